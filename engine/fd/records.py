"""The fully dynamic engine's records: waves, the export journal, statistics, consistency points."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.maintain.base import PyFact
from engine.storage import Fact

Key = tuple[str, Fact]  # (predicate, encoded fact)
Inst = tuple[int, Key, tuple[Key, ...], tuple[Key, ...]]  # rule, head, positives, negated


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
