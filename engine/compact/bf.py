r"""Backward/Forward with non-recursive counters (B/F^c) for one recursive component of the arrays core.

Motik, Nenov, Piro, Horrocks, "Maintenance of Datalog materialisations
revisited" (2019), with the counters of Hu, Motik, Horrocks, "Modular
materialisation of Datalog programs" (2018), Alg. 3 lines 57-86; the objects
core's version is engine.algorithms.bf. Deletion is exact: a fact that lost a
derivation is deleted only when backward chaining over the recursive rules
(CHECK) and forward chaining over the facts proved so far (SATURATE) find no
other derivation; a fact with a positive non-recursive counter is proved at
once, so non-recursive rules are never evaluated backwards. Nothing is
rederived; insertion is DRed^c's (engine.compact.dred), without its
rederivation step.

What runs set-at-a-time: the counters, the deletion's seeds (facts left
without a counter, heads of instances a lower deletion removed), the
propagation of each round of deleted facts to the facts they derive, and
each round of SATURATE. What runs one fact at a time: CHECK, as in the paper
(which facts it proves depends on the facts checked before), on an explicit
stack, so a long derivation chain cannot overflow a call stack; each step of
it runs a rule's plan from the head (engine.compact.plans) on one fact. It is
compiled (engine.compact.bf_check, with SATURATE's forward chaining: one numba
call per 1,024 checks) unless the component's recursive plans apply built-ins;
then it runs here, by a stack of generators (engine.graph.depth_first), and
checks the same facts in the same order.

The paper's sets are flags per row of the component's relations, and the
relations' views of them (`ArraysCore.bindings`): C (checked), P (proved), Y
(delayed), I \ (D \ A) (`kept`: present before, not deleted) and
I \ ((D u Delta D) \ A) (`survivors`: nor about to be deleted). Lower
relations are read as they are both before and after the update: proofs use
only what survives of the old materialisation, facts that gain a derivation
through a lower change are inserted afterwards (as in engine.algorithms.bf).

Not here: counting, insertion, the seeds (engine.compact.dred), running plans (engine.compact.core).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact.bf_program import Checker
from fluxmat.engine.compact.dred import DRed
from fluxmat.engine.graph import depth_first

NEW, BOTH, EITHER = 0, 2, 3  # kernels.present's modes: now, before and now, before or now
Fact = tuple[str, int]  # (predicate, row)


class BF(DRed):
    """One recursive component's maintenance in one update, by B/F^c (see the module docstring)."""

    def run(self) -> None:
        touched = self.count()
        lost = self.lost(touched)
        deleted = _Deletion(self).delete_unproved(lost) if any(map(len, lost.values())) else {}
        self.insert(touched, deleted, rederive=False)


def _stable(step) -> int:
    """A lower atom as it is both before and after the update (a negated one: absent in both)."""
    return EITHER if step.negated else BOTH


class _Deletion:
    """Lines 57-86 of Alg. 3 for one component in one update: delete the facts no proof is left for."""

    def __init__(self, bf: BF):
        self.core, self.comp, self.epoch = bf.core, bf.comp, bf.epoch
        self.rels = {p: self.core.rels[p] for p in bf.comp.preds}
        n = {p: rel.n for p, rel in self.rels.items()}
        self.checked = {p: np.zeros(n[p], np.uint8) for p in n}  # C
        self.proved = {p: np.zeros(n[p], np.uint8) for p in n}  # P
        self.delayed = {p: np.zeros(n[p], np.uint8) for p in n}  # Y
        self.kept = {p: rel.alive[: n[p]].copy() for p, rel in self.rels.items()}  # I \ (D \ A)
        self.survivors = {p: a.copy() for p, a in self.kept.items()}  # I \ ((D u Delta D) \ A)
        self.by_head: dict[str, list] = {}  # the recursive rules' plans from the head, by head
        for plan in bf.comp.head_plans:
            self.by_head.setdefault(plan.head_pred, []).append(plan)
        self.checks = 0
        flags = {"checked": self.checked, "proved": self.proved, "delayed": self.delayed,
                 "survivors": self.survivors}  # fmt: skip
        self.compiled = Checker.build(self.core, self.comp, flags)  # None: CHECK in Python

    def mode(self, step) -> int:
        return NEW if step.pred in self.rels else _stable(step)

    def delete_unproved(self, affected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        r"""Lines 57-69: delete the affected facts CHECK does not prove; the deleted rows (D) per predicate.

        Each round's unproved facts (Delta D) go to D, and the facts they derive
        over I \ (D \ A) (each at most once per update) are affected in turn.
        """
        deleted: dict[str, list] = {p: [] for p in self.rels}
        delta = self.unproved(affected)
        while any(map(len, delta.values())):
            nxt: dict[str, np.ndarray] = {}
            for plan in self.comp.rec_starts:
                rows = delta.get(plan.start.pred)
                if rows is not None and len(rows):
                    heads = self._heads(plan, rows, self.kept)
                    rel = self.rels[plan.head_pred]
                    rows = rel.lookup(heads)
                    got = K.new_in(rows, True, rel.alive, rel.cnt, True, rel.dmark, self.epoch)
                    nxt[plan.head_pred] = np.concatenate([nxt.get(plan.head_pred, got[:0]), got])
            for p, rows in delta.items():
                self.kept[p][rows] = 0
                deleted[p].append(rows)
            delta = self.unproved(nxt)
            self.core.after_component()  # limits between rounds
        return {p: np.concatenate(parts) for p, parts in deleted.items() if parts}

    def _heads(self, plan, rows: np.ndarray, view: dict) -> np.ndarray:
        """The heads of the plan's instances from `rows`, this component's relations read through `view`."""
        heads, _ = self.core.run(plan, rows, np.ones(len(rows), np.int64), self.mode, view)
        return heads

    def unproved(self, affected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """CHECK each affected fact; those left unproved (Delta D), no longer survivors."""
        out = {}
        for p, rows in affected.items():
            lost = self.compiled.unproved(p, rows) if self.compiled else self._unproved(p, rows)
            if len(lost):
                out[p] = lost
        return out

    def _unproved(self, p: str, rows: np.ndarray) -> np.ndarray:
        """`unproved` for one predicate in Python (a component whose plans apply built-ins)."""
        proved, survivors = self.proved[p], self.survivors[p]
        lost = []
        for r in rows.tolist():
            self.check((p, r))
            if not proved[r]:
                survivors[r] = 0
                lost.append(r)
        return np.array(lost, np.int64)

    def check(self, fact: Fact) -> None:
        depth_first(fact, self._check)

    def _check(self, fact: Fact) -> Iterator[Fact]:
        """CHECK(F) (lines 70-76) as a generator that yields the facts it must check first.

        For each instance of a recursive rule deriving F over the survivors, its
        body facts of this component are checked; F is done once it is proved.
        """
        p, r = fact
        if self.checked[p][r] or self._saturate(p, r):
            return
        self.checks += 1
        if self.checks % 1024 == 0:
            self.core.after_component()  # limits: a long proof search
        row = np.array([r], np.int64)
        for plan in self.by_head.get(p, ()):
            B, _ = self.core.bindings(plan, row, np.ones(1, np.int64), self.mode, self.survivors)
            own = [s for s in plan.steps if s.pred in self.rels and not s.negated]
            body = [(s.pred, self._rows(s, B)) for s in own]
            for i in range(len(B)):
                for q, rows in body:
                    yield (q, int(rows[i]))
                if self.proved[p][r]:
                    return

    def _rows(self, step, B: np.ndarray) -> np.ndarray:
        """The rows of one positive atom in each binding (every column is bound once its step ran)."""
        src = np.where(step.src >= 0, step.src, step.outslot)
        repeats = step.src <= -3  # a repeated variable: the slot of the column it repeats
        src[repeats] = step.outslot[-3 - step.src[repeats]]
        return self.rels[step.pred].lookup(K.project(B, src, step.cval))

    def _saturate(self, p: str, r: int) -> bool:
        """SATURATE(F) (lines 77-86): F is checked; proved (with forward chaining) if it is delayed or counted.

        Forward chaining runs semi-naively over the proved facts: a derived
        fact is proved when it has been checked, else delayed.
        """
        self.checked[p][r] = 1
        if not self.delayed[p][r] and self.rels[p].cnt[r] <= 0:
            return False
        delta = self._prove({p: np.array([r], np.int64)})
        while delta:
            nxt: dict[str, list] = {}
            for plan in self.comp.rec_starts:
                rows = delta.get(plan.start.pred)
                if rows is not None:
                    nxt.setdefault(plan.head_pred, []).append(self._heads(plan, rows, self.proved))
            found = {q: self.rels[q].lookup(np.concatenate(hs)) for q, hs in nxt.items()}
            delta = self._prove(found)
        return True

    def _prove(self, derived: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Derived rows: checked ones not proved yet become proved (returned), unchecked ones delayed."""
        out = {}
        for q, rows in derived.items():
            rows = np.unique(rows[rows >= 0])
            checked = self.checked[q][rows] != 0
            self.delayed[q][rows[~checked]] = 1
            new = rows[checked & (self.proved[q][rows] == 0)]
            if len(new):
                self.proved[q][new] = 1
                out[q] = new
        return out
