"""What a job has in flight: the running micro-batch, its phase, and since when.

The job (stream.job) tells an `InFlight` when a batch starts (`start`), each
time it moves on to another phase (`enter`: reading the updates, reasoning,
committing to Redis, publishing deltas, ...) and when it is over (`done`,
committed or failed). Anyone may ask, at any moment and from any thread, what
is in flight and for how long (`now`): the health check (ops.status) turns a
batch in flight longer than `--stall-seconds` into `degraded: committing to
Redis for 23 s`, whatever the phase stalls on (Redis paused, a broker that
does not acknowledge, a source read that hangs, a very long engine batch).

Thread-safety: one small lock, held only to copy or replace a few fields; no
method calls anything while holding it, so no other lock can wait on it.

Not here: thresholds, health states (ops.status), metrics (ops.metrics).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# The phases a job reports, and how the health check names them (a bounded set: a metric label).
PHASES = {
    "start": "restoring the state from Redis at start",
    "collect": "reading updates from the source",
    "check": "reading the batch id from Redis",
    "decode": "decoding updates",
    "engine": "reasoning",
    "restore": "restoring the state from Redis",
    "export": "exporting the state changes",
    "commit": "committing to Redis",
    "publish": "publishing deltas",
    "tasks": "processing keys in executor tasks",
    "sizes": "reading state sizes from Redis",
    "verify": "starting a self-check",
    "snapshot": "writing the local snapshot",
}


@dataclass(frozen=True)
class Work:
    """The batch in flight at one moment (`InFlight.now`)."""

    batch: int | None  # None: the job is starting (restoring its state)
    phase: str  # a key of `PHASES`
    seconds: float  # since the batch started
    phase_seconds: float  # since it entered `phase`

    @property
    def text(self) -> str:
        """E.g. `committing to Redis for 23 s (batch 12, in flight for 24 s)`."""
        what = "starting" if self.batch is None else f"batch {self.batch}"
        return (f"{PHASES.get(self.phase, self.phase)} for {self.phase_seconds:.0f} s "
                f"({what}, in flight for {self.seconds:.0f} s)")  # fmt: skip


class InFlight:
    """The job's work in flight (see the module docstring); `clock` is for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._batch: int | None = None
        self._phase: str | None = None  # None: nothing in flight
        self._started = 0.0
        self._entered = 0.0

    def start(self, batch: int | None, phase: str) -> None:
        """A batch (None: the job's start) begins, in `phase`."""
        now = self._clock()
        with self._lock:
            self._batch, self._phase, self._started, self._entered = batch, phase, now, now

    def enter(self, phase: str) -> None:
        """The batch in flight moves on to `phase` (ignored when none is in flight)."""
        now = self._clock()
        with self._lock:
            if self._phase is not None:
                self._phase, self._entered = phase, now

    def done(self) -> None:
        """The batch is over: committed and published, or failed."""
        with self._lock:
            self._phase = None

    def now(self) -> Work | None:
        """What is in flight, or None when idle."""
        now = self._clock()
        with self._lock:
            if self._phase is None:
                return None
            return Work(self._batch, self._phase, max(now - self._started, 0.0), max(now - self._entered, 0.0))
