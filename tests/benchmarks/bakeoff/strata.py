"""The arrays candidate's compiled program: components in dependency order and join plans.

A plan starts at one atom of a rule (a body position, where a delta enters,
or the head, to rederive given facts) and joins the other body atoms in a
greedy order: next the atom with the most bound columns, fully bound ones
(a hash-table probe) first. Each step says per column where its value comes
from (kernels.join_step's `src`) and which index answers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fluxmat.engine.graph import components as components_of

HEAD = -1  # the position of a plan that starts at the head


@dataclass
class Step:
    pred: str
    position: int  # the atom's body position (HEAD for the head)
    src: np.ndarray
    cval: np.ndarray
    outslot: np.ndarray
    mask: tuple[int, ...]  # the bound columns
    how: int = 0  # 0 full-key table, 1 index on `mask`, 2 scan
    k: int = -1  # the index's number in its relation


@dataclass
class Plan:
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
    counted: dict[str, dict[str, list[Plan]]] = field(default_factory=dict)  # by head, then delta predicate
    rec_starts: list[Plan] = field(default_factory=list)  # recursive rules from a position in this component
    lower_starts: list[Plan] = field(default_factory=list)  # recursive rules from a lower position
    head_plans: list[Plan] = field(default_factory=list)  # recursive rules from the head
    inputs: set[str] = field(default_factory=set)  # the body predicates of its rules
    explicit: set[str] = field(default_factory=set)  # its own predicates (explicit changes enter there)
    stc: bool = False  # exactly p(X, Y) :- p(Y, X) and p(X, Z) :- p(X, Y), p(Y, Z) recursive: a closure module


def _shape(rule) -> tuple:
    """A rule's variable pattern with variables numbered by first occurrence (head first)."""
    names: dict = {}

    def t(term):
        return ("c", term[1]) if term[0] == "const" else names.setdefault(term[1], len(names))

    return (tuple(map(t, rule.head[1])), tuple(tuple(map(t, ts)) for _, ts in rule.body))


SYMMETRIC = ((0, 1), ((1, 0),))
TRANSITIVE = ((0, 1), ((0, 2), (2, 1)))


def is_stc(preds: list[str], rec_rules: list, arities: dict[str, int]) -> bool:
    """Whether a component is one binary relation closed by exactly a symmetric and a transitive rule."""
    if len(preds) != 1 or arities[preds[0]] != 2:
        return False
    if any(p != preds[0] for r in rec_rules for p, _ in r.body):  # the shape alone is not enough:
        return False  # c(X, Z) :- c(X, Y), e(Y, Z) is linear, not transitive (engine.analysis._pattern)
    shapes = {_shape(r) for r in rec_rules}
    return len(rec_rules) == 2 and shapes == {SYMMETRIC, TRANSITIVE}


def _step(atom, position: int, slots: dict[str, int]) -> Step:
    """An atom's step given the variables bound so far (`slots`, extended with the ones it binds)."""
    pred, terms = atom
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
    how = 0 if len(mask) == n else (2 if not mask else 1)
    return Step(pred, position, src, cval, outslot, mask, how)


def _bound(atom, slots) -> tuple[int, int]:
    terms = atom[1]
    b = sum(1 for kind, v in terms if kind == "const" or v in slots)
    return (b == len(terms), b)


def plan(rule, start: int) -> Plan:
    """The rule's plan starting at body position `start` (or HEAD)."""
    slots: dict[str, int] = {}
    first = _step(rule.head if start == HEAD else rule.body[start], start, slots)
    rest = [(i, a) for i, a in enumerate(rule.body) if i != start]
    steps = []
    while rest:
        best = max(range(len(rest)), key=lambda x: _bound(rest[x][1], slots))
        i, atom = rest.pop(best)
        steps.append(_step(atom, i, slots))
    hp, hterms = rule.head
    hsrc = np.array([-1 if kind == "const" else slots[v] for kind, v in hterms], np.int64)
    hval = np.array([v if kind == "const" else 0 for kind, v in hterms], np.int64)
    return Plan(first, steps, max(len(slots), 1), hp, hsrc, hval)


def components(rules: list, arities: dict[str, int]) -> tuple[list[Component], list[Plan], dict]:
    """Strongly connected components of the predicate graph in dependency order, with their plans.

    Also every plan and the index masks each relation needs.
    """
    graph: dict[str, set[str]] = {p: set() for p in arities}
    for r in rules:
        for p, _ in r.body:
            graph[p].add(r.head[0])
    order = components_of(sorted(graph), {p: sorted(hs) for p, hs in graph.items()})[::-1]  # bodies first
    comp_of = {p: i for i, ps in enumerate(order) for p in ps}
    comps = [Component(sorted(ps), False) for ps in order]
    for r in rules:
        c = comps[comp_of[r.head[0]]]
        if any(comp_of[p] == comp_of[r.head[0]] for p, _ in r.body):
            c.recursive = True
    rec_rules: dict[int, list] = {}
    for r in rules:
        if any(comp_of[p] == comp_of[r.head[0]] for p, _ in r.body):
            rec_rules.setdefault(comp_of[r.head[0]], []).append(r)
    masks: dict[str, list] = {}
    for i, c in enumerate(comps):
        c.stc = c.recursive and is_stc(c.preds, rec_rules.get(i, []), arities)
        if c.stc:
            masks[c.preds[0]] = [(0,), (1,)]
    for c in comps:
        c.explicit = set(c.preds)
    for r in rules:
        comps[comp_of[r.head[0]]].inputs.update(p for p, _ in r.body)
    plans: list[Plan] = []
    for r in rules:
        c = comps[comp_of[r.head[0]]]
        inside = [comp_of[p] == comp_of[r.head[0]] for p, _ in r.body]
        rec = any(inside)
        for i in range(len(r.body)):
            pl = plan(r, i)
            plans.append(pl)
            if not rec:
                c.counted.setdefault(r.head[0], {}).setdefault(pl.start.pred, []).append(pl)
            elif inside[i]:
                c.rec_starts.append(pl)
            else:
                c.lower_starts.append(pl)
        if rec:
            pl = plan(r, HEAD)
            plans.append(pl)
            c.head_plans.append(pl)
    for pl in plans:
        for s in pl.steps:
            if s.how == 1 and s.mask not in masks.setdefault(s.pred, []):
                masks[s.pred].append(s.mask)
    return comps, plans, masks
