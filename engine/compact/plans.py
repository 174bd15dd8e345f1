"""The arrays core's compiled program: components in dependency order and their join plans.

Built once from the engine's analysis (engine.analysis): its strata are the
components (predicates without rules come first, one component each), its
rules' positive and negated atoms the plans' atoms, and rule constants
become term ids through the maintainer's dictionary.

A plan starts at one atom of a rule (a body position, where a delta enters,
or the head, to rederive given facts) and joins the other body atoms in a
greedy order: next the atom with the most bound columns, fully bound ones
(a hash-table probe) first. A negated atom is an anti-probe, placed as soon
as every column is bound. Each step says per column where its value comes
from (kernels.join_step's `src`) and which index answers it.

Not here: running plans or maintaining anything (engine.compact.core).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from fluxmat.engine.analysis import Analysis
from fluxmat.engine.compact.builtins import BuiltinStep, Runtime, Spec, head_var, specs, step
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.syntax import Atom, BinOp, Call, Var

HEAD = -1  # the position of a plan that starts at the head
FULL, INDEX, SCAN, ANTI = 0, 1, 2, 3  # how a step finds its rows (kernels.join_step)

Term = tuple[str, object]  # ("var", name) or ("const", term id)
Literal = tuple[str, tuple[Term, ...], bool]  # predicate, terms, negated


@dataclass
class Step:
    pred: str
    position: int  # the atom's body position (HEAD for the head)
    src: np.ndarray
    cval: np.ndarray
    outslot: np.ndarray
    mask: tuple[int, ...]  # the bound columns
    how: int = FULL
    negated: bool = False
    k: int = -1  # the index's number in its relation


@dataclass
class Plan:
    rule: int  # the analysed rule's id
    start: Step
    steps: list[Step]
    nslots: int
    head_pred: str
    head_src: np.ndarray
    head_cval: np.ndarray
    # built-ins to apply after the start (key 0) or after step i - 1 (key i) (engine.compact.builtins)
    after: dict[int, list[BuiltinStep]] = field(default_factory=dict)

    @property
    def position(self) -> int:
        return self.start.position


@dataclass
class Component:
    preds: list[str]
    recursive: bool
    counted: dict[str, dict[str, list[Plan]]] = field(
        default_factory=dict
    )  # by head, then delta predicate
    rec_starts: list[Plan] = field(
        default_factory=list
    )  # recursive rules from a position in this component
    lower_starts: list[Plan] = field(default_factory=list)  # recursive rules from a lower position
    head_plans: list[Plan] = field(default_factory=list)  # recursive rules from the head
    inputs: set[str] = field(default_factory=set)  # the body predicates of its rules
    stc: bool = (
        False  # one relation closed by a symmetric and a transitive rule only: a closure module
    )
    # one binary relation whose only recursive rule is a linear transitive closure of a lower
    # relation: (rule id, the lower relation, left-linear) (`linear_closure`; engine.compact.reach)
    reach: tuple[int, str, bool] | None = None


def _step(lit: Literal, position: int, slots: dict[str, int]) -> Step:
    """An atom's step given the variables bound so far (`slots`, extended with the ones it binds)."""
    pred, terms, negated = lit
    n = len(terms)
    src = np.full(n, -2, np.int64)
    cval = np.zeros(n, np.int64)
    outslot = np.full(n, -1, np.int64)
    first: dict[str, int] = {}
    for j, (kind, v) in enumerate(terms):
        if kind == "const":
            src[j], cval[j] = -1, v
        elif v in slots:
            src[j] = slots[v]
        elif v in first:
            src[j] = -3 - first[v]
        else:
            first[v] = j
    for v, j in first.items():
        outslot[j] = slots[v] = len(slots)
    mask = tuple(j for j in range(n) if src[j] >= -1)
    how = FULL if len(mask) == n else (SCAN if not mask else INDEX)
    if negated and position != HEAD:
        how = ANTI
    return Step(pred, position, src, cval, outslot, mask, how, negated)


def _rank(lit: Literal, slots, later: frozenset[str]) -> tuple[int, int, bool]:
    """Greedy order: fully bound atoms first (anti-probes before probes), then by bound columns.

    On a tie, an atom whose predicate is not in `later` (a recursive rule's own
    component) goes first: a closure is larger than the relations it is built
    from, so probing the lower relation first keeps the bindings few (deriving
    `path(x, z)` from the head of `path(X, Z) :- path(X, Y), edge(Y, Z)` looks
    at the edges into z, not at every path from x).
    """
    terms = lit[1]
    b = sum(1 for kind, v in terms if kind == "const" or v in slots)
    full = b == len(terms)
    lower = lit[0] not in later
    if lit[2]:
        return (3 if full else -1, b, lower)
    return (2 if full else 1, b, lower)


def _place(pending: list[Spec], slots: dict[str, int], rt: Runtime | None) -> list[BuiltinStep]:
    """The built-ins whose inputs are bound now, in order (an assignment may make later ones ready)."""
    out = []
    progress = True
    while progress:
        progress = False
        for spec in list(pending):
            if spec.inputs() <= slots.keys():
                assert rt is not None
                out.append(step(spec, slots, rt))
                pending.remove(spec)
                progress = True
    return out


def plan(rid: int, head: Literal, body: list[Literal], start: int,
         builtins: tuple[list[Spec], Runtime | None] = ([], None),
         later: frozenset[str] = frozenset()) -> Plan:  # fmt: skip
    """The rule's plan starting at body position `start` (or HEAD); `start` binds as a positive atom.

    `builtins`: the rule's built-ins (engine.compact.builtins.specs) and their runtime; each
    is placed as soon as its inputs are bound. `later`: predicates joined after the others
    on a tie (`_rank`).
    """
    slots: dict[str, int] = {}
    pending, rt = list(builtins[0]), builtins[1]
    first_lit = head if start == HEAD else body[start]
    first = _step((first_lit[0], first_lit[1], False), start, slots)
    first.negated = start != HEAD and body[start][2]
    after = {0: _place(pending, slots, rt)}
    rest = [(i, lit) for i, lit in enumerate(body) if i != start]
    steps = []
    while rest:
        best = max(range(len(rest)), key=lambda x: _rank(rest[x][1], slots, later))
        i, lit = rest.pop(best)
        steps.append(_step(lit, i, slots))
        after[len(steps)] = _place(pending, slots, rt)
    assert not pending, "the analysis binds every built-in's inputs"
    hp, hterms, _ = head
    hsrc = np.array([-1 if kind == "const" else slots[v] for kind, v in hterms], np.int64)
    hval = np.array([v if kind == "const" else 0 for kind, v in hterms], np.int64)
    after = {k: v for k, v in after.items() if v}
    return Plan(rid, first, steps, max(len(slots), 1), hp, hsrc, hval, after)


def literals(rule: AnalysedRule, term_id: Callable[[object], int]) -> tuple[Literal, list[Literal]]:
    """A rule's head and body (positives, then negated atoms) as plan literals.

    A head expression is the hidden variable its assignment binds (engine.compact.builtins.specs).
    """

    def term(j: int, t) -> Term:
        if isinstance(t, Var):
            return ("var", t.name)
        if isinstance(t, BinOp | Call):
            return ("var", head_var(j))
        return ("const", term_id(t.value))

    def lit(atom: Atom, negated: bool) -> Literal:
        return (atom.pred, tuple(term(j, t) for j, t in enumerate(atom.args)), negated)

    body = [lit(a, False) for a in rule.positives] + [lit(a, True) for a in rule.negatives]
    return lit(rule.head, False), body


def rule_builtins(rule: AnalysedRule, rt: Runtime | None) -> tuple[list[Spec], Runtime | None]:
    """`plan`'s `builtins` argument for a rule (`rt` may be None when the program has none)."""
    return specs(rule), rt


def runtime(analysis: Analysis, term_id) -> Runtime | None:
    """The built-ins' runtime for a program's plans, None when no rule has a built-in."""
    return Runtime(term_id) if uses_builtins(analysis.rules) else None


def uses_builtins(rules) -> bool:
    """Whether any of these analysed rules has a comparison, an assignment or an expression in its head."""
    return any(r.builtins or any(isinstance(t, BinOp | Call) for t in r.head.args) for r in rules)


def has_builtins(comps: list[Component]) -> bool:
    """Whether any plan of these components applies a built-in."""
    return any(
        pl.after for c in comps for by in c.counted.values() for pls in by.values() for pl in pls
    ) or any(pl.after for c in comps for pl in (*c.rec_starts, *c.lower_starts, *c.head_plans))


def _components(analysis: Analysis, stc: set[int]) -> tuple[list[Component], dict[str, int]]:
    edb = sorted(p for p in analysis.arity if analysis.stratum_of.get(p, 0) == 0)
    comps = [Component([p], False) for p in edb]
    comps += [
        Component(sorted(s.preds), bool(s.recursive), stc=s.index in stc) for s in analysis.strata
    ]
    comp_of = {p: i for i, c in enumerate(comps) for p in c.preds}
    return comps, comp_of


def closure_strata(analysis: Analysis) -> set[int]:
    """Strata that are one relation whose recursive rules are exactly an stc module's (engine.analysis)."""
    out = set()
    for spec in analysis.modules:
        s = analysis.strata[spec.stratum - 1]
        if spec.kind == "stc" and s.preds == {spec.pred} and set(s.recursive) == set(spec.rules):
            out.add(s.index)
    return out


def linear_closure(pred: str, head: Literal, body: list[Literal]) -> tuple[str, bool] | None:
    """(e, left) when the rule is a linear transitive closure of `e`; None for any other rule.

    Right-linear (left False) `pred(X, Z) :- pred(X, Y), e(Y, Z)` or left-linear
    `pred(X, Z) :- e(X, Y), pred(Y, Z)`, in either body order, with X, Y, Z
    distinct variables and `e` another binary relation.
    """
    own = [terms for p, terms, neg in body if p == pred and not neg]
    low = [(p, terms) for p, terms, neg in body if p != pred and not neg]
    if len(body) != 2 or len(own) != 1 or len(low) != 1:
        return None
    e, terms = low[0][0], (*head[1], *own[0], *low[0][1])
    if len(head[1]) != 2 or len(terms) != 6 or any(kind != "var" for kind, _ in terms):
        return None
    h1, h2, a, b, c, d = terms
    if (a, b, d) == (h1, c, h2) and len({a, b, d}) == 3:
        return e, False
    if (c, d, b) == (h1, a, h2) and len({c, d, b}) == 3:
        return e, True
    return None


def _mark_closures(comps: list[Component], recursive: dict[str, list]) -> None:
    """Set `reach` of each one-relation component whose only recursive rule is a linear closure."""
    for c in comps:
        rules = recursive.get(c.preds[0], [])
        if c.stc or len(c.preds) != 1 or len(rules) != 1:
            continue
        rid, head, body, builtins = rules[0]
        found = None if builtins else linear_closure(c.preds[0], head, body)
        if found is not None:
            c.reach = (rid, *found)


def compile_program(
    analysis: Analysis, term_id, closures: bool
) -> tuple[list[Component], list[Plan], dict]:
    """Components in dependency order with their plans; every plan; the index masks per relation."""
    comps, comp_of = _components(analysis, closure_strata(analysis) if closures else set())
    masks: dict[str, list] = {c.preds[0]: [(0,), (1,)] for c in comps if c.stc}
    plans: list[Plan] = []
    rt = runtime(analysis, term_id)
    recursive: dict[str, list] = {}
    for r in analysis.rules:
        head, body = literals(r, term_id)
        bi = rule_builtins(r, rt)
        if r.recursive:
            recursive.setdefault(head[0], []).append((r.id, head, body, bool(bi[0])))
        c = comps[comp_of[head[0]]]
        c.inputs.update(p for p, _, _ in body)
        inside = [comp_of[p] == comp_of[head[0]] for p, _, _ in body]
        later = frozenset(c.preds) if r.recursive else frozenset()
        for i in range(len(body)):
            pl = plan(r.id, head, body, i, bi, later)
            plans.append(pl)
            if not r.recursive:
                c.counted.setdefault(head[0], {}).setdefault(pl.start.pred, []).append(pl)
            elif inside[i]:
                c.rec_starts.append(pl)
            else:
                c.lower_starts.append(pl)
        if r.recursive:
            plans.append(plan(r.id, head, body, HEAD, bi, later))
            c.head_plans.append(plans[-1])
    _mark_closures(comps, recursive)
    for pl in plans:
        for s in pl.steps:
            if s.how == INDEX and s.mask not in masks.setdefault(s.pred, []):
                masks[s.pred].append(s.mask)
    return comps, plans, masks
