"""ltc(R): linear closure, R(x, z) :- R(x, y), S(y, z) with S from lower strata, set at a time.

Our addition to the tc/stc modules of Hu, Motik & Horrocks (2019), for the most
common recursive shape (paths from a base relation). When a stratum holds only R
and every recursive rule is of that form (one or more base relations S), R is
the closure of its other facts R0 (explicit or from non-recursive rules) along
S: R = {(x, z) | R0(x, w), z reachable from w over S, w itself included}.

`close` computes that closure for new R facts set-at-a-time instead of one rule
instance per (x, y, z): when the new facts have many sources (transitive
closure: every node is one), the reachable sets of all nodes are built once
over S's strongly connected components, sinks first, by set unions, and each
source takes the union for its targets; with few sources (single-source
reachability), each source is searched on its own, so that a long chain does
not cost the n^2 of every node's reachable set.

It is the Add of the `Reachability` upkeep module (engine.modules.reach),
which keeps R as reachability between updates; the DRed^c-MOD phase functions
Del / Red do not apply to ltc: R's rules read S, a lower stratum, so lower
changes do reach them (the paper's Diff is not empty here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import repeat

from fluxmat.engine.graph import components, search
from fluxmat.engine.storage import Fact

DP_SHARE = 4  # build every node's reachable set when sources * DP_SHARE >= nodes


def close(adj: Mapping[int, list[int]], delta: Iterable[Fact]) -> set[Fact]:
    """R(x, z) for every R(x, w) of `delta` and z reachable from w over `adj` (w included)."""
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
    return out


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
