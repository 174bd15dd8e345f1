"""Forward chaining with rewriting (Motik et al. 2015b), the core of B/F~ (Motik et al. 2015).

Contract. `Saturation` is procedure saturate() of B/F~ (Algorithm 5 lines 41-50,
Algorithm 6 `rewrite`, Algorithm 7 `prove`) run as the engine's one fixpoint
loop, `engine.evaluate.saturate`: each round the compiled delta plans derive
the instances that use the round's new facts, each instance once (the
annotated queries of the paper are the delta plans' "literals before the delta
avoid it"), and `accept` rewrites. V (the processed, up-to-date facts) is a
table of dictionary-encoded relations; gamma (`Classes` over ids) maps every
constant to its representative. When a non-trivial `a ~ b` is derived, the
larger id by value order is merged into the smaller, and every fact of V
mentioning it is *re-encoded*: removed from V (it is outdated, the paper's
P-hat) and its gamma-image queued as new. Rule constants are facts of
internal relations (engine.equality.program.constants_as_facts), so rewriting
a rule (Algorithm 6 lines 55-58) is re-encoding that fact, and its delta
re-evaluates the rule over V. Reflexivity (~4, line 47) is applied to every
new fact in `accept`, not by rules, so it works for any predicate.

The same loop serves two callers (engine.equality.bfeq):

- forward r-materialisation (initial load and insertions): V is the stored I,
  gamma is the stored pi, and every derived fact is admitted;
- B/F~'s saturate(): V and gamma start empty / as the identity, and `gate`
  admits a derived fact only when its pi-image is a checked fact (the caller
  delays the rest, Algorithm 7).

Facts inside are `(pred, int tuple)` pairs or per-predicate sets of int tuples,
as everywhere in the engine; rewrite mode takes positive programs without
built-ins (engine.equality.program.check_program).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import chain

from fluxmat.engine.equality.classes import Classes
from fluxmat.engine.equality.program import SAME_AS
from fluxmat.engine.evaluate import Bound, Derived, Evaluator, saturate
from fluxmat.engine.storage import Fact, Relation

Key = tuple[str, Fact]  # (relation, encoded fact)
Facts = dict[str, set[Fact]]


def mentioning(relations: dict[str, Relation], c: int, skip: frozenset = frozenset()) -> set[Key]:
    """The facts of `relations` (but those of `skip`) with constant id `c` in some position.

    Probes a single-column index per position (built once, then kept live).
    """
    out: set[Key] = set()
    for pred, rel in relations.items():
        if pred in skip or not rel.facts:
            continue
        for col in range(len(next(iter(rel.facts)))):
            for f in rel.index((col,)).get(c, ()):
                out.add((pred, f))
    return out


class Saturation:
    """Algorithm 5 lines 41-50 with `rewrite` (Alg. 6) and `prove` (Alg. 7) over compiled plans.

    P is V plus the round's delta; P-hat needs no set, as an outdated fact is never
    gamma-normal again (classes only merge during a run). `gate(pred, f)` (B/F~
    only) says whether a derived fact is admitted now; the caller keeps the
    others (set Y). `internal` names the relations of rule constants: they are
    re-encoded like any fact but are not facts of J (no reflexivity, not
    expanded). `old_classes` records every class of gamma as it was before this
    run first merged it and, with `track`, `entered` / `dropped` the facts that
    entered and left V (for the change of the expansion). `bind` suits many
    small runs over the same V (B/F~'s checks): the plans' views are built once
    (engine.evaluate.Bound).
    """

    def __init__(
        self,
        ev: Evaluator,
        rules: tuple[int, ...],
        gamma: Classes,
        V: dict[str, Relation],
        internal: frozenset,
        gate: Callable[[str, Fact], bool] | None = None,
        track: bool = False,
        bind: bool = False,
    ) -> None:
        self.rules, self.gamma, self.V = rules, gamma, V
        self.internal, self.gate, self.track = internal, gate, track
        self.ev: Evaluator | Bound = ev
        if bind:  # many small runs (B/F~): build each plan's views once
            for pred in (*ev.analysis.arity, SAME_AS):
                self._rel(pred)
            self.ev = Bound(ev, self.view, self.view)
        self.entered: set[Key] = set()
        self.dropped: set[Key] = set()
        self.old_classes: dict = {}
        self.instances = 0  # rule instances considered (lines 50 and 58)

    def view(self, pred: str) -> list:
        rel = self.V.get(pred)
        return [] if rel is None else [(rel, None)]

    def holds(self, pred: str, f: Fact) -> bool:
        r"""Whether f is in P \ P-hat, once `add` has returned (the delta is then empty)."""
        rel = self.V.get(pred)
        return rel is not None and f in rel.facts

    def add(self, facts: Facts) -> None:
        """P.add for each of `facts` (not gated: lines 39-40), then lines 41-50 to the end."""
        delta = self._absorb(facts.items(), False)
        if delta:
            saturate(self.ev, self.rules, self.view, self.view, delta, self._accept)

    def _accept(self, derived: Derived, _delta: Facts) -> Facts:
        self.instances += sum(len(hs) for _, hs in derived)
        return self._absorb([(rule.head.pred, hs) for rule, hs in derived], True)  # type: ignore[union-attr]

    def _absorb(self, facts: Iterable[tuple[str, Iterable[Fact]]], gated: bool) -> Facts:
        """Lines 42-47 for a round's facts: rewrite (merging), admit, reflexivity; the new ones."""
        image, gate = self.gamma.image, self.gate if gated else None
        new: Facts = {}
        merges: list[Fact] = []
        for pred, fs in facts:
            known = self._rel(pred).facts
            out = new.setdefault(pred, set())
            for f in fs:
                f = image(f)  # line 43: gamma(F); an outdated F is never processed itself
                if f in known or (gate is not None and not gate(pred, f)):
                    continue
                if pred == SAME_AS and f[0] != f[1]:
                    merges.append(f)  # line 45
                else:
                    out.add(f)
        while merges:
            for a, b in merges:
                self._rewrite(a, b, new)
            merges = self._renormalise(new)
        reflexive = self._enter(new)
        if reflexive:  # line 47: proved, so gated like any derived fact
            known, gate = self._rel(SAME_AS).facts, self.gate
            out = {(c, c) for c in reflexive} - known
            if gate is not None:
                out = {f for f in out if gate(SAME_AS, f)}
            self._enter({SAME_AS: out})
            new.setdefault(SAME_AS, set()).update(out)
        return {p: fs for p, fs in new.items() if fs}

    def _enter(self, new: Facts) -> set[int]:
        """Add `new` to V; return the constants of the new facts of J."""
        constants: set[int] = set()
        for pred, fs in new.items():
            if not fs:
                continue
            self._rel(pred).update(fs)
            if self.track:
                self.entered.update((pred, f) for f in fs)
            if pred not in self.internal:
                constants.update(chain.from_iterable(fs))
        return constants

    def _renormalise(self, new: Facts) -> list[Fact]:
        """Re-encode the queued facts after merges; return the non-trivial equalities among them."""
        image, merges = self.gamma.image, []
        for pred, fs in new.items():
            known = self._rel(pred).facts
            out = set()
            for f in fs:
                g = image(f)
                if g in known:
                    continue
                if pred == SAME_AS and g[0] != g[1]:
                    merges.append(g)
                else:
                    out.add(g)
            new[pred] = out
        return merges

    def _rewrite(self, a: int, b: int, new: Facts) -> None:
        """Algorithm 6: merge into the smaller, re-encode the facts of V mentioning the larger.

        The facts re-encoded include rule constants (lines 55-56); their images are
        queued as new, so the delta plans re-evaluate those rules (lines 57-58).
        """
        gamma = self.gamma
        a, b = gamma.find(a), gamma.find(b)
        if a == b:
            return
        for r in (a, b):
            if r not in self.old_classes:
                self.old_classes[r] = frozenset(gamma.members(r))
        gamma.union(a, b)
        c = gamma.find(a)
        d = b if c == a else a
        for pred, f in mentioning(self.V, d):  # lines 53-54 (queued facts: line 43)
            self.V[pred].discard(f)
            if self.track:
                self.dropped.add((pred, f))
            new.setdefault(pred, set()).add(f)
        new.setdefault(SAME_AS, set()).add((c, c))  # gamma(a ~ b)

    def _rel(self, pred: str) -> Relation:
        rel = self.V.get(pred)
        if rel is None:
            rel = self.V[pred] = Relation()
        return rel

