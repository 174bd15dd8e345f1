"""`dred`: Delete/Rederive (Gupta et al. 1993), stratum by stratum.

Follows Algorithm 1 of Hu, Motik & Horrocks (2018): overdelete everything that
depends on a deleted fact, rederive in one step by evaluating rules backwards
over what survives, then insert semi-naively. I is the old materialisation
until `commit`; D and A accumulate the changes.
"""

from __future__ import annotations

from engine.analysis import Stratum
from engine.evaluate import Derived, saturate
from engine.maintain.base import Changes, Maintainer


class DRed(Maintainer):
    name = "dred"

    def update_stratum(self, s: Stratum) -> None:
        self.overdelete(s)
        self.insert(s, self.rederive(s))

    def commit(self, report) -> None:
        """As Maintainer.commit; the report's details count overdeleted and rederived facts."""
        d = {p: r.facts for p, r in self.D.items() if p not in self.analysis.internal}
        report.details["overdeleted"] = sum(len(fs) for fs in d.values())
        report.details["rederived"] = sum(
            len(fs & self.A[p].facts) for p, fs in d.items() if p in self.A
        )
        super().commit(report)

    def overdelete(self, s: Stratum) -> None:
        P, N = self.lower_changes(s)
        nd = self.tally(self.ev.derive(s.rules, self.OLD, self.OLD, P, N), -1) if P or N else {}
        for p in s.preds:
            if p in self.minus:
                nd.setdefault(p, set()).update(self.minus[p])
        self.overdelete_loop(s, nd)

    def overdelete_loop(self, s: Stratum, nd: Changes) -> None:
        """Propagate ND through the recursive rules, adding each wave to D (lines 9-13)."""

        def fresh(nd: Changes) -> Changes:
            out = {}
            for p, fs in nd.items():
                new = self.deletable(p, fs - self._get(self.D, p).facts)
                if new:
                    out[p] = new
            return out

        def accept(derived: Derived, delta: Changes) -> Changes:
            nd = self.lose(derived, s)
            for p, fs in delta.items():
                self._get(self.D, p).update(fs)
            self.overdeleting(s)
            return fresh(nd)

        steps = []
        for m in self.modules.get(s.index, ()):
            m.start_deletion()
            cnr = self._get_w(self.cnr, m.pred)
            steps.append((m, lambda d, m=m, cnr=cnr: m.delete(self.I_MINUS_DMA, d, cnr)))
        generic = self.generic[s.index]
        saturate(
            self.ev, generic, self.I_MINUS_DMA, self.I_PLUS_A, fresh(nd), accept, steps,
            instances=self.lost_instances(s),
        )  # fmt: skip

    def lose(self, derived: Derived, s: Stratum) -> Changes:
        """Account for lost instances of stratum `s`'s rules; return their heads."""
        return self.tally(derived, -1)

    def gained(self, s: Stratum, N: Changes, P: Changes) -> Derived:
        """Instances of stratum `s` that the lower changes start (Π⟨NEW ⊳ A-D, D-A⟩)."""
        return self.ev.derive(s.rules, self.NEW, self.NEW, N, P)

    def overdeleting(self, s: Stratum) -> None:
        """Hook: called after each round of overdeletion in stratum `s` (D is current)."""

    def lost_instances(self, s: Stratum) -> bool:
        """Whether `lose` needs whole instances (not just heads) in stratum `s`."""
        return False

    def deletable(self, pred: str, facts: set) -> set:
        """The affected facts that are overdeleted (DRed: all)."""
        return facts

    def entered(self, s: Stratum, new: Changes) -> None:
        """Hook: `new` entered A in one round of stratum `s`'s insertion."""

    def rederive(self, s: Stratum) -> Changes:
        """One-step rederivation by backward rule evaluation (line 4)."""
        R: Changes = {}
        by_head: dict[str, list] = {}
        for rid in s.rules:
            rule = self.analysis.rules[rid]
            by_head.setdefault(rule.head.pred, []).append(rule)
        for p in s.preds:
            d = self.D.get(p)
            if not d:
                continue
            explicit = self.E.get(p, set())
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
                found = {
                    h for h, _ in self.ev.backward(rule, todo, self.I_MINUS_DMA, self.I_PLUS_A, True)
                }
                if found:
                    R.setdefault(p, set()).update(found)
                    todo -= found
        return R

    def insert(
        self, s: Stratum, seeds: Changes, own: dict | None = None, full: bool = False
    ) -> None:
        """Semi-naive insertion (lines 14-20); with modules REDERIVE-INSERT's loop.

        `own` maps a module to the facts it rederived itself (not given back to it).
        With `full` the stratum is evaluated from scratch over (I - D) u A (D holds
        all of it): non-recursive rules over everything instead of the lower
        changes, and a first round of the recursive rules over everything.
        """
        P, N = self.lower_changes(s)
        na = {p: set(fs) for p, fs in seeds.items()}
        for p in s.preds:
            if p in self.plus:
                if self.counts_nonrecursive:
                    self._get_w(self.cnr, p).add_all(self.plus[p])
                na.setdefault(p, set()).update(self.plus[p])
        if full:
            derived = self.ev.derive(s.nonrecursive, self.NEW, self.NEW)
        else:
            derived = self.gained(s, N, P) if P or N else []
        self.tally(derived, +1, na)
        mods = self.modules.get(s.index, ())
        for m in mods:  # facts whose C_nr became positive (tc keeps them in X)
            m.external(self.plus.get(m.pred, ()))
            for rule, hs in derived:
                if rule.head.pred == m.pred and not rule.recursive:
                    m.external(hs)

        def fresh(na: Changes) -> Changes:
            out = {}
            for p, fs in na.items():
                i, d, a = self.rel(p).facts, self._get(self.D, p).facts, self._get(self.A, p)
                new = fs - a.facts  # new in I, or back after overdeletion:
                new = ((new - i) | (new & d)) if d else new - i
                if new:
                    a.update(new)
                    out[p] = new
            self.entered(s, out)
            return out

        def accept(derived: Derived, delta: Changes) -> Changes:
            return fresh(self.tally(derived, +1))

        steps = [(m, lambda d, m=m: m.add(self.NEW, d)) for m in mods]
        generic = self.generic[s.index]
        saturate(
            self.ev, generic, self.NEW, self.NEW, fresh(na), accept, steps, full=full, own=own
        )  # fmt: skip
