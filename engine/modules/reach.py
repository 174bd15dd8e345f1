"""Reachability: tc(R) and ltc(R) as upkeep modules, kept as reach sets and rows.

ltc(R) derives R = R0 . S*: R(x, z) for R0(x, w) and z reachable from w over S
(w itself included), where R0 are the R facts with a non-recursive justification
(explicit or a non-recursive rule) and S the union of the base relations. Rather
than counting the O(|R| * degree) instances of `R(x, z) :- R(x, y), S(y, z)`,
`Reach` keeps two maps of node sets:

* reach(v) = the nodes reachable from v over S, v included, for every node of S
  and every target of R0;
* row(x) = the union of reach(w) over R0(x, w), which is exactly R(x, .).

`update` takes the changes of S and R0 and returns the R facts lost and gained:
only nodes that reach the source of a changed S edge can change their reach
(and not even those when the edge is redundant: see `_dirty`);
they are recomputed sinks first over the strongly connected components of that
part of the graph (engine.graph), and a node whose successors' reach did not
change is skipped. Then the rows of the sources whose R0 targets changed, or
whose own R0 facts changed, are recomputed and compared with the old rows.

Node sets are bitsets (Python ints over a local numbering of the nodes, one OR
per edge instead of a set union) while the graph is small enough for that to
cost less memory than sets would: at most `BITSET_NODES` nodes, or a node count
whose n^2 / 8 bytes per table stays within a few times the size of R. Beyond
that, sets of node numbers with the same algorithm. The representation is
chosen when the state is built (at load) and kept until the next load.

`Reachability` is the upkeep module over that state (engine.modules.base):
ltc(R) with the base relations as S and the R facts with a non-recursive
justification as R0 (`dredc`'s updates, the fully dynamic algorithms), and
tc(R) with S = R0 = R's edges (the fully dynamic algorithms). ltc has no
phase form, so `Reachability` is also ltc's Add in materialisations: the
set-at-a-time closure of engine.modules.ltc.
"""

from __future__ import annotations

from collections.abc import Iterable

from fluxmat.engine.evaluate import View
from fluxmat.engine.graph import components, search
from fluxmat.engine.modules.base import UpkeepModule
from fluxmat.engine.modules.ltc import close
from fluxmat.engine.storage import Fact

BITSET_NODES = 4096  # bitsets up to here whatever R's size
BYTES_PER_FACT = 64  # beyond it, bitsets while n^2 / 8 per table <= this * |R|


class _Bitsets:
    """Node sets as Python ints: bit i is node number i."""

    @staticmethod
    def empty():
        return 0

    @staticmethod
    def one(i: int):
        return 1 << i

    @staticmethod
    def minus(a, b):
        return a & ~b

    @staticmethod
    def has(bits: int, i: int) -> bool:
        return bool(bits >> i & 1)

    @staticmethod
    def within(a: int, b: int) -> bool:
        return not a & ~b

    @staticmethod
    def disjoint(a: int, b: int) -> bool:
        return not a & b

    @staticmethod
    def pairs(x: int, bits: int, nodes: list[int], out: list[Fact]) -> None:
        """Append (x, node) for every node in `bits`."""
        while bits:
            low = bits & -bits
            out.append((x, nodes[low.bit_length() - 1]))
            bits ^= low


class _Sets:
    """Node sets as Python sets of node numbers."""

    @staticmethod
    def empty():
        return set()

    @staticmethod
    def one(i: int):
        return {i}

    @staticmethod
    def minus(a, b):
        return a - b

    @staticmethod
    def has(numbers: set[int], i: int) -> bool:
        return i in numbers

    @staticmethod
    def within(a: set[int], b: set[int]) -> bool:
        return a <= b

    @staticmethod
    def disjoint(a: set[int], b: set[int]) -> bool:
        return a.isdisjoint(b)

    @staticmethod
    def pairs(x: int, numbers: set[int], nodes: list[int], out: list[Fact]) -> None:
        out.extend([(x, nodes[i]) for i in numbers])


class Reach:
    """R = R0 . S* kept as reach sets and rows (see the module docstring)."""

    def __init__(self, edges: Iterable[Fact], r0: Iterable[Fact], size: int = 0):
        """Build the state from S's edges (with repeats across relations) and R0.

        `size` is |R|, used to choose the representation.
        """
        self.nodes: list[int] = []  # number -> node
        self.num: dict[int, int] = {}  # node -> number
        self.succ: dict[int, dict[int, int]] = {}  # S: node -> successor -> multiplicity
        self.pred: dict[int, set[int]] = {}
        self.r0: dict[int, set[int]] = {}  # x -> w for R0(x, w)
        self.r0_rev: dict[int, set[int]] = {}  # w -> x
        self.reach: dict[int, object] = {}
        self.rows: dict[int, object] = {}
        self.work = 0  # node sets computed (the module's inference count)
        self.fresh: list[int] = []  # nodes numbered since reach was last completed
        for u, v in edges:
            self._edge(u, v)
        r0 = list(r0)
        for x, w in r0:
            self._r0(x, w)
        n = len(self.nodes)
        dense = n <= BITSET_NODES or n * n // 8 <= BYTES_PER_FACT * max(size, len(r0), 1)
        self.sets = _Bitsets if dense else _Sets
        self.fresh = []
        self._rereach(set(self.num))
        for x in self.r0:
            self.rows[x] = self._row(x)

    # ------------------------------------------------------------ upkeep
    def update(
        self, s_gone: Iterable[Fact], s_new: Iterable[Fact], r0_gone: Iterable[Fact],
        r0_new: Iterable[Fact],
    ) -> tuple[list[Fact], list[Fact]]:
        """Apply changes of S (edges with repeats) and R0; the R facts (lost, gained)."""
        removed = [(u, v) for u, v in s_gone if self._unedge(u, v)]
        added = [(u, v) for u, v in s_new if self._edge(u, v)]
        for _x, w in r0_new:
            self._node(w)
        one, num, reach = self.sets.one, self.num, self.reach
        for v in self.fresh:  # a new node reaches itself (more if it is dirty)
            reach[v] = one(num[v])
        self.fresh = []
        dirty = self._dirty(removed, added)
        changed = self._rereach(dirty) if dirty else set()
        sources = {x for x, w in r0_gone if self._unr0(x, w)}
        sources.update(x for x, w in r0_new if self._r0(x, w))
        r0_rev = self.r0_rev
        for w in changed:
            xs = r0_rev.get(w)
            if xs:
                sources |= xs
        lost: list[Fact] = []
        gained: list[Fact] = []
        sets, nodes, rows = self.sets, self.nodes, self.rows
        empty = sets.empty()
        for x in sources:
            old = rows.get(x, empty)
            new = self._row(x) if x in self.r0 else empty
            if new == old:
                continue
            if x in self.r0:
                rows[x] = new
            else:
                rows.pop(x, None)
            sets.pairs(x, sets.minus(old, new), nodes, lost)
            sets.pairs(x, sets.minus(new, old), nodes, gained)
        return lost, gained

    def holds(self, x: int, z: int) -> bool:
        """Whether R(x, z) holds in the current state."""
        row, i = self.rows.get(x), self.num.get(z)
        return row is not None and i is not None and self.sets.has(row, i)

    def _row(self, x: int):
        reach = self.reach
        ws = iter(self.r0[x])
        row = reach[next(ws)]
        if isinstance(row, set):
            row = set(row)
        for w in ws:
            row |= reach[w]
        self.work += 1
        return row

    def _dirty(self, gone: list[Fact], new: list[Fact]) -> set[int]:
        """The sources of the changed edges that can change their reach.

        Not a new edge (u, v) with reach(v) within reach(u) already. Not a lost
        edge (u, v) when another successor c of u reaches v and reaches no
        source of a lost edge: no lost edge lies on c's paths, so reach(c) keeps
        v (and with it reach(v)) whatever else this batch changes. Every other
        node's reach then changes only through a dirty node it reaches.
        """
        sets, reach, num, succ = self.sets, self.reach, self.num, self.succ
        dirty = {u for u, v in new if not sets.within(reach[v], reach[u])}
        if gone:
            mask = sets.empty()
            for u, _v in gone:
                mask |= sets.one(num[u])
            for u, v in gone:
                i = num[v]
                if not any(
                    sets.has(reach[c], i) and sets.disjoint(reach[c], mask)
                    for c in succ.get(u, ())
                ):
                    dirty.add(u)
        return dirty

    def _rereach(self, dirty: set[int]) -> set[int]:
        """Recompute reach for the nodes that reach `dirty`; return those that changed."""
        affected = search(self.pred, dirty)  # the nodes reaching a dirty one
        succ, reach, num, sets = self.succ, self.reach, self.num, self.sets
        inside = {a: [c for c in succ.get(a, ()) if c in affected] for a in affected}
        changed: set[int] = set()
        for members in components(affected, inside):
            if len(members) == 1:
                a = members[0]
                if a not in dirty and a in reach and not any(c in changed for c in succ.get(a, ())):
                    continue
            group = set(members)  # a cycle's nodes all reach the same nodes
            r = sets.empty()
            for a in members:
                r |= sets.one(num[a])
                for c in succ.get(a, ()):
                    if c not in group:
                        r |= reach[c]
            self.work += 1
            for a in members:
                if reach.get(a) != r:
                    reach[a] = r
                    changed.add(a)
        return changed

    # ------------------------------------------------------------ graph edits
    def _node(self, v: int) -> None:
        if v not in self.num:
            self.num[v] = len(self.nodes)
            self.nodes.append(v)
            self.fresh.append(v)

    def _edge(self, u: int, v: int) -> bool:
        """Count edge (u, v); True if it is new."""
        self._node(u)
        self._node(v)
        row = self.succ.setdefault(u, {})
        n = row.get(v, 0)
        row[v] = n + 1
        if n:
            return False
        self.pred.setdefault(v, set()).add(u)
        return True

    def _unedge(self, u: int, v: int) -> bool:
        """Uncount edge (u, v); True if it is gone."""
        row = self.succ[u]
        n = row[v] - 1
        if n:
            row[v] = n
            return False
        del row[v]
        if not row:
            del self.succ[u]
        _drop(self.pred, v, u)
        return True

    def _r0(self, x: int, w: int) -> bool:
        self._node(w)
        ws = self.r0.setdefault(x, set())
        if w in ws:
            return False
        ws.add(w)
        self.r0_rev.setdefault(w, set()).add(x)
        return True

    def _unr0(self, x: int, w: int) -> bool:
        if w not in self.r0.get(x, ()):
            return False
        _drop(self.r0, x, w)
        _drop(self.r0_rev, w, x)
        return True

    def facts(self) -> list[Fact]:
        """R as it stands: every row's pairs (for checks)."""
        out: list[Fact] = []
        for x, row in self.rows.items():
            self.sets.pairs(x, row, self.nodes, out)
        return out


def _drop(table: dict[int, set[int]], key: int, value: int) -> None:
    """Remove `value` from table[key], and `key` with its last value."""
    values = table[key]
    values.discard(value)
    if not values:
        del table[key]


class Reachability(UpkeepModule):
    """tc(R) or ltc(R) kept as `Reach` (see the module docstring).

    The edges are R0; paths run over the base relations S (`bases`, ltc) or
    over the edges themselves (tc, no bases).
    """

    def reset(self) -> None:
        self.edges = set()
        self.upkeep = Reach((), ())  # the reach sets and rows, kept between updates

    def add(self, Ip: View, delta: set[Fact]) -> set[Fact]:
        """Ltc's Add (materialisation): R facts derived from `delta` over S (engine.modules.ltc)."""
        adj: dict[int, list[int]] = {}
        for base in self.bases:
            for rel, excl in Ip(base):
                for u, v in rel.facts if excl is None else rel.facts - excl:
                    adj.setdefault(u, []).append(v)
        out = close(adj, delta)
        self.count(len(out))
        for rel, excl in Ip(self.pred):
            present = out & rel.facts
            if excl:
                present -= excl
            out -= present
        return out

    def build(self, edges: Iterable[Fact], s_edges: Iterable[Fact] = (), size: int = 0) -> None:
        """R0 := `edges`; S := `s_edges` (ltc) or the edges (tc); R has `size` facts."""
        self.edges = set(edges)
        self.upkeep = Reach(s_edges if self.bases else self.edges, self.edges, size)

    def connected(self, f: Fact) -> bool:
        return self.upkeep.holds(*f)

    def change(
        self, gone: Iterable[Fact] = (), new: Iterable[Fact] = (),
        s_gone: Iterable[Fact] = (), s_new: Iterable[Fact] = (),
    ) -> tuple[list[Fact], list[Fact]]:  # fmt: skip
        """R0 edges `gone` and `new`, S facts `s_gone` and `s_new`: the R facts (lost, gained)."""
        gone, new = list(gone), list(new)
        self.edges.difference_update(gone)
        self.edges.update(new)
        if not self.bases:  # tc: the edges are S too
            s_gone, s_new = gone, new
        before = self.upkeep.work
        lost, gained = self.upkeep.update(s_gone, s_new, gone, new)
        self.count(self.upkeep.work - before + len(lost) + len(gained))
        return lost, gained
