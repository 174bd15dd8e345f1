"""stc(R) as an upkeep module: the connected components of R's edges, kept edge by edge.

The fully dynamic algorithms (engine.fd) keep an stc module operation by
operation instead of phase by phase. The edges are R's base facts (explicit or
derived by the stratum's other rules) taken as undirected edges; R holds
exactly the pairs inside a component, R(u, u) included (every base fact is
such a pair). `link` merges the components of an edge's ends (CLOSEEDGES,
engine.modules.stc) and returns the pairs the merge derives; `unlink` decides
whether a component splits -- searches from both ends in turn, one node each,
so the work is bounded by twice the smaller side -- and returns the pairs
across the split (and R(u, u) of an end left without edges).
"""

from __future__ import annotations

from collections.abc import Iterable

from fluxmat.engine.modules.base import UpkeepModule
from fluxmat.engine.modules.stc import merge_components
from fluxmat.engine.storage import Fact


class Components(UpkeepModule):
    """Connected components over the edge facts of one stc relation."""

    def reset(self) -> None:
        self.component: dict[int, set[int]] = {}  # node -> its component (shared set)
        self.edges = set()
        self.adj: dict[int, dict[int, int]] = {}  # node -> neighbour -> edge facts

    def build(self, edges: Iterable[Fact], s_edges: Iterable[Fact] = (), size: int = 0) -> None:
        """The components of `edges` (an stc relation has no S: `s_edges` is empty)."""
        self.reset()
        self.edges = set(edges)
        for u, v in self.edges:
            self._touch(u, v, 1)
        self._merge(self.edges, pairs=False)

    def connected(self, f: Fact) -> bool:
        comp = self.component
        U = comp.get(f[0])
        return U is not None and comp.get(f[1]) is U

    def change(
        self, gone: Iterable[Fact] = (), new: Iterable[Fact] = (),
        s_gone: Iterable[Fact] = (), s_new: Iterable[Fact] = (),
    ) -> tuple[list[Fact], set[Fact]]:  # fmt: skip
        """Edges `gone`, then `new`: the pairs (lost, derived by the merges)."""
        lost: list[Fact] = []
        for f in gone:
            if f in self.edges:
                self.edges.discard(f)
                lost += self._split(f)
        derived: set[Fact] = set()
        for f in new:
            if f not in self.edges:
                self.edges.add(f)
                self._touch(f[0], f[1], 1)
                derived |= self._merge((f,))
        return lost, derived

    def _merge(self, edges: Iterable[Fact], pairs: bool = True) -> set[Fact]:
        J, n = merge_components(self.component, edges, pairs)
        self.count(n)
        return J

    def _touch(self, u: int, v: int, d: int) -> None:
        for a, b in ((u, v), (v, u)) if u != v else ((u, u),):
            row = self.adj.setdefault(a, {})
            n = row.get(b, 0) + d
            if n:
                row[b] = n
            else:
                del row[b]
                if not row:
                    del self.adj[a]

    def _split(self, f: Fact) -> list[Fact]:
        """`f` is no longer an edge; the pairs no longer inside one component."""
        u, v = f
        self._touch(u, v, -1)
        adj = self.adj
        if u == v or v in adj.get(u, ()):  # a loop, or (v, u) is an edge too
            return [] if u in adj else self._isolate(u, [])
        side = self._cut_off(u, v)
        if side is None:
            return []
        comp = self.component
        U = comp[u]
        other = U - side
        self.count(len(U) + len(side) * len(other))
        lost = [(a, b) for a in side for b in other]
        lost += [(b, a) for a, b in lost]
        small = side if len(side) < len(other) else other  # the larger part keeps U
        U -= small
        part = set(small)
        for a in small:
            comp[a] = part
        for node in (u, v):
            if node not in adj:
                self._isolate(node, lost)
        return lost

    def _cut_off(self, u: int, v: int) -> set[int] | None:
        """The nodes of the end cut off from the other, or None if u, v are connected.

        Searches from both ends in turn, one node each: a side whose search runs
        out never met the other and is all of its component, so the work is
        bounded by twice the smaller side (or by what the searches see before
        they meet).
        """
        adj = self.adj
        seen = ({u}, {v})
        todo = ([u], [v])
        try:
            while True:
                for k in (0, 1):
                    if not todo[k]:
                        return seen[k]
                    mine, theirs = seen[k], seen[1 - k]
                    for b in adj.get(todo[k].pop(), ()):
                        if b in theirs:
                            return None
                        if b not in mine:
                            mine.add(b)
                            todo[k].append(b)
        finally:
            self.count(len(seen[0]) + len(seen[1]))

    def _isolate(self, node: int, lost: list[Fact]) -> list[Fact]:
        """`node` has no edge left: not even R(node, node) holds."""
        comp = self.component
        comp[node].discard(node)
        del comp[node]
        lost.append((node, node))
        return lost
