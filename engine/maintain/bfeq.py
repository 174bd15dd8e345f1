"""`bf` with `equality="rewrite"`: B/F~ (Motik, Nenov, Piro & Horrocks 2015), fully incremental.

Contract: as engine.maintain.rewrite (`facts()` is the expanded materialisation
J of P plus the equality axioms, `compact` holds I = pi(J), `classes` holds
pi), but every update is maintained incrementally, including those that add or
delete `owl:sameAs` facts or make rules derive or retract equalities.

- Load and insertion: forward r-materialisation (Motik et al. 2015b) by
  engine.rewriting.Saturation over the stored (pi, I) with Gamma = pi(P):
  new facts are rewritten, processed and propagated, and every derived
  equality merges two classes on the spot (outdating the facts that mention
  the merged constant, rewriting and re-evaluating the rules that do).
- Deletion: Algorithms 1-7 of the paper (`_Deletion`). Facts of pi(E-) are
  doubtful (D); each doubtful fact is checked (`check`, Algorithm 4: backward
  chaining over I through pi(P), reflexivity (~4) and replacement (~1)-(~3))
  and the checked facts C are saturated forward from E' (Algorithm 5) into a
  fresh rewriting (gamma, V) of what C covers; a fact some member of whose
  expansion is no longer proved makes its consequences doubtful. Then
  Algorithm 2: every checked class is regrouped by gamma (a deleted equality
  can split a class, which *restores* rewritten facts: section 3.1), the
  doubtful facts not proved leave I, and the proved ones enter it rewritten by
  the new pi. The paper's optimisations are all here: reflexivity facts proved
  from E's vocabulary (lines 37-39), the processed sets V and O with
  annotated queries (each rule instance considered once), disproved facts S
  excluded from backward chaining, singleton classes skipped.

The change to J is computed from the change to (pi, I): the facts that left or
entered I and every fact of I mentioning a class that changed, expanded before
and after (`_expansion_change`); J is never copied. An update applies its
deletions first (B/F~), then its insertions (forward).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import product

from engine.analysis import Analysis
from engine.equality import SAME_AS, Classes, PyFact, expand_with
from engine.graph import depth_first
from engine.maintain.rewrite import Rewrite
from engine.maintainer import Report, Update
from engine.rewriting import (
    Saturation,
    Store,
    body_matches,
    compile_rules,
    drop,
    ground,
    index_bodies,
    instances,
    is_equality,
    unify,
)

Change = tuple[set, set]  # (facts of J removed, facts of J added)


class BFEq(Rewrite):
    """B/F~ for deletions, forward r-materialisation for insertions (see the module docstring)."""

    def __init__(self, analysis: Analysis, *args, **kwargs):
        super().__init__(analysis, *args, **kwargs)
        self.raw_rules = compile_rules(analysis.program.rules)
        self.compact: Store = Store()  # type: ignore[assignment]
        self._set_rules(self.raw_rules)
        self.norm_of: dict[PyFact, PyFact] = {}  # explicit fact -> pi(fact)
        self.by_normal: dict[PyFact, set[PyFact]] = {}  # F -> F^pi n E
        self.by_const: dict[object, set[PyFact]] = {}  # constant -> explicit facts mentioning it

    def _set_rules(self, rules: list) -> None:
        """Gamma = pi(P), indexed by body and head predicate."""
        self.rules = rules
        self.by_body = index_bodies(rules)
        self.by_head: dict[str, list] = {}
        for rule in rules:
            self.by_head.setdefault(rule.head[0], []).append(rule)

    # ------------------------------------------------------------ explicit facts
    def _index(self, fact: PyFact) -> None:
        n = self.norm_of[fact] = self.classes.normal(fact)
        self.by_normal.setdefault(n, set()).add(fact)
        for v in set(fact[1:]):
            self.by_const.setdefault(v, set()).add(fact)

    def _unindex(self, fact: PyFact) -> None:
        n = self.norm_of.pop(fact)
        drop(self.by_normal, n, fact)
        for v in set(fact[1:]):
            drop(self.by_const, v, fact)

    def _rekey(self, moved: Iterable) -> None:
        """Re-normalise the explicit facts that mention a constant whose representative changed."""
        for d in moved:
            for fact in self.by_const.get(d, ()):
                n = self.classes.normal(fact)
                old = self.norm_of[fact]
                if n != old:
                    drop(self.by_normal, old, fact)
                    self.norm_of[fact] = n
                    self.by_normal.setdefault(n, set()).add(fact)

    # ------------------------------------------------------------ load and update
    def materialise(self, report: Report) -> None:
        self.I = {}
        self.classes, self.compact = Classes(), Store()
        self.norm_of, self.by_normal, self.by_const = {}, {}, {}
        self._set_rules(self.raw_rules)
        gone, new, stats = self._insert(list(self.explicit()))
        self._apply(gone, new, set(), set())
        report.added = sum(len(r) for r in self.I.values())
        report.details = {"compact_facts": len(self.compact), **stats}

    def maintain(self, update: Update, report: Report) -> None:
        update.apply(self.E)
        plus, minus = update.plus, update.minus
        gone: set[PyFact] = set()
        new: set[PyFact] = set()
        details = {"equality_recomputed": 0}
        if minus:
            raw = [self.decode(p, f) for p, fs in minus.items() for f in fs]
            for f in raw:
                self._unindex(f)
            run = _Deletion(self)
            g, n = run.run(raw)
            self._apply(g, n, gone, new)
            details.update(run.stats())
        if plus:
            raw = [self.decode(p, f) for p, fs in plus.items() for f in fs]
            g, n, stats = self._insert(raw)
            self._apply(g, n, gone, new)
            for k, v in stats.items():
                details[k] = details.get(k, 0) + v
        for pred, (a, r) in _by_pred(self, new, gone).items():
            report.note(pred, a, r)
        details["compact_facts"] = len(self.compact)
        report.details = details

    def _insert(self, raw: list[PyFact]) -> tuple[set, set, dict]:
        """Forward r-materialisation of E+ over the stored (pi, I)."""
        for f in raw:
            self._index(f)
        guard = self._guard if self.limits.active else None
        sat = Saturation(self.rules, self.classes, self.compact, track=True, guard=guard)
        for f in raw:
            sat.add(self.classes.normal(f))
        sat.run()
        self._set_rules(sat.rules)
        old = sat.old_classes or {}
        self._rekey(m for ms in old.values() for m in ms)
        removed, added = sat.dropped - sat.entered, sat.entered - sat.dropped
        gone, new = self._expansion_change(removed, added, old)
        return gone, new, {"rule_instances": sat.instances}

    def _guard(self, sat: Saturation) -> None:
        """engine.limits for the forward saturation (the only part that can run without end)."""
        if self._work_start is not None:
            self.limits.check_work(sat.instances)
        self.limits.check_facts(len(self.compact))

    def _expansion_change(self, removed: set, added: set, old_classes: dict) -> Change:
        """J's change from I's (`removed`, `added`) and the classes as they were (`old_classes`).

        Only facts that left or entered I, or mention a representative whose class
        changed, can expand differently; every other fact of I expands as before.
        """
        compact, members = self.compact, self.classes.members
        find = self.classes.find
        new_reps = {find(m) for ms in old_classes.values() for m in ms}
        was = set(removed)
        for r in old_classes:
            was.update(f for f in compact.mentioning(r) if f not in added)
        now = set(added)
        for r in new_reps:
            now.update(compact.mentioning(r))
        before = set(expand_with(was, lambda v: old_classes.get(v) or members(v)))
        after = set(expand_with(now, members))
        return before - after, after - before

    def _apply(self, gone: set, new: set, all_gone: set, all_new: set) -> None:
        """Apply a change of J to the stored relations, folding it into the update's totals."""
        for facts, into, undo in ((gone, all_gone, all_new), (new, all_new, all_gone)):
            for fact in facts:
                pred, f = self.encode(fact)
                if into is all_gone:
                    self.rel(pred).discard(f)
                else:
                    self.rel(pred).add(f)
                if fact in undo:
                    undo.discard(fact)  # removed then added back by one update, or vice versa
                else:
                    into.add(fact)


class _Deletion:
    """One run of Algorithm 1 (B/F~) with Algorithms 2-5; names follow the paper."""

    def __init__(self, m: BFEq) -> None:
        self.m, self.pi, self.I = m, m.classes, m.compact
        self.C: set[PyFact] = set()  # checked
        self.Cq: list[PyFact] = []  # C in order: saturate() and line 7 resume where they left
        self.saturated = self.settled = 0
        self.D: set[PyFact] = set()  # doubtful
        self.Dq: deque[PyFact] = deque()
        self.O: set[PyFact] = set()  # doubtful facts not proved whose consequences are doubtful
        self.S: set[PyFact] = set()  # disproved
        self.Y: dict[PyFact, set[PyFact]] = {}  # delayed, by pi-image
        self.gamma = Classes()
        self.sat = Saturation(m.raw_rules, self.gamma, Store(), gate=self._gate)

    def stats(self) -> dict[str, int]:
        return {
            "doubtful": len(self.D), "checked": len(self.C), "disproved": len(self.S),
            "rule_instances": self.sat.instances,
        }  # fmt: skip

    def _gate(self, f: PyFact) -> bool:
        """Algorithm 7: admit f to P if pi(f) is checked, else delay it (Y)."""
        n = self.pi.normal(f)
        if n in self.C:
            return True
        self.Y.setdefault(n, set()).add(f)
        return False

    def _doubt(self, f: PyFact) -> None:
        if f not in self.D:
            self.D.add(f)
            self.Dq.append(f)

    # ------------------------------------------------------------ Algorithm 1
    def run(self, deleted: list[PyFact]) -> Change:
        """Lines 3-17 for E- = `deleted` (already gone from E and its indexes)."""
        compact, spent, pi = self.I, self.O, self.pi
        for f in deleted:
            self._doubt(pi.normal(f))
        while self.Dq:
            F = self.Dq.popleft()
            self.check(F)
            for G in self.Cq[self.settled :]:  # line 7 (a checked fact's status is final)
                if self.disproved(G):
                    self.S.add(G)
            self.settled = len(self.Cq)
            if not self.proved(F):
                if _reflexive(F) and len(pi.members(F[1])) > 1:  # lines 9-11
                    for G in compact.mentioning(F[1]):
                        if G not in spent:
                            self._doubt(G)
                for c in set(F[1:]):  # line 12
                    self._doubt((SAME_AS, c, c))
                for rule, q, sigma in body_matches(self.m.by_body, F):  # lines 13-15
                    for tau in instances(q, compact, sigma, exclude=spent, avoid=F):
                        self._doubt(ground(rule.head, tau))
                spent.add(F)  # line 16: its consequences are doubtful now
        return self.propagate()

    def images(self, F: PyFact):
        """gamma(F^pi), per position the representatives under gamma of F's classes."""
        cols = []
        for v in F[1:]:
            ms = self.pi.members(v)
            cols.append({self.gamma.find(x) for x in ms} if len(ms) > 1 else (v,))
        return ((F[0], *args) for args in product(*cols))

    def proved(self, F: PyFact) -> bool:
        """allProved(F)."""
        holds = self.sat.holds
        return F not in self.S and all(holds(g) for g in self.images(F))

    def disproved(self, F: PyFact) -> bool:
        """allDisproved(F)."""
        holds = self.sat.holds
        return not any(holds(g) for g in self.images(F))

    # ------------------------------------------------------------ Algorithm 4
    def check(self, F: PyFact) -> None:
        """checkProvability(F), by an explicit stack: deep proofs cannot overflow Python's."""
        depth_first(F, self._check)

    def _check(self, F: PyFact):
        """Lines 22-35 as a generator yielding the facts to check before going on.

        The three searches run in the reverse of the paper's order, and lines 25-28
        (every fact mentioning c, to prove c ~ c by reflexivity) only when some member
        of c's class is not in E's vocabulary: lines 37-39 prove the reflexive facts
        of the others, and every equality between members of c's class comes from
        an explicit fact (line 40) or an instance of a rule whose head is c ~ c, which
        lines 32-35 check. Any order is correct (each search stops once F is
        proved); this one checks the few facts that can derive equalities first
        instead of the many that merely mention c.
        """
        if F in self.C:
            return
        self.C.add(F)
        self.Cq.append(F)
        self.saturate()
        if self.proved(F):
            return
        compact, S, pi, m = self.I, self.S, self.pi, self.m
        for rule in m.by_head.get(F[0], ()):  # lines 32-35
            sigma = unify(rule.head[1], F[1:], {})
            if sigma is None:
                continue
            for tau in instances(rule.from_head, compact, sigma, exclude=S):
                for b in rule.body:
                    yield ground(b, tau)
                    if self.proved(F):
                        return
        for c in set(F[1:]):  # lines 29-31
            r = (SAME_AS, c, c)
            if r not in S and len(pi.members(c)) > 1:
                yield r
                if self.proved(F):
                    return
        if _reflexive(F) and not all(d in m.by_const for d in pi.members(F[1])):  # lines 25-28
            for G in compact.mentioning(F[1]):
                if G not in S:
                    yield G
                    if self.proved(F):
                        return

    # ------------------------------------------------------------ Algorithm 5
    def saturate(self) -> None:
        """Lines 36-40 for the facts checked since the last call, then lines 41-50."""
        m, sat, find = self.m, self.sat, self.gamma.find
        while self.saturated < len(self.Cq):
            F = self.Cq[self.saturated]
            self.saturated += 1
            if _reflexive(F):  # lines 37-39
                for d in self.pi.members(F[1]):
                    if d in m.by_const:
                        sat.add((SAME_AS, find(d), find(d)))
            for G in m.by_normal.get(F, ()):  # line 40: F^pi n E ...
                sat.add(self.gamma.normal(G))
            for G in self.Y.pop(F, ()):  # ... and F^pi n Y
                sat.add(self.gamma.normal(G))
        sat.run()

    # ------------------------------------------------------------ Algorithm 2
    def propagate(self) -> Change:
        """Lines 18-21: regroup the checked classes by gamma, then update I."""
        m, pi, compact, sat, find = self.m, self.pi, self.I, self.sat, self.gamma.find
        old: dict = {}
        for F in self.Cq:
            if _reflexive(F):
                ms = pi.members(F[1])
                if len(ms) > 1 and any(find(d) != F[1] for d in ms):
                    old[F[1]] = frozenset(ms)
        for c in old:
            pi.regroup(c, find)
        removed = {F for F in self.D if not sat.holds(F)}
        for F in removed:
            compact.discard(F)
        added = set()
        for F in sat.V.facts:
            G = pi.normal(F)
            if compact.add(G):
                added.add(G)
        if old:
            m._set_rules([r.rewritten(pi.find) for r in m.raw_rules])
            m._rekey(d for ms in old.values() for d in ms)
        return m._expansion_change(removed, added, old)


def _reflexive(f: PyFact) -> bool:
    return is_equality(f) and f[1] == f[2]


def _by_pred(m: BFEq, new: set, gone: set) -> dict:
    out: dict[str, tuple[set, set]] = {}
    for facts, k in ((new, 0), (gone, 1)):
        for fact in facts:
            pred, f = m.encode(fact)
            out.setdefault(pred, (set(), set()))[k].add(f)
    return out
