"""DRed with non-recursive counters (DRed^c; Hu, Motik, Horrocks 2018) for one recursive component.

Counters count explicit and non-recursive derivations. Facts that lose them,
or a recursive derivation, and have a zero counter are over-deleted
(semi-naive over the old state), removed, rederived one step from what
remains (plans from the head), then insertions run to a fixpoint. Facts with
a positive counter are never over-deleted. Negated atoms are of lower
components (stratification): a negated fact that appeared over-deletes like a
deleted positive fact, one that went seeds insertions like an added one.

When the over-deletion grows past a share of the component's present facts
(engine.compact.recompute.RECOMPUTE_FRACTION), it stops before anything is
removed and the component is recomputed from its inputs instead
(engine.compact.recompute), which then costs less than deleting and
rederiving most of it.
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact import reach
from fluxmat.engine.compact.recompute import recompute

NEW, OLD = 0, 1
_EMPTY = np.empty(0, np.int64)


def _new(_step) -> int:
    return NEW


class DRed:
    """One recursive component's maintenance in one update."""

    def __init__(self, core, comp, explicit, flipped, added=()):
        self.core, self.comp, self.explicit, self.flipped = core, comp, explicit, flipped
        self.added = added  # plans of rules a program change adds: every instance inserts its head
        self.epoch = core.epoch
        self.mine = set(comp.preds)

    def mode_over(self, step) -> int:
        """Over-deletion reads the old state (this component is not changed before its removal)."""
        return NEW if step.pred in self.mine else OLD

    def run(self) -> None:
        touched = self.count()
        choice = self.core.deletions
        limit = choice.budget(self.core, self.comp.preds)
        deleted = self._fixpoint(self.lost(touched), self.mode_over, over=True, limit=limit)
        if deleted is None:  # cheaper to evaluate the component afresh
            choice.taken["recompute"] += 1
            self.flipped.update(recompute(self))
            return
        choice.taken["dred"] += any(map(len, deleted.values()))
        self.insert(touched, deleted, rederive=True)

    def count(self) -> dict[str, np.ndarray]:
        """The explicit and non-recursive derivation changes into the counters; the touched rows per predicate."""
        core, comp = self.core, self.comp
        return {p: core.count_into(p, comp, self.explicit, self.flipped) for p in comp.preds}

    def lost(self, touched: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The deletion's seeds: present facts left without a counter, heads of instances a lower change removed.

        Each at most once per update (stamped in `dmark`); facts with a positive counter are never seeds.
        """
        lost = {p: self.dead_seeds(p, t) for p, t in touched.items()}
        for plan in self.comp.lower_starts:  # a lower fact went: its instances lose a derivation
            rows = self.lower_delta(plan, appeared=False)
            if len(rows):
                self.collect(lost, plan, rows, self.mode_over, over=True)
        return lost

    def insert(self, touched: dict, deleted: dict, rederive: bool) -> None:
        """Remove `deleted`, then insert to a fixpoint (after rederiving the deleted facts, with `rederive`).

        The seeds: facts that gained a counter, heads of instances a lower change
        added, a program change's added rules (and rederived facts).
        """
        rels = self.core.rels
        for p, rows in deleted.items():
            rels[p].alive[rows] = 0
        seeds = {p: self.revive(p, t[rels[p].cnt[t] > 0]) for p, t in touched.items()}
        if rederive:
            self._rederive(deleted, seeds)
        self.insert_added(seeds)
        for plan in self.comp.lower_starts:
            rows = self.lower_delta(plan, appeared=True)
            if len(rows):
                self.collect(seeds, plan, rows, _new, over=False)
        self.flips(deleted, self.fixpoint_new(seeds))

    def insert_added(self, seeds: dict) -> None:
        """The heads of the rules a program change adds, present now and added to `seeds`."""
        for plan in self.added:
            rel = self.core.rels[plan.head_pred]
            got = K.revive(rel.insert(self.core.run_all(plan, old=False)), rel.alive)
            seeds[plan.head_pred] = np.concatenate([seeds.get(plan.head_pred, _EMPTY), got])

    def fixpoint_new(self, seeds: dict) -> dict:
        """Insertions from `seeds` to a fixpoint over the new state; every row inserted, per predicate.

        A linear closure whose present facts are all seeds is evaluated by reachability (engine.compact.reach).
        """
        closed = reach.fixpoint(self.core, self.comp, seeds)
        return closed if closed is not None else self._fixpoint(seeds, _new, over=False)

    def _rederive(self, deleted: dict, seeds: dict) -> None:
        """Over-deleted facts that still have a derivation in the new state come back (seeds)."""
        core = self.core
        for plan in self.comp.head_plans:
            rows = deleted.get(plan.start.pred)
            if rows is not None and len(rows):
                heads, _ = core.run(plan, rows, np.ones(len(rows), np.int64), _new)
                if len(heads):
                    got = self.revive(plan.head_pred, core.rels[plan.head_pred].lookup(heads))
                    seeds[plan.head_pred] = np.concatenate([seeds[plan.head_pred], got])

    def lower_delta(self, plan, appeared: bool) -> np.ndarray:
        """The rows of a lower delta that add instances (appeared=True) or remove them (False).

        At a negated position that is the other way round.
        """
        delta = self.flipped.get(plan.start.pred)
        if delta is None or not len(delta):
            return _EMPTY
        want_alive = appeared != plan.start.negated
        return delta[(self.core.rels[plan.start.pred].alive[delta] != 0) == want_alive]

    def dead_seeds(self, p: str, rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return rows
        rel = self.core.rels[p]
        return K.new_in(rows, True, rel.alive, rel.cnt, True, rel.dmark, self.epoch)

    def revive(self, p: str, rows: np.ndarray) -> np.ndarray:
        """The dead ones among `rows` of `p`, made present."""
        return K.revive(rows, self.core.rels[p].alive) if len(rows) else rows

    def collect(self, into: dict, plan, rows, mode_of, over: bool) -> None:
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
        into[p] = np.concatenate([into.get(p, _EMPTY), got])

    def _fixpoint(self, seeds: dict, mode_of, over: bool, limit: float = np.inf) -> dict | None:
        """The recursive rules from `seeds` until nothing new (see `collect`); every row reached, per predicate.

        None as soon as more than `limit` rows are reached (the over-deletion's budget).
        """
        out = {p: [rows] for p, rows in seeds.items()}
        delta, reached = seeds, 0
        while any(len(r) for r in delta.values()):
            reached += sum(map(len, delta.values()))
            if reached > limit:
                return None
            nxt: dict[str, np.ndarray] = {}
            for plan in self.comp.rec_starts:
                rows = delta.get(plan.start.pred)
                if rows is not None and len(rows):
                    self.collect(nxt, plan, rows, mode_of, over=over)
            for p, rows in nxt.items():
                out.setdefault(p, []).append(rows)
            delta = nxt
            self.core.after_component()  # limits between rounds: recursive arithmetic may never end
        return {p: np.concatenate(parts) for p, parts in out.items()}

    def flips(self, deleted: dict, inserted: dict) -> None:
        """Rows whose presence differs from before the update: over-deleted and not back, or newly present."""
        for p in self.comp.preds:
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
