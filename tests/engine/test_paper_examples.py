"""The worked examples of Hu, Motik & Horrocks (AAAI 2018), and update semantics.

Paper: Hu, Motik & Horrocks, "Optimised Maintenance of Datalog Materialisations" (2018).
Predicates are written in lower case (fluxmat syntax): the paper's A, B, R, S, D
are a, b, r, s, d.

The Report has no measure of how much work backward rule evaluation does (its
`backward_matches` counts only the instances found, and DRed's failed
rederivations find none). The tests of Examples 1 and 2 therefore count the
candidate facts that backward evaluation looks at by wrapping the indexes and
full scans it reads (`probes` fixture); the engine itself is not changed.

What the papers count -- overdeleted facts, counters, backward evaluation
(whose indexes the probes wrap), Counting's refusal of recursion -- is the
objects core's (`--core objects`): those tests choose it. The results and the
update semantics are checked on the arrays core too (the default), which runs
one procedure for these algorithm names (docs/reference/core.md): with it
`counting` materialises recursive programs.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import fluxmat.engine.evaluate as evaluate
from fluxmat.engine import ALGORITHMS, AlgorithmError, EngineOptions, Reasoner, UpdateError
from fluxmat.engine.algorithms.stratified import Run


def _paper(text: str, algorithm: str, core: str = "arrays") -> Reasoner:
    """The papers' algorithms exactly on the objects core: `dredc` without its levels
    (engine.algorithms.dredc). The arrays core (the default) runs its own procedure."""
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core=core, levels=False))


# ------------------------------------------------------------------ instrumentation


@dataclass
class _Probes:
    active: int = 0
    candidates: int = 0


class _CountingIndex:
    """A read-only view of an index dict that counts the facts of each bucket it returns."""

    def __init__(self, idx: dict, probes: _Probes):
        self._idx, self._probes = idx, probes

    def get(self, key, default=()):
        bucket = self._idx.get(key, default)
        self._probes.candidates += len(bucket)
        return bucket

    def __getattr__(self, name):
        return getattr(self._idx, name)

    def __contains__(self, key):
        return key in self._idx


class _CountingSet:
    """A read-only view of a fact set that counts the facts a full scan enumerates."""

    def __init__(self, facts: set, probes: _Probes):
        self._facts, self._probes = facts, probes

    def __iter__(self):
        for f in self._facts:
            self._probes.candidates += 1
            yield f

    def __contains__(self, fact):
        return fact in self._facts

    def __len__(self):
        return len(self._facts)


@pytest.fixture
def probes(monkeypatch) -> _Probes:
    """Counts candidate facts read while rules are evaluated backwards."""
    state = _Probes()
    container, backward = evaluate._container, evaluate.Evaluator.backward

    def counting_container(rel, cols):
        c = container(rel, cols)
        if not state.active:
            return c
        return _CountingSet(c, state) if cols is None else _CountingIndex(c, state)

    def counting_backward(self, *args, **kwargs):
        state.active += 1
        try:
            return backward(self, *args, **kwargs)
        finally:
            state.active -= 1

    monkeypatch.setattr(evaluate, "_container", counting_container)
    monkeypatch.setattr(evaluate.Evaluator, "backward", counting_backward)
    return state


def _remat_lines(program: str, facts) -> list[str]:
    r = _paper(program, "remat")
    r.maintainer.load(facts)
    return r.lines()


# ------------------------------------------------------------------ Example 3 / Figure 1

EXAMPLE3 = "a(Y) :- a(X), b(X, Y).\n"  # rule (8): A(x) ∧ B(x, y) → A(y)
EXAMPLE3_E = [
    ("a", "a"), ("a", "b"), ("a", "d"),
    ("b", "a", "c"), ("b", "b", "c"), ("b", "c", "d"), ("b", "d", "e"),
]  # fmt: skip
NODES = "abcde"
FIGURE1_T1 = {"a": (1, 0), "b": (1, 0), "c": (0, 2), "d": (1, 1), "e": (0, 1)}
FIGURE1_T2 = {"a": (0, 0), "b": (1, 0), "c": (0, 1), "d": (1, 0), "e": (0, 1)}
FIGURE1_T3 = {"a": (0, 0), "b": (1, 0), "c": (0, 1), "d": (1, 1), "e": (0, 1)}


def _example3(algorithm: str, core: str = "arrays") -> Reasoner:
    r = _paper(EXAMPLE3, algorithm, core)
    r.maintainer.load(EXAMPLE3_E)
    return r


def _counters(r: Reasoner) -> dict[str, tuple[int, int]]:
    return {x: r.maintainer.counters(("a", x)) for x in NODES}


def _capture_overdeleted(monkeypatch, r: Reasoner) -> dict:
    """Record D (the overdeleted a-facts) and the counters when rederivation starts."""
    seen: dict = {}
    m = r.maintainer

    def spying(rederive):
        def spy(run, s):
            d = run.D.get("a")
            seen["D"] = sorted(m.decode("a", f)[1] for f in (d.facts if d else ()))
            seen["counters"] = _counters(r)
            return rederive(run, s)

        return spy

    for name in ("rederive_backward", "rederive_counted"):  # DRed's and DRed^c's (one Run per update)
        monkeypatch.setattr(Run, name, spying(getattr(Run, name)))
    return seen


@pytest.mark.parametrize("algorithm", sorted(set(ALGORITHMS) - {"counting"}))
def test_example3_materialisation(algorithm):
    """Example 3: "The materialisation mat(Π, E) extends E with A(c) and A(e)."

    After deleting A(a), A(c) still follows from A(b) and A(d) stays explicit.
    """
    r = _example3(algorithm)
    assert sorted(f for f in r.facts() if f[0] == "a") == [("a", x) for x in NODES]
    r.update(delete=[("a", "a")])
    assert sorted(f for f in r.facts() if f[0] == "a") == [("a", x) for x in "bcde"]
    assert r.lines() == _remat_lines(EXAMPLE3, [f for f in EXAMPLE3_E if f != ("a", "a")])


def test_example3_figure1_counters_dredc(monkeypatch):
    """Figure 1: (C_nr, C_r) of each A-fact before the update (T1), after
    overdeletion (T2) and after deleting A(a) (T3). "A(c) is derived from A(a)
    and A(b) using the recursive rule (8), so the recursive counter for A(c) is two."
    """
    r = _example3("dredc", "objects")  # the objects core's counters and its DRed^c run
    assert _counters(r) == FIGURE1_T1
    seen = _capture_overdeleted(monkeypatch, r)
    report = r.update(delete=[("a", "a")])
    assert seen["counters"] == FIGURE1_T2
    assert _counters(r) == FIGURE1_T3
    assert report.backward_queries == 0
    assert report.removed_facts == {"a": {r.maintainer.encode(("a", "a"))[1]}}


def test_example3_dredc_overdeletes_only_a_and_c(monkeypatch):
    """Example 3: "while DRed overdeletes four facts, DRedc overdeletes only A(a)
    and A(c), and does not touch A(e)" -- A(d) has C_nr = 1 so it is never overdeleted.
    """
    # the objects core's overdeletion (engine.algorithms.stratified)
    r = _example3("dredc", "objects")
    seen = _capture_overdeleted(monkeypatch, r)
    r.update(delete=[("a", "a")])
    assert seen["D"] == ["a", "c"]
    assert r.maintainer.counters(("a", "e")) == (0, 1)


def test_example3_dred_overdeletes_four_facts(monkeypatch):
    """Example 3: "The standard DRed algorithm first overdeletes A(a), A(c), A(d),
    and A(e); it rederives A(d) since the fact is in E \\ E−; it rederives A(c) by
    evaluating rule (8) backwards"."""
    r = _example3("dred", "objects")  # the objects core's overdeletion and backward evaluation
    seen = _capture_overdeleted(monkeypatch, r)
    report = r.update(delete=[("a", "a")])
    assert seen["D"] == ["a", "c", "d", "e"]
    assert report.backward_queries > 0
    assert report.backward_matches >= 1  # the derivation of A(c) from A(b)
    assert report.removed == 1 and report.added == 0


# ------------------------------------------------------------------ Examples 1 and 2

EXAMPLE1 = "s(Y1, Y2) :- r(X, Y1), r(X, Y2).\n"  # rule (4)
EXAMPLE2 = (  # rules (6) and (7)
    "d(Y, Z) :- b(a, Y, Z).\nd(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.\n"
)
SIZES = (10, 20, 40)


def example1(n: int):
    """E = {R(a_i, b), R(a_i, c_i) | 1 ≤ i ≤ n}; delete all R(a_i, c_i)."""
    facts = [("r", f"a{i}", "b") for i in range(1, n + 1)]
    facts += [("r", f"a{i}", f"c{i}") for i in range(1, n + 1)]
    return EXAMPLE1, facts, [("r", f"a{i}", f"c{i}") for i in range(1, n + 1)]


def example2(n: int):
    """E = {B(a, b1, 1), B(a, c_i, 1), B(b_i, d_j, 1) | 1 ≤ i, j ≤ n}; delete B(a, b1, 1)."""
    facts = [("b", "a", "b1", 1)] + [("b", "a", f"c{i}", 1) for i in range(1, n + 1)]
    facts += [("b", f"b{i}", f"d{j}", 1) for i in range(1, n + 1) for j in range(1, n + 1)]
    return EXAMPLE2, facts, [("b", "a", "b1", 1)]


def _run(example, n: int, algorithm: str, probes: _Probes, core: str = "arrays"):
    """Load, delete, compare with remat; the report and the candidates the probes counted
    (the probes wrap the objects core's evaluator: with the arrays core they count nothing)."""
    program, facts, delete = example(n)
    r = _paper(program, algorithm, core)
    r.maintainer.load(facts)
    probes.candidates = 0
    report = r.update(delete=delete)
    kept = [f for f in facts if f not in set(delete)]
    assert r.lines() == _remat_lines(program, kept)
    return report, probes.candidates


def test_example1_materialisation():
    """Example 1: mat(Π, E) is E plus S(b, b), S(b, c_i), S(c_i, b), S(c_i, c_i)."""
    program, facts, _ = example1(3)
    r = _paper(program, "remat")
    r.maintainer.load(facts)
    s = {f for f in r.facts() if f[0] == "s"}
    expected = {("s", "b", "b")}
    for i in range(1, 4):
        expected |= {("s", "b", f"c{i}"), ("s", f"c{i}", "b"), ("s", f"c{i}", f"c{i}")}
    assert s == expected


@pytest.mark.parametrize("example", [example1, example2], ids=["example1", "example2"])
def test_dred_backward_rederivation_is_quadratic(example, probes):
    """Section 3.2: one-step rederivation evaluates rules backwards; "the first atom
    considers a total of n² facts, so the cost of one-step rederivation is O(n²)"."""
    work = {}
    for n in SIZES:
        # the objects core's backward evaluation, which the probes wrap
        report, candidates = _run(example, n, "dred", probes, "objects")
        assert report.backward_queries > 0
        work[n] = candidates
    assert work[10] > 0
    assert work[40] / work[20] > 3, work


@pytest.mark.parametrize("example", [example1, example2], ids=["example1", "example2"])
def test_dredc_needs_no_backward_evaluation(example, probes):
    """Section 4.1: "By avoiding backward rule evaluation, DRedc removes the dominating
    source of inefficiency on Examples 1 and 2" -- its work grows linearly in n."""
    work = {}
    for n in SIZES:
        # the probes wrap the objects core's evaluator
        report, candidates = _run(example, n, "dredc", probes, "objects")
        assert (report.backward_queries, report.backward_matches, candidates) == (0, 0, 0)
        work[n] = report.total_applications
    assert work[10] > 0
    assert work[40] / work[20] < 2.5, work


@pytest.mark.parametrize("algorithm", ["bf", "counting"])
def test_example1_counters_replace_backward_evaluation(algorithm, probes):
    """Section 5: B/Fc "just checks whether the nonrecursive counter is nonzero"; rule (4)
    is non-recursive, so like Counting it never evaluates a rule backwards."""
    work = {}
    for n in SIZES:
        # the probes wrap the objects core's evaluator
        report, candidates = _run(example1, n, algorithm, probes, "objects")
        assert (report.backward_queries, report.backward_matches, candidates) == (0, 0, 0)
        work[n] = report.total_applications
    assert work[40] / work[20] < 2.5, work


@pytest.mark.parametrize("example", [example1, example2], ids=["example1", "example2"])
def test_all_algorithms_agree_on_paper_examples(example, probes):
    """Theorem 1 (and B/F's correctness): every algorithm reaches mat(Π, E \\ E−)."""
    for algorithm in sorted(ALGORITHMS):
        if algorithm == "counting" and example is example2:
            continue  # rule (7) is recursive
        _run(example, 10, algorithm, probes)  # compares with remat


def test_counting_refuses_recursive_program():
    """Counting "is applicable only to nonrecursive rules" (Section 1): rule (7) is recursive.
    The objects core's `counting` is the paper's and refuses it."""
    with pytest.raises(AlgorithmError) as info:
        _paper(EXAMPLE2, "counting", "objects")
    message = str(info.value)
    assert "recursive" in message
    assert "predicate d " in message


def test_counting_refuses_mutually_recursive_program():
    with pytest.raises(AlgorithmError, match="recursive.*predicate (even|odd) "):
        _paper(MUTUAL, "counting", "objects")


MUTUAL = "even(Y) :- odd(X), s(X, Y).\nodd(Y) :- even(X), s(X, Y).\n"


def test_counting_on_the_arrays_core_materialises_recursive_programs(probes):
    """The arrays core (the default) refuses no recursive program under `counting`: it counts
    non-recursive predicates and runs DRed^c for recursive components (docs/reference/core.md).
    Example 2 and a mutual recursion give remat's materialisation after a deletion."""
    _run(example2, 10, "counting", probes, "arrays")  # compares with remat
    facts = [("even", 0)] + [("s", i, i + 1) for i in range(6)] + [("s", 6, 1)]  # a cycle 1..6
    r = _paper(MUTUAL, "counting", "arrays")
    r.load(facts)
    assert sorted(f[1] for f in r.facts() if f[0] == "odd") == [1, 3, 5]
    r.update(delete=[("s", 2, 3)])  # the cycle is cut: only odd(1) stays
    assert sorted(f[1] for f in r.facts() if f[0] in ("even", "odd")) == [0, 1, 2]
    assert r.lines() == _remat_lines(MUTUAL, [f for f in facts if f != ("s", 2, 3)])


# ------------------------------------------------------------------ update semantics

PATH = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
EMPLOYEE = "employee(X) :- manager(X).\nstaff(X) :- employee(X).\n"
ALL = sorted(ALGORITHMS)
NOT_COUNTING = sorted(set(ALGORITHMS) - {"counting"})


def _path(algorithm: str) -> Reasoner:
    r = _paper(PATH, algorithm)
    r.load([("edge", "a", "b"), ("edge", "b", "c")])
    return r


@pytest.mark.parametrize("algorithm", NOT_COUNTING)
def test_adding_an_explicit_fact_is_a_noop(algorithm):
    """Base contract: adding an already-explicit fact changes nothing and is counted."""
    r = _path(algorithm)
    before = r.lines()
    report = r.update(add=[("edge", "a", "b"), ("edge", "b", "c")])
    assert (report.noop_adds, report.added, report.removed) == (2, 0, 0)
    assert r.lines() == before


@pytest.mark.parametrize("algorithm", NOT_COUNTING)
def test_deleting_a_non_explicit_fact_is_a_noop(algorithm):
    """Deleting a derived-only fact (path(a, c)) or an absent one does nothing and is counted."""
    r = _path(algorithm)
    before = r.lines()
    report = r.update(delete=[("path", "a", "c"), ("edge", "x", "y")])
    assert (report.noop_deletes, report.added, report.removed) == (2, 0, 0)
    assert r.lines() == before
    assert ("path", "a", "c") in r.facts()


@pytest.mark.parametrize("algorithm", ALL)
def test_fact_both_added_and_deleted_is_rejected(algorithm):
    """An update that both adds and deletes one fact is an UpdateError, applied not at all."""
    r = _paper(EMPLOYEE, algorithm)
    r.load([("manager", "ann")])
    before = r.lines()
    with pytest.raises(UpdateError, match="both added and deleted"):
        r.update(add=[("manager", "bob"), ("manager", "cy")], delete=[("manager", "cy")])
    assert r.lines() == before
    assert set(r.maintainer.explicit()) == {("manager", "ann")}


@pytest.mark.parametrize("algorithm", ALL)
def test_deleting_explicit_but_derivable_fact_keeps_it(algorithm):
    """mat(Π, E \\ {F}) still contains F when a rule derives it: employee(ann) from manager(ann)."""
    r = _paper(EMPLOYEE, algorithm)
    r.load([("manager", "ann"), ("employee", "ann"), ("employee", "bob")])
    report = r.update(delete=[("employee", "ann"), ("employee", "bob")])
    assert ("employee", "ann") in r.facts() and ("staff", "ann") in r.facts()
    assert ("employee", "bob") not in r.facts() and ("staff", "bob") not in r.facts()
    assert report.removed == 2 and report.noop_deletes == 0
    assert set(r.maintainer.explicit()) == {("manager", "ann")}


@pytest.mark.parametrize("algorithm", NOT_COUNTING)
def test_wrong_arity_update_is_rejected(algorithm):
    r = _path(algorithm)
    with pytest.raises(UpdateError, match="has 3 arguments but predicate edge has 2"):
        r.update(add=[("edge", "a", "b", "c")])


@pytest.mark.parametrize("algorithm", NOT_COUNTING)
def test_deletion_and_insertion_through_a_recursive_cycle(algorithm):
    """B/Fc (Algorithm 3) with an update that deletes and adds at once: facts proved
    during DELETEUNPROVED via a newly added lower-stratum fact must still propagate.

    E has source(a), edges a->b->c->a, b->e and the cycle d<->e; the update adds
    a->d and deletes a->b. Afterwards reach = {a, d, e}: e follows from d via d->e.
    """
    program = "reach(X) :- source(X).\nreach(Y) :- reach(X), edge(X, Y).\n"
    facts = [("source", "a")] + [("edge", x, y) for x, y in ("ab", "bc", "be", "ca", "de", "ed")]
    r = _paper(program, algorithm)
    r.maintainer.load(facts)
    r.update(add=[("edge", "a", "d")], delete=[("edge", "a", "b")])
    reach = sorted(f[1] for f in r.facts() if f[0] == "reach")
    assert reach == ["a", "d", "e"]
