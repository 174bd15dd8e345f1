"""stc(R): the symmetric-transitive-closure module for R transitive and symmetric.

Hu, Motik & Horrocks (2019), section 6, Algorithms 7-9. R is an undirected graph;
the module keeps its connected components C_R (each node maps to its component,
a shared set) and R holds exactly the pairs inside each component, R(u, u)
included. Merging components U and V derives the |U| x |V| pairs in both
directions, so a cycle of n nodes costs O(n^2) instead of the O(n^3) rule
instances of semi-naive evaluation (Example 2). Components merge smaller into
larger.

Deletion dissolves every component containing a deleted fact: its pairs with a
zero non-recursive counter are overdeleted, the others are kept in Y_R (they
survive) and Red rebuilds components from Y_R alone. Facts of a dissolved
component that another rule still derives are rederived by that rule and come
back through `add`. Components not touched by a deletion lose no fact, and their
pairs stay justified by the edges that built them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine.evaluate import View
from engine.modules.base import Module, member
from engine.storage import Fact


class SymmetricTransitiveClosure(Module):
    kind = "stc"

    def reset(self) -> None:
        self.component: dict[int, set[int]] = {}  # node -> its component (shared set)
        self.kept: set[Fact] = set()  # Y_R: facts of dissolved components that survive

    def close_edges(self, edges: Iterable[Fact]) -> set[Fact]:
        """CLOSEEDGES (Algorithm 7): merge components along `edges`; the pairs derived."""
        comp = self.component
        J: set[Fact] = set()
        n = 0
        for u, v in edges:
            U = comp.get(u)
            if U is None:
                U = comp[u] = {u}
                J.add((u, u))
                n += 1
            V = comp.get(v)
            if V is None:
                V = comp[v] = {v}
                J.add((v, v))
                n += 1
            if U is V:
                continue
            if len(U) < len(V):
                U, V = V, U
            for a in U:
                for b in V:
                    J.add((a, b))
                    J.add((b, a))
            n += 2 * len(U) * len(V)
            U |= V
            for b in V:
                comp[b] = U
        self._count(n)
        return J

    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        src = Ip(self.pred)
        return {f for f in self.close_edges(delta) if not member(src, f)}

    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        """Algorithm 8: dissolve the components of deleted facts."""
        comp = self.component
        J: set[Fact] = set()
        n = 0
        for u, v in delta:
            U = comp.get(u)
            if U is None or comp.get(v) is not U:
                continue  # dissolved already
            for a in U:
                del comp[a]
            n += len(U) * len(U)
            for a in U:
                for b in U:
                    f = (a, b)
                    if cnr.get(f, 0):
                        self.kept.add(f)
                    else:
                        J.add(f)
        self._count(n)
        return J - delta

    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        """Algorithm 9: rebuild components from the surviving facts Y_R."""
        kept, self.kept = self.kept, set()
        return self.close_edges(kept) & deleted
