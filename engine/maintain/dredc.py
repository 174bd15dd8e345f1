"""`dredc`: DRed with non-recursive and recursive counters (Hu, Motik & Horrocks 2018, Alg. 2).

Differences to DRed: a fact is overdeleted only when its non-recursive counter
C_nr (explicit occurrence + non-recursive derivations) is zero; one-step
rederivation checks the recursive counter C_r instead of evaluating rules
backwards; counters are decremented during overdeletion and incremented during
insertion. On a non-recursive program it performs exactly Counting's inferences.

Levels (our addition; engine/ALGORITHMS.md, "Levels in DRed^c"): in a recursive
stratum without modules every fact has the semi-naive round that first derived
it, and a third counter C_wf of its well-founded derivations: instances whose
body facts of the same stratum all have lower levels. Whatever keeps C_wf > 0
is derivable (induction on levels), so overdeletion stops there instead of
following every lost derivation; C_wf is exactly C_r at the moment a fact
enters I, and a loss is well-founded when the body levels say so.

With modules (the default) this is DRed^c-MOD (Hu, Motik & Horrocks 2019,
Algorithm 3): tc/stc modules overdelete with Del, rederive with Red (in one or
more steps, over their own state) and insert with Add, inside the same loops as
the generic recursive rules, whose instances alone C_r counts. An ltc module
(R's stratum holds R alone, every recursive rule is `R(x, z) :- R(x, y), S(y,
z)`) is not run phase by phase: its stratum is maintained as reachability
(`update_closure`), R = R0 . S* with R0 the R facts whose C_nr is positive.
"""

from __future__ import annotations

from engine.analysis import Stratum
from engine.evaluate import Derived
from engine.maintain.base import Changes
from engine.maintain.dred import DRed
from engine.storage import Relation, Weighted

UNKNOWN_HEAD = float("inf")  # a head without a level: every loss counts (safe side)


class _Recompute(Exception):
    """Overdeletion of a levelled stratum passed its limit: evaluate it from scratch."""


class DRedC(DRed):
    name = "dredc"
    counts_nonrecursive = True
    counts_recursive = True
    supports_modules = True
    module_kinds = ("tc", "stc", "ltc")
    # A levelled stratum is evaluated from scratch instead when the update changes
    # more than `recompute_input` of the facts it reads, or overdeletion passes
    # `recompute_share` of its facts; both only beyond `recompute_min` facts.
    recompute_input = 0.05
    recompute_share = 0.15
    recompute_min = 1000

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        strata = self.analysis.strata
        self.leveled = {
            s.index for s in strata if self.levels and s.recursive and not self.modules.get(s.index)
        }
        self.leveled_preds = {p for s in strata if s.index in self.leveled for p in s.preds}
        self.closures = {  # stratum -> its ltc module, maintained by update_closure
            i: m for i, ms in self.modules.items() for m in ms if m.spec.kind == "ltc"
        }
        self.level: dict[str, dict] = {}  # pred -> fact -> level
        self.cwf: dict[str, Weighted] = {}  # pred -> fact -> C_wf
        self.top = 0  # the highest level given so far
        self.limit = 0.0  # overdeleted facts beyond which a stratum is recomputed
        self.recomputed = 0  # strata recomputed in this update
        self.replaced: set[str] = set()  # their predicates (D = old I, A = new I)
        # rule -> positions of its positive literals in its own stratum, with their preds
        self.same = {
            rid: tuple(
                (i, a.pred)
                for i, a in enumerate(self.analysis.rules[rid].positives)
                if self.stratum_of(a.pred) == s.index
            )
            for s in strata if s.index in self.leveled for rid in s.recursive
        }  # fmt: skip

    def whole_instances(self, rule) -> bool:
        return rule.recursive and self.stratum_of(rule.head.pred) in self.leveled

    def per_fact_tables(self) -> tuple[dict, ...]:
        return self.cnr, self.cr, self.cwf, self.level

    # ------------------------------------------------------------ materialisation
    def materialise(self) -> None:
        self.level.clear()
        self.cwf.clear()
        self.top = 0
        super().materialise()

    def _insert_all(self, pred: str, facts) -> None:
        super()._insert_all(pred, facts)
        if pred in self.leveled_preds:
            self.level.setdefault(pred, {}).update(dict.fromkeys(facts, self.top))

    def _absorb(self, derived: Changes) -> Changes:
        self.top += 1  # one semi-naive round: its new facts get the next level
        out = super()._absorb(derived)
        self._stamp_wf(out)
        return out

    def _stamp_wf(self, new: Changes) -> None:
        """C_wf := C_r for facts entering I: the instances of their own round."""
        for p, fs in new.items():
            if p in self.leveled_preds:
                cr = self.cr.get(p, {}).get
                self._get_w(self.cwf, p).update({f: cr(f, 0) for f in fs})

    def prepare(self) -> None:
        """As Maintainer.prepare; then the ltc modules' reachability state."""
        super().prepare()
        for m in self.closures.values():
            edges = [f for b in m.bases for f in self.rel(b).facts]
            cnr = self.cnr.get(m.pred, {})
            r0 = [f for f, n in cnr.items() if n > 0]
            m.start_upkeep(edges, r0, len(self.rel(m.pred)))

    # ------------------------------------------------------------ updates
    def update_closure(self, s: Stratum) -> None:
        """Stratum `s` of an ltc module: R0's and S's changes give R's (no instances).

        R0 changes where C_nr crosses zero: lost and gained instances of the
        non-recursive rules (over the lower changes), explicit deletions and
        additions. The module turns them, with S's changes, into R's losses (D)
        and gains (A).
        """
        m = self.closures[s.index]
        pred = m.pred
        P, N = self.lower_changes(s)
        lost = self.ev.derive(s.nonrecursive, self.OLD, self.OLD, P, N) if P or N else []
        won = self.ev.derive(s.nonrecursive, self.NEW, self.NEW, N, P) if P or N else []
        minus, plus = self.minus.get(pred, set()), self.plus.get(pred, set())
        touched = set(minus) | plus
        for derived in (lost, won):
            for _rule, hs in derived:
                touched.update(hs)
        cnr = self._get_w(self.cnr, pred)
        was = {f for f in touched if cnr.get(f, 0) > 0}
        self.tally(lost, -1)
        self.tally(won, +1)
        cnr.add_all(minus, -1)
        cnr.add_all(plus, +1)
        now = {f for f in touched if cnr.get(f, 0) > 0}
        s_gone = [f for b in m.bases for f in self.d_minus_a(b)]
        s_new = [f for b in m.bases for f in self.a_minus_d(b)]
        gone, new = m.maintain(s_gone, s_new, was - now, now - was)
        if gone:
            self._get(self.D, pred).update(gone)
        if new:
            self._get(self.A, pred).update(new)

    def update_stratum(self, s: Stratum) -> None:
        if s.index in self.closures:
            self.update_closure(s)
            return
        if s.index in self.leveled:
            size = sum(len(self.rel(p)) for p in s.preds)
            self.limit = max(self.recompute_min, self.recompute_share * size)
            try:
                input_limit = max(self.recompute_min, self.recompute_input * self.input_size(s))
                if self.input_change(s) > input_limit:
                    raise _Recompute
                self.overdelete(s)
            except _Recompute:
                self.recompute(s)
                return
        else:
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
        nd: Changes = {}
        if P or N:
            if s.index in self.leveled:
                nd = self.tally(self.ev.derive(s.nonrecursive, self.OLD, self.OLD, P, N), -1)
                lost = self.ev.derive(s.recursive, self.OLD, self.OLD, P, N, instances=True)
                for p, fs in self.lose(lost, s).items():
                    nd.setdefault(p, set()).update(fs)
            else:
                nd = self.tally(self.ev.derive(s.rules, self.OLD, self.OLD, P, N), -1)
        for p in s.preds:
            fs = self.minus.get(p)
            if fs:
                self._get_w(self.cnr, p).add_all(fs, -1)
                nd.setdefault(p, set()).update(fs)
        self.overdelete_loop(s, nd)

    def input_size(self, s: Stratum) -> int:
        """The facts stratum `s` reads from lower strata, plus its explicit facts."""
        lower = (p for p in self.body_preds[s.index] if self.stratum_of(p) < s.index)
        return sum(len(self.rel(p)) for p in lower) + sum(len(self.E.get(p, ())) for p in s.preds)

    def input_change(self, s: Stratum) -> int:
        """How many of those this update changes."""
        P, N = self.lower_changes(s)
        n = sum(map(len, P.values())) + sum(map(len, N.values()))
        return n + sum(len(self.plus.get(p, ())) + len(self.minus.get(p, ())) for p in s.preds)

    def overdeleting(self, s: Stratum) -> None:
        if s.index in self.leveled:
            if sum(len(self.D[p]) for p in s.preds if p in self.D) > self.limit:
                raise _Recompute

    def recompute(self, s: Stratum) -> None:
        """Evaluate stratum `s` from scratch over the updated lower strata.

        D takes all of the stratum's facts and its counters and levels start
        afresh; insertion then derives everything (as a load would) into A, so
        commit keeps exactly the new stratum and the report its difference.
        """
        self.recomputed += 1
        seeds: Changes = {}
        for p in s.preds:
            self.D[p] = self.rel(p)  # all of it (the same object: I stays as it was)
            self.replaced.add(p)
            for table in self.per_fact_tables():
                table.pop(p, None)
            kept = self.E.get(p, set()) - self.minus.get(p, set()) - self.plus.get(p, set())
            if kept:
                self._get_w(self.cnr, p).add_all(kept)
                seeds[p] = kept
        self.insert(s, seeds, full=True)

    def NEW(self, pred: str) -> list:
        if pred in self.replaced:  # (I \ D) u A = A: D holds all of I
            return [(self._get(self.A, pred), None)]
        return super().NEW(pred)

    def commit(self, report) -> None:
        """A recomputed stratum's A becomes its relation; the rest as DRed^c."""
        report.details["recomputed_strata"] = self.recomputed
        self.recomputed = 0
        for p in self.replaced:
            new = self.A.pop(p, None) or Relation()
            old = self.D.pop(p).facts
            self.I[p] = new
            if p not in self.analysis.internal:
                report.note(p, new.facts - old, old - new.facts)
        self.replaced.clear()
        super().commit(report)

    def lost_instances(self, s: Stratum) -> bool:
        return s.index in self.leveled

    def lose(self, derived: Derived, s: Stratum) -> Changes:
        """Decrement C_r for each lost instance, and C_wf when it was well-founded.

        Returns the heads that lost a well-founded instance: only they can have
        lost their last support (every other fact keeps C_nr > 0 or C_wf > 0).
        """
        if s.index not in self.leveled:
            return super().lose(derived, s)
        out: Changes = {}
        for rule, items in derived:
            pred = rule.head.pred
            wf = self._well_founded(rule, items, UNKNOWN_HEAD)
            self._get_w(self.cr, pred).add_all([h for h, _, _ in items], -1)
            self._get_w(self.cwf, pred).add_all(wf, -1)
            out.setdefault(pred, set()).update(wf)
        return out

    def gained(self, s: Stratum, N: Changes, P: Changes) -> Derived:
        """As DRed's, counting new well-founded derivations of facts staying in I.

        A started instance whose same-stratum body lies below its head, a fact
        staying in I, is a new well-founded derivation of it (C_wf + 1).
        """
        if s.index not in self.leveled:
            return super().gained(s, N, P)
        out = self.ev.derive(s.nonrecursive, self.NEW, self.NEW, N, P)
        for rule, items in self.ev.derive(s.recursive, self.NEW, self.NEW, N, P, instances=True):
            pred = rule.head.pred
            i, d = self.rel(pred).facts, self._get(self.D, pred).facts
            staying = [t for t in items if t[0] in i and t[0] not in d]
            self._get_w(self.cwf, pred).add_all(self._well_founded(rule, staying, -1))
            out.append((rule, [h for h, _, _ in items]))
        return out

    def _well_founded(self, rule, items: list, missing: float) -> list:
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

    def deletable(self, pred: str, facts: set) -> set:
        cnr = self.cnr.get(pred, {}).get
        if pred not in self.leveled_preds:
            return {f for f in facts if not cnr(f, 0)}
        cwf = self.cwf.get(pred, {}).get
        return {f for f in facts if cwf(f, 0) <= 0 and not cnr(f, 0)}

    def entered(self, s: Stratum, new: Changes) -> None:
        """Facts entering A in one insertion round get the next level; C_wf := C_r."""
        if s.index not in self.leveled:
            return
        self.top += 1
        for p, fs in new.items():
            if p in self.leveled_preds:
                self.level.setdefault(p, {}).update(dict.fromkeys(fs, self.top))
        self._stamp_wf(new)

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


def _below(body, pos, h) -> bool:
    """Whether every levelled body fact of an instance is below level `h`."""
    return all(get(pos[i], -1) < h for i, get in body)
