"""`dredc`: DRed with non-recursive and recursive counters (Hu, Motik & Horrocks 2018, Alg. 2).

Differences to DRed: a fact is overdeleted only when its non-recursive counter
C_nr (explicit occurrence + non-recursive derivations) is zero; one-step
rederivation checks the recursive counter C_r instead of evaluating rules
backwards; counters are decremented during overdeletion and incremented during
insertion. On a non-recursive program it performs exactly Counting's inferences.

Levels (our addition; engine.levels and docs/algorithms.md,
"Levels in DRed^c"): in a recursive stratum without modules overdeletion stops
at facts that keep a well-founded derivation. A levelled stratum whose update
would change too much is evaluated from scratch instead (`recompute`).

With modules (the default) this is DRed^c-MOD (Hu, Motik & Horrocks 2019,
Algorithm 3): tc/stc phase modules overdelete with Del, rederive with Red (in
one or more steps, over their own state) and insert with Add, inside the same
loops as the generic recursive rules, whose instances alone C_r counts. An ltc
stratum (R alone, every recursive rule `R(x, z) :- R(x, y), S(y, z)`) is kept by
its upkeep module (`update_closure`): R = R0 . S* with R0 the R facts whose C_nr
is positive.
"""

from __future__ import annotations

from fluxmat.engine.algorithms.dred import DRed
from fluxmat.engine.algorithms.stratified import Recompute, Run
from fluxmat.engine.analysis import Stratum
from fluxmat.engine.maintainer import Report
from fluxmat.engine.modules import PhaseModule, UpkeepModule
from fluxmat.engine.storage import relation_in


class DRedC(DRed):
    name = "dredc"
    counts_nonrecursive = True
    counts_recursive = True
    supports_modules = True
    levelled = True
    # A levelled stratum is evaluated from scratch instead when the update changes
    # more than `recompute_input` of the facts it reads, or overdeletion passes
    # `recompute_share` of its facts; both only beyond `recompute_min` facts.
    recompute_input = 0.05
    recompute_share = 0.15
    recompute_min = 1000

    def prepare(self) -> None:
        """As SemiNaive.prepare; then the upkeep modules' state (R0: C_nr > 0)."""
        super().prepare()
        self.build_closures(lambda p: [f for f, n in self.cnr.get(p, {}).items() if n > 0])

    def commit(self, run: Run, report: Report) -> None:
        report.details["recomputed_strata"] = run.recomputed
        super().commit(run, report)

    # ------------------------------------------------------------ updates
    def update_stratum(self, run: Run, s: Stratum) -> None:
        mods = self.modules.get(s.index, ())
        if mods and isinstance(mods[0], UpkeepModule):
            self.update_closure(run, s, mods[0])
            return
        if self.levels.covers(s):
            size = sum(len(self.rel(p)) for p in s.preds)
            limit = max(self.recompute_min, self.recompute_share * size)
            try:
                input_limit = max(self.recompute_min, self.recompute_input * self.input_size(s))
                if self.input_change(run, s) > input_limit:
                    raise Recompute
                run.overdelete(s, run.lost(s), limit)
            except Recompute:
                run.insert(s, run.replace(s), full=True)
                return
        else:
            run.overdelete(s, run.lost(s))
        seeds = run.rederive_counted(s)
        own = {}
        for m in mods:  # lines 33-35
            assert isinstance(m, PhaseModule)
            own[m] = m.rederive(run.d_minus_a(m.pred))
            if own[m]:
                seeds.setdefault(m.pred, set()).update(own[m])
        run.insert(s, seeds, own)

    def update_closure(self, run: Run, s: Stratum, closure: UpkeepModule) -> None:
        """An ltc stratum: R0's and S's changes give R's (no instances, nothing overdeleted).

        R0 changes where C_nr crosses zero: lost and gained instances of the
        non-recursive rules (over the lower changes), explicit deletions and
        additions. The upkeep module turns them, with S's changes, into R's
        losses (D) and gains (A).
        """
        pred = closure.pred
        r0_gone, r0_new = run.counter_crossings(s, s.nonrecursive).get(pred, ((), ()))
        s_gone = [f for b in closure.bases for f in run.d_minus_a(b)]
        s_new = [f for b in closure.bases for f in run.a_minus_d(b)]
        gone, new = closure.change(r0_gone, r0_new, s_gone, s_new)
        if gone:
            relation_in(run.D, pred).update(gone)
        if new:
            relation_in(run.A, pred).update(new)

    def input_size(self, s: Stratum) -> int:
        """The facts stratum `s` reads from lower strata, plus its explicit facts."""
        lower = (p for p in self.body_preds[s.index] if self.stratum_of(p) < s.index)
        return sum(len(self.rel(p)) for p in lower) + sum(len(self.E.get(p, ())) for p in s.preds)

    def input_change(self, run: Run, s: Stratum) -> int:
        """How many of those this update changes."""
        P, N = run.lower_changes(s)
        n = sum(map(len, P.values())) + sum(map(len, N.values()))
        return n + sum(len(run.plus.get(p, ())) + len(run.minus.get(p, ())) for p in s.preds)
