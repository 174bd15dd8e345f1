"""`--verify-every N`: the job checks itself against a from-scratch evaluation.

Every N committed batches (stream.job calls `after_batch` under the batch lock)
the verifier copies the explicit facts and the materialisation, then, in a
background thread, computes mat(P, E) from scratch with `remat` and compares.
The result (`Verification`) goes to the job's observer: "verified exact at batch
N", or the difference (facts missing from the job's materialisation, facts it
should not hold) -- which the operator sees as a failing health state, since the
job's answers are then wrong. One check runs at a time; a batch that comes due
while one is running is skipped (the next due batch is checked).

The copy is taken under the lock (it costs a pass over the facts); the
recomputation runs beside the job and competes with it for the interpreter, so
choose N so that a check takes a small share of the time between checks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fluxmat.engine import EngineOptions, Reasoner

SAMPLE = 5  # differing facts kept in a result, each way


@dataclass(frozen=True)
class Verification:
    """One self-check: `ok` when the job's materialisation equals mat(P, E) at `batch`."""

    batch: int
    ok: bool
    facts: int  # in the from-scratch materialisation
    missing: int = 0  # in mat(P, E), not in the job's materialisation
    extra: int = 0  # in the job's materialisation, not in mat(P, E)
    sample: list[str] = field(default_factory=list)  # a few of them, `-fact` missing, `+fact` extra
    seconds: float = 0.0
    error: str | None = None  # the check itself failed (e.g. out of memory)


class Verifier:
    """Runs `Verification`s every `every` batches and hands them to `report` (module docstring)."""

    def __init__(self, every: int, report: Callable[[Verification], None]):
        self.every = every
        self.report = report
        self.thread: threading.Thread | None = None

    def after_batch(self, batch: int, reasoner: Reasoner) -> bool:
        """Start a check of `batch` if one is due and none is running; True if started.

        Called under the job's batch lock: the copies taken here are consistent.
        """
        if self.every <= 0 or batch < 0 or batch % self.every or self.busy:
            return False
        explicit, facts = reasoner.explicit(), reasoner.facts()
        self.thread = threading.Thread(
            target=self._check, args=(batch, reasoner, explicit, facts), daemon=True,
            name=f"fluxmat-verify-{batch}",
        )  # fmt: skip
        self.thread.start()
        return True

    @property
    def busy(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the running check (tests, shutdown)."""
        if self.thread is not None:
            self.thread.join(timeout)

    def _check(self, batch: int, reasoner: Reasoner, explicit: set, facts: set) -> None:
        start = time.perf_counter()
        try:
            options = EngineOptions("remat", equality=reasoner.options.equality)
            ref = Reasoner(reasoner.program, options=options)
            ref.load(explicit)
            expected = ref.facts()
        except Exception as exc:  # a check that cannot run is reported, never raised into the job
            self.report(Verification(batch, False, 0, error=f"{type(exc).__name__}: {exc}",
                                     seconds=time.perf_counter() - start))  # fmt: skip
            return
        missing, extra = expected - facts, facts - expected
        show = reasoner.show
        sample = [f"-{show(f)}" for f in sorted(missing, key=repr)[:SAMPLE]]
        sample += [f"+{show(f)}" for f in sorted(extra, key=repr)[:SAMPLE]]
        self.report(Verification(batch, not missing and not extra, len(expected), len(missing),
                                 len(extra), sample, time.perf_counter() - start))  # fmt: skip
