"""`counting`: the Counting algorithm (Gupta et al. 1993), non-recursive programs only.

Each fact keeps one counter: its explicit occurrence plus the number of rule
instances deriving it. Per stratum, instances that stop firing decrement and
instances that start firing increment (summed per fact first:
`Run.counter_crossings`); a fact is removed when its counter reaches zero and
added when it becomes positive. No rule is evaluated backwards.
"""

from __future__ import annotations

from fluxmat.engine.algorithms.stratified import Run, Stratified
from fluxmat.engine.analysis import Analysis, Stratum
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.storage import Dictionary, relation_in


class Counting(Stratified):
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

    def update_stratum(self, run: Run, s: Stratum) -> None:
        for p, (zero, positive) in run.counter_crossings(s, s.rules).items():
            rel = self.rel(p).facts
            gone = zero & rel
            new = positive - rel
            if gone:
                relation_in(run.D, p).update(gone)
            if new:
                relation_in(run.A, p).update(new)
