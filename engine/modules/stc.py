"""stc(R): the symmetric-transitive-closure module for R transitive and symmetric.

Hu, Motik & Horrocks (2019), section 6, Algorithms 7-9. R is an undirected graph;
the module keeps its connected components C_R (each node maps to its component,
a shared set) and R holds exactly the pairs inside each component, R(u, u)
included. Merging components U and V derives the |U| x |V| pairs in both
directions, so a cycle of n nodes costs O(n^2) instead of the O(n^3) rule
instances of semi-naive evaluation (Example 2). Components merge smaller into
larger.

Deletion dissolves every component containing a deleted fact. The paper's Del
overdeletes all its pairs with a zero non-recursive counter, keeps the others in
Y_R, and Red rebuilds components from Y_R. Here Del rebuilds the components of
the dissolved one from its Y_R pairs at once and overdeletes only the pairs that
end up in different components: the others follow from Y_R, whose facts have
final non-recursive counters, so they are derivable and their consequences need
not be touched. Red returns the overdeleted facts (those other rules overdeleted
included) whose ends share a rebuilt component. A rebuilt component is never
dissolved again in the same update. Facts of a dissolved component that another
rule still derives are rederived by that rule and come back through `add`.
Components not touched by a deletion lose no fact, and their pairs stay
justified by the edges that built them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fluxmat.engine.evaluate import View
from fluxmat.engine.modules.base import PhaseModule, member
from fluxmat.engine.storage import Fact


class SymmetricTransitiveClosure(PhaseModule):
    def reset(self) -> None:
        self.component: dict[int, set[int]] = {}  # node -> its component (shared set)
        self.rebuilt: set[int] = set()  # ids of components rebuilt in this deletion

    def start_deletion(self) -> None:
        self.rebuilt.clear()

    def close_edges(self, edges: Iterable[Fact], pairs: bool = True) -> set[Fact]:
        """CLOSEEDGES (Algorithm 7) on this module's components (`merge_components`)."""
        J, n = merge_components(self.component, edges, pairs)
        self.count(n)
        return J

    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        src = Ip(self.pred)
        return {f for f in self.close_edges(delta) if not member(src, f)}

    def delete(self, Ip: View, delta: set[Fact], cnr: Mapping[Fact, int]) -> set[Fact]:
        """Algorithm 8, rebuilding at once: the pairs Y_R no longer connects."""
        comp = self.component
        J: set[Fact] = set()
        n = 0
        for u, v in delta:
            U = comp.get(u)
            if U is None or comp.get(v) is not U or id(U) in self.rebuilt:
                continue  # dissolved already, or rebuilt from Y_R in this update
            for a in U:
                del comp[a]
            n += len(U) * len(U)
            kept = [(a, b) for a in U for b in U if cnr.get((a, b), 0)]  # Y_R
            self.close_edges(kept, pairs=False)
            for a in U:
                A = comp.get(a)
                if A is not None:
                    self.rebuilt.add(id(A))
                J.update((a, b) for b in U if A is None or comp.get(b) is not A)
        self.count(n)
        return J - delta

    def rederive(self, deleted: set[Fact]) -> set[Fact]:
        """Algorithm 9: the overdeleted facts inside a component of Y_R."""
        self.rebuilt.clear()
        comp = self.component
        return {f for f in deleted if (A := comp.get(f[0])) is not None and comp.get(f[1]) is A}


def merge_components(
    comp: dict[int, set[int]], edges: Iterable[Fact], pairs: bool = True
) -> tuple[set[Fact], int]:
    """CLOSEEDGES (Algorithm 7): merge the components of `comp` along `edges`.

    `comp` maps a node to its component (a set shared by its members; smaller
    merged into larger). Returns the pairs derived (none without `pairs`) and
    the number of candidate pairs (the work).
    """
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
        if pairs:
            for a in U:
                for b in V:
                    J.add((a, b))
                    J.add((b, a))
            n += 2 * len(U) * len(V)
        U |= V
        for b in V:
            comp[b] = U
    return J, n
