"""Stage 4: execution -- the rule-matching operator and the one fixpoint loop.

`Evaluator.derive(rules, Ip, In, P, N)` is the operator Pi<Ip, In |> P, N> of
Hu, Motik & Horrocks (2018): the multiset with one head per instance of each rule
whose positive body holds in `Ip`, whose negated atoms are absent from `In`, and
that uses at least one fact of `P` (positive) or `N` (negated). Every instance is
produced exactly once: the delta plan of literal i requires literals before i to
avoid the delta sets. With `P = N = None` it is the plain Pi<Ip, In>.

`saturate` is the single semi-naive loop every algorithm uses: it feeds the facts
it is given back into `derive` until an `accept` callback returns nothing new.
Specialised modules (engine.modules) take part in the same loop: each round
every module step sees the round's facts of its relation, minus those it
produced itself in the previous round (Hu, Motik & Horrocks 2019, Algorithm 2).

Full and delta plans of cyclic rules are evaluated over their hypertree
decompositions (engine.hypertree) unless the evaluator is built with
`hypertree=False`; results are the same multisets either way.

Views map a predicate to a list of sources `(Relation, excluded)`: the union of
each relation minus its excluded set (a set, several sets, or None). A `Bound`
evaluator builds each plan's views once, for callers that evaluate thousands of
one-fact deltas over sources that change only in place (B/F~'s checks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace

from fluxmat.engine.analysis import Analysis
from fluxmat.engine.hypertree import compile_decomposed
from fluxmat.engine.plans import AnyOf, Plan, compile_plan
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.storage import Dictionary, Fact, Relation

Source = tuple[Relation, object]
View = Callable[[str], list[Source]]
Facts = dict[str, set[Fact]] | dict[str, Relation]
Derived = list[tuple[AnalysedRule, list[Fact]]]  # (modules add (Module, set) entries)
Step = Callable[[set[Fact]], set[Fact]]
EMPTY: frozenset = frozenset()


@dataclass
class Counts:
    """Work counters accumulated by an evaluator; reports take snapshots of them."""

    applications: Counter = field(default_factory=Counter)  # rule id -> instances
    module_work: Counter = field(default_factory=Counter)  # module name -> candidate facts
    backward_queries: int = 0
    backward_matches: int = 0
    backward_reads: int = 0  # facts read while evaluating rules backwards
    iterations: int = 0
    work: int = 0  # rule applications + module inferences, in total (engine.limits)

    def snapshot(self) -> Counts:
        """A copy, for measuring the work done after it (reports, engine.maintainer)."""
        return replace(self, applications=Counter(self.applications), module_work=Counter(self.module_work))

    def rewind(self, to: Counts) -> None:
        """Forget the work done since the snapshot `to` (in place: evaluators share this)."""
        for f in fields(self):
            setattr(self, f.name, getattr(to, f.name))


def _exclusion(excl, extra):
    sets = [s for s in (excl, extra) if s]
    flat = []
    for s in sets:
        if isinstance(s, AnyOf):
            flat.extend(s.sets)
        else:
            flat.append(s)
    if not flat:
        return None
    return flat[0] if len(flat) == 1 else AnyOf(flat)


def _container(rel: Relation, cols):
    return rel.facts if cols is None else rel.index(cols)


class Evaluator:
    """Compiles plans lazily (once each) and runs them over views."""

    def __init__(
        self,
        analysis: Analysis,
        dictionary: Dictionary,
        size: Callable[[str], int],
        hypertree: bool = True,
        counts: Counts | None = None,
    ):
        """An evaluator over relations whose sizes `size` gives (for join orders).

        `hypertree` evaluates cyclic rules over their decompositions
        (engine.hypertree); the work is added to `counts` (a fresh `Counts` if none).
        """
        self.analysis = analysis
        self.hypertree = hypertree
        self.dictionary = dictionary
        self.size = size
        self.plans: dict[tuple[int, str, int | None], Plan] = {}
        self.counts = Counts() if counts is None else counts
        self.guard: Callable[[], None] | None = None  # called between fixpoint rounds (limits)
        # rule ids grouped by the predicates of their literals, for delta dispatch
        self.by_literal: dict[str, list[tuple[int, int]]] = {}
        for r in analysis.rules:
            for i, a in enumerate(r.positives + r.negatives):
                self.by_literal.setdefault(a.pred, []).append((r.id, i))

    def plan(
        self, rule: AnalysedRule, kind: str, delta: int | None = None, instances: bool = False
    ) -> Plan:
        key = (rule.id, kind, delta, instances)
        p = self.plans.get(key)
        if p is None:
            dec = self.analysis.decompositions.get(rule.id) if self.hypertree else None
            if dec is not None and kind != "backward":
                p = compile_decomposed(
                    rule, dec, kind, delta, self.dictionary, self.size, instances
                )
            else:
                p = compile_plan(rule, kind, delta, self.dictionary, self.size, instances)
            self.plans[key] = p
        return p

    # -- views
    def _views(
        self, plan: Plan, Ip: View, In: View, P, N, before: int, live: bool = False
    ) -> list | None:
        """The views of `plan`'s literals (None when a positive one has no source).

        `live` keeps every source and exclusion set as given, empty ones included,
        so that the views stay valid while those objects change (`Bound`).
        """
        rule = plan.rule
        npos = len(rule.positives)
        views: list = [None] * len(plan.literal_preds)
        for need in plan.needs:
            i = need.lit
            pred = plan.literal_preds[i]
            if i < npos:
                extra = P.get(pred) if (P is not None and i < before) else None
                srcs = [
                    (_container(r, need.cols), x if live else _exclusion(x, extra))
                    for r, x in Ip(pred) if live or r
                ]  # fmt: skip
                if not srcs:
                    return None
                views[i] = srcs
            else:
                extra = N.get(pred, EMPTY) if (N is not None and i < before) else EMPTY
                srcs = [(r.facts, x if live else _exclusion(x, None)) for r, x in In(pred) if live or r]
                views[i] = (srcs, extra or EMPTY)
        return views

    def _run(self, plan: Plan, D, views, out: list) -> None:
        before = len(out)
        plan.run(D, views, out, self.dictionary.values, self.dictionary.intern)
        n = len(out) - before
        counts = self.counts
        counts.applications[plan.rule.id] += n
        counts.work += n

    # -- the operator
    def derive(
        self,
        rule_ids: Iterable[int],
        Ip: View,
        In: View,
        P: Facts | None = None,
        N: Facts | None = None,
        instances: bool = False,
    ) -> Derived:
        """Pi<Ip, In |> P, N> as (rule, heads) pairs; P = N = None gives Pi<Ip, In>.

        With `instances`, each rule's list holds `(head, positive facts, negated
        facts)` triples instead of heads.
        """
        rules = self.analysis.rules
        result: Derived = []
        if P is None and N is None:
            for rid in rule_ids:
                rule = rules[rid]
                plan = self.plan(rule, "full", None, instances)
                views = self._views(plan, Ip, In, None, None, 0)
                if views is None:
                    continue
                out: list[Fact] = []
                self._run(plan, None, views, out)
                if out:
                    result.append((rule, out))
            return result
        P = P or {}
        N = N or {}
        Ps, Ns = _sets(P), _sets(N)

        def views(plan: Plan, lit: int) -> list | None:
            if not self._worth(plan.rule, lit, Ip, P):
                return None
            return self._views(plan, Ip, In, Ps, Ns, lit)

        return self._deltas(set(rule_ids), P, N, instances, views)

    def _deltas(self, wanted: set[int], P: Facts, N: Facts, instances: bool, views) -> Derived:
        """The delta plans of the `wanted` rules for P and N, over `views(plan, lit)`."""
        rules = self.analysis.rules
        outs: dict[int, list[Fact]] = {}
        for deltas, positive in ((P, True), (N, False)):
            for pred, dfacts in deltas.items():
                if not dfacts:
                    continue
                dset = dfacts.facts if isinstance(dfacts, Relation) else dfacts
                for rid, lit in self.by_literal.get(pred, ()):
                    rule = rules[rid]
                    if rid not in wanted or (lit < len(rule.positives)) != positive:
                        continue
                    plan = self.plan(rule, "delta", lit, instances)
                    v = views(plan, lit)
                    if v is not None:
                        self._run(plan, dset, v, outs.setdefault(rid, []))
        return [(rules[rid], out) for rid, out in outs.items() if out]

    def _worth(self, rule: AnalysedRule, lit: int, Ip: View, P) -> bool:
        """False when an earlier positive literal can only match delta facts (Ip = P there)."""
        for j in range(min(lit, len(rule.positives))):
            pred = rule.positives[j].pred
            d = P.get(pred)
            if d and sum(len(r) for r, _ in Ip(pred)) <= len(d):
                return False
        return True

    def backward(
        self, rule: AnalysedRule, heads: Iterable[Fact], Ip: View, In: View, first: bool
    ) -> list[tuple[Fact, tuple]]:
        """Instances of `rule` over (Ip, In) deriving each of `heads`: (head, positive facts)."""
        plan = self.plan(rule, "backward")
        return self._backward(plan, self._views(plan, Ip, In, None, None, 0), heads, first)

    def _backward(self, plan: Plan, views, heads: Iterable[Fact], first: bool) -> list:
        self.counts.backward_queries += 1
        if views is None:
            return []
        out: list = []
        before = plan.work[0]
        for h in heads:
            plan.run((h,), views, out, self.dictionary.values, self.dictionary.intern, first)
        self.counts.backward_matches += len(out)
        self.counts.backward_reads += plan.work[0] - before
        return out


class Bound:
    """An evaluator whose views are fixed: each plan's views are built once, then reused.

    For callers that evaluate many small deltas or single heads (B/F~ checks one
    fact at a time), where building views costs more than running the plan.
    `Ip(pred)` and `In(pred)` must return the same relations and exclusion sets
    for the object's whole life (mutated in place, never replaced); the views
    then follow their changes. `derive` and `backward` take the same arguments
    as the `Evaluator`'s and hand calls with other views (or negated deltas,
    whole instances, no delta) to it, so `saturate` runs on either.
    """

    def __init__(self, ev: Evaluator, Ip: View, In: View) -> None:
        self.ev, self.Ip, self.In, self.counts = ev, Ip, In, ev.counts
        self._cache: dict[int, list | None] = {}

    @property
    def guard(self) -> Callable[[], None] | None:
        """The evaluator's guard (engine.limits), for `saturate`."""
        return self.ev.guard

    def _views(self, plan: Plan) -> list | None:
        key = id(plan)  # plans live as long as the evaluator's cache
        if key not in self._cache:
            self._cache[key] = self.ev._views(plan, self.Ip, self.In, None, None, 0, live=True)
        return self._cache[key]

    def derive(self, rule_ids, Ip: View, In: View, P=None, N=None, instances=False) -> Derived:
        """As `Evaluator.derive`."""
        if P is None or N or instances or Ip != self.Ip or In != self.In:
            return self.ev.derive(rule_ids, Ip, In, P, N, instances)
        Ps = _sets(P)

        def views(plan: Plan, lit: int) -> list | None:
            v = self._views(plan)
            if v is None or not lit:
                return v
            v = list(v)
            for j in range(lit):  # literals before the delta avoid it
                d = Ps.get(plan.literal_preds[j])
                if d and v[j] is not None:
                    v[j] = [(c, _exclusion(x, d)) for c, x in v[j]]
            return v

        return self.ev._deltas(set(rule_ids), P, {}, False, views)

    def backward(self, rule: AnalysedRule, heads, Ip: View, In: View, first: bool) -> list:
        """As `Evaluator.backward`."""
        if Ip != self.Ip or In != self.In:
            return self.ev.backward(rule, heads, Ip, In, first)
        plan = self.ev.plan(rule, "backward")
        return self.ev._backward(plan, self._views(plan), heads, first)


def _sets(deltas: Facts) -> dict[str, set[Fact]]:
    return {p: (d.facts if isinstance(d, Relation) else d) for p, d in deltas.items()}


def saturate(
    ev: Evaluator | Bound,
    rule_ids: tuple[int, ...],
    Ip: View,
    In: View,
    delta: dict[str, set[Fact]],
    accept: Callable[[Derived, dict[str, set[Fact]]], dict[str, set[Fact]]],
    modules: Sequence[tuple[object, Step]] = (),
    full: bool = False,
    own: dict | None = None,
    instances: bool = False,
) -> None:
    """The semi-naive fixpoint loop shared by every algorithm.

    Repeats `delta = accept(derive(rule_ids, Ip, In |> delta), delta)` until `delta`
    is empty. `accept` updates the algorithm's state (so that the views see it) and
    returns the facts that are new in this round.

    `modules` are `(module, step)` pairs: each round, `step` gets the round's
    facts of `module.pred` minus those it returned in the previous round (`own`
    gives them for the first round) and returns facts that `accept` receives as
    `(module, facts)` entries of the derived list. With `full`, the rules of the
    first round are evaluated over all of Ip (Pi<Ip, In>) instead of the delta.
    With `instances`, rules derive `(head, positive facts, negated facts)` triples.
    `ev.guard`, when set, is called before every round; it raises to stop the
    loop (engine.limits).
    """
    own = dict(own or {})
    guard = ev.guard
    while any(delta.values()):
        if guard is not None:
            guard()
        ev.counts.iterations += 1
        if not rule_ids:
            derived: Derived = []
        elif full:
            derived = ev.derive(rule_ids, Ip, In, instances=instances)
            full = False
        else:
            derived = ev.derive(rule_ids, Ip, In, delta, None, instances)
        for module, step in modules:
            fs = delta.get(module.pred)  # type: ignore[attr-defined]
            mine = own.get(module)
            if fs and mine:
                fs = fs - mine
            out = step(fs) if fs else set()
            own[module] = out
            if out:
                derived.append((module, out))  # type: ignore[arg-type]
        delta = accept(derived, delta)
