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
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.syntax import Atom, Var

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


def _rank(lit: Literal, slots) -> tuple[int, int]:
    """Greedy order: fully bound atoms first (anti-probes before probes), then by bound columns."""
    terms = lit[1]
    b = sum(1 for kind, v in terms if kind == "const" or v in slots)
    full = b == len(terms)
    if lit[2]:
        return (3 if full else -1, b)
    return (2 if full else 1, b)


def plan(rid: int, head: Literal, body: list[Literal], start: int) -> Plan:
    """The rule's plan starting at body position `start` (or HEAD); `start` binds as a positive atom."""
    slots: dict[str, int] = {}
    first_lit = head if start == HEAD else body[start]
    first = _step((first_lit[0], first_lit[1], False), start, slots)
    first.negated = start != HEAD and body[start][2]
    rest = [(i, lit) for i, lit in enumerate(body) if i != start]
    steps = []
    while rest:
        best = max(range(len(rest)), key=lambda x: _rank(rest[x][1], slots))
        i, lit = rest.pop(best)
        steps.append(_step(lit, i, slots))
    hp, hterms, _ = head
    hsrc = np.array([-1 if kind == "const" else slots[v] for kind, v in hterms], np.int64)
    hval = np.array([v if kind == "const" else 0 for kind, v in hterms], np.int64)
    return Plan(rid, first, steps, max(len(slots), 1), hp, hsrc, hval)


def literals(rule: AnalysedRule, term_id: Callable[[object], int]) -> tuple[Literal, list[Literal]]:
    """A rule's head and body (positives, then negated atoms) as plan literals."""

    def lit(atom: Atom, negated: bool) -> Literal:
        terms = tuple(
            ("var", t.name) if isinstance(t, Var) else ("const", term_id(t.value))
            for t in atom.args
        )
        return (atom.pred, terms, negated)

    body = [lit(a, False) for a in rule.positives] + [lit(a, True) for a in rule.negatives]
    return lit(rule.head, False), body


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


def compile_program(
    analysis: Analysis, term_id, closures: bool
) -> tuple[list[Component], list[Plan], dict]:
    """Components in dependency order with their plans; every plan; the index masks per relation."""
    comps, comp_of = _components(analysis, closure_strata(analysis) if closures else set())
    masks: dict[str, list] = {c.preds[0]: [(0,), (1,)] for c in comps if c.stc}
    plans: list[Plan] = []
    for r in analysis.rules:
        head, body = literals(r, term_id)
        c = comps[comp_of[head[0]]]
        c.inputs.update(p for p, _, _ in body)
        inside = [comp_of[p] == comp_of[head[0]] for p, _, _ in body]
        for i in range(len(body)):
            pl = plan(r.id, head, body, i)
            plans.append(pl)
            if not r.recursive:
                c.counted.setdefault(head[0], {}).setdefault(pl.start.pred, []).append(pl)
            elif inside[i]:
                c.rec_starts.append(pl)
            else:
                c.lower_starts.append(pl)
        if r.recursive:
            plans.append(plan(r.id, head, body, HEAD))
            c.head_plans.append(plans[-1])
    for pl in plans:
        for s in pl.steps:
            if s.how == INDEX and s.mask not in masks.setdefault(s.pred, []):
                masks[s.pred].append(s.mask)
    return comps, plans, masks
