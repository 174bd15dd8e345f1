"""tc/stc/ltc modules in the fully dynamic engine: R kept as the closure of its base facts.

Hu, Motik & Horrocks (2019) plug the stc module into DRed^c phase by phase; the
fully dynamic engine has no phases, so the module is kept at the level of single
operations instead. It applies to a stratum that holds R alone and whose only
recursive rules are R's symmetry and transitivity rules (the other rules of the
stratum read lower strata only).

* An R fact is a *base* fact while it is explicit or justified by one of the
  stratum's other rules (FD-Counting: a logged instance; FD-DRed: the instance
  that inserted it, or backward evaluation at rederivation).
* `Components` keeps the connected components of the present base facts taken
  as undirected edges; R holds exactly the pairs inside a component (R(u, u)
  included) and the base facts.
* A fact that becomes a base fact links its ends: merging components U and V
  determines `add` operations for the pairs of U x V and V x U not present (a
  *module addition*; on execution it is inserted if its ends are still
  connected; no recursion stop is needed, as a component is derivable from the
  base facts, which depend on lower strata only).
* A deletion of R fact F that the policy allows first unlinks F if it is an
  edge: when the component splits, every pair across the split is determined
  for deletion in F's wave. F itself is deleted only if its ends are no longer
  connected; otherwise it stays, derived by the module.
* Rederivation: a base justification first, else the components.

A tc module (R's stratum holds R alone, its only recursive rule is R's
transitivity rule) works the same way over `Reachability`: R holds the pairs
joined by a directed path of one or more base facts (engine.modules.reach, with
S = R0 = the edges); linking an edge determines the pairs it newly joins, and
unlinking one determines the pairs no longer joined. An ltc module likewise,
with R0 (the base R facts) as the edges and paths over the lower relations S,
whose facts entering and leaving I (`s_link`, `s_unlink`) change the pairs too.

So the stratum's transitivity and symmetry instances (O(n^3) on a clique of n
nodes) are never evaluated nor logged. Invariants at quiescence: the edges are
the present base facts (FD-DRed: present facts with a base derivation when they
became edges); every base-derivable R fact is an edge or lies inside a
component; R = base facts + pairs inside components. engine/ALGORITHMS.md.
"""

from __future__ import annotations

from engine.modules.ltc import LinearClosure
from engine.modules.reach import Reach
from engine.modules.stc import SymmetricTransitiveClosure
from engine.modules.tc import TransitiveClosure
from engine.storage import Fact

MODULE = "module"  # the justification of a module addition (a pending `add` item)


class Components:
    """Connected components over the edge facts of one stc relation."""

    bases: tuple[str, ...] = ()  # no lower relation feeds an stc closure (ltc: Reachability)

    def __init__(self, stc: SymmetricTransitiveClosure):
        self.stc = stc  # its `component` map, CLOSEEDGES and work counter are shared
        self.edges: set[Fact] = set()
        self.adj: dict[int, dict[int, int]] = {}  # node -> neighbour -> edge facts

    def reset(self, edges, size: int = 0, s_edges=()) -> None:
        self.stc.reset()
        self.edges = set(edges)
        self.adj = {}
        for u, v in self.edges:
            self._touch(u, v, 1)
        self.stc.close_edges(self.edges, pairs=False)

    def connected(self, f: Fact) -> bool:
        comp = self.stc.component
        U = comp.get(f[0])
        return U is not None and comp.get(f[1]) is U

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

    def link(self, f: Fact) -> set[Fact]:
        """Make `f` an edge; the pairs its ends' merge derives (present ones included)."""
        if f in self.edges:
            return set()
        self.edges.add(f)
        self._touch(f[0], f[1], 1)
        return self.stc.close_edges((f,))

    def unlink(self, f: Fact) -> list[Fact]:
        """`f` is no longer an edge; the pairs no longer inside one component."""
        if f not in self.edges:
            return []
        self.edges.discard(f)
        u, v = f
        self._touch(u, v, -1)
        adj = self.adj
        if u == v or v in adj.get(u, ()):  # a loop, or (v, u) is an edge too
            return [] if u in adj else self._isolate(u, [])
        side = self._cut_off(u, v)
        if side is None:
            return []
        comp = self.stc.component
        U = comp[u]
        other = U - side
        self.stc._count(len(U) + len(side) * len(other))
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
            self.stc._count(len(seen[0]) + len(seen[1]))

    def _isolate(self, node: int, lost: list[Fact]) -> list[Fact]:
        """`node` has no edge left: not even R(node, node) holds."""
        comp = self.stc.component
        comp[node].discard(node)
        del comp[node]
        lost.append((node, node))
        return lost


class Reachability:
    """Directed paths over the edge facts of one tc relation (`Components`' interface).

    With `bases` (an ltc module) the edges are R0 instead and the paths run over
    the base relations S, whose facts enter and leave through `s_change`.
    """

    def __init__(self, module: TransitiveClosure | LinearClosure):
        self.module = module  # its work counter is shared
        self.bases: tuple[str, ...] = getattr(module, "bases", ())
        self.edges: set[Fact] = set()
        self.state = Reach((), ())

    def reset(self, edges, size: int = 0, s_edges=()) -> None:
        """Start over from `edges` and S's `s_edges` (ltc); R has `size` facts."""
        self.edges = set(edges)
        self.state = Reach(s_edges if self.bases else self.edges, self.edges, size)

    def connected(self, f: Fact) -> bool:
        return self.state.holds(*f)

    def _change(self, s: tuple, r0: tuple) -> tuple[list[Fact], list[Fact]]:
        """Apply (gone, new) edges of S and R0; the pairs (lost, gained)."""
        before = self.state.work
        out = self.state.update(*s, *r0)
        self.module._count(self.state.work - before + len(out[0]) + len(out[1]))
        return out

    def _edge_change(self, gone: tuple, new: tuple) -> tuple[list[Fact], list[Fact]]:
        return self._change(((), ()) if self.bases else (gone, new), (gone, new))

    def link(self, f: Fact) -> set[Fact]:
        """Make `f` an edge; the pairs it newly joins."""
        if f in self.edges:
            return set()
        self.edges.add(f)
        return set(self._edge_change((), (f,))[1])

    def unlink(self, f: Fact) -> list[Fact]:
        """`f` is no longer an edge; the pairs no longer joined."""
        if f not in self.edges:
            return []
        self.edges.discard(f)
        return self._edge_change((f,), ())[0]

    def s_change(self, gone: tuple, new: tuple) -> tuple[list[Fact], list[Fact]]:
        """ltc: S facts (gone, new); the pairs (lost, gained)."""
        return self._change((gone, new), ((), ()))


class ClosureUpkeep:
    """The FullyDynamic side: operations determined by edge changes (mixed in)."""

    closures: dict[str, Components | Reachability]

    def takes(self, spec) -> bool:
        """Take a tc/stc/ltc(R) module if R's stratum holds R alone and only its rules recur."""
        s = next(s for s in self.analysis.strata if s.index == spec.stratum)
        return (
            spec.kind in ("tc", "stc", "ltc")
            and s.preds == {spec.pred}
            and set(s.recursive) == set(spec.rules)
        )

    def setup_closures(self) -> None:
        """After the modules are built: their state, and the rules left to evaluate."""
        self.closures = {
            m.pred: Components(m) if m.kind == "stc" else Reachability(m)
            for ms in self.modules.values() for m in ms
        }  # fmt: skip
        self.active_rules = [r for r in self.analysis.rules if r.id not in self.module_rules]
        self.base_rules = {  # closure pred -> the other rules of its stratum
            p: [r.id for r in self.active_rules if r.head.pred == p] for p in self.closures
        }
        self.closure_bases: dict[str, list[str]] = {}  # ltc: S pred -> closure preds
        for p, c in self.closures.items():
            for b in c.bases:
                self.closure_bases.setdefault(b, []).append(p)

    def build_closures(self) -> None:
        """Edges from the current I: explicit facts and heads of the base rules."""
        for pred, comps in self.closures.items():
            edges = set(self.E.get(pred, ()))
            base = self.base_rules[pred]
            if base:
                for _rule, heads in self.ev.derive(base, self.OLD, self.OLD):
                    edges.update(heads)
            present = self.rel(pred).facts
            s_edges = [f for b in comps.bases for f in self.rel(b).facts]
            comps.reset(edges & present, len(present), s_edges)

    def has_base_support(self, key) -> bool:
        """Policy hook: whether a present R fact is justified by a base rule now."""
        return False

    def _adds(self, pred: str, pairs, update: int) -> None:
        """Module additions for the `pairs` of closure `pred` not present."""
        present = self.rel(pred).facts
        for g in pairs:
            if g not in present:
                self.stats.determined += 1
                self._push(update, ("a", (pred, g), MODULE, False, update))

    def _dels(self, pred: str, pairs, wave: int, but=None) -> None:
        """Deletions, in `wave`, of the `pairs` of closure `pred` present (except `but`)."""
        present = self.rel(pred).facts
        for g in pairs:
            if g != but and g in present:
                self._enqueue_del((pred, g), wave)

    def link(self, key, update: int) -> None:
        """`key` is a base fact: module additions for what its merge derives."""
        pred, f = key
        self._adds(pred, self.closures[pred].link(f), update)

    def s_link(self, key, update: int) -> None:
        """An S fact entered I: module additions for the pairs of R it joins (ltc)."""
        for r in self.closure_bases[key[0]]:
            self._adds(r, self.closures[r].s_change((), (key[1],))[1], update)

    def s_unlink(self, key, wave: int) -> None:
        """An S fact left I: determine the deletion of the pairs it no longer joins (ltc)."""
        for r in self.closure_bases[key[0]]:
            self._dels(r, self.closures[r].s_change((key[1],), ())[0], wave)

    def touch(self, key, update: int) -> None:
        """Link `key` if it is a base fact now (explicit or supported)."""
        pred, f = key
        if pred in self.closures and (f in self.E.get(pred, ()) or self.has_base_support(key)):
            self.link(key, update)

    def unlink_keeps(self, key, wave: int) -> bool:
        """Unlink `key`, a fact being deleted that is not a base fact.

        Determines the deletion of the pairs its removal disconnects; True if the
        module still derives `key` itself.
        """
        pred, f = key
        comps = self.closures[pred]
        self._dels(pred, comps.unlink(f), wave, but=f)
        return comps.connected(f)
