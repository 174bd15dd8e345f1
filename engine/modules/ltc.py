"""ltc(R): linear closure, R(x, z) :- R(x, y), S(y, z) with S from lower strata.

Our addition to the tc/stc modules of Hu, Motik & Horrocks (2019), for the most
common recursive shape (paths from a base relation). When a stratum holds only R
and every recursive rule is of that form (one or more base relations S), R is
the closure of its other facts R0 (explicit or from non-recursive rules) along
S: R = {(x, z) | R0(x, w), z reachable from w over S, w itself included}.

Add computes that closure for the new R facts set-at-a-time instead of one rule
instance per (x, y, z): when the new facts have many sources (transitive
closure: every node is one), the reachable sets of all nodes are built once
over S's strongly connected components, sinks first, by set unions, and each
source takes the union for its targets; with few sources (single-source
reachability), each source is searched on its own, so that a long chain does
not cost the n^2 of every node's reachable set. `module_inferences` counts the
candidate pairs.

Used by materialisation (`remat`, and the load of `dredc`) and by `dredc`'s
updates, which keep R as reachability (engine.modules.reach) instead of the
rule's instances: `start_upkeep` builds that state after a load, `maintain`
turns the changes of S and R0 into the changes of R. The DRed^c-MOD phase
functions `delete` / `rederive` do not apply: R's rules read S, a lower
stratum, so lower changes do reach them (the paper's Diff is not empty here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat

from engine.evaluate import View
from engine.graph import components, search
from engine.modules.base import Module
from engine.modules.reach import Reach
from engine.storage import Fact

DP_SHARE = 4  # build every node's reachable set when sources * DP_SHARE >= nodes


class LinearClosure(Module):
    kind = "ltc"

    def __init__(self, spec, counts, bases: tuple[str, ...] = ()):
        super().__init__(spec, counts)
        self.bases = bases

    def reset(self) -> None:
        """Forget the upkeep state (materialisation itself keeps none between calls)."""
        self.upkeep: Reach | None = None

    def start_upkeep(self, edges: Iterable[Fact], r0: Iterable[Fact], size: int) -> None:
        """Build the reachability state over S's `edges` and R0 (R has `size` facts)."""
        self.upkeep = Reach(edges, r0, size)

    def maintain(self, s_gone, s_new, r0_gone, r0_new) -> tuple[list[Fact], list[Fact]]:
        """The R facts (lost, gained) when S and R0 change so (collections of facts)."""
        assert self.upkeep is not None, "start_upkeep() first"
        before = self.upkeep.work
        out = self.upkeep.update(s_gone, s_new, r0_gone, r0_new)
        self._count(self.upkeep.work - before + len(out[0]) + len(out[1]))
        return out

    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        adj: dict[int, list[int]] = {}
        for base in self.bases:
            for rel, excl in Ip(base):
                for u, v in rel.facts if excl is None else rel.facts - excl:
                    adj.setdefault(u, []).append(v)
        seeds: dict[int, set[int]] = {}
        for x, w in delta:
            seeds.setdefault(x, set()).add(w)
        starts = set().union(*seeds.values()) if seeds else set()
        order = components(starts, adj)
        comp = {v: ci for ci, members in enumerate(order) for v in members}
        out: set[Fact] = set()
        if len(seeds) * DP_SHARE >= len(comp):
            reach = closures(adj, order, comp)
            for x, ws in seeds.items():
                zs = set().union(*(reach[comp[w]] for w in ws))
                out.update(zip(repeat(x), zs))
        else:
            for x, ws in seeds.items():
                out.update(zip(repeat(x), search(adj, ws)))
        self._count(len(out))
        for rel, excl in Ip(self.pred):
            present = out & rel.facts
            if excl:
                present -= excl
            out -= present
        return out

    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        raise AssertionError("ltc is maintained by `maintain`, not by DRed^c-MOD's phases")

    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        raise AssertionError("ltc is maintained by `maintain`, not by DRed^c-MOD's phases")


def closures(adj: Mapping[int, list[int]], order: list[list[int]], comp: Mapping[int, int]):
    """Each component's reachable nodes (itself included), sinks first, by set unions."""
    reach: list[set[int]] = []
    for ci, members in enumerate(order):
        r = set(members)
        for v in members:
            for w in adj.get(v, ()):
                cw = comp[w]
                if cw != ci:
                    r |= reach[cw]
        reach.append(r)
    return reach
