"""The two kinds of module and view helpers (see the package docstring for the contract)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping

from fluxmat.engine.analysis import ModuleSpec
from fluxmat.engine.evaluate import Counts, View
from fluxmat.engine.storage import Fact


class Module(ABC):
    """A module over relation `pred`, replacing rules `rules` of its stratum."""

    def __init__(self, spec: ModuleSpec, counts: Counts):
        self.spec = spec
        self.pred = spec.pred
        self.rules = spec.rules
        self.name = str(spec)
        self.counts = counts
        self.reset()

    def __repr__(self) -> str:
        return f"<module {self.name}>"

    def count(self, n: int) -> None:
        """Add `n` candidate facts to this module's work (`Report.module_inferences`)."""
        if n:
            self.counts.module_work[self.name] += n
            self.counts.work += n

    @abstractmethod
    def reset(self) -> None:
        """Forget all state (before a materialisation)."""


class PhaseModule(Module):
    """A module with DRed^c-MOD's phases: Add, Del and Red, one call per round."""

    @abstractmethod
    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        """Add: the closure of Ip under the module's rules given new facts `delta`."""

    def start_deletion(self) -> None:  # noqa: B027 - optional hook
        """An update's overdeletion phase begins (a sequence of `delete` calls)."""

    def external(self, facts: Iterable[Fact]) -> None:  # noqa: B027 - optional hook
        """R facts whose non-recursive counter became positive in this update."""

    @abstractmethod
    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        """Del: the R facts to overdelete because `delta` is being deleted."""

    @abstractmethod
    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        """Red: the facts of `deleted` derivable from the survivors; ends the deletion."""


class UpkeepModule(Module):
    """A module that keeps R as the closure of its edges, changed edge by edge.

    The edges are R's base facts (explicit, or derived by the stratum's other
    rules); with `bases` (ltc) paths also run over the facts of those lower
    relations (S). `build` makes the state from a materialisation; `change`
    applies edge and S changes and returns the R facts (lost, gained); `link`
    and `unlink` do so for one edge; `connected` says whether R(u, v) holds by
    the closure. Work is counted like Add's. An upkeep module whose kind has
    no phase form (ltc) also has Add, for materialisations.
    """

    def __init__(self, spec: ModuleSpec, counts: Counts, bases: tuple[str, ...] = ()):
        self.bases = bases
        self.edges: set[Fact] = set()  # reset() and build() set them
        super().__init__(spec, counts)

    @abstractmethod
    def build(self, edges: Iterable[Fact], s_edges: Iterable[Fact] = (), size: int = 0) -> None:
        """Start over from `edges` and S's `s_edges` (with repeats); R has `size` facts."""

    @abstractmethod
    def change(
        self, gone: Iterable[Fact] = (), new: Iterable[Fact] = (),
        s_gone: Iterable[Fact] = (), s_new: Iterable[Fact] = (),
    ) -> tuple[Iterable[Fact], Iterable[Fact]]:  # fmt: skip
        """Edges `gone` and `new` (and S facts): the R facts (lost, gained)."""

    @abstractmethod
    def connected(self, f: Fact) -> bool:
        """Whether the closure derives `f`."""

    def link(self, f: Fact) -> Iterable[Fact]:
        """Make `f` an edge; the R facts it derives (already present ones may be among them)."""
        if f in self.edges:
            return ()
        return self.change(new=(f,))[1]

    def unlink(self, f: Fact) -> Iterable[Fact]:
        """`f` is no longer an edge; the R facts the closure no longer derives."""
        if f not in self.edges:
            return ()
        return self.change(gone=(f,))[0]


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
