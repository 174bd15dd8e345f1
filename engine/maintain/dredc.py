"""`dredc`: DRed with non-recursive and recursive counters (Hu, Motik & Horrocks 2018, Alg. 2).

Differences to DRed: a fact is overdeleted only when its non-recursive counter
C_nr (explicit occurrence + non-recursive derivations) is zero; one-step
rederivation checks the recursive counter C_r instead of evaluating rules
backwards; counters are decremented during overdeletion and incremented during
insertion. On a non-recursive program it performs exactly Counting's inferences.

With modules (the default) this is DRed^c-MOD (Hu, Motik & Horrocks 2019,
Algorithm 3): tc/stc modules overdelete with Del, rederive with Red (in one or
more steps, over their own state) and insert with Add, inside the same loops as
the generic recursive rules, whose instances alone C_r counts.
"""

from __future__ import annotations

from engine.analysis import Stratum
from engine.maintain.base import Changes
from engine.maintain.dred import DRed


class DRedC(DRed):
    name = "dredc"
    counts_nonrecursive = True
    counts_recursive = True
    supports_modules = True

    def update_stratum(self, s: Stratum) -> None:
        self.overdelete(s)
        seeds = self.rederive(s)
        own = {}
        for m in self.modules.get(s.index, ()):  # lines 33-35
            own[m] = m.rederive(self.d_minus_a(m.pred))
            if own[m]:
                seeds.setdefault(m.pred, set()).update(own[m])
        self.insert(s, seeds, own)

    def overdelete(self, s: Stratum) -> None:
        """Lines 28-38: decrement counters for affected instances, then propagate."""
        P, N = self.lower_changes(s)
        nd = self.tally(self.ev.derive(s.rules, self.OLD, self.OLD, P, N), -1) if P or N else {}
        for p in s.preds:
            fs = self.minus.get(p)
            if fs:
                self._get_w(self.cnr, p).add_all(fs, -1)
                nd.setdefault(p, set()).update(fs)
        self.overdelete_loop(s, nd)

    def may_delete(self, pred: str, fact) -> bool:
        return self.cnr.get(pred, {}).get(fact, 0) == 0

    def rederive(self, s: Stratum) -> Changes:
        """Line 24: R = {F in D | C_r[F] > 0}; no backward rule evaluation."""
        R: Changes = {}
        for p in s.preds:
            d = self.D.get(p)
            if d:
                cr = self.cr.get(p, {})
                kept = {f for f in d.facts if cr.get(f, 0) > 0}
                if kept:
                    R[p] = kept
        return R
