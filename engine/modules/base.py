"""The module interface and view helpers (see the package docstring for the contract)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping

from engine.analysis import ModuleSpec
from engine.evaluate import Counts, View
from engine.storage import Fact


class Module(ABC):
    """A tc/stc module over relation `pred`, replacing rules `rules` of its stratum."""

    kind = "abstract"

    def __init__(self, spec: ModuleSpec, counts: Counts):
        self.spec = spec
        self.pred = spec.pred
        self.rules = spec.rules
        self.name = str(spec)
        self.counts = counts
        self.reset()

    def __repr__(self) -> str:
        return f"<module {self.name}>"

    def _count(self, n: int) -> None:
        if n:
            self.counts.module_work[self.name] += n
            self.counts.work += n

    @abstractmethod
    def reset(self) -> None:
        """Forget all state: the next call is `add` over an empty materialisation."""

    def start_deletion(self) -> None:  # noqa: B027 - optional hook
        """An update's overdeletion phase begins (a sequence of `delete` calls)."""

    def external(self, facts: Iterable[Fact]) -> None:  # noqa: B027 - optional hook
        """R facts whose non-recursive counter became positive in this update."""

    @abstractmethod
    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        """Add: the closure of Ip under the module's rules given new facts `delta`."""

    @abstractmethod
    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        """Del: the R facts to overdelete because `delta` is being deleted."""

    @abstractmethod
    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        """Red: the facts of `deleted` derivable from the survivors; ends the deletion."""


# ------------------------------------------------------------------ view helpers


def member(sources: list, fact: Fact) -> bool:
    """Whether `fact` is in the union of the view's sources."""
    for rel, excl in sources:
        if fact in rel.facts and (excl is None or fact not in excl):
            return True
    return False


def successors(sources: list, node: int) -> Iterator[Fact]:
    """The facts (node, w) of the view (sources of one view are disjoint)."""
    for rel, excl in sources:
        bucket = rel.index((0,)).get(node)
        if not bucket:
            continue
        if excl is None:
            yield from bucket
        else:
            for f in bucket:
                if f not in excl:
                    yield f
