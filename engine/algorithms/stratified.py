r"""One update at a time, stratum by stratum: the Delete/Rederive machinery of the classic algorithms.

Hu, Motik & Horrocks (2018), section 3. `Stratified` is the base of `dred`,
`dredc`, `bf` and `counting`: its `maintain` makes a `Run` for the update, asks
the algorithm to maintain every affected stratum in order (`update_stratum`),
then sets E and commits. The run holds everything that lives for one update:
E+ and E-, the changes D and A accumulated stratum by stratum, the stratum
being maintained, the views over the old materialisation I that rules are
evaluated in, and the phases the algorithms call:

* `lost(s)` -- the seeds of overdeletion: heads of the instances that lower
  changes stop (Pi<I |> D\A, A\D>) and E- (counters decremented);
* `overdelete(s, seeds)` -- DRed's loop (Algorithm 1 lines 9-13) through the
  one fixpoint loop (`engine.evaluate.saturate`), phase modules' Del included;
  a fact is overdeleted unless its counters keep it (C_nr > 0; with levels
  C_wf > 0);
* `rederive_backward(s)` (DRed: rules evaluated backwards) and
  `rederive_counted(s)` (DRed^c: C_r > 0);
* `insert(s, seeds)` -- semi-naive insertion over (I \ D) u A (lines 14-20),
  phase modules' Add included;
* `replace(s)` -- recompute a stratum from scratch (D takes all of it);
* `commit(report)` -- I := (I \ D) u A, the exact delta into the report.

I stays the old materialisation until `commit`, so every view of an earlier
stratum is still the one the paper's operators read. Counters are the
maintainer's (engine.seminaive), and so are the levels (engine.levels).
"""

from __future__ import annotations

from abc import abstractmethod

from fluxmat.engine.analysis import Stratum
from fluxmat.engine.evaluate import Derived, saturate
from fluxmat.engine.maintainer import Changes, Report, Update
from fluxmat.engine.modules import PhaseModule
from fluxmat.engine.seminaive import SemiNaive
from fluxmat.engine.storage import Fact, Relation, Weighted, relation_in, weights_in


class Recompute(Exception):
    """Overdeletion passed its limit: the stratum is better evaluated from scratch."""


class Stratified(SemiNaive):
    """Classic algorithms: each update maintained stratum by stratum in a `Run`."""

    current_run: Run | None = None  # the update being maintained (for `size`)

    def maintain(self, update: Update, report: Report) -> None:
        run = self.current_run = Run(self, update)
        guard = self.ev.guard
        try:
            for s in self.analysis.strata:
                run.current = s.index
                if run.affected(s):
                    self.update_stratum(run, s)
                    if guard is not None:  # limits: also between strata
                        guard()
        finally:
            self.current_run = None
        update.apply(self.E)
        self.commit(run, report)

    def size(self) -> int:
        """Facts in I, plus those the current update is adding (A) before its commit."""
        run = self.current_run
        extra = sum(map(len, run.A.values())) if run is not None else 0
        return super().size() + extra

    @abstractmethod
    def update_stratum(self, run: Run, s: Stratum) -> None:
        """Maintain stratum `s` for the update of `run` (lower strata are done)."""

    def commit(self, run: Run, report: Report) -> None:
        """Install the run's changes (algorithms add their details first)."""
        run.commit(report)


class Run:
    """One update of a `Stratified` algorithm (see the module docstring)."""

    def __init__(self, m: Stratified, update: Update):
        self.m = m
        self.I = m.I  # the old materialisation until `commit` (the same dict)
        self.plus, self.minus = update.plus, update.minus
        self.D: dict[str, Relation] = {}
        self.A: dict[str, Relation] = {}
        self.current = 0  # the stratum being maintained
        self.replaced: set[str] = set()  # predicates of recomputed strata (D = old I)
        self.recomputed = 0  # strata recomputed from scratch
        self._dma: dict[str, set[Fact]] = {}  # D \ A of finished strata
        self._amd: dict[str, set[Fact]] = {}  # A \ D of finished strata
        for pred, fs in update.minus.items():
            if m.stratum_of(pred) == 0:
                relation_in(self.D, pred).update(fs)
        for pred, fs in update.plus.items():
            if m.stratum_of(pred) == 0:
                relation_in(self.A, pred).update(fs)

    def affected(self, s: Stratum) -> bool:
        if any(p in self.plus or p in self.minus for p in s.preds):
            return True
        return any(self.D.get(p) or self.A.get(p) for p in self.m.body_preds[s.index])

    # ------------------------------------------------------------ views
    def OLD(self, pred: str) -> list:
        return [(relation_in(self.I, pred), None)]

    def NEW(self, pred: str) -> list:
        r"""(I \\ D) u A."""
        if pred in self.replaced:  # D holds all of I
            return [(relation_in(self.A, pred), None)]
        return [(relation_in(self.I, pred), relation_in(self.D, pred).facts), (relation_in(self.A, pred), None)]

    def I_MINUS_DMA(self, pred: str) -> list:
        r"""I \\ (D \\ A)."""
        return [(relation_in(self.I, pred), self.d_minus_a(pred))]

    def I_PLUS_A(self, pred: str) -> list:
        """I u A."""
        rel = relation_in(self.I, pred)
        return [(rel, None), (relation_in(self.A, pred), rel.facts)]

    def d_minus_a(self, pred: str) -> set[Fact]:
        d = relation_in(self.D, pred).facts
        a = self.A.get(pred)
        if not a:
            return d
        if self.m.stratum_of(pred) >= self.current:
            return d - a.facts
        cached = self._dma.get(pred)
        if cached is None:
            cached = self._dma[pred] = d - a.facts
        return cached

    def a_minus_d(self, pred: str) -> set[Fact]:
        a = relation_in(self.A, pred).facts
        d = self.D.get(pred)
        if not d:
            return a
        if self.m.stratum_of(pred) >= self.current:
            return a - d.facts
        cached = self._amd.get(pred)
        if cached is None:
            cached = self._amd[pred] = a - d.facts
        return cached

    def lower_changes(self, s: Stratum) -> tuple[Changes, Changes]:
        r"""(D \\ A, A \\ D) of the predicates stratum s reads from lower strata."""
        P, N = {}, {}
        for p in self.m.body_preds[s.index]:
            if self.m.stratum_of(p) < s.index:
                dma, amd = self.d_minus_a(p), self.a_minus_d(p)
                if dma:
                    P[p] = dma
                if amd:
                    N[p] = amd
        return P, N

    # ------------------------------------------------------------ deletion
    def lost(self, s: Stratum) -> Changes:
        """Heads of the instances the lower changes stop, and E- (counters decremented)."""
        m, OLD = self.m, self.OLD
        P, N = self.lower_changes(s)
        seeds: Changes = {}
        if P or N:
            if m.levels.covers(s):
                seeds = m.tally(m.ev.derive(s.nonrecursive, OLD, OLD, P, N), -1)
                lost = m.ev.derive(s.recursive, OLD, OLD, P, N, instances=True)
                for p, fs in m.levels.lose(lost).items():
                    seeds.setdefault(p, set()).update(fs)
            else:
                seeds = m.tally(m.ev.derive(s.rules, OLD, OLD, P, N), -1)
        for p in s.preds:
            fs = self.minus.get(p)
            if fs:
                if m.counts_nonrecursive:
                    weights_in(m.cnr, p).add_all(fs, -1)
                seeds.setdefault(p, set()).update(fs)
        return seeds

    def overdelete(self, s: Stratum, seeds: Changes, limit: float | None = None) -> None:
        """Propagate the seeds through the recursive rules and Del into D (lines 9-13).

        Raises `Recompute` once D holds more than `limit` facts of the stratum.
        """
        m = self.m
        levelled = m.levels.covers(s)

        def fresh(nd: Changes) -> Changes:
            out = {}
            for p, fs in nd.items():
                new = self.deletable(p, fs - relation_in(self.D, p).facts)
                if new:
                    out[p] = new
            return out

        def accept(derived: Derived, delta: Changes) -> Changes:
            nd = m.levels.lose(derived) if levelled else m.tally(derived, -1)
            for p, fs in delta.items():
                relation_in(self.D, p).update(fs)
            if limit is not None and sum(len(self.D[p]) for p in s.preds if p in self.D) > limit:
                raise Recompute
            return fresh(nd)

        steps = []
        for mod in m.modules.get(s.index, ()):
            assert isinstance(mod, PhaseModule)
            mod.start_deletion()
            cnr = weights_in(m.cnr, mod.pred)
            steps.append((mod, lambda d, mod=mod, cnr=cnr: mod.delete(self.I_MINUS_DMA, d, cnr)))
        saturate(
            m.ev, m.generic[s.index], self.I_MINUS_DMA, self.I_PLUS_A, fresh(seeds), accept,
            steps, instances=levelled,
        )  # fmt: skip

    def deletable(self, pred: str, facts: set) -> set:
        """The affected facts that are overdeleted: all, or those no counter keeps."""
        m = self.m
        if not m.counts_nonrecursive:
            return facts
        if pred in m.levels.preds:
            return m.levels.deletable(pred, facts, m.cnr.get(pred, {}))
        cnr = m.cnr.get(pred, {}).get
        return {f for f in facts if not cnr(f, 0)}

    def replace(self, s: Stratum) -> Changes:
        """Recompute stratum `s`: D takes all of it, its counters start afresh.

        Returns the seeds of the insertion that rebuilds it (the explicit facts
        that stay); `insert(s, seeds, full=True)` then derives everything into A.
        """
        self.recomputed += 1
        seeds: Changes = {}
        for p in s.preds:
            self.D[p] = self.m.rel(p)  # all of it (the same object: I stays as it was)
            self.replaced.add(p)
            for table in self.m.per_fact_tables():
                table.pop(p, None)
            kept = self.m.E.get(p, set()) - self.minus.get(p, set()) - self.plus.get(p, set())
            if kept:
                weights_in(self.m.cnr, p).add_all(kept)
                seeds[p] = kept
        return seeds

    def counter_crossings(self, s: Stratum, rules) -> dict[str, tuple[set[Fact], set[Fact]]]:
        """Apply the update to C_nr of stratum `s`'s facts; where it crossed zero.

        The update: E- and E+, and the instances of `rules` (non-recursive) that
        the lower changes stop and start. The changes are summed per fact into a weighted multiset and consolidated,
        so a fact that lost and regained instances is not looked at again. Returns
        per predicate the facts whose C_nr fell to zero and those it rose from zero.
        """
        m, OLD, NEW = self.m, self.OLD, self.NEW
        change: dict[str, Weighted] = {}
        for table, sign in ((self.minus, -1), (self.plus, +1)):
            for p in s.preds:
                if table.get(p):
                    weights_in(change, p).add_all(table[p], sign)
        P, N = self.lower_changes(s)
        if P or N:
            for derived, sign in (
                (m.ev.derive(rules, OLD, OLD, P, N), -1), (m.ev.derive(rules, NEW, NEW, N, P), +1),
            ):  # fmt: skip
                for rule, heads in derived:
                    weights_in(change, rule.head.pred).add_all(heads, sign)
        out = {}
        for p, delta in change.items():
            cnr = weights_in(m.cnr, p)
            zero, positive = set(), set()
            for f, w in delta.consolidate().items():
                was = cnr.get(f, 0)
                now = cnr[f] = was + w
                if now <= 0 < was:
                    zero.add(f)
                elif was <= 0 < now:
                    positive.add(f)
            out[p] = (zero, positive)
        return out

    # ------------------------------------------------------------ rederivation
    def rederive_backward(self, s: Stratum) -> Changes:
        """One-step rederivation by backward rule evaluation (Algorithm 1 line 4)."""
        m = self.m
        R: Changes = {}
        by_head: dict[str, list] = {}
        for rid in s.rules:
            rule = m.analysis.rules[rid]
            by_head.setdefault(rule.head.pred, []).append(rule)
        for p in s.preds:
            d = self.D.get(p)
            if not d:
                continue
            explicit = m.E.get(p, set())
            minus = self.minus.get(p, set())
            todo = set()
            for f in d.facts:
                if f in explicit and f not in minus:
                    R.setdefault(p, set()).add(f)
                else:
                    todo.add(f)
            for rule in by_head.get(p, ()):
                if not todo:
                    break
                found = {h for h, _ in m.ev.backward(rule, todo, self.I_MINUS_DMA, self.I_PLUS_A, True)}
                if found:
                    R.setdefault(p, set()).update(found)
                    todo -= found
        return R

    def rederive_counted(self, s: Stratum) -> Changes:
        """R = {F in D | C_r[F] > 0} (Algorithm 2 line 24): no backward evaluation."""
        R: Changes = {}
        for p in s.preds:
            d = self.D.get(p)
            if d:
                cr = self.m.cr.get(p, {})
                kept = {f for f in d.facts if cr.get(f, 0) > 0}
                if kept:
                    R[p] = kept
        return R

    # ------------------------------------------------------------ insertion
    def insert(
        self, s: Stratum, seeds: Changes, own: dict | None = None, full: bool = False
    ) -> None:
        """Semi-naive insertion (lines 14-20); with modules REDERIVE-INSERT's loop.

        `own` maps a module to the facts it rederived itself (not given back to it).
        With `full` the stratum is evaluated from scratch over (I - D) u A (D holds
        all of it): non-recursive rules over everything instead of the lower
        changes, and a first round of the recursive rules over everything.
        """
        m, NEW = self.m, self.NEW
        na = {p: set(fs) for p, fs in seeds.items()}
        for p in s.preds:
            if p in self.plus:
                if m.counts_nonrecursive:
                    weights_in(m.cnr, p).add_all(self.plus[p])
                na.setdefault(p, set()).update(self.plus[p])
        if full:
            derived = m.ev.derive(s.nonrecursive, NEW, NEW)
        else:
            derived = self.gained(s)
        m.tally(derived, +1, na)
        mods = m.modules.get(s.index, ())
        for mod in mods:  # facts whose C_nr became positive (tc keeps them in X)
            assert isinstance(mod, PhaseModule)
            mod.external(self.plus.get(mod.pred, ()))
            for rule, hs in derived:
                if rule.head.pred == mod.pred and not rule.recursive:
                    mod.external(hs)
        levelled = m.levels.covers(s)

        def fresh(na: Changes) -> Changes:
            out = {}
            for p, fs in na.items():
                i, d, a = m.rel(p).facts, relation_in(self.D, p).facts, relation_in(self.A, p)
                new = fs - a.facts  # new in I, or back after overdeletion:
                new = ((new - i) | (new & d)) if d else new - i
                if new:
                    a.update(new)
                    out[p] = new
            if levelled:
                m.levels.round(out)
            return out

        def accept(derived: Derived, delta: Changes) -> Changes:
            return fresh(m.tally(derived, +1))

        steps = [(mod, lambda d, mod=mod: mod.add(NEW, d)) for mod in mods]
        saturate(m.ev, m.generic[s.index], NEW, NEW, fresh(na), accept, steps, full=full, own=own)

    def gained(self, s: Stratum) -> Derived:
        """Instances of stratum `s` that the lower changes start (Pi<NEW |> A-D, D-A>).

        In a levelled stratum, a started instance whose same-stratum body lies
        below its head, a fact staying in I, is a new well-founded derivation.
        """
        m, NEW = self.m, self.NEW
        P, N = self.lower_changes(s)
        if not (P or N):
            return []
        if not m.levels.covers(s):
            return m.ev.derive(s.rules, NEW, NEW, N, P)
        out = m.ev.derive(s.nonrecursive, NEW, NEW, N, P)
        started = m.ev.derive(s.recursive, NEW, NEW, N, P, instances=True)
        out += m.levels.gained(started, lambda p: (m.rel(p).facts, relation_in(self.D, p).facts))
        return out

    # ------------------------------------------------------------ commit
    def overdeletion(self) -> dict[str, int]:
        """How many facts were overdeleted, and how many of those rederived."""
        internal = self.m.analysis.internal
        d = {p: r.facts for p, r in self.D.items() if p not in internal and p not in self.replaced}
        return {
            "overdeleted": sum(len(fs) for fs in d.values()),
            "rederived": sum(len(fs & self.A[p].facts) for p, fs in d.items() if p in self.A),
        }

    def commit(self, report: Report) -> None:
        r"""I := (I \\ D) u A (a recomputed stratum's A becomes its relation); note the delta."""
        m = self.m
        internal = m.analysis.internal
        for p in self.replaced:
            new = self.A.pop(p, None) or Relation()
            old = self.D.pop(p).facts
            m.I[p] = new
            if p not in internal:
                report.note(p, new.facts - old, old - new.facts)
        tables = m.per_fact_tables()
        for pred in set(self.D) | set(self.A):
            d = self.D.get(pred)
            a = self.A.get(pred)
            dset = d.facts if d else set()
            aset = a.facts if a else set()
            removed, added = dset - aset, aset - dset
            rel = m.rel(pred)
            rel.difference_update(removed)
            rel.update(added)
            for table in tables:
                w = table.get(pred)
                if w:
                    for f in removed:
                        w.pop(f, None)
            if pred not in internal:
                report.note(pred, added, removed)
