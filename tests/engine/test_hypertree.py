"""Hypertree decompositions for cyclic rules (Zhang et al. 2023), combined mode.

Paper: Zhang, Hu, Nenov & Horrocks, "Enhancing Datalog Reasoning with Hypertree
Decompositions" (2023).
Checked here: which rules get a decomposition (only cyclic ones), the
PossibleCollaborator example of section 3 (its decomposition, its result, and
the O(n k) vs O(n k^2) work of the decomposed vs the left-to-right plan), and
that decomposed plans produce exactly the same multisets of heads and of rule
instances as ordinary plans -- full and delta plans, with negation and
comparisons -- and the same materialisations under remat, dredc and fd-counting
updates, on random triangle / 4-cycle rules.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import Reasoner, analyse, create, parse_program
from fluxmat.engine.evaluate import Evaluator
from fluxmat.engine.hypertree import compile_decomposed
from fluxmat.engine.plans import compile_plan
from tests.support.gen import examples

# "PC(x, y) <- CW(x, z1), CA(x, z2), PC(z1, y), PC(z2, y)." (section 3)
PC = "pc(X, Y) :- cw(X, Z1), ca(X, Z2), pc(Z1, Y), pc(Z2, Y).\n"


def pc_data(n: int, k: int) -> list[tuple]:
    """The dataset E of section 3."""
    facts = [("cw", f"a{n}", "a2"), ("ca", f"a{n}", "a3")]
    for i in range(n):
        for j in range(1, k + 1):
            b, c = f"b{i * k + j}", f"c{i * k + j}"
            facts += [
                ("cw", f"a{i}", b),
                ("ca", f"a{i}", c),
                ("pc", b, f"d{j}"),
                ("pc", c, f"d{j}"),
            ]
    return facts


def decomposition(text: str):
    an = analyse(parse_program(text))
    return {rid: str(d) for rid, d in an.decompositions.items()}


def test_only_cyclic_rules_are_decomposed():
    assert decomposition("p(X, Z) :- e(X, Y), e(Y, Z).") == {}  # a path: acyclic
    assert decomposition("p(X) :- e(X, Y), e(Y, Z), f(X, Y, Z).") == {}  # covered by f
    assert decomposition("p(X, Z) :- p(X, Y), p(Y, Z).") == {}
    # a triangle is cyclic, but its best bag binds every variable: no gain
    assert decomposition("t(X, Y, Z) :- e(X, Y), e(Y, Z), e(Z, X).") == {}
    assert set(decomposition("c(X, Z) :- e(X, Y), e(Y, Z), e(Z, W), e(W, X).")) == {0}
    assert set(decomposition(PC)) == {0}


def test_possible_collaborator_decomposition_is_the_papers():
    """chi(p1) = {x, z1, y}, lambda(p1) = {CW(x, z1), PC(z1, y)}; p2 likewise with z2, CA."""
    (d,) = analyse(parse_program(PC)).decompositions.values()
    assert d.width == 2
    assert sorted((b.lits, b.vars) for b in d.bags) == [
        ((0, 2), ("X", "Y", "Z1")),
        ((1, 3), ("X", "Y", "Z2")),
    ]


@pytest.mark.parametrize("algorithm", ["remat", "dredc", "dred", "bf", "fd-counting"])
def test_possible_collaborator_result(algorithm):
    """mat adds {PC(a_i, d_j) | 0 <= i <= n, 1 <= j <= k}; the removal of CA(a_n, a_3)
    (Figure 2, scenario 3) retracts PC(a_n, d_j)."""
    n, k = 6, 5
    r = Reasoner.from_text(PC, algorithm)
    r.load(pc_data(n, k))
    derived = {f for f in r.facts() if f[0] == "pc" and f[1].startswith("a")}
    assert derived == {("pc", f"a{i}", f"d{j}") for i in range(n + 1) for j in range(1, k + 1)}
    r.update(delete=[("ca", f"a{n}", "a3")])
    gone = {("pc", f"a{n}", f"d{j}") for j in range(1, k + 1)}
    assert not gone & r.facts()
    r.update(add=[("cw", f"a{n}", "a4"), ("ca", f"a{n}", "a5")])  # Figure 2, scenario 2
    assert gone <= r.facts()


def _full_plan_work(n: int, k: int, hypertree: bool) -> tuple[int, Counter]:
    m = create("remat", analyse(parse_program(PC)), hypertree=False)
    m.load(pc_data(n, k))
    rule = m.analysis.rules[0]
    dec = m.analysis.decompositions[0]
    size = lambda p: len(m.rel(p))  # noqa: E731
    if hypertree:
        plan = compile_decomposed(rule, dec, "full", None, m.dictionary, size, count=True)
    else:
        plan = compile_plan(rule, "full", None, m.dictionary, size, count=True)
    ev: Evaluator = m.ev
    view = lambda p: [(m.rel(p), None)]  # noqa: E731
    views = ev._views(plan, view, view, None, None, 0)
    out: list = []
    plan.run(None, views, out, m.dictionary.values, m.dictionary.intern)
    return plan.work[0], Counter(out)


def test_possible_collaborator_avoids_the_blow_up():
    """Left to right the body considers O(n k^2) substitutions; over the
    decomposition every stage considers O(n k) (section 3)."""
    works = {}
    for k in (10, 20, 40):
        n = 10
        generic, heads = _full_plan_work(n, k, hypertree=False)
        decomposed, same = _full_plan_work(n, k, hypertree=True)
        assert same == heads  # the same multiset of heads
        assert generic >= n * k * k
        assert decomposed <= 8 * n * k
        works[k] = (generic, decomposed)
    # doubling k: quadruples the generic work, doubles the decomposed work
    assert works[40][0] >= 3.5 * works[20][0]
    assert works[40][1] <= 2.5 * works[20][1]


# ------------------------------------------------------------ random cyclic rules

SYMS = ("a", "b", "c")
BODIES = (
    "e(X, Y), f(Y, Z), e(Z, W), f(W, V), e(V, X)",  # 5-cycle
    "e(X, Y), f(Y, Z), e(Z, W), f(W, X)",  # 4-cycle
    "e(X, Y), e(Y, Z), e(Z, W), e(W, X), f(X, Z)",  # 4-cycle with a chord
    "e(X, Z1), f(X, Z2), p(Z1, Y), p(Z2, Y)",  # PossibleCollaborator's shape
)
HEADS = ("p(X, Y)", "q(X, Z)", "q(Y, X)")
EXTRAS = ("", ", not g(X, Y)", ", not g(Y, Z)", ", X != Z", ", Y != X, not g(Z, Z)", ", n(X)")
PLAIN = "p(X, Y) :- e(X, Y).\nq(X, Y) :- f(X, Y), not g(X, Y).\ng(X, Y) :- h(X, Y).\n"


@st.composite
def cyclic_programs(draw):
    rules = []
    for _ in range(draw(st.integers(1, 2))):
        body = draw(st.sampled_from(BODIES))
        bound = set(re.findall(r"\w+", body))
        head = draw(st.sampled_from([h for h in HEADS if set(re.findall(r"[A-Z]\w*", h)) <= bound]))
        extras = [x for x in EXTRAS if set(re.findall(r"[A-Z]\w*", x)) <= bound]
        rules.append(f"{head} :- {body}{draw(st.sampled_from(extras))}.")
    return PLAIN + "\n".join(rules) + "\n"


def random_facts(low: int = 4):
    """Dense e and f (3 symbols), so that cycles close and heads repeat; sparse g, h, n."""
    pairs = st.tuples(st.sampled_from(SYMS), st.sampled_from(SYMS))

    def rel(p, lo, hi):
        return st.sets(pairs, min_size=lo, max_size=hi).map(lambda s: {(p, *t) for t in s})

    unary = st.sets(st.sampled_from(SYMS), max_size=2).map(lambda s: {("n", x) for x in s})
    parts = st.tuples(rel("e", low, 9), rel("f", low, 9), rel("g", 0, 3), rel("h", 0, 3), unary)
    return parts.map(lambda ps: sorted(set().union(*ps)))


SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck)
)


@SETTINGS
@given(cyclic_programs(), random_facts(), random_facts(0), random_facts(0))
def test_instances_equal_with_and_without_hypertree(text, facts, plus, minus):
    """derive(..., instances=True) gives the same multiset of (head, pos, neg)
    triples over the decomposition, full and through every delta literal."""
    an = analyse(parse_program(text))
    assert an.decompositions
    m = create("remat", an, hypertree=False)
    m.load(facts)

    def enc(fs):
        return {
            p: {tuple(map(m.dictionary.intern, f[1:])) for f in fs if f[0] == p}
            for p in {f[0] for f in fs}
        }

    P, N = enc(plus), enc(minus)
    view = lambda p: [(m.rel(p), None)]  # noqa: E731
    results = []
    for hypertree in (False, True):
        ev = Evaluator(an, m.dictionary, lambda p: len(m.rel(p)), hypertree)
        rids = tuple(an.decompositions)
        got = []
        for deltas in ((None, None), (P, N), (P, None), (None, N)):
            for rule, out in ev.derive(rids, view, view, *deltas, instances=True):
                got.append((rule.id, Counter(out)))
            for rule, out in ev.derive(rids, view, view, *deltas):
                got.append((rule.id, Counter(out)))
        results.append(got)
    assert results[0] == results[1]


@SETTINGS
@given(
    cyclic_programs(),
    random_facts(),
    st.lists(st.tuples(random_facts(0), random_facts(0)), min_size=1, max_size=4),
    st.sampled_from(["remat", "dredc", "fd-counting"]),
)
def test_updates_equal_with_and_without_hypertree(text, facts, updates, algorithm):
    on = Reasoner.from_text(text, algorithm, hypertree=True)
    off = Reasoner.from_text(text, algorithm, hypertree=False)
    assert on.load(facts).total_applications == off.load(facts).total_applications
    assert on.facts() == off.facts()
    current = set(facts)
    for add, delete in updates:
        delete = [f for f in delete if f not in add]
        on.update(add, delete)
        off.update(add, delete)
        current = (current - set(delete)) | set(add)
        assert on.facts() == off.facts()
    fresh = Reasoner.from_text(text, "remat", hypertree=False)
    fresh.load(sorted(current))
    assert on.facts() == fresh.facts()
