"""Forward chaining with rewriting (Motik et al. 2015b), the core of B/F~ (Motik et al. 2015).

Contract. `Saturation` is procedure saturate() of B/F~ (Algorithm 5 lines 41-50,
Algorithm 6 `rewrite`, Algorithm 7 `prove`): it processes the queue of facts P
into V (the processed, up-to-date facts), applying the rules Gamma and
rewriting to representatives as equalities are derived. gamma (a `Classes`)
maps every constant to its representative; whenever a non-trivial `a ~ b` is
processed, the larger of the two is merged into the smaller, every processed
fact mentioning it becomes outdated (the set P-hat: removed from V, its
gamma-image queued) and every rule mentioning it is rewritten and re-evaluated.

The same loop serves two callers (engine.maintain.bfeq):

- forward r-materialisation (initial load and insertions): V is the stored I,
  gamma is the stored pi, Gamma is pi(P), and every derived fact is queued;
- B/F~'s saturate(): V, gamma and Gamma start empty / as the identity / as P,
  and `gate` admits a derived fact only when its pi-image is a checked fact
  (the rest are delayed by the caller, Algorithm 7).

Facts are Python tuples (pred, *values), as in engine.equality; rules are
compiled once (`compile_rules`) into atoms whose arguments are `Var`s or
constant values. Rule bodies are evaluated with annotated queries
(`solve`): when a fact G is matched to body atom i, atoms before i may not
match G again, so every rule instance is considered once (Theorem 1.2).

Pure Python, no engine storage: rewrite mode takes positive programs without
built-ins (engine.equality.check_program).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator

from engine.equality import SAME_AS, Classes, PyFact, order_key
from engine.syntax import Atom, Const, Rule

_EMPTY: frozenset = frozenset()


class RVar:
    """A rule variable: one object per variable of a rule, hashed by identity (fast keys)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


CAtom = tuple  # (pred, args): each argument an RVar or a constant value
Plan = list  # [(atom, neq)]: an annotated query in evaluation order


class CRule:
    """A compiled rule with its join orders: after matching body atom i, from the head, whole."""

    __slots__ = ("head", "body", "constants", "after", "from_head", "whole")

    def __init__(self, head: CAtom, body: tuple[CAtom, ...]) -> None:
        self.head, self.body = head, body
        self.constants = {t for a in (head, *body) for t in a[1] if not isinstance(t, RVar)}
        self.after = [
            _order([(b, j < i) for j, b in enumerate(body) if j != i], _vars(body[i]))
            for i in range(len(body))
        ]  # Q of (2), annotated: atoms before i may not match the fact matched to i
        self.from_head = _order([(b, False) for b in body], _vars(head))
        self.whole = _order([(b, False) for b in body], set())

    def rewritten(self, find: Callable) -> CRule:
        """gamma(rule): every constant replaced by its representative."""

        def atom(a: CAtom) -> CAtom:
            return (a[0], tuple(t if isinstance(t, RVar) else find(t) for t in a[1]))

        return CRule(atom(self.head), tuple(atom(b) for b in self.body))


def _vars(atom: CAtom) -> set:
    return {t for t in atom[1] if isinstance(t, RVar)}


def _order(atoms: Plan, bound: set) -> Plan:
    """Most-bound atom first, then the next given what that binds, and so on."""
    out, bound, left = [], set(bound), list(atoms)
    while left:
        best = max(
            left,
            key=lambda a: (
                sum(1 for t in a[0][1] if t in bound or not isinstance(t, RVar)),
                -len(a[0][1]),
            ),
        )
        left.remove(best)
        out.append(best)
        bound |= _vars(best[0])
    return out


def compile_rules(rules: Iterable[Rule]) -> list[CRule]:
    """Rules over RVars and constant values; each `_` becomes a variable of its own."""
    return [_compile(r) for r in rules]


def _compile(rule: Rule) -> CRule:
    names: dict[str, RVar] = {}

    def term(t):
        if isinstance(t, Const):
            return t.value
        if t.name == "_":
            return RVar("_")
        return names.setdefault(t.name, RVar(t.name))

    def atom(a: Atom) -> CAtom:
        return (a.pred, tuple(term(t) for t in a.args))

    return CRule(atom(rule.head), tuple(atom(b) for b in rule.body))  # type: ignore[arg-type]


def unify(args: tuple, values: tuple, sigma: dict) -> dict | None:
    """Extend sigma so that `args` match `values`; None if they cannot."""
    s = None
    for t, v in zip(args, values, strict=True):
        if isinstance(t, RVar):
            bound = (s or sigma).get(t, _EMPTY)
            if bound is _EMPTY:
                if s is None:
                    s = dict(sigma)
                s[t] = v
            elif bound != v:
                return None
        elif t != v:
            return None
    return sigma if s is None else s


def ground(atom: CAtom, sigma: dict) -> PyFact:
    return (atom[0], *(sigma[t] if isinstance(t, RVar) else t for t in atom[1]))


class Store:
    """A set of facts with hash indexes on (pred), (pred, position, value) and (constant)."""

    __slots__ = ("facts", "by_pred", "by_arg", "by_const")

    def __init__(self, facts: Iterable[PyFact] = ()) -> None:
        self.facts: set[PyFact] = set()
        self.by_pred: dict[str, set[PyFact]] = {}
        self.by_arg: dict[tuple, set[PyFact]] = {}
        self.by_const: dict[object, set[PyFact]] = {}
        for f in facts:
            self.add(f)

    def __len__(self) -> int:
        return len(self.facts)

    def __iter__(self) -> Iterator[PyFact]:
        return iter(self.facts)

    def __contains__(self, f) -> bool:
        return f in self.facts

    def add(self, f: PyFact) -> bool:
        if f in self.facts:
            return False
        self.facts.add(f)
        pred = f[0]
        self.by_pred.setdefault(pred, set()).add(f)
        for i, v in enumerate(f[1:]):
            self.by_arg.setdefault((pred, i, v), set()).add(f)
        for v in set(f[1:]):
            self.by_const.setdefault(v, set()).add(f)
        return True

    def discard(self, f: PyFact) -> bool:
        if f not in self.facts:
            return False
        self.facts.discard(f)
        pred = f[0]
        self.by_pred[pred].discard(f)
        for i, v in enumerate(f[1:]):
            drop(self.by_arg, (pred, i, v), f)
        for v in set(f[1:]):
            drop(self.by_const, v, f)
        return True

    def mentioning(self, c) -> set[PyFact]:
        """The facts with constant `c` in some position (live: do not mutate while iterating)."""
        return self.by_const.get(c, _EMPTY)  # type: ignore[return-value]

    def candidates(self, pred: str, args: tuple, sigma: dict):
        """The facts of `pred` agreeing with the bound arguments of `args` at the best index.

        With every argument bound this is a membership test.
        """
        best = None
        values = []
        for i, t in enumerate(args):
            v = sigma.get(t, _EMPTY) if isinstance(t, RVar) else t
            if v is _EMPTY:
                values = None
                continue
            if values is not None:
                values.append(v)
            found = self.by_arg.get((pred, i, v))
            if not found:
                return _EMPTY
            if best is None or len(found) < len(best):
                best = found
        if values is not None and best is not None:
            fact = (pred, *values)
            return (fact,) if fact in self.facts else _EMPTY
        return self.by_pred.get(pred, _EMPTY) if best is None else best


def drop(index: dict, key, f) -> None:
    """Remove f from the set index[key], and the key once its set is empty."""
    s = index[key]
    s.discard(f)
    if not s:
        del index[key]


def solve(
    plan: Plan,
    store: Store,
    sigma: dict,
    exclude: set | frozenset = _EMPTY,
    avoid: PyFact | None = None,
    k: int = 0,
) -> Iterator[dict]:
    r"""[store \ exclude].eval(Q, {avoid}, sigma) for Q = plan[k:]: every extension of sigma.

    An atom annotated True (`neq`) must not be matched to `avoid`.
    """
    (pred, args), neq = plan[k]
    last = k + 1 == len(plan)
    for f in store.candidates(pred, args, sigma):
        if (exclude and f in exclude) or (neq and f == avoid):
            continue
        s = unify(args, f[1:], sigma)
        if s is not None:
            if last:
                yield s
            else:
                yield from solve(plan, store, s, exclude, avoid, k + 1)


def instances(plan: Plan, store: Store, sigma: dict, exclude=_EMPTY, avoid=None) -> Iterator[dict]:
    """`solve`, also for an empty query (one instance: sigma)."""
    if not plan:
        return iter((sigma,))
    return solve(plan, store, sigma, exclude, avoid)


def body_matches(rules_by_pred: dict, fact: PyFact) -> Iterator[tuple[CRule, Plan, dict]]:
    """Pi.matchBody(F): (rule, annotated rest of the body Q (2), sigma) per body atom F matches."""
    for rule, i in rules_by_pred.get(fact[0], ()):
        sigma = unify(rule.body[i][1], fact[1:], {})
        if sigma is not None:
            yield rule, rule.after[i], sigma


def index_bodies(rules: list[CRule]) -> dict[str, list[tuple[CRule, int]]]:
    out: dict[str, list] = {}
    for rule in rules:
        for i, b in enumerate(rule.body):
            out.setdefault(b[0], []).append((rule, i))
    return out


def is_equality(f: PyFact) -> bool:
    return f[0] == SAME_AS and len(f) == 3


class Saturation:
    """Algorithm 5 lines 41-50 with `rewrite` (Alg. 6) and `prove` (Alg. 7).

    P is V u `pending`; P-hat is `outdated`. `gate(F)` (B/F~ only) says whether a
    derived fact is admitted to P now; the caller keeps the others (set Y).
    With `track`, `old_classes` records every class of gamma as it was before
    this run first merged it (for computing the change of the expansion).
    """

    def __init__(
        self,
        rules: list[CRule],
        gamma: Classes,
        store: Store,
        gate: Callable[[PyFact], bool] | None = None,
        track: bool = False,
        guard: Callable[[Saturation], None] | None = None,
    ) -> None:
        self.gamma, self.V, self.gate, self.guard = gamma, store, gate, guard
        self.rules = list(rules)
        self.by_body = index_bodies(self.rules)
        self.pending: set[PyFact] = set()
        self.queue: deque[PyFact] = deque()
        self.outdated: set[PyFact] = set()
        self.entered: set[PyFact] = set()  # facts that entered V during this object's life
        self.dropped: set[PyFact] = set()  # facts rewrite() took out of V (outdated)
        self.old_classes: dict | None = {} if track else None
        self.instances = 0  # rule instances considered (lines 50 and 58)

    def holds(self, f: PyFact) -> bool:
        r"""Whether f is in P \ P-hat, once `run` has returned (the queue is then empty)."""
        return f in self.V.facts

    def add(self, f: PyFact) -> None:
        """P.add(F)."""
        if f in self.V.facts or f in self.pending or f in self.outdated:
            return
        self.pending.add(f)
        self.queue.append(f)

    def prove(self, f: PyFact) -> None:
        """Algorithm 7 (the caller delays what `gate` refuses)."""
        if self.gate is None or self.gate(f):
            self.add(f)

    def run(self) -> None:
        """Lines 41-50: process P until it is exhausted."""
        gamma, V, queue, prove, guard = self.gamma, self.V, self.queue, self.prove, self.guard
        popped = 0
        while queue:
            popped += 1
            if guard is not None and not popped & 1023:
                guard(self)  # engine.limits: raises when the budget ran out
            f = queue.popleft()
            self.pending.discard(f)
            g = gamma.normal(f)
            if g != f:  # line 44: outdated before it was processed
                self.outdated.add(f)
                self.add(g)
                continue
            V.add(f)
            self.entered.add(f)
            if is_equality(f) and f[1] != f[2]:
                self._rewrite(f[1], f[2])  # line 45
                continue
            for c in set(f[1:]):  # line 47: reflexivity
                prove((SAME_AS, c, c))
            for rule, q, sigma in body_matches(self.by_body, f):  # lines 48-50
                for tau in instances(q, V, sigma, avoid=f):
                    self.instances += 1
                    prove(ground(rule.head, tau))

    def _rewrite(self, a, b) -> None:
        """Algorithm 6: merge the larger constant into the smaller, outdate, re-evaluate rules."""
        c, d = (a, b) if order_key(a) < order_key(b) else (b, a)
        gamma = self.gamma
        if self.old_classes is not None:
            for r in (c, d):
                if r not in self.old_classes:
                    self.old_classes[r] = frozenset(gamma.members(r))
        gamma.union(c, d)
        for f in list(self.V.mentioning(d)):  # lines 53-54 (queued facts: line 44)
            self.V.discard(f)
            self.dropped.add(f)
            self.outdated.add(f)
            self.add(gamma.normal(f))
        changed = False
        for k, rule in enumerate(self.rules):  # lines 55-58
            if d in rule.constants:
                self.rules[k] = rule = rule.rewritten(gamma.find)
                changed = True
                for tau in instances(rule.whole, self.V, {}):
                    self.instances += 1
                    self.prove(ground(rule.head, tau))
        if changed:
            self.by_body = index_bodies(self.rules)
