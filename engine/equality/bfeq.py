"""`bf` with `equality="rewrite"`: B/F~ (Motik, Nenov, Piro & Horrocks 2015), fully incremental.

Contract: as engine.equality.rewrite (`facts()` is the expanded materialisation
J of P plus the equality axioms, `rewritten()` the normal facts I = pi(J),
`representative(c)` is pi), but every update is maintained incrementally,
including those that add or delete `owl:sameAs` facts or make rules derive or
retract equalities.

State, dictionary-encoded like every maintainer's: `pi` (`Classes` over ids),
`store` (I, one relation per predicate; `self.I` holds J), the rule constants
as facts of internal relations (engine.equality.program.constants_as_facts),
and three indexes of the explicit facts (their pi-image, the explicit facts
per pi-image, the explicit facts per constant). Rules are evaluated only
through the compiled plans (engine.plans): forward by
engine.equality.saturation on the one fixpoint loop, backward (Algorithm 4
lines 32-35) by `Evaluator.backward`, the doubtful consequences (Algorithm 1
lines 13-15) by `Evaluator.derive`.

- Load and insertion: forward r-materialisation (Motik et al. 2015b) over the
  stored (pi, I): new facts are rewritten, processed and propagated, and every
  derived equality merges two classes on the spot (re-encoding the facts and
  rule constants that mention the merged constant).
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

from fluxmat.engine.analysis import Analysis, analyse
from fluxmat.engine.equality.classes import Classes, PyFact, expand_args, order_key
from fluxmat.engine.equality.program import SAME_AS, check, constants_as_facts
from fluxmat.engine.equality.rewrite import Rewriting
from fluxmat.engine.equality.saturation import Facts, Key, Saturation, mentioning
from fluxmat.engine.evaluate import Bound, Evaluator
from fluxmat.engine.graph import depth_first
from fluxmat.engine.limits import Limits
from fluxmat.engine.maintainer import Report, Update
from fluxmat.engine.storage import Dictionary, Fact, Relation, relation_in

Change = dict[str, tuple[set[Fact], set[Fact]]]  # per relation: (facts of J removed, added)


class BFEq(Rewriting):
    """B/F~ for deletions, forward r-materialisation for insertions (see the module docstring)."""

    name = "bf"

    def __init__(
        self, analysis: Analysis, dictionary: Dictionary | None = None, hypertree: bool = True
    ):
        check(analysis)
        program, constants = constants_as_facts(analysis.program)
        super().__init__(analyse(program), dictionary)
        self.ev = Evaluator(self.analysis, self.dictionary, self._size, hypertree, self.counts)
        self.rule_ids = tuple(r.id for r in self.analysis.rules)
        self.by_head: dict[str, list] = {}
        for rule in self.analysis.rules:
            self.by_head.setdefault(rule.head.pred, []).append(rule)
        self.internal = self.analysis.internal  # the relations of rule constants
        self.constants = [self.encode(f) for f in constants]
        self.pi = Classes(self.order)
        self.store: dict[str, Relation] = {}  # I = pi(J); self.I holds J
        self.normal_of: dict[Key, Fact] = {}  # explicit fact -> pi(fact)
        self.explicit_of: dict[Key, set[Fact]] = {}  # F -> F^pi n E
        self.explicit_with: dict[int, set[Key]] = {}  # constant -> explicit facts mentioning it

    def order(self, i: int) -> tuple:
        """The order on constants, for ids."""
        return order_key(self.dictionary.values[i])

    def _size(self, pred: str) -> int:
        rel = self.store.get(pred)
        return len(rel) if rel is not None else 0

    def relation(self, pred: str) -> Relation:
        """The relation of I holding `pred`."""
        return relation_in(self.store, pred)

    # ------------------------------------------------------------ views (values)
    def representative(self, value) -> object:
        """pi(value): the representative of `value`'s class."""
        i = self.dictionary.lookup(value)
        return value if i is None else self.dictionary.values[self.pi.find(i)]

    @property
    def classes(self) -> Classes:
        """The classes of pi over values (a copy: the maintainer keeps them over ids)."""
        return self.pi.mapped(self.dictionary.values.__getitem__)

    @property
    def compact(self) -> set[PyFact]:
        """I as Python facts."""
        return {self.decode(p, f) for p, rel in self.store.items() if p not in self.internal
                for f in rel.facts}  # fmt: skip

    @property
    def norm_of(self) -> dict[PyFact, PyFact]:
        """Explicit fact -> its pi-image, as Python facts."""
        return {self.decode(p, f): self.decode(p, n) for (p, f), n in self.normal_of.items()}

    @property
    def by_normal(self) -> dict[PyFact, set[PyFact]]:
        """pi-image -> the explicit facts it stands for, as Python facts."""
        return {self.decode(p, n): {self.decode(p, f) for f in fs}
                for (p, n), fs in self.explicit_of.items()}  # fmt: skip

    # ------------------------------------------------------------ explicit facts
    def _index(self, key: Key) -> None:
        pred, f = key
        n = self.normal_of[key] = self.pi.image(f)
        self.explicit_of.setdefault((pred, n), set()).add(f)
        for v in set(f):
            self.explicit_with.setdefault(v, set()).add(key)

    def _unindex(self, key: Key) -> None:
        pred, f = key
        _drop(self.explicit_of, (pred, self.normal_of.pop(key)), f)
        for v in set(f):
            _drop(self.explicit_with, v, key)

    def rekey(self, moved: Iterable[int]) -> None:
        """Re-normalise the explicit facts and rule constants that mention a moved constant."""
        for d in moved:
            for key in self.explicit_with.get(d, ()):
                pred, f = key
                n, old = self.pi.image(f), self.normal_of[key]
                if n != old:
                    _drop(self.explicit_of, (pred, old), f)
                    self.normal_of[key] = n
                    self.explicit_of.setdefault((pred, n), set()).add(f)
        for pred, f in self.constants:
            rel = self.relation(pred)
            rel.difference_update(list(rel.facts))
            rel.add(self.pi.image(f))

    # ------------------------------------------------------------ load and update
    def set_limits(self, limits: Limits) -> None:
        """Also checked by the evaluator before every round of the forward saturation."""
        super().set_limits(limits)
        self.ev.guard = self.check_limits if limits.active else None

    def size(self) -> int:
        """Facts of I = pi(J) (the fact limit counts the compact materialisation)."""
        return self._compact_size()

    def materialise(self, report: Report) -> None:
        self.I, self.store, self.pi = {}, {}, Classes(self.order)
        self.normal_of, self.explicit_of, self.explicit_with = {}, {}, {}
        for pred, f in self.constants:
            self.relation(pred).add(f)
        sat = self._insert([(p, f) for p, fs in self.E.items() for f in fs], track=False)
        keys = ((p, f) for p, rel in self.store.items() if p not in self.internal for f in rel.facts)
        for pred, facts in _expanded(keys, self.pi.members, self.pi.trivial).items():
            self.rel(pred).update(facts)
        report.added = sum(len(r) for r in self.I.values())
        report.details = {"compact_facts": self._compact_size(), "rule_instances": sat.instances}

    def maintain(self, update: Update, report: Report) -> None:
        update.apply(self.E)
        plus, minus = update.plus, update.minus
        totals: Change = {}
        details = {"equality_recomputed": 0}
        if minus:
            keys = [(p, f) for p, fs in minus.items() for f in fs]
            for key in keys:
                self._unindex(key)
            run = _Deletion(self)
            self._apply(self._expansion_change(*run.run(keys)), totals)
            details.update(run.stats())
        if plus:
            sat = self._insert([(p, f) for p, fs in plus.items() for f in fs], track=True)
            removed, added = sat.dropped - sat.entered, sat.entered - sat.dropped
            self._apply(self._expansion_change(removed, added, sat.old_classes), totals)
            details["rule_instances"] = details.get("rule_instances", 0) + sat.instances
        for pred, (gone, new) in totals.items():
            report.note(pred, new, gone)
        details["compact_facts"] = self._compact_size()
        report.details = details

    def _compact_size(self) -> int:
        return sum(len(r) for p, r in self.store.items() if p not in self.internal)

    def _insert(self, keys: list[Key], track: bool) -> Saturation:
        """Forward r-materialisation of E+ (`keys`, already in E) over the stored (pi, I)."""
        sat = Saturation(self.ev, self.rule_ids, self.pi, self.store, self.internal, track=track)
        new: Facts = {}
        for pred, f in keys:
            new.setdefault(pred, set()).add(self.pi.image(f))
        sat.add(new)
        if sat.old_classes:
            self.rekey(m for ms in sat.old_classes.values() for m in ms)
        for key in keys:
            self._index(key)
        return sat

    def _expansion_change(self, removed: set[Key], added: set[Key], old_classes: dict) -> Change:
        """J's change from I's (`removed`, `added`) and the classes as they were (`old_classes`).

        Only facts that left or entered I, or mention a representative whose class
        changed, can expand differently; every other fact of I expands as before.
        """
        pi, skip = self.pi, self.internal
        was = {k for k in removed if k[0] not in skip}
        now = {k for k in added if k[0] not in skip}
        for r in old_classes:
            was.update(k for k in mentioning(self.store, r, skip) if k not in added)
        for r in {pi.find(m) for ms in old_classes.values() for m in ms}:
            now.update(mentioning(self.store, r, skip))
        before = _expanded(
            was, lambda v: old_classes.get(v) or pi.members(v),
            lambda f: pi.trivial(f) and old_classes.keys().isdisjoint(f),
        )  # fmt: skip
        after = _expanded(now, pi.members, pi.trivial)
        out: Change = {}
        for pred in before.keys() | after.keys():
            b, a = before.get(pred, set()), after.get(pred, set())
            out[pred] = (b - a, a - b)
        return out

    def _apply(self, change: Change, totals: Change) -> None:
        """Apply a change of J to the stored relations, folding it into the update's totals.

        A fact removed and then added back by one update (or the reverse) is no change.
        """
        for pred, (gone, new) in change.items():
            rel = self.rel(pred)
            rel.difference_update(gone)
            rel.update(new)
            all_gone, all_new = totals.setdefault(pred, (set(), set()))
            back = gone & all_new
            all_new -= back
            all_gone |= gone - back
            back = new & all_gone
            all_gone -= back
            all_new |= new - back


def _expanded(keys: Iterable[Key], members, plain) -> Facts:
    """F^pi per relation for the normal facts `keys` (`plain(f)`: f stands for itself alone)."""
    out: Facts = {}
    for pred, f in keys:
        into = out.get(pred)
        if into is None:
            into = out[pred] = set()
        if plain(f):
            into.add(f)
        else:
            into.update(expand_args(f, members))
    return out


class _Deletion:
    """One run of Algorithm 1 (B/F~) with Algorithms 2-5; names follow the paper."""

    def __init__(self, m: BFEq) -> None:
        self.m, self.pi, self.I = m, m.pi, m.store
        self.C: set[Key] = set()  # checked
        self.Cq: list[Key] = []  # C in order: saturate() and line 7 resume where they left
        self.saturated = self.settled = 0
        self.D: set[Key] = set()  # doubtful
        self.Dq: deque[Key] = deque()
        self.O: Facts = {}  # doubtful facts not proved whose consequences are doubtful
        self.unproved: Facts = {}  # not proved, consequences not yet doubtful (lines 13-16)
        self.S: Facts = {p: set() for p in (*self.I, SAME_AS)}  # disproved
        self.Y: dict[Key, set[Fact]] = {}  # delayed, by pi-image
        self.gamma = Classes(m.order)
        V = {pred: Relation((f,)) for pred, f in m.constants}  # Gamma = P: gamma the identity
        self.sat = Saturation(
            m.ev, m.rule_ids, self.gamma, V, m.internal, gate=self._gate, bind=True
        )  # fmt: skip
        self.backward = Bound(m.ev, self._unrefuted, self._unrefuted)

    def stats(self) -> dict[str, int]:
        return {
            "doubtful": len(self.D), "checked": len(self.C),
            "disproved": sum(len(s) for s in self.S.values()), "rule_instances": self.sat.instances,
        }  # fmt: skip

    def _gate(self, pred: str, f: Fact) -> bool:
        """Algorithm 7: admit f to P if pi(f) is checked, else delay it (Y)."""
        n = self.pi.image(f)
        if (pred, n) in self.C:
            return True
        self.Y.setdefault((pred, n), set()).add(f)
        return False

    def _doubt(self, F: Key) -> None:
        if F not in self.D:
            self.D.add(F)
            self.Dq.append(F)

    def _unrefuted(self, pred: str) -> list:
        r"""The view I \ S that backward chaining reads."""
        rel = self.I.get(pred)
        return [(rel, self.S.get(pred))] if rel else []

    def _unspent(self, pred: str) -> list:
        r"""The view I \ O that lines 13-15 read."""
        rel = self.I.get(pred)
        return [(rel, self.O.get(pred))] if rel else []

    # ------------------------------------------------------------ Algorithm 1
    def run(self, deleted: list[Key]) -> tuple[set[Key], set[Key], dict]:
        r"""Lines 3-17 for E- = `deleted` (already gone from E and its indexes).

        Lines 13-16 run for the unproved doubtful facts in batches, whenever the
        queue empties: one delta evaluation over I \ O finds the same instances,
        each once, as one evaluation per fact.
        """
        pi, store, spent, internal = self.pi, self.I, self.O, self.m.internal
        for pred, f in deleted:
            self._doubt((pred, pi.image(f)))
        while self.Dq:
            while self.Dq:
                F = self.Dq.popleft()
                self.check(F)
                for pred, f in self.Cq[self.settled :]:  # line 7 (a checked fact's status is final)
                    if self.disproved(pred, f):
                        self.S[pred].add(f)
                self.settled = len(self.Cq)
                pred, f = F
                if self.proved(pred, f):
                    continue
                if pred == SAME_AS and f[0] == f[1] and len(pi.members(f[0])) > 1:  # lines 9-11
                    for G in mentioning(store, f[0], internal):
                        if G[1] not in spent.get(G[0], ()):
                            self._doubt(G)
                for c in set(f):  # line 12
                    self._doubt((SAME_AS, (c, c)))
                self.unproved.setdefault(pred, set()).add(f)
            self.consequences()
        return self.propagate()

    def consequences(self) -> None:
        r"""Lines 13-16 for the batch of unproved doubtful facts: their consequences over I \ O."""
        batch, self.unproved = self.unproved, {}
        if not batch:
            return
        for rule, heads in self.m.ev.derive(self.m.rule_ids, self._unspent, self._unspent, batch):
            pred = rule.head.pred
            for h in heads:
                self._doubt((pred, h))
        for pred, fs in batch.items():
            self.O.setdefault(pred, set()).update(fs)  # line 16: its consequences are doubtful now

    def images(self, f: Fact):
        """gamma(F^pi), per position the representatives under gamma of F's classes."""
        pi, find = self.pi, self.gamma.find
        cols = []
        for v in f:
            ms = pi.members(v)
            cols.append({find(x) for x in ms} if len(ms) > 1 else (v,))
        return product(*cols)

    def proved(self, pred: str, f: Fact) -> bool:
        """allProved(F). gamma refines pi: F of singletons is its only image."""
        if f in self.S.get(pred, ()):
            return False
        holds = self.sat.holds
        if self.pi.trivial(f):
            return holds(pred, f)
        return all(holds(pred, g) for g in self.images(f))

    def disproved(self, pred: str, f: Fact) -> bool:
        """allDisproved(F)."""
        holds = self.sat.holds
        if self.pi.trivial(f):
            return not holds(pred, f)
        return not any(holds(pred, g) for g in self.images(f))

    # ------------------------------------------------------------ Algorithm 4
    def check(self, F: Key) -> None:
        """checkProvability(F), by an explicit stack: deep proofs cannot overflow Python's."""
        depth_first(F, self._check)

    def _check(self, F: Key):
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
        C = self.C
        if F in C:
            return
        C.add(F)
        self.Cq.append(F)
        self.saturate()
        pred, f = F
        if self.proved(pred, f):
            return
        m, S, pi, view = self.m, self.S, self.pi, self._unrefuted
        for rule in m.by_head.get(pred, ()):  # lines 32-35
            for _, body in self.backward.backward(rule, (f,), view, view, False):
                for atom, g in zip(rule.positives, body, strict=True):
                    G = (atom.pred, g)
                    if G not in C and atom.pred not in m.internal:  # a checked G: nothing to do
                        yield G
                        if self.proved(pred, f):
                            return
        refuted = S[SAME_AS]
        for c in set(f):  # lines 29-31
            G = (SAME_AS, (c, c))
            if G not in C and (c, c) not in refuted and len(pi.members(c)) > 1:
                yield G
                if self.proved(pred, f):
                    return
        if pred == SAME_AS and f[0] == f[1]:  # lines 25-28
            if all(d in m.explicit_with for d in pi.members(f[0])):
                return
            for G in mentioning(self.I, f[0], m.internal):
                if G not in C and G[1] not in S[G[0]]:
                    yield G
                    if self.proved(pred, f):
                        return

    # ------------------------------------------------------------ Algorithm 5
    def saturate(self) -> None:
        """Lines 36-40 for the facts checked since the last call, then lines 41-50."""
        m, find, image = self.m, self.gamma.find, self.gamma.image
        new: Facts = {}
        while self.saturated < len(self.Cq):
            F = self.Cq[self.saturated]
            self.saturated += 1
            pred, f = F
            if pred == SAME_AS and f[0] == f[1]:  # lines 37-39
                for d in self.pi.members(f[0]):
                    if d in m.explicit_with:
                        new.setdefault(SAME_AS, set()).add((find(d), find(d)))
            for g in m.explicit_of.get(F, ()):  # line 40: F^pi n E ...
                new.setdefault(pred, set()).add(image(g))
            for g in self.Y.pop(F, ()):  # ... and F^pi n Y
                new.setdefault(pred, set()).add(image(g))
        if new:
            self.sat.add(new)

    # ------------------------------------------------------------ Algorithm 2
    def propagate(self) -> tuple[set[Key], set[Key], dict]:
        """Lines 18-21: regroup the checked classes by gamma, then update I.

        Returns the facts that left I, those that entered it, and the classes as
        they were before the regrouping.
        """
        m, pi, store, sat, find = self.m, self.pi, self.I, self.sat, self.gamma.find
        old: dict = {}
        for pred, f in self.Cq:
            if pred == SAME_AS and f[0] == f[1]:
                ms = pi.members(f[0])
                if len(ms) > 1 and any(find(d) != f[0] for d in ms):
                    old[f[0]] = frozenset(ms)
        for c in old:
            pi.regroup(c, find)
        removed = {F for F in self.D if not sat.holds(*F)}
        for pred, f in removed:
            store[pred].discard(f)
        added = set()
        for pred, rel in sat.V.items():
            if pred in m.internal:
                continue
            target = m.relation(pred)
            for f in rel.facts:
                g = pi.image(f)
                if target.add(g):
                    added.add((pred, g))
        if old:
            m.rekey(d for ms in old.values() for d in ms)
        return removed, added, old


def _drop(index: dict, key, item) -> None:
    """Remove `item` from the set index[key], and the key once its set is empty."""
    s = index[key]
    s.discard(item)
    if not s:
        del index[key]
