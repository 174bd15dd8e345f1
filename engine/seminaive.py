"""Semi-naive materialisation with counters and modules: the base of the rule-evaluating algorithms.

`SemiNaive` adds to the `Maintainer` state (engine.maintainer) the evaluator
(engine.evaluate), the derivation counters C_nr (explicit occurrence plus
non-recursive instances) and C_r (recursive instances) for algorithms that keep
them, the specialised modules of the strata (engine.modules) and
`evaluate_strata`, the stratum-by-stratum semi-naive evaluation of mat(P, E)
through the one fixpoint loop (`engine.evaluate.saturate`). With modules it is
MAT-MOD (Hu, Motik & Horrocks 2019, Algorithm 2); C_r then counts only the
instances of generic recursive rules. With `hypertree=True` (the default)
cyclic rules are evaluated over hypertree decompositions (engine.hypertree),
with the same results.

`remat`, the classic algorithms (engine.algorithms.stratified) and the fully
dynamic ones (engine.fd) build on it. It maintains no update itself: each
algorithm's `maintain` does.
"""

from __future__ import annotations

from collections.abc import Iterable

from fluxmat.engine.analysis import Analysis, ModuleSpec
from fluxmat.engine.evaluate import Derived, Evaluator, saturate
from fluxmat.engine.levels import Levels
from fluxmat.engine.limits import Limits
from fluxmat.engine.maintainer import Changes, Maintainer, Report
from fluxmat.engine.modules import Module, UpkeepModule, build, build_upkeep
from fluxmat.engine.storage import Dictionary, Fact, Weighted, relation_in, weights_in
from fluxmat.engine.syntax import PyFact


class SemiNaive(Maintainer):
    """Evaluator, counters, modules and the semi-naive materialisation (module doc)."""

    counts_nonrecursive = False  # keep C_nr (explicit + non-recursive derivations)
    counts_recursive = False  # keep C_r (recursive derivations)
    incremental = True  # compile delta plans and build their indexes at load time
    upkeep_modules = False  # keep every module as an upkeep module between updates
    levelled = False  # keep levels where `levels=True` (engine.levels; dredc)

    def __init__(
        self,
        analysis: Analysis,
        dictionary: Dictionary | None = None,
        modules: bool = True,
        hypertree: bool = True,
        levels: bool = True,
    ):
        """State shared by the rule-evaluating algorithms.

        `modules` takes the specialised modules (`supports_modules`); `levels`
        keeps levels in the recursive strata without modules, for algorithms that
        stop overdeletion at well-founded derivations with them (`levelled`:
        dredc); the others have no levelled stratum.
        """
        super().__init__(analysis, dictionary)
        self.cnr: dict[str, Weighted] = {}
        self.cr: dict[str, Weighted] = {}
        self.ev = Evaluator(
            analysis, self.dictionary, lambda p: len(self.rel(p)), hypertree, self.counts
        )
        self.body_preds = {s.index: analysis.body_preds(s) for s in analysis.strata}
        # stratum -> the modules MAT-MOD runs: phase modules, and ltc's upkeep module
        self.modules: dict[int, list[Module]] = {}
        self.closures: dict[str, UpkeepModule] = {}  # relation -> its upkeep module
        if modules and self.supports_modules:
            for spec in analysis.modules:
                if self.takes(spec):
                    self._take(spec)
        levelled = Levels.candidates(analysis, self.modules) if levels and self.levelled else ()
        self.levels = Levels(analysis, levelled, self.cr)
        # the rules the modules evaluate instead of the generic loop
        self.module_rules = frozenset(rid for ms in self.modules.values() for m in ms for rid in m.rules)
        self.generic = {  # stratum -> recursive rules evaluated semi-naively
            s.index: tuple(r for r in s.recursive if r not in self.module_rules)
            for s in analysis.strata
        }

    def _take(self, spec: ModuleSpec) -> None:
        rules, counts = self.analysis.rules, self.counts
        m = build(spec, counts, rules)
        self.modules.setdefault(spec.stratum, []).append(m)
        if isinstance(m, UpkeepModule):
            self.closures[spec.pred] = m
        elif self.upkeep_modules:
            self.closures[spec.pred] = build_upkeep(spec, counts, rules)

    def set_limits(self, limits: Limits) -> None:
        """Also checked by the evaluator before every fixpoint round (`Evaluator.guard`)."""
        super().set_limits(limits)
        self.ev.guard = self.check_limits if limits.active else None

    def takes(self, spec: ModuleSpec) -> bool:
        """Whether this algorithm evaluates the module `spec` (modules on)."""
        return True

    def counters(self, fact: PyFact) -> tuple[int, int]:
        """(C_nr, C_r) of a fact, for algorithms that keep them."""
        pred, f = self.encode(fact)
        return self.cnr.get(pred, {}).get(f, 0), self.cr.get(pred, {}).get(f, 0)

    def OLD(self, pred: str) -> list:
        """I as a view (engine.evaluate)."""
        return [(self.rel(pred), None)]

    # ------------------------------------------------------------ counting
    @staticmethod
    def heads(derived: Derived) -> Changes:
        """The derived heads as a set per predicate (multiplicities dropped)."""
        out: Changes = {}
        for rule, hs in derived:
            pred = rule.pred if isinstance(rule, Module) else rule.head.pred
            out.setdefault(pred, set()).update(hs)
        return out

    def tally(self, derived: Derived, sign: int, into: Changes | None = None) -> Changes:
        """Add `sign` to the counters of derived heads (C_nr or C_r by rule kind)."""
        into = {} if into is None else into
        for rule, heads in derived:
            if isinstance(rule, Module):  # module inferences are not counted
                if rule.pred in into:
                    into[rule.pred].update(heads)
                else:  # a module's result is a fresh set: taken over, not copied
                    into[rule.pred] = heads
                continue
            pred = rule.head.pred
            if rule.recursive:
                if self.counts_recursive:
                    weights_in(self.cr, pred).add_all(heads, sign)
            elif self.counts_nonrecursive:
                weights_in(self.cnr, pred).add_all(heads, sign)
            into.setdefault(pred, set()).update(heads)
        return into

    def per_fact_tables(self) -> tuple[dict, ...]:
        """Tables pred -> {fact: value} whose entries go when their fact leaves I."""
        return self.cnr, self.cr, *self.levels.tables()

    # ------------------------------------------------------------ materialisation
    def materialise(self, report: Report) -> None:
        """mat(P, E) by `evaluate_strata`; then, if incremental, `prepare` for updates."""
        self.I.clear()
        self.cnr.clear()
        self.cr.clear()
        self.evaluate_strata()
        if self.incremental:
            self.prepare()
        report.added = sum(len(r) for p, r in self.I.items() if p not in self.analysis.internal)

    def evaluate_strata(self) -> None:
        """Semi-naive evaluation of every stratum over E, keeping counters if asked.

        With modules this is MAT-MOD (Hu, Motik & Horrocks 2019, Algorithm 2): the
        first round applies the generic recursive rules to the whole stratum and
        gives each module all facts of its relation; later rounds are semi-naive.
        """
        self.levels.reset()
        for ms in self.modules.values():
            for m in ms:
                m.reset()
        for pred, fs in self.E.items():
            if self.stratum_of(pred) == 0:
                self.enter(pred, fs)
        OLD = self.OLD
        for s in self.analysis.strata:
            for p in s.preds:
                fs = self.E.get(p)
                if fs:
                    if self.counts_nonrecursive:
                        weights_in(self.cnr, p).add_all(fs)
                    self.enter(p, fs)
            new = self.tally(self.ev.derive(s.nonrecursive, OLD, OLD), +1)
            for p, fs in new.items():
                self.enter(p, fs)
            if self.ev.guard is not None:  # limits: also between strata
                self.ev.guard()
            if not s.recursive:
                continue
            stratum = {p: self.rel(p).facts for p in s.preds}  # live: read before absorbed

            def accept(derived: Derived, _delta: Changes) -> Changes:
                return self.absorb_round(self.tally(derived, +1))

            steps = [(m, lambda d, m=m: m.add(OLD, d)) for m in self.modules.get(s.index, ())]
            saturate(self.ev, self.generic[s.index], OLD, OLD, stratum, accept, steps, full=True)

    def enter(self, pred: str, facts: Iterable[Fact]) -> None:
        """Facts enter I during a materialisation, at the current level."""
        self.rel(pred).update(facts)
        self.levels.stamp(pred, facts)

    def absorb_round(self, derived: Changes) -> Changes:
        """One round's derived facts enter I; return those that were new.

        `derived`'s sets (tally's own) are trimmed in place and returned: removing
        the facts already present costs the smaller side, not a copy of the larger.
        """
        self.levels.top += 1  # one semi-naive round: its new facts get the next level
        out: Changes = {}
        for p, fs in derived.items():
            rel = self.rel(p)
            fs -= fs & rel.facts
            if fs:
                self.enter(p, fs)
                out[p] = fs
        self.levels.stamp_wf(out)
        return out

    def prepare(self) -> None:
        """Compile every delta plan and build the indexes it probes.

        Done at load time, when relation sizes are known, so that updates never pay
        for planning or index construction.
        """
        for rule in self.analysis.rules:
            if rule.id in self.module_rules:
                continue
            for lit in range(len(rule.positives) + len(rule.negatives)):
                for whole in {False, self.whole_instances(rule)}:
                    plan = self.ev.plan(rule, "delta", lit, whole)
                    for need in plan.needs:
                        if need.cols is not None:
                            relation_in(self.I, plan.literal_preds[need.lit]).index(need.cols)

    def whole_instances(self, rule) -> bool:
        """Whether updates also evaluate `rule` as whole instances (`prepare` compiles both)."""
        return rule.recursive and self.stratum_of(rule.head.pred) in self.levels.strata

    def build_closures(self, edges_of) -> None:
        """Build each upkeep module's state from I: its edges are `edges_of(pred)`."""
        for pred, closure in self.closures.items():
            s_edges = [f for b in closure.bases for f in self.rel(b).facts]
            closure.build(edges_of(pred), s_edges, len(self.rel(pred)))
