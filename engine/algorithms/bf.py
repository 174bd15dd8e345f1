"""`bf`: Backward/Forward with non-recursive counters (B/F^c; Hu, Motik & Horrocks 2018, Alg. 3).

Deletion is exact: before a fact is deleted, backward chaining over the recursive
rules looks for an alternative derivation, and forward chaining (SATURATE) over
the facts proved so far confirms it. A non-zero non-recursive counter proves a
fact at once, so non-recursive rules are never evaluated backwards. No
rederivation step is needed; insertion is the same as in DRed^c without C_r.

One stratum's deletion is a `_Deletion` run (its checked, proved and delayed
facts); the propagation of disproved facts and SATURATE both go through the one
fixpoint loop, `engine.evaluate.saturate`. CHECK is run by an explicit stack of
generators, so deep recursive derivation chains cannot overflow Python's call
stack.
"""

from __future__ import annotations

from fluxmat.engine.algorithms.dred import DRed
from fluxmat.engine.algorithms.stratified import Run
from fluxmat.engine.analysis import Stratum
from fluxmat.engine.evaluate import Derived, saturate
from fluxmat.engine.graph import depth_first
from fluxmat.engine.maintainer import Changes
from fluxmat.engine.plans import AnyOf
from fluxmat.engine.storage import Relation, relation_in


class BF(DRed):
    name = "bf"
    counts_nonrecursive = True

    def update_stratum(self, run: Run, s: Stratum) -> None:
        _Deletion(self, run, s).delete_unproved(run.lost(s))
        run.insert(s, {})


class _Deletion:
    """Lines 57-86 for one stratum of one update: delete the facts no proof is left for."""

    def __init__(self, m: BF, run: Run, s: Stratum):
        self.m, self.run, self.s = m, run, s
        self.checked: set = set()  # C
        self.proved: dict[str, Relation] = {}  # P
        self.delayed: set = set()  # Y
        self.pending: Changes = {}  # Delta D while it is being built
        self.by_head: dict[str, list] = {}  # the recursive rules by head predicate
        for rid in s.recursive:
            rule = m.analysis.rules[rid]
            self.by_head.setdefault(rule.head.pred, []).append(rule)

    def delete_unproved(self, seeds: Changes) -> None:
        r"""Lines 57-69: delete the affected facts that CHECK does not prove.

        The unproved facts go to D and their consequences (over I \ (D \ A)) are
        affected in turn.
        """
        run, m = self.run, self.m

        def accept(derived: Derived, delta: Changes) -> Changes:
            nd = m.tally(derived, -1)
            for p, fs in delta.items():
                relation_in(run.D, p).update(fs)
            return self.unproved(nd)

        saturate(m.ev, self.s.recursive, run.I_MINUS_DMA, run.I_PLUS_A, self.unproved(seeds), accept)
        self.pending = {}

    def unproved(self, affected: Changes) -> Changes:
        """Check the affected facts not in D yet; those left unproved (Delta D)."""
        self.pending = {}
        for p, fs in affected.items():
            d = relation_in(self.run.D, p).facts
            for f in fs:
                if f in d:
                    continue
                self.check((p, f))
                if f not in relation_in(self.proved, p).facts:
                    self.pending.setdefault(p, set()).add(f)
        return self.pending

    def _survivors(self, pred: str) -> list:
        r"""I \\ ((D u Delta D) \\ A), the view CHECK matches recursive rules against."""
        gone = self.run.d_minus_a(pred)
        extra = self.pending.get(pred)
        return [(self.m.rel(pred), AnyOf((gone, extra)) if extra else gone)]

    def check(self, fact) -> None:
        depth_first(fact, self._check)

    def _check(self, fact):
        """CHECK(F) (lines 70-76) as a generator that yields the facts it must check first."""
        if fact in self.checked:
            return
        if self.saturate_fact(fact):
            return
        pred, f = fact
        proved = relation_in(self.proved, pred).facts
        ev, current = self.m.ev, self.s.index
        for rule in self.by_head.get(pred, ()):
            for _, body in ev.backward(rule, (f,), self._survivors, self.run.I_PLUS_A, False):
                for atom, g in zip(rule.positives, body, strict=True):
                    if self.m.stratum_of(atom.pred) == current:
                        yield (atom.pred, g)
                if f in proved:
                    return

    def saturate_fact(self, fact) -> bool:
        """SATURATE(F) (lines 77-86): forward chaining over proved facts."""
        self.checked.add(fact)
        pred, f = fact
        if fact not in self.delayed and self.m.cnr.get(pred, {}).get(f, 0) <= 0:
            return False

        def split(np: Changes) -> Changes:
            out: Changes = {}
            for p, fs in np.items():
                proved = relation_in(self.proved, p)
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
            return split(self.m.heads(derived))

        saturate(
            self.m.ev, self.s.recursive, self._proved_view, self.run.I_PLUS_A, split({pred: {f}}),
            accept,
        )  # fmt: skip
        return True

    def _proved_view(self, pred: str) -> list:
        r"""P for the current stratum, I \ (D \ A) for lower strata.

        Proofs use only what survives of the old materialisation: a fact proved through
        a newly added lower fact would stay in I, so insertion would never see it as
        new and would not propagate its consequences. Insertion derives such facts.
        """
        if self.m.stratum_of(pred) == self.s.index:
            return [(relation_in(self.proved, pred), None)]
        return self.run.I_MINUS_DMA(pred)
