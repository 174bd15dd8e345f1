"""The arrays candidate: int64 columns, hash indexes in numpy arrays, join loops compiled by numba.

Storage (per relation, `Rel`): the facts as an int64 column block, an int32
non-recursive derivation counter per row, presence and flip stamps, a
full-key hash table and one hash index per column set the plans probe (all
in numpy arrays; tests/benchmarks/bakeoff/kernels.py). No Python object per fact.

Evaluation: each rule is compiled once into plans -- one per body position
(the delta starts there) and one from the head (for rederivation) -- whose
atoms are ordered greedily by bound columns; a plan runs set-at-a-time, one
numba call per atom over all bindings, each binding probed fact-at-a-time in
the compiled loop. That is the path of large updates; an update with few
explicit changes (onecall.THRESHOLD) instead runs its whole cascade in one
call of a compiled interpreter of the same plans (the lines marked `hybrid hook`
below; interp.py), since each of the ~40 calls of a small update
costs more to dispatch than to run.

Maintenance (per update, strata in dependency order; the update is one
consistency point, so the core does not keep a derivation log):

* a non-recursive predicate is maintained by *counting* (Gupta et al. 1993):
  each rule instance with the delta at position i, earlier atoms in the new
  state and later ones in the old, adds its sign to its head's counter;
  presence = counter > 0;
* a recursive component by *DRed with non-recursive counters* (DRed^c, Hu,
  Motik, Horrocks 2018): counters count explicit and non-recursive
  derivations; facts that lose them, or a recursive derivation, and have a
  zero counter are over-deleted (semi-naive over the old state), removed,
  rederived one step from what remains (plans from the head), then
  insertions run to a fixpoint. Facts with a positive counter are never
  over-deleted.

The old state of a relation is read through `flip` (the epoch in which a
row's presence last changed), so no copy of a relation is ever made.
"""

from __future__ import annotations

import numpy as np

from tests.benchmarks.bakeoff import kernels as K
from tests.benchmarks.bakeoff.onecall import OneCall
from tests.benchmarks.bakeoff.rel import Rel
from tests.benchmarks.bakeoff.strata import Plan, components

NEW, OLD = 0, 1
_EMPTY = np.empty(0, np.int64)


class ArraysCore:
    """numpy + numba candidate (see the module docstring)."""

    name = "arrays"

    def __init__(self, rules: list, arities: dict[str, int]) -> None:
        self.arities = dict(arities)
        for r in rules:
            self.arities.setdefault(r.head[0], len(r.head[1]))
            for p, ts in r.body:
                self.arities.setdefault(p, len(ts))
        self.sccs, self.plans, masks = components(rules, self.arities)
        self.rels = {p: Rel(p, a, masks.get(p, [])) for p, a in self.arities.items()}
        for plan in self.plans:
            for step in plan.steps:
                step.k = self.rels[step.pred].index_of(step.mask)
        self.epoch = 0
        self.one_call = OneCall(self)  # hybrid hook: small updates in one compiled call (onecall.py)

    @classmethod
    def warm(cls) -> None:
        """Compile (or load from numba's on-disk cache) every kernel, on a tiny program using them all."""
        from tests.benchmarks.bakeoff.workload import Rule

        def a(p, *ts):
            return (p, tuple(("const", t) if isinstance(t, int) else ("var", t) for t in ts))

        rules = [Rule(a("c", "X", "Y"), (a("e", "X", "Y"),)),
                 Rule(a("c", "X", "Z"), (a("c", "X", "Y"), a("e", "Y", "Z"))),
                 Rule(a("s", "X", "Y"), (a("e", "X", "Y"),)), Rule(a("s", "X", "Y"), (a("s", "Y", "X"),)),
                 Rule(a("s", "X", "Z"), (a("s", "X", "Y"), a("s", "Y", "Z"))),
                 Rule(a("d", "X"), (a("c", "X", "X"),)), Rule(a("f", "X"), (a("e", "X", 1),)),
                 Rule(a("g", "X"), (a("e", "X", "Y"), a("b", "Z")))]  # fmt: skip
        e = np.array([[0, 1], [1, 2], [2, 0], [3, 1]], np.int64)
        for threshold in (-1, 64):  # hybrid hook: the set-at-a-time path, then the one-call path
            core = cls(rules, {"e": 2, "b": 1})
            core.one_call.threshold = threshold
            core.load({"e": e, "b": np.array([[5]], np.int64)})
            core.update({"e": np.array([[4, 4]], np.int64)}, {"e": e[:2]})
            core.facts()

    # ------------------------------------------------------------ the interface
    def load(self, facts: dict[str, np.ndarray]) -> None:
        self.update(facts, {})

    def update(self, add: dict[str, np.ndarray], delete: dict[str, np.ndarray]) -> tuple[int, int]:
        self.epoch += 1
        if self.one_call.fits(add, delete):  # hybrid hook: the whole cascade in one compiled call (onecall.py)
            return self.one_call.update(add, delete)
        try:
            return self._update(add, delete)
        finally:
            self.one_call.stale()  # hybrid hook: the interpreter re-reads the relations

    def _update(self, add: dict[str, np.ndarray], delete: dict[str, np.ndarray]) -> tuple[int, int]:
        explicit = self._explicit(add, delete)
        flipped: dict[str, np.ndarray] = {}
        for scc in self.sccs:
            if scc.inputs.isdisjoint(flipped) and scc.explicit.isdisjoint(explicit):
                continue
            if scc.stc:
                self._closure(scc, explicit, flipped)
            elif scc.recursive:
                _DRed(self, scc, explicit, flipped).run()
            else:
                self._counted(scc.preds[0], scc, explicit, flipped)
        added = removed = 0
        for p, rows in flipped.items():
            up = int(self.rels[p].alive[rows].sum())
            added += up
            removed += len(rows) - up
        return added, removed

    def facts(self) -> dict[str, set[tuple[int, ...]]]:
        out = {}
        for p, rel in self.rels.items():
            live = rel.cols[: rel.n][rel.alive[: rel.n] != 0]
            if len(live):
                out[p] = set(map(tuple, live.tolist()))
        return out

    def nbytes(self) -> int:
        return sum(r.nbytes() for r in self.rels.values())

    def save(self, path: str) -> None:
        arrays = {}
        for i, rel in enumerate(self.rels.values()):
            keep = rel.alive[: rel.n] != 0
            arrays[f"cols{i}"] = rel.cols[: rel.n][keep]
            arrays[f"cnt{i}"] = rel.cnt[: rel.n][keep]
            arrays[f"expl{i}"] = rel.expl[: rel.n][keep]
        arrays["preds"] = np.array(list(self.rels), dtype=object).astype(str)
        np.savez(path, **arrays)

    @classmethod
    def restore(cls, path: str, rules: list, arities: dict[str, int]) -> ArraysCore:
        core = cls(rules, arities)
        with np.load(path if path.endswith(".npz") else path + ".npz") as z:
            for i, p in enumerate(z["preds"].tolist()):
                core.rels[p].fill(z[f"cols{i}"], z[f"cnt{i}"], z[f"expl{i}"])
        return core

    # ------------------------------------------------------------ explicit facts
    def _explicit(self, add, delete) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Explicit changes that change E, as (rows, signs) per predicate; sets the rows' `expl`."""
        out: dict[str, list] = {}
        for p, keys in delete.items():
            rel = self.rels[p]
            rows = rel.lookup(np.ascontiguousarray(keys, dtype=np.int64))
            rows = np.unique(rows[rows >= 0])
            rows = rows[rel.expl[rows] != 0]
            rel.expl[rows] = 0
            out.setdefault(p, []).append((rows, -1))
        for p, keys in add.items():
            rel = self.rels[p]
            rows = np.unique(rel.insert(np.ascontiguousarray(keys, dtype=np.int64)))
            rows = rows[rel.expl[rows] == 0]
            rel.expl[rows] = 1
            out.setdefault(p, []).append((rows, 1))
        return {p: (np.concatenate([r for r, _ in parts]),
                    np.concatenate([np.full(len(r), s, np.int64) for r, s in parts]))
                for p, parts in out.items()}  # fmt: skip

    # ------------------------------------------------------------ plans
    def run(self, plan: Plan, rows: np.ndarray, weights: np.ndarray, mode_of) -> tuple[np.ndarray, np.ndarray]:
        """The head facts (and weights) of the plan's instances starting at `rows` of its first atom."""
        start = self.rels[plan.start.pred]
        B, W = K.bind_rows(rows, weights, start.cols, plan.start.src, plan.start.cval, plan.start.outslot,
                           plan.nslots)  # fmt: skip
        for step in plan.steps:
            if len(B) == 0:
                break
            rel = self.rels[step.pred]
            k = max(step.k, 0)
            B, W = K.join_step(B, W, step.src, step.cval, step.outslot, rel.cols, rel.n, rel.alive, rel.flip,
                               self.epoch, mode_of(step), rel.slots, rel.islots[k], rel.inext[k], step.how)  # fmt: skip
        return K.project(B, plan.head_src, plan.head_cval), W

    def _counted(self, p: str, scc, explicit, flipped) -> None:
        """Counting for a non-recursive predicate: counters from the deltas, presence = counter > 0."""
        touched = self.count_into(p, scc, explicit, flipped)
        if len(touched):
            rel = self.rels[p]
            flipped[p] = K.settle_counted(touched, rel.cnt, rel.alive, rel.flip, self.epoch)

    def _closure(self, scc, explicit, flipped) -> None:
        """The symmetric-transitive closure module: components of the counted (base) edges, redone where touched.

        Present = every pair of nodes in one component of the undirected graph of
        base edges (counter > 0). A component is named by its least node. The
        touched rows' endpoints and their old components are searched again over
        the base edges; only nodes whose component's name changed gain or lose
        pairs, so an edge inside a component, or one whose loss does not split
        it, costs a search and nothing more.
        """
        p = scc.preds[0]
        rel = self.rels[p]
        touched = self.count_into(p, scc, explicit, flipped)
        if not len(touched):
            return
        touched, matters = K.base_changes(touched, rel.cnt, rel.base, rel.alive)
        if not matters:
            return
        ends = np.unique(rel.cols[touched].ravel())
        old = K.rows_from(ends, rel.cols, rel.islots[0], rel.inext[0], rel.alive)
        region = np.unique(np.concatenate([ends, rel.cols[old, 1]]))
        rel.ensure_nodes(rel.maxid)
        rel.node_stamp += 1
        nodes, labels = K.components_from(region, rel.cols, rel.islots[0], rel.inext[0], rel.islots[1],
                                          rel.inext[1], rel.cnt, rel.seen, rel.node_stamp)  # fmt: skip
        U = np.unique(np.concatenate([region, nodes]))
        old = K.rows_from(U, rel.cols, rel.islots[0], rel.inext[0], rel.alive)
        xs, ys = rel.cols[old, 0], rel.cols[old, 1]
        oldmin = _group_min(len(U), np.searchsorted(U, xs), ys)
        newmin = np.full(len(U), -1, np.int64)
        if len(nodes):
            starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
            least = np.minimum.reduceat(nodes, starts)
            newmin[np.searchsorted(U, nodes)] = least[labels]
        changed = oldmin != newmin
        if not changed.any():
            return
        ix, iy = np.searchsorted(U, xs), np.searchsorted(U, ys)
        cand = changed[ix] | changed[iy]
        nx, ny = newmin[ix[cand]], newmin[iy[cand]]
        gone = old[cand][(nx < 0) | (nx != ny)]
        rel.alive[gone] = 0
        came = np.empty(0, np.int64)
        moved = U[changed & (newmin >= 0)]
        if len(moved):  # each moved node with every member of its new component, both ways
            came = K.revive(rel.insert(_component_pairs(moved, nodes, labels)), rel.alive)
        rows = np.concatenate([came, gone])
        rel.flip[rows] = self.epoch
        if len(rows):
            flipped[p] = rows

    def count_into(self, p: str, scc, explicit, flipped) -> np.ndarray:
        """Add the explicit and non-recursive derivation changes of `p` to its counters; the touched rows."""
        rel = self.rels[p]
        touched = []
        if p in explicit:
            touched.append(rel.count(*explicit[p], self.epoch))
        for q, plans in scc.counted.get(p, {}).items():
            delta = flipped.get(q)
            if delta is None or not len(delta):
                continue
            for plan in plans:
                self._count_plan(rel, plan, delta, touched)
        return np.concatenate(touched) if touched else np.empty(0, np.int64)

    def _count_plan(self, rel, plan, delta, touched: list) -> None:
        """One counting plan over a delta: earlier atoms in the new state, later ones in the old."""
        signs = np.where(self.rels[plan.start.pred].alive[delta] != 0, 1, -1).astype(np.int64)
        pos = plan.position
        heads, w = self.run(plan, delta, signs, lambda s: NEW if s.position < pos else OLD)
        if len(heads):
            touched.append(rel.count(rel.insert(heads), w, self.epoch))


def _component_pairs(moved: np.ndarray, nodes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(x, m) and (m, x) for each moved node x and each member m of its component (nodes grouped by label)."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(labels)) + 1])
    sizes = np.diff(np.concatenate([starts, [len(nodes)]]))
    order = np.argsort(nodes)
    lab = labels[order][np.searchsorted(nodes[order], moved)]
    counts = sizes[lab]
    offs = np.repeat(starts[lab] - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
    xs, ms = np.repeat(moved, counts), nodes[offs]
    return np.ascontiguousarray(np.concatenate([np.stack([xs, ms], 1), np.stack([ms, xs], 1)]))


def _group_min(n: int, idx: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Per group 0..n-1 the least of its `vals` (-1 for a group without any)."""
    out = np.full(n, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(out, idx, vals)
    out[out == np.iinfo(np.int64).max] = -1
    return out


class _DRed:
    """One recursive component's maintenance in one update (DRed^c; see the module docstring)."""

    def __init__(self, core: ArraysCore, scc, explicit, flipped):
        self.core, self.scc, self.explicit, self.flipped = core, scc, explicit, flipped
        self.epoch = core.epoch
        self.mine = set(scc.preds)

    def mode_over(self, step) -> int:  # over-deletion reads the old state (this component not yet changed)
        return NEW if step.pred in self.mine else OLD

    def run(self) -> None:
        core, rels = self.core, self.core.rels
        touched = {p: core.count_into(p, self.scc, self.explicit, self.flipped) for p in self.scc.preds}
        lost = {p: self._dead_seeds(p, t) for p, t in touched.items()}
        for plan in self.scc.lower_starts:  # a lower fact deleted: its instances lose a derivation
            rows = self._lower_delta(plan, want_alive=False)
            if len(rows):
                self._collect(lost, plan, rows, self.mode_over, over=True)
        deleted = self._overdelete(lost)
        for p, rows in deleted.items():
            rels[p].alive[rows] = 0
        seeds = {p: self._revive(p, touched[p][rels[p].cnt[touched[p]] > 0]) for p in self.scc.preds}
        for plan in self.scc.head_plans:
            rows = deleted.get(plan.start.pred)
            if rows is not None and len(rows):
                heads, _ = core.run(plan, rows, np.ones(len(rows), np.int64), lambda s: NEW)
                if len(heads):
                    got = self._revive(plan.head_pred, rels[plan.head_pred].lookup(heads))
                    seeds[plan.head_pred] = np.concatenate([seeds[plan.head_pred], got])
        for plan in self.scc.lower_starts:
            rows = self._lower_delta(plan, want_alive=True)
            if len(rows):
                self._collect(seeds, plan, rows, lambda s: NEW, over=False)
        inserted = self._insert(seeds)
        self._flips(deleted, inserted)

    def _lower_delta(self, plan, want_alive: bool) -> np.ndarray:
        delta = self.flipped.get(plan.start.pred)
        if delta is None or not len(delta):
            return np.empty(0, np.int64)
        return delta[(self.core.rels[plan.start.pred].alive[delta] != 0) == want_alive]

    def _dead_seeds(self, p: str, rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return rows
        rel = self.core.rels[p]
        return K.new_in(rows, True, rel.alive, rel.cnt, True, rel.dmark, self.epoch)

    def _revive(self, p: str, rows: np.ndarray) -> np.ndarray:
        return K.revive(rows, self.core.rels[p].alive) if len(rows) else rows

    def _collect(self, into: dict, plan, rows, mode_of, over: bool) -> None:
        """The plan's heads from `rows`: over-deletion candidates (over) or revived insertions."""
        core = self.core
        heads, _ = core.run(plan, rows, np.ones(len(rows), np.int64), mode_of)
        if not len(heads):
            return
        p, rel = plan.head_pred, core.rels[plan.head_pred]
        if over:
            got = K.new_in(rel.lookup(heads), True, rel.alive, rel.cnt, True, rel.dmark, self.epoch)
        else:
            got = K.revive(rel.insert(heads), rel.alive)
        into[p] = np.concatenate([into.get(p, np.empty(0, np.int64)), got])

    def _overdelete(self, lost: dict) -> dict:
        """Semi-naive over-deletion from `lost`, over the old state; every over-deleted row per predicate."""
        return self._fixpoint(lost, self.mode_over, over=True)

    def _insert(self, seeds: dict) -> dict:
        """Semi-naive insertion from the revived `seeds` over the new state; every revived row per predicate."""
        return self._fixpoint(seeds, lambda s: NEW, over=False)

    def _fixpoint(self, seeds: dict, mode_of, over: bool) -> dict:
        """The recursive rules from `seeds` until nothing new (see `_collect`); every row reached, per predicate."""
        out = {p: [rows] for p, rows in seeds.items()}
        delta = seeds
        while any(len(r) for r in delta.values()):
            nxt: dict[str, np.ndarray] = {}
            for plan in self.scc.rec_starts:
                rows = delta.get(plan.start.pred)
                if rows is not None and len(rows):
                    self._collect(nxt, plan, rows, mode_of, over=over)
            for p, rows in nxt.items():
                out.setdefault(p, []).append(rows)
            delta = nxt
        return {p: np.concatenate(parts) for p, parts in out.items()}

    def _flips(self, deleted: dict, inserted: dict) -> None:
        """Rows whose presence differs from before the update: over-deleted and not back, or newly present."""
        for p in self.scc.preds:
            rel = self.core.rels[p]
            d, i = deleted.get(p, _EMPTY), inserted.get(p, _EMPTY)
            if not len(d) and not len(i):
                continue
            gone = d[rel.alive[d] == 0]
            new = i[rel.dmark[i] != self.epoch]
            rows = np.concatenate([gone, new])
            rel.flip[rows] = self.epoch
            if len(rows):
                self.flipped[p] = rows
