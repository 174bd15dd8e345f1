"""Transitive-closure and symmetric-transitive-closure modules (Hu, Motik & Horrocks 2019).

Paper: Hu, Motik & Horrocks, "Modular Materialisation of Datalog Programs" (2019).
Checked here: the pattern matcher (which rules form tc(R) / stc(R) modules),
the selection of modules per algorithm, and the work of Examples 1 and 2 --
semi-naive evaluation considers O(n^3) rule instances (`Report.rule_applications`),
the modules O(n^2) candidate facts (`Report.module_inferences`) -- with identical
results. Correctness on random programs and the golden corpus with modules on and
off is tested in tests/engine/test_properties.py and tests/engine/test_golden.py.

The modules of engine.modules (tc, stc, ltc) and their work counts are the
objects core's: those tests choose it. The arrays core (the default) keeps an
stc(R) relation by its own closure module (engine.compact.closure) and has no
tc module; what it does with `modules` is checked at the end.
"""

from __future__ import annotations

import math

import pytest

from fluxmat.engine import ALGORITHMS, EngineOptions, Reasoner, analyse, create, parse_program
from tests.support.shared import PROGRAMS

TC = "r(X, Z) :- r(X, Y), r(Y, Z).\n"  # rule (1)
STC = TC + "r(Y, X) :- r(X, Y).\n"  # rules (1) and (5)
SIZES = (10, 20, 40)
WITH_MODULES = sorted(a for a, cls in ALGORITHMS.items() if cls.supports_modules)
# The fully dynamic ones take a tc/stc module only where R's stratum holds R alone, as
# in Examples 1 and 2 (more in tests/engine/test_fd_modules.py).


def objects(text: str, algorithm: str = "dredc", **options) -> Reasoner:
    """A reasoner on the objects core: its modules (engine.modules) and their work counts."""
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core="objects", **options))


def arrays(text: str, algorithm: str = "dredc", **options) -> Reasoner:
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays", **options))


def modules_of(text: str) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(m.kind, m.pred, m.rules) for m in analyse(parse_program(text)).modules]


def example1(n: int) -> list[tuple]:
    """Example 1: E = {R(c_i, c_i+1) | 0 <= i <= n}."""
    return [("r", f"c{i}", f"c{i + 1}") for i in range(n + 1)]


def example2(n: int) -> list[tuple]:
    """Example 2: E = {R(c_i, c_i+1) | 1 <= i < n} u {R(c_n, c_1)}."""
    return [("r", f"c{i}", f"c{i + 1}") for i in range(1, n)] + [("r", f"c{n}", "c1")]


def exponent(work: dict[int, int]) -> float:
    """The growth exponent k of work ~ n^k, fitted between the smallest and largest n."""
    lo, hi = min(work), max(work)
    return math.log(work[hi] / work[lo]) / math.log(hi / lo)


# ------------------------------------------------------------------ the pattern matcher


@pytest.mark.parametrize(
    "text",
    [
        TC,
        "r(A, C) :- r(B, C), r(A, B).\n",  # body atoms swapped, other names
        "p(X, Y) :- e(X, Y).\n" + TC.replace("r", "p"),
        "r[?X, ?Z] :- r[?X, ?Y], r[?Y, ?Z] .\n",  # RDFox syntax
    ],
)
def test_transitivity_rule_is_a_tc_module(text):
    """Section 5: a module consisting of the single rule (1)."""
    (kind, _, rules), *rest = modules_of(text)
    assert (kind, len(rules), rest) == ("tc", 1, [])


def test_transitivity_and_symmetry_form_an_stc_module():
    """Section 6: rules (1) and (5) together; rule order and duplicates do not matter."""
    text = "r(X, Y) :- r(Y, X).\nr(X, Y) :- e(X, Y).\n" + TC + TC
    assert modules_of(text) == [("stc", "r", (0, 2, 3))]


@pytest.mark.parametrize(
    "text",
    [
        "r(X, Z) :- r(X, Y), r(Y, Z), X != Z.\n",  # a built-in
        "r(X, Z) :- r(X, Y), r(Y, Z), not s(X).\ns(a).\n",  # negation
        "r(X, Z) :- r(X, Y), r(Y, Z), e(X).\n",  # another atom
        "r(X, Z) :- r(X, Y), r(Y, a), r(a, Z).\n",
        "r(X, Z) :- r(X, a), r(a, Z).\n",  # a constant
        "r(X, X) :- r(X, Y), r(Y, X).\n",  # repeated head variable
        "r(X, Z) :- r(X, Y), r(Z, Y).\n",  # not a chain
        "r(X, Z) :- r(X, Y), s(Y, Z).\ns(X, Z) :- r(X, Z).\n",  # two predicates
        "r(X, Z, W) :- r(X, Y, W), r(Y, Z, W).\n",  # ternary
        "r(Y, X) :- r(X, Y).\nr(X, Y) :- e(X, Y).\n",  # symmetry alone
    ],
)
def test_other_rules_are_not_modules(text):
    assert modules_of(text) == []


def test_generic_rules_share_the_module_stratum():
    """Algorithm 2, lines 13-15: a stratum holds modules and generic rules."""
    text = TC + "s(X, Y) :- r(X, Y), f(Y).\nr(Y, X) :- s(X, Y), g(X).\n"
    an = analyse(parse_program(text))
    (module,) = an.modules
    stratum = an.strata[module.stratum - 1]
    assert an.modules_of(stratum) == (module,)
    assert set(stratum.recursive) - set(module.rules) == {1, 2}
    m = create("dredc", an)
    assert m.generic[stratum.index] == (1, 2)


def test_modules_are_found_in_the_lubm_program():
    """LUBM's colleagues and connectedCourses are symmetric-transitive, subOrganizationOf
    transitive (the paper's Table 1 lists LUBM-LE with 1 tc and 2 stc modules)."""
    an = analyse(parse_program((PROGRAMS / "lubm.dlog").read_text()))
    kinds = sorted((m.kind, an.display.get(m.pred, m.pred).rsplit("#", 1)[-1]) for m in an.modules)
    assert kinds == [
        ("stc", "colleagues"),
        ("stc", "connectedCourses"),
        ("tc", "subOrganizationOf"),
    ]


# ------------------------------------------------------------------ selection


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_modules_are_used_where_supported_and_results_agree(algorithm):
    """Modules are on by default for remat, dredc and the fully dynamic algorithms
    (where R's stratum holds R alone, as here); the others evaluate every rule
    generically whatever the flag says. Results are the same in every case."""
    text = STC + "s(X) :- r(X, Y), not r(Y, c).\n"
    if algorithm == "counting":
        pytest.skip("counting refuses recursive programs")
    facts = example2(6) + [("r", "c", "d")]
    results = set()
    for modules in (True, False):
        r = objects(text, algorithm, modules=modules)  # the objects core's modules and their counts
        assert r.maintainer.uses_modules == (modules and algorithm in WITH_MODULES)
        report = r.load(facts)
        assert bool(report.module_inferences) == r.maintainer.uses_modules
        r.update(add=[("r", "d", "c1")], delete=[("r", "c2", "c3")])
        results.add(frozenset(r.facts()))
    assert len(results) == 1


def test_reasoner_default_uses_modules():
    assert objects(TC).maintainer.uses_modules  # the objects core: its tc module
    assert not objects(TC, modules=False).maintainer.uses_modules
    stc = analyse(parse_program(STC)).modules
    # the default core (arrays): its closure module keeps stc(r)
    assert Reasoner.from_text(STC).modules_used() == set(stc)
    assert Reasoner.from_text(STC, modules=False).modules_used() == set()


# ------------------------------------------------------------------ Examples 1 and 2


def _load(text: str, facts: list[tuple], algorithm: str, modules: bool):
    r = objects(text, algorithm, modules=modules)  # module_inferences: the objects core's modules
    return r, r.load(facts)


@pytest.mark.parametrize("algorithm", WITH_MODULES)
def test_example1_transitive_closure_of_a_chain(algorithm):
    """Example 1: "Algorithm 1 considers all of these O(n^3) rule instances" (2) -- with
    n + 2 nodes exactly C(n+2, 3); the tc module considers only instances (3),
    R(c_i, c_i+1) ∧ R(c_i+1, c_k), i.e. C(n+1, 2) pairs. Same materialisation."""
    generic, modular = {}, {}
    for n in SIZES:
        plain, report = _load(TC, example1(n), algorithm, False)
        assert report.total_applications == math.comb(n + 2, 3)
        assert report.total_module_inferences == 0
        generic[n] = report.total_applications
        mod, report = _load(TC, example1(n), algorithm, True)
        assert report.total_applications == 0
        assert report.module_inferences == {"tc(r)": math.comb(n + 1, 2)}
        modular[n] = report.total_module_inferences
        assert mod.facts() == plain.facts()
        assert len(mod.facts()) == math.comb(n + 2, 2)
    assert 2.8 < exponent(generic) < 3.2, generic
    assert 1.8 < exponent(modular) < 2.2, modular


@pytest.mark.parametrize("algorithm", WITH_MODULES)
def test_example2_symmetric_transitive_closure_of_a_cycle(algorithm):
    """Example 2: semi-naive evaluation considers every instance (2) with 1 <= i, j, k <= n
    (n^3) plus the n^2 instances of rule (5); the stc module derives each of the n^2
    pairs of the one connected component exactly once. Same materialisation."""
    generic, modular = {}, {}
    for n in SIZES:
        plain, report = _load(STC, example2(n), algorithm, False)
        assert report.total_applications == n**3 + n**2
        generic[n] = report.total_applications
        mod, report = _load(STC, example2(n), algorithm, True)
        assert report.total_applications == 0
        assert report.module_inferences == {"stc(r)": n**2}
        modular[n] = report.total_module_inferences
        assert mod.facts() == plain.facts()
        assert len(mod.facts()) == n**2
    assert 2.8 < exponent(generic) < 3.2, generic
    assert 1.8 < exponent(modular) < 2.2, modular


@pytest.mark.parametrize("example", [example1, example2], ids=["example1", "example2"])
def test_dredc_mod_deletion_and_insertion_are_quadratic(example):
    """Section 7: DRed^c-MOD against DRed^c on small deletions and insertions. Deleting
    and re-inserting the middle edge: DRed^c's counter updates touch O(n^3) instances,
    the modules' Del/Red/Add O(n^2) candidates; every state equals remat's."""
    text = TC if example is example1 else STC
    work = {True: {}, False: {}}
    for n in SIZES:
        facts = example(n)
        mid = facts[len(facts) // 2]
        states = []
        for modules in (True, False):
            r, _ = _load(text, facts, "dredc", modules)
            deleted = r.update(delete=[mid])
            after_delete = r.facts()
            added = r.update(add=[mid])
            states.append((after_delete, r.facts()))
            reports = (deleted, added)
            key = sum(
                x.total_module_inferences if modules else x.total_applications for x in reports
            )
            work[modules][n] = key
            if modules:
                assert sum(x.total_applications for x in reports) == 0
        oracle, _ = _load(text, [f for f in facts if f != mid], "remat", False)
        assert states[0] == states[1]
        assert states[0][0] == oracle.facts()
    assert 1.8 < exponent(work[True]) < 2.2, work
    assert exponent(work[False]) > 2.8, work


@pytest.mark.parametrize("n", [12, 30])
def test_stc_deletion_overdeletes_only_the_pairs_it_disconnects(n):
    """stc's Del rebuilds a dissolved component from its surviving facts (Y_R) at
    once: deleting one edge of Example 2's cycle disconnects nothing, so only the
    edge itself is overdeleted (and rederived); deleting a second, opposite edge
    splits the cycle into two paths of n/2 nodes, and exactly the 2 (n/2)^2 pairs
    between them are overdeleted (the paper's Del overdeletes all n^2 pairs of the
    component both times, then Red puts back what survives)."""
    facts = example2(n)
    r, _ = _load(STC, facts, "dredc", True)
    first = r.update(delete=[facts[0]])  # r(c1, c2)
    assert (first.removed, first.details["overdeleted"], first.details["rederived"]) == (0, 1, 1)
    second = r.update(delete=[facts[n // 2]])  # r(c_{n/2+1}, c_{n/2+2})
    half = n // 2
    assert second.removed == second.details["overdeleted"] == 2 * half * half
    assert second.details["rederived"] == 0
    oracle, _ = _load(STC, [f for i, f in enumerate(facts) if i not in (0, half)], "remat", False)
    assert r.facts() == oracle.facts()


# ------------------------------------------------------------------ the arrays core

ARRAYS_ALGORITHMS = ["bf", "counting", "dred", "dredc", "fd-counting", "fd-dred", "remat"]


@pytest.mark.parametrize("algorithm", ARRAYS_ALGORITHMS)
def test_arrays_core_keeps_stc_by_its_closure_module(algorithm):
    """The arrays core: every algorithm keeps an stc(R) stratum by the closure module
    (engine.compact.closure), which evaluates no rule instance and reports no module
    inferences; `modules=False` evaluates the rules (DRed^c). Same results, the objects
    core's too (`counting` runs DRed^c for the recursive stratum on the arrays core)."""
    text = STC + "s(X) :- r(X, Y), not r(Y, c).\n"
    facts = example2(6) + [("r", "c", "d")]
    results = set()
    for modules in (True, False):
        r = arrays(text, algorithm, modules=modules)
        assert r.modules_used() == (set(analyse(parse_program(text)).modules) if modules else set())
        report = r.load(facts)
        assert report.module_inferences == {}
        stc_rules = {0, 1} & set(report.rule_applications)
        assert bool(stc_rules) != modules, report.rule_applications
        r.update(add=[("r", "d", "c1")], delete=[("r", "c2", "c3")])
        results.add(frozenset(r.facts()))
    reference = objects(text, "dredc")
    reference.load(facts)
    reference.update(add=[("r", "d", "c1")], delete=[("r", "c2", "c3")])
    assert results == {frozenset(reference.facts())}


def test_arrays_core_has_no_tc_module():
    """A transitive rule alone is DRed^c on the arrays core whatever `modules` says:
    Example 1's O(n^3) rule instances both ways, no module inferences."""
    n = 20
    work = []
    for modules in (True, False):
        r = arrays(TC, "dredc", modules=modules)
        assert r.modules_used() == set()
        report = r.load(example1(n))
        assert report.module_inferences == {} and len(r.facts()) == math.comb(n + 2, 2)
        work.append(report.total_applications)
    assert work[0] == work[1] >= math.comb(n + 2, 3)
