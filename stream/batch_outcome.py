"""What one micro-batch did (`BatchOutcome`), its phase clock, and the crash points the crash tests use.

Not here: processing the batch (stream.batch).
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field


def crash_point(point: str, batch: int) -> None:
    """Fault injection for crash tests.

    `FLUXMAT_CRASH_AT=<point>:<batch>` kills the process (as SIGKILL would: no
    cleanup) when batch `<batch>` reaches `<point>` (`before-commit`,
    `after-commit`, `after-publish`; `program-change`: right after a program
    message was applied to the engine, before the rest of its batch, and with a
    real SIGKILL; `<batch>` may be `*`: any batch). Unset in production.
    """
    spec = os.environ.get("FLUXMAT_CRASH_AT")
    if spec and spec in (f"{point}:{batch}", f"{point}:*"):
        if point == "program-change":
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(137)


@dataclass
class BatchOutcome:
    batch: int
    replayed: bool = False
    updates: int = 0
    adds: int = 0  # fact operations in the applied updates
    deletes: int = 0
    peak_pending: int = 0  # largest backlog of engine operations during the batch
    dead: int = 0
    quarantined: int = 0  # of `dead`: updates that exceeded a work limit
    # deletions of shared facts dropped (a key's processor: BatchProcessor.shared)
    shared_deletes: int = 0
    added: int = 0
    removed: int = 0
    through: object = None
    seconds: float = 0.0
    oldest_timestamp_ms: int | None = None
    timestamps_ms: list[int] = field(default_factory=list)  # of each applied update's message
    stats: dict[str, int] = field(default_factory=dict)
    # work per rule (engine Reasoner.rules_since): file:line -> (applications, log growth, log entries now)
    rules: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # seconds: decode, engine (feed), poll (the delta and its causes), deltas (encoded), export, commit, publish
    phases: dict[str, float] = field(default_factory=dict)
    # what was sent to the deltas topic for this batch (a replay re-sends): messages, added and removed facts
    published: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("messages", "added", "removed"), 0)
    )
    # which update changed each fact of the output (parallel to output["added"] / ["removed"]): its id, or
    # partition:offset; None when the work of several updates changed it (or none: the initial facts)
    causes: dict[str, list] = field(default_factory=dict)
    output: dict | None = field(default=None, repr=False)  # what was published


class Clock:
    """Seconds per phase of a batch (BatchOutcome.phases; fluxmat_batch_phase_seconds)."""

    timer = staticmethod(time.perf_counter)  # a subclass may count CPU seconds instead

    def __init__(self):
        self.phases: dict[str, float] = {}
        self.last = self.timer()

    def lap(self, phase: str) -> None:
        now = self.timer()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now
