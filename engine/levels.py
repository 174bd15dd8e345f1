"""Levels and well-founded counters: where `dredc`'s overdeletion may stop.

Our addition to DRed^c (docs/algorithms.md, "Levels in DRed^c"). In a
levelled stratum (recursive, no modules) every fact has a level, the
semi-naive round that put it into I, and a third counter C_wf: its instances
of the stratum's recursive rules whose body facts of the same stratum all have
lower levels (well-founded instances). Invariant: every fact keeps C_nr > 0 or
C_wf > 0, so it is derivable (induction on levels). C_wf is exactly C_r when a
fact enters I (the instances of its own round); an instance lost or started
later is well-founded when the body levels say so.

`Levels` is the state and its bookkeeping: the semi-naive materialisation
(engine.seminaive) stamps levels round by round, the overdeletion and insertion
loops of engine.algorithms.stratified keep them and C_wf. Only `dredc` levels
strata; for the other algorithms the set of levelled strata is empty. It
evaluates no rule.
"""

from __future__ import annotations

from collections.abc import Iterable

from fluxmat.engine.analysis import Analysis, Stratum
from fluxmat.engine.evaluate import Derived
from fluxmat.engine.maintainer import Changes
from fluxmat.engine.storage import Fact, Weighted, weights_in

UNKNOWN_HEAD = float("inf")  # a head without a level: every loss counts (safe side)


class Levels:
    """Levels and C_wf of the facts of the strata in `strata` (see the module docstring)."""

    def __init__(self, analysis: Analysis, strata: Iterable[int], cr: dict[str, Weighted]):
        """Levels for `strata`; `cr` are the maintainer's C_r tables (read, and decremented)."""
        self.strata = frozenset(strata)
        self.preds = frozenset(p for s in analysis.strata if s.index in self.strata for p in s.preds)
        self.cr = cr
        self.level: dict[str, dict] = {}  # pred -> fact -> level
        self.cwf: dict[str, Weighted] = {}  # pred -> fact -> C_wf
        self.top = 0  # the highest level given so far
        # rule -> positions of its positive literals in its own stratum, with their preds
        stratum_of = analysis.stratum_of
        self.same = {
            rid: tuple(
                (i, a.pred)
                for i, a in enumerate(analysis.rules[rid].positives)
                if stratum_of.get(a.pred, 0) == s.index
            )
            for s in analysis.strata if s.index in self.strata for rid in s.recursive
        }  # fmt: skip

    @staticmethod
    def candidates(analysis: Analysis, modules: dict) -> list[int]:
        """The strata levels apply to: recursive, without modules."""
        return [s.index for s in analysis.strata if s.recursive and not modules.get(s.index)]

    def covers(self, s: Stratum) -> bool:
        return s.index in self.strata

    def tables(self) -> tuple[dict, ...]:
        """Per-fact tables whose entries go when their fact leaves I."""
        return self.cwf, self.level

    def reset(self) -> None:
        """Before a materialisation: no fact has a level."""
        self.level.clear()
        self.cwf.clear()
        self.top = 0

    def stamp(self, pred: str, facts: Iterable[Fact]) -> None:
        """Facts entering I get the current level."""
        if pred in self.preds:
            self.level.setdefault(pred, {}).update(dict.fromkeys(facts, self.top))

    def stamp_wf(self, new: Changes) -> None:
        """C_wf := C_r for facts entering I: the instances of their own round."""
        for p, fs in new.items():
            if p in self.preds:
                cr = self.cr.get(p, {}).get
                weights_in(self.cwf, p).update({f: cr(f, 0) for f in fs})

    def round(self, new: Changes) -> None:
        """`new` entered in one insertion round: the next level, and C_wf := C_r."""
        self.top += 1
        for p, fs in new.items():
            self.stamp(p, fs)
        self.stamp_wf(new)

    def lose(self, derived: Derived) -> Changes:
        """Decrement C_r for each lost instance, and C_wf when it was well-founded.

        Returns the heads that lost a well-founded instance: only they can have
        lost their last support (every other fact keeps C_nr > 0 or C_wf > 0).
        """
        out: Changes = {}
        for rule, items in derived:
            pred = rule.head.pred
            wf = self.well_founded(rule, items, UNKNOWN_HEAD)
            weights_in(self.cr, pred).add_all([h for h, _, _ in items], -1)
            weights_in(self.cwf, pred).add_all(wf, -1)
            out.setdefault(pred, set()).update(wf)
        return out

    def gained(self, derived: Derived, present) -> list:
        """Count the new well-founded instances of facts staying in I.

        `derived` are the recursive instances (triples) the lower changes start;
        `present(pred)` gives (I's facts, D's facts) of `pred`. Returns them as
        (rule, heads) pairs.
        """
        out = []
        for rule, items in derived:
            pred = rule.head.pred
            i, d = present(pred)
            staying = [t for t in items if t[0] in i and t[0] not in d]
            weights_in(self.cwf, pred).add_all(self.well_founded(rule, staying, -1))
            out.append((rule, [h for h, _, _ in items]))
        return out

    def deletable(self, pred: str, facts: set, cnr: dict) -> set:
        """The facts with C_nr = 0 and no well-founded instance left."""
        get = cnr.get
        cwf = self.cwf.get(pred, {}).get
        return {f for f in facts if cwf(f, 0) <= 0 and not get(f, 0)}

    def well_founded(self, rule, items: list, missing: float) -> list:
        """Heads of the instances whose same-stratum body facts lie below the head.

        `missing` is the level assumed for a head without one (a body fact
        without one counts as -1).
        """
        level = self.level
        hl = level.get(rule.head.pred, {}).get
        same = self.same[rule.id]
        if len(same) == 1:  # linear rules: one comprehension
            i, p = same[0]
            bl = level.get(p, {}).get
            return [h for h, pos, _ in items if bl(pos[i], -1) < hl(h, missing)]
        body = [(i, level.get(p, {}).get) for i, p in same]
        return [h for h, pos, _ in items if _below(body, pos, hl(h, missing))]


def _below(body, pos, h) -> bool:
    """Whether every levelled body fact of an instance is below level `h`."""
    return all(get(pos[i], -1) < h for i, get in body)
