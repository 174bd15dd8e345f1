"""Work limits: how much one update may cost, and how large a materialisation may grow.

Recursive arithmetic can make a materialisation infinite: with
`d(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.` one fact closing a cycle of `b`
derives a path length for every lap, without end. The engine cannot tell such
an update from a merely large one, so the caller sets a budget (`Limits`) and
the engine stops with `WorkLimitExceeded` or `FactLimitExceeded` when it runs out:

* `work`: rule applications plus module inferences caused by one update (a
  load is not an update and has no work limit);
* `facts`: facts in the materialisation (internal ones included), during loads
  and updates alike.

The budget is checked between units of work (the fully dynamic engine, which
charges each unit to the update whose queue it came from) or between fixpoint
rounds (every other algorithm, engine.evaluate.saturate), never per derived
tuple: a check is a few integer comparisons. The counts can therefore pass a
limit by what one unit or one round derives before the error is raised.

What happens to the state on the error is the caller's business: the engine is
left mid-update and must be rebuilt (the streaming job rebuilds it from its
last committed state, stream.batch; the CLI stops).
"""

from __future__ import annotations

from dataclasses import dataclass

from fluxmat.engine.errors import FluxmatError

DEFAULT_MAX_FACTS = 2_000_000  # 4.5x the largest materialisation of the benchmark suite (DAG-R)
DEFAULT_MAX_UPDATE_WORK = 20_000_000  # 2.7x the suite's costliest update (7.4M applications)


@dataclass(frozen=True)
class Limits:
    """A caller's budget; None (or 0 from a flag, see `of`) means no limit."""

    work: int | None = None  # rule applications + module inferences of one update
    facts: int | None = None  # facts in the materialisation

    @classmethod
    def of(cls, work: int | None = None, facts: int | None = None) -> Limits:
        """From flag values, where 0 (like None) turns a limit off."""
        return cls(work or None, facts or None)

    @property
    def active(self) -> bool:
        return self.work is not None or self.facts is not None

    def check_facts(self, facts: int, update: int | None = None) -> None:
        """Raise `FactLimitExceeded` when `facts` is over the limit."""
        if self.facts is not None and facts > self.facts:
            raise FactLimitExceeded(
                f"fact limit exceeded: {facts:,} facts in the materialisation "
                f"(limit {self.facts:,})", update
            )  # fmt: skip

    def check_work(self, work: int, update: int | None = None) -> None:
        """Raise `WorkLimitExceeded` when `work` (of one update) is over the limit."""
        if self.work is not None and work > self.work:
            raise WorkLimitExceeded(
                f"work limit exceeded: {work:,} rule applications and module inferences "
                f"by one update (limit {self.work:,})", update
            )  # fmt: skip


NO_LIMITS = Limits()


class LimitExceeded(FluxmatError):
    """A budget of `Limits` ran out; `update` is the charged update's sequence number, if known.

    `key` is the caller's name for that update (engine.feed sets it). `shared`: the
    update ran in one run with others whose work cannot be told apart from its own
    (engine.compact.fed), so `update` is only the run's first; running the updates
    one at a time (engine.feed without overlap) finds the one that breaches.
    """

    def __init__(self, message: str, update: int | None = None):
        super().__init__(message)
        self.update = update
        self.key: object = None
        self.shared = False

    def located(self, where: str) -> LimitExceeded:
        """The same error, its message prefixed with `where` (e.g. `updates.jsonl:3`)."""
        return type(self)(f"{where}: {self.message}", self.update)


class WorkLimitExceeded(LimitExceeded):
    """One update caused more rule applications and module inferences than allowed."""


class FactLimitExceeded(LimitExceeded):
    """The materialisation grew past the allowed number of facts."""
