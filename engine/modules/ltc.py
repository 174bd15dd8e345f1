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
candidate pairs. Used by materialisation (`remat`); maintenance algorithms keep
their own counters over the rule's instances and evaluate it generically.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat

from engine.evaluate import View
from engine.graph import components
from engine.modules.base import Module
from engine.storage import Fact

DP_SHARE = 4  # build every node's reachable set when sources * DP_SHARE >= nodes


class LinearClosure(Module):
    kind = "ltc"

    def __init__(self, spec, counts, bases: tuple[str, ...] = ()):
        super().__init__(spec, counts)
        self.bases = bases

    def reset(self) -> None:
        """Nothing to forget: the module keeps no state between calls."""

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
        raise AssertionError("ltc is a materialisation module; maintenance evaluates it generically")

    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        raise AssertionError("ltc is a materialisation module; maintenance evaluates it generically")


def search(adj: Mapping[int, list[int]], starts: Iterable[int]) -> set[int]:
    """The nodes reachable from `starts` (included)."""
    seen = set(starts)
    stack = list(seen)
    while stack:
        for w in adj.get(stack.pop(), ()):
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


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
