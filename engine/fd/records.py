"""What the fully dynamic engine keeps besides the facts: waves, journal, statistics.

Records only (engine.fd.core does the work): a `Wave` of deletions with one root
cause, the `Journal` of changes since the state was last exported
(engine.fd.snapshot), the cumulative `FDStats`, and the `ConsistencyPoint`s a
quiescent engine reports (`PointRows`: the arrays core's, as rows of term ids). A pending `add` item is justified by a rule instance
(`Inst`), by nothing (explicit), or by an upkeep module (`MODULE`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.storage import Fact
from fluxmat.engine.syntax import PyFact

Key = tuple[str, Fact]  # (predicate, encoded fact)
Inst = tuple[int, Key, tuple[Key, ...], tuple[Key, ...]]  # rule, head, positives, negated
MODULE = "module"  # the justification of a module addition (a pending `add` item)


@dataclass
class Wave:
    """Deletions with one root cause; rederivation runs when `pending` reaches 0."""

    id: int
    update: int
    pending: int = 0
    done: bool = False
    deleted: list[Key] = field(default_factory=list)
    candidates: dict[Key, list[Inst]] = field(default_factory=dict)
    rederive_left: int = 0


@dataclass
class Journal:
    """What changed since the state was last exported (engine.fd.snapshot)."""

    explicit: set = field(default_factory=set)  # fact keys whose E membership changed
    facts: set = field(default_factory=set)  # fact keys inserted or deleted
    log: dict = field(default_factory=dict)  # derivation-log instances added or removed -> head
    full: bool = True  # export everything (after load or restore)

    def clear(self) -> None:
        self.explicit.clear()
        self.facts.clear()
        self.log.clear()
        self.full = False


@dataclass
class FDStats:
    """Cumulative counters of the fully dynamic engine."""

    units: int = 0
    updates: int = 0
    determined: int = 0
    cancelled: int = 0
    executed: int = 0
    recursion_stops: int = 0
    rederivations: int = 0
    waves: int = 0
    noop_adds: int = 0
    noop_deletes: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ConsistencyPoint:
    """A quiescent state: it equals mat(P, E) after update `seq` (id `through`)."""

    seq: int
    through: object
    added: list[PyFact]
    removed: list[PyFact]
    # for each added / removed fact, the update (seq) whose work changed it last -- its insertion, or
    # the deletion wave that took its support away; 0 when the work of several updates changed it
    added_by: list[int] = field(default_factory=list)
    removed_by: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class PointRows:
    """A consistency point's delta as rows of term ids (the arrays core): no Python tuple per fact.

    `values[i]` is term i's constant. `parts`, per predicate (named as facts name
    it): `(pred, added, added_by, removed, removed_by)`, the rows int64 arrays of
    shape (facts, arity) and the causes int64 arrays of update seqs (0: several),
    as `ConsistencyPoint` has them. The point's `added` facts are the parts' added
    rows one predicate after the other, in this order; its `removed` likewise
    (`point()` gives that `ConsistencyPoint`).
    """

    seq: int
    through: object
    values: list
    parts: list[tuple]  # (str, ndarray, ndarray, ndarray, ndarray)

    def point(self) -> ConsistencyPoint:
        """The same delta as Python facts."""
        added, removed, added_by, removed_by = [], [], [], []
        values = self.values
        for pred, plus, plus_by, minus, minus_by in self.parts:
            sides = ((plus, plus_by, added, added_by), (minus, minus_by, removed, removed_by))
            for rows, by, facts, causes in sides:
                facts.extend((pred, *(values[i] for i in row)) for row in rows.tolist())
                causes.extend(by.tolist())
        return ConsistencyPoint(self.seq, self.through, added, removed, added_by, removed_by)


class NotQuiescent(FluxmatError):
    """Raised when a run exceeds its step bound (a termination test failed)."""
