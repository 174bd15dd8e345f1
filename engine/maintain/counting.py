"""`counting`: the Counting algorithm (Gupta et al. 1993), non-recursive programs only.

Each fact keeps one counter: its explicit occurrence plus the number of rule
instances deriving it. Per stratum, instances that stop firing decrement and
instances that start firing increment; a fact is removed when its counter
reaches zero and added when it becomes positive. No rule is evaluated backwards.
"""

from __future__ import annotations

from engine.analysis import Analysis, Stratum
from engine.errors import AlgorithmError
from engine.maintain.base import Maintainer
from engine.storage import Dictionary


class Counting(Maintainer):
    name = "counting"
    counts_nonrecursive = True

    def __init__(self, analysis: Analysis, dictionary: Dictionary | None = None, **kw):
        for s in analysis.strata:
            if s.recursive:
                rule = analysis.rules[s.recursive[0]]
                raise AlgorithmError(
                    "the counting algorithm handles only non-recursive programs, but this "
                    f"program is recursive: predicate {rule.head.pred} depends on itself "
                    f"(rule '{rule}' at {rule.rule.pos}); use dredc, bf or dred instead"
                )
        super().__init__(analysis, dictionary, **kw)

    def update_stratum(self, s: Stratum) -> None:
        P, N = self.lower_changes(s)
        touched = {}
        for table, sign in ((self.minus, -1), (self.plus, +1)):
            for p in s.preds:
                fs = table.get(p)
                if fs:
                    self._get_w(self.cnr, p).add_all(fs, sign)
                    touched.setdefault(p, set()).update(fs)
        if P or N:
            self.tally(self.ev.derive(s.rules, self.OLD, self.OLD, P, N), -1, touched)
            self.tally(self.ev.derive(s.rules, self.NEW, self.NEW, N, P), +1, touched)
        for p, fs in touched.items():
            cnr, rel = self.cnr.get(p, {}), self.rel(p).facts
            gone = {f for f in fs if cnr.get(f, 0) == 0 and f in rel}
            new = {f for f in fs if cnr.get(f, 0) > 0 and f not in rel}
            if gone:
                self._get(self.D, p).update(gone)
            if new:
                self._get(self.A, p).update(new)
