"""`bf`: Backward/Forward with non-recursive counters (B/F^c; Hu, Motik & Horrocks 2018, Alg. 3).

Deletion is exact: before a fact is deleted, backward chaining over the recursive
rules looks for an alternative derivation, and forward chaining (SATURATE) over
the facts proved so far confirms it. A non-zero non-recursive counter proves a
fact at once, so non-recursive rules are never evaluated backwards. No
rederivation step is needed; insertion is the same as in DRed^c without C_r.

CHECK is run by an explicit stack of generators, so deep recursive derivation
chains cannot overflow Python's call stack.
"""

from __future__ import annotations

from engine.analysis import Stratum
from engine.evaluate import Derived, saturate
from engine.graph import depth_first
from engine.maintain.base import Changes
from engine.maintain.dred import DRed
from engine.plans import AnyOf
from engine.storage import Relation


class BF(DRed):
    name = "bf"
    counts_nonrecursive = True

    def update_stratum(self, s: Stratum) -> None:
        self.delete_unproved(s)
        self.insert(s, {})

    def delete_unproved(self, s: Stratum) -> None:
        """Lines 57-69."""
        self.checked: set = set()  # C
        self.proved: dict[str, Relation] = {}  # P
        self.delayed: set = set()  # Y
        self.pending: Changes = {}  # Delta D while it is being built
        self._rec_by_head: dict[str, list] = {}
        for rid in s.recursive:
            rule = self.analysis.rules[rid]
            self._rec_by_head.setdefault(rule.head.pred, []).append(rule)
        P, N = self.lower_changes(s)
        nd: Changes = {}
        if P or N:
            self.tally(self.ev.derive(s.nonrecursive, self.OLD, self.OLD, P, N), -1, nd)
            self.tally(self.ev.derive(s.recursive, self.OLD, self.OLD, P, N), -1, nd)
        for p in s.preds:
            fs = self.minus.get(p)
            if fs:
                self._get_w(self.cnr, p).add_all(fs, -1)
                nd.setdefault(p, set()).update(fs)
        while True:
            self.pending = {}
            for p, fs in nd.items():
                d = self._get(self.D, p).facts
                for f in fs:
                    if f in d:
                        continue
                    self.check((p, f))
                    if f not in self._get(self.proved, p).facts:
                        self.pending.setdefault(p, set()).add(f)
            delta = self.pending
            if not delta:
                break
            nd = self.tally(
                self.ev.derive(s.recursive, self.I_MINUS_DMA, self.I_PLUS_A, delta, None), -1
            )
            for p, fs in delta.items():
                self._get(self.D, p).update(fs)
        self.pending = {}

    def _survivors(self, pred: str) -> list:
        r"""I \\ ((D u Delta D) \\ A), the view CHECK matches recursive rules against."""
        gone = self.d_minus_a(pred)
        extra = self.pending.get(pred)
        return [(self.rel(pred), AnyOf((gone, extra)) if extra else gone)]

    def check(self, fact) -> None:
        depth_first(fact, self._check)

    def _check(self, fact):
        """CHECK(F) (lines 70-76) as a generator that yields the facts it must check first."""
        if fact in self.checked:
            return
        if self.saturate_fact(fact):
            return
        pred, f = fact
        proved = self._get(self.proved, pred).facts
        for rule in self._rec_by_head.get(pred, ()):
            for _, body in self.ev.backward(rule, (f,), self._survivors, self.I_PLUS_A, False):
                for atom, g in zip(rule.positives, body, strict=True):
                    if self.stratum_of(atom.pred) == self.current:
                        yield (atom.pred, g)
                if f in proved:
                    return

    def saturate_fact(self, fact) -> bool:
        """SATURATE(F) (lines 77-86): forward chaining over proved facts."""
        self.checked.add(fact)
        pred, f = fact
        if fact not in self.delayed and self.cnr.get(pred, {}).get(f, 0) <= 0:
            return False
        s = self.analysis.strata[self.current - 1]

        def split(np: Changes) -> Changes:
            out: Changes = {}
            for p, fs in np.items():
                proved = self._get(self.proved, p)
                for g in fs:
                    if (p, g) in self.checked:
                        if g not in proved.facts:
                            out.setdefault(p, set()).add(g)
                    else:
                        self.delayed.add((p, g))
            for p, fs in out.items():
                self.proved[p].update(fs)
            return out

        def accept(derived: Derived, delta: Changes) -> Changes:
            return split(self.heads(derived))

        saturate(
            self.ev, s.recursive, self._proved_view, self.I_PLUS_A, split({pred: {f}}), accept
        )
        return True

    def _proved_view(self, pred: str) -> list:
        r"""P for the current stratum, I \ (D \ A) for lower strata.

        Proofs use only what survives of the old materialisation: a fact proved through
        a newly added lower fact would stay in I, so insertion would never see it as
        new and would not propagate its consequences. Insertion derives such facts.
        """
        if self.stratum_of(pred) == self.current:
            return [(self._get(self.proved, pred), None)]
        return self.I_MINUS_DMA(pred)
