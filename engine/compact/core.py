"""The arrays core: the materialisation as int64 column blocks, maintained set-at-a-time.

Storage (per relation, engine.compact.relation): the facts as an int64 column
block, an int32 non-recursive derivation counter per row, presence and flip
stamps, an explicit flag, a full-key hash table and one hash index per column
set the plans probe (all numpy arrays; engine.compact.kernels). No Python
object per fact.

Evaluation: each rule is compiled once into plans (engine.compact.plans); a
plan runs set-at-a-time, one numba call per atom over all bindings, each
binding probed fact-at-a-time in the compiled loop. A negated atom is an
anti-probe: a binding survives when its fact is absent.

Maintenance, per update, components in dependency order (the update is one
consistency point, so no derivation log is kept):

* a non-recursive predicate by *counting* (Gupta et al. 1993): each rule
  instance with the delta at position i, earlier atoms in the new state and
  later ones in the old, adds its sign to its head's counter (a fact of a
  negated atom that appears removes instances, one that goes adds them);
  presence = counter > 0;
* a recursive component by *DRed with non-recursive counters* (DRed^c, Hu,
  Motik, Horrocks 2018; engine.compact.dred);
* a component that is exactly a symmetric and transitive relation by a
  closure module (engine.compact.closure).

The old state of a relation is read through `flip` (the epoch in which a
row's presence last changed), so no copy of a relation is ever made.

Not here: term ids, validation, reports (engine.compact.maintainer).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact.bf import BF
from fluxmat.engine.compact.closure import closure
from fluxmat.engine.compact.dred import DRed
from fluxmat.engine.compact.plans import Component, Plan, Step
from fluxmat.engine.compact.recompute import DeletionChoice
from fluxmat.engine.compact.relation import Rel

NEW, OLD = 0, 1
Arrays = dict[str, np.ndarray]
Views = dict[str, np.ndarray]  # presence flags read instead of a relation's own (`bindings`)


class ArraysCore:
    """Relations and compiled components (see the module docstring).

    `on_work(rule_id, instances)` is told every plan's head instances (work
    counters and limits); `after_component()` runs after each component.
    """

    def __init__(self, comps: list[Component], plans: list[Plan], masks: dict, arities: dict[str, int],
                 on_work: Callable[[int, int], None], after_component: Callable[[], None]):  # fmt: skip
        self.comps, self.on_work, self.after_component = comps, on_work, after_component
        self.rels = {p: Rel(p, a, masks.get(p, [])) for p, a in arities.items()}
        named = {p for c in comps for p in c.preds}
        comps += [Component([p], False) for p in self.rels if p not in named]  # no rule names them
        for pl in plans:
            for step in pl.steps:
                step.k = self.rels[step.pred].index_of(step.mask)
        self.epoch = 0
        self.change = None  # a program change for the next update (engine.compact.program)
        self.deletions = DeletionChoice()  # DRed^c or recomputing (engine.compact.recompute)
        self.backward_forward = False  # B/F^c instead of DRed^c (engine.compact.bf)

    def rel(self, pred: str, arity: int) -> Rel:
        """The relation `pred`, created with its own component when new (a predicate no rule reads)."""
        rel = self.rels.get(pred)
        if rel is None:
            rel = self.rels[pred] = Rel(pred, arity, [])
            self.comps.append(Component([pred], False))
        return rel

    def update(self, add: Arrays, delete: Arrays) -> dict[str, np.ndarray]:
        """Apply explicit adds and deletes (int64 rows per predicate); the rows that flipped, per predicate.

        Adds of explicit facts and deletes of non-explicit ones change nothing.
        A pending program change (`self.change`, engine.compact.program.RuleChange)
        adds and removes rule instances per component in the same pass; it is consumed.
        """
        change, self.change = self.change, None
        self.epoch += 1
        self.deferring(True)
        try:
            return self._update(change, add, delete)
        finally:
            self.deferring(False)

    def deferring(self, on: bool) -> None:
        """Let large inserts leave indexes stale (`on`), or stop and make every index current (engine.compact.relation).

        Outside an update every index is current: the small-update interpreter
        reads the tables directly, and so do the closure modules, whose relations never defer.
        """
        closed = {c.preds[0] for c in self.comps if c.stc}
        for p, rel in self.rels.items():
            rel.defer = on and p not in closed
            if not on:
                rel.flush()

    def _update(self, change, add: Arrays, delete: Arrays) -> dict[str, np.ndarray]:
        explicit = self._explicit(add, delete)
        flipped: dict[str, np.ndarray] = {}
        for comp in self.comps:
            added = []  # rules a program change adds to a recursive component
            if change is not None:
                comp, added = change.component(comp, explicit)
            # by membership, not set.isdisjoint(dict): that walks the dict (thousands of strata)
            quiet = not any(q in flipped for q in comp.inputs)
            quiet = quiet and not any(p in explicit for p in comp.preds)
            if quiet and not added:
                continue
            if comp.stc:
                closure(self, comp, explicit, flipped)
            elif comp.recursive:
                (BF if self.backward_forward else DRed)(self, comp, explicit, flipped, added).run()
            else:
                self._counted(comp.preds[0], comp, explicit, flipped)
            self.after_component()
        return flipped

    def _explicit(self, add: Arrays, delete: Arrays) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Explicit changes that change E, as (rows, signs) per predicate; sets the rows' `expl`."""
        out: dict[str, list] = {}
        for p, keys in delete.items():
            rel = self.rels[p]
            rows = rel.lookup(keys)
            rows = np.unique(rows[rows >= 0])
            rows = rows[rel.expl[rows] != 0]
            rel.expl[rows] = 0
            out.setdefault(p, []).append((rows, -1))
        for p, keys in add.items():
            rel = self.rels[p]
            rows = np.unique(rel.insert(keys))
            rows = rows[rel.expl[rows] == 0]
            rel.expl[rows] = 1
            out.setdefault(p, []).append((rows, 1))
        return {p: (np.concatenate([r for r, _ in parts]),
                    np.concatenate([np.full(len(r), s, np.int64) for r, s in parts]))
                for p, parts in out.items()}  # fmt: skip

    # ------------------------------------------------------------ plans
    def run(self, plan: Plan, rows: np.ndarray, weights: np.ndarray, mode_of: Callable[[Step], int],
            views: Views | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """The head facts (and weights) of the plan's instances starting at `rows` of its first atom."""
        B, W = self.bindings(plan, rows, weights, mode_of, views)
        return K.project(B, plan.head_src, plan.head_cval), W

    def bindings(self, plan: Plan, rows: np.ndarray, weights: np.ndarray, mode_of: Callable[[Step], int],
                 views: Views | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """The plan's instances starting at `rows` of its first atom, as bindings (one slot per variable).

        `views` replace the presence flags of some relations: a step over such a
        relation counts a row when its flag in the view is non-zero (its mode is
        then ignored). Backward/Forward reads its proved and surviving facts
        this way (engine.compact.bf).
        """
        start = self.rels[plan.start.pred]
        B, W = K.bind_rows(rows, weights, start.cols, plan.start.src, plan.start.cval, plan.start.outslot,
                           plan.nslots)  # fmt: skip
        # built-ins (engine.compact.builtins), by the number of steps before them
        after = plan.after
        for b in after.get(0, ()):
            B, W = b.apply(B, W)
        for i, step in enumerate(plan.steps, start=1):
            if len(B) == 0:
                break
            rel = self.rels[step.pred]
            rel.flush()
            k = max(step.k, 0)
            alive, mode = rel.alive, mode_of(step)
            if views is not None and step.pred in views:
                alive, mode = views[step.pred], NEW
            B, W = K.join_step(B, W, step.src, step.cval, step.outslot, rel.cols, rel.n, alive, rel.flip,
                               self.epoch, mode, rel.slots, rel.islots[k], rel.inext[k], step.how)  # fmt: skip
            for b in after.get(i, ()):
                B, W = b.apply(B, W)
        self.on_work(plan.rule, len(B))
        return B, W

    def run_all(self, plan: Plan, old: bool) -> np.ndarray:
        """The head facts of all the instances of a plan's rule, before this epoch (`old`) or now.

        The plan starts at a positive atom (engine.compact.program compiles it from position 0).
        """
        rel = self.rels[plan.start.pred]
        present = rel.alive[: rel.n] != 0
        if old:
            present ^= rel.flip[: rel.n] == self.epoch
        rows = np.flatnonzero(present).astype(np.int64)
        mode = OLD if old else NEW
        heads, _ = self.run(plan, rows, np.ones(len(rows), np.int64), lambda _s: mode)
        return heads

    def _counted(self, p: str, comp: Component, explicit, flipped) -> None:
        """Counting for a non-recursive predicate: counters from the deltas, presence = counter > 0."""
        touched = self.count_into(p, comp, explicit, flipped)
        if len(touched):
            rel = self.rels[p]
            flipped[p] = K.settle_counted(touched, rel.cnt, rel.alive, rel.flip, self.epoch)

    def count_into(self, p: str, comp: Component, explicit, flipped) -> np.ndarray:
        """Add the explicit and non-recursive derivation changes of `p` to its counters; the touched rows."""
        rel = self.rels[p]
        touched = []
        if p in explicit:
            touched.append(rel.count(*explicit[p], self.epoch))
        for q, plans in comp.counted.get(p, {}).items():
            delta = flipped.get(q)
            if delta is None or not len(delta):
                continue
            for plan in plans:
                self._count_plan(rel, plan, delta, touched)
        return np.concatenate(touched) if touched else np.empty(0, np.int64)

    def _count_plan(self, rel: Rel, plan: Plan, delta: np.ndarray, touched: list) -> None:
        """One counting plan over a delta: earlier atoms in the new state, later ones in the old.

        A delta row that appeared counts +1 (-1 at a negated position), one that went -1 (+1).
        """
        gain = 1 if not plan.start.negated else -1
        signs = np.where(self.rels[plan.start.pred].alive[delta] != 0, gain, -gain).astype(np.int64)
        pos = plan.position
        heads, w = self.run(plan, delta, signs, lambda s: NEW if s.position < pos else OLD)
        if len(heads):
            touched.append(rel.count(rel.insert(heads), w, self.epoch))

    # ------------------------------------------------------------ reading
    def size(self) -> int:
        return sum(r.size() for r in self.rels.values())

    def nbytes(self) -> int:
        return sum(r.nbytes() for r in self.rels.values())
