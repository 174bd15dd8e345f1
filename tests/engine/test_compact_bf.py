"""Backward/Forward (`bf`, B/F^c) on the arrays core (engine.compact.bf) against bf on the objects core.

Oracle tests (as differential dataflow's tests/bfs.rs): after the load and
every update the arrays core's materialisation under `bf` must equal a
from-scratch `remat` of the current explicit facts and the objects core's
incremental `bf`, with the same facts added and removed (rule-instance counts
differ: the arrays core's plans are its own). Programs are hypothesis-drawn
(joins, constants, self and mutual recursion, negation over lower strata,
bounded arithmetic); updates add and delete, overlap, re-add and delete
facts that are not there. Deletions run set-at-a-time (`bf` never takes the
one-call path for them); insertions either way.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, ParseError, Reasoner, parse_program
from fluxmat.engine.compact import bf_program
from fluxmat.engine.limits import Limits, WorkLimitExceeded
from tests.support.compact import (
    EDGES,
    TC,
    builtin_facts,
    builtin_programs,
    check_against_objects,
    random_case,
    scratch,
    stratified,
    updates,
)
from tests.support.gen import examples

REACH = "reach(Y) :- reach(X), edge(X, Y).\n"


def _parses(text: str) -> bool:
    try:
        parse_program(text, "<test>")
    except ParseError:  # `a % X`: an expression over a constant is not written so
        return False
    return True


def _bf(text: str, algorithm: str = "bf") -> Reasoner:
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays"))


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_and_updates(data):
    text, universe, load = random_case(data)
    steps = data.draw(updates(universe), label="updates")
    check_against_objects(text, "bf", load, steps, against="bf")


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                 HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_with_arithmetic(data):
    """Comparisons, assignments and head expressions, recursion through bounded arithmetic."""
    text = data.draw(builtin_programs(), label="program")
    assume(_parses(text) and stratified(text))
    universe = builtin_facts()
    load = data.draw(st.lists(st.sampled_from(universe), max_size=12), label="load")
    steps = data.draw(updates(universe), label="updates")
    check_against_objects(text, "bf", load, steps, against="bf")


NEGATED = TC + "cut(X) :- edge(X, Y), not path(Y, X).\nfar(X, Y) :- path(X, Y), not edge(X, Y).\n"


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=20), updates(EDGES))
def test_closure_with_cycles_and_negation_above(load, steps):
    """Cycles: a deleted path may have another derivation through a cycle (CHECK finds it)."""
    check_against_objects(NEGATED, "bf", load, steps, against="bf")


MUTUAL = (
    "odd(X, Y) :- edge(X, Y).\nodd(X, Z) :- even(X, Y), edge(Y, Z).\n"
    "even(X, Z) :- odd(X, Y), edge(Y, Z).\nlone(X) :- edge(X, _), not odd(X, X).\n"
)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=20), updates(EDGES))
def test_mutual_recursion(load, steps):
    """One component of two relations: CHECK follows body facts of either."""
    check_against_objects(MUTUAL, "bf", load, steps, against="bf")


# ---------------------------------------------------------------- what it does


def test_bf_neither_over_deletes_nor_recomputes():
    """Deleting a chain's middle edge: B/F deletes exactly the lost paths; DRed^c would recompute."""
    chain = [("edge", i, i + 1) for i in range(40)]
    ways = {"bf": {"dred": 0, "recompute": 0}, "dredc": {"dred": 0, "recompute": 1}}
    for algorithm, taken in ways.items():
        r = _bf(TC, algorithm)
        r.maintainer.small.threshold = -1  # dredc's one-call path has no recomputing fallback
        r.load(chain)
        report = r.update([], [chain[20]])
        assert r.maintainer.core.deletions.taken == taken
        assert report.removed == 1 + 21 * 20  # the edge, the paths from 0..20 to 21..40
        assert r.facts() == scratch(TC, set(chain) - {chain[20]})


def test_a_fact_with_a_counter_is_proved_at_once():
    """Hu et al. 2018, B/F^c: reach(2) keeps its explicit derivation; nothing above it is deleted."""
    r = _bf(REACH)
    r.load([("reach", 0), ("reach", 2), ("edge", 0, 1), ("edge", 1, 2), ("edge", 2, 3)])
    report = r.update([], [("edge", 0, 1)])
    assert (report.removed, report.added) == (2, 0)  # the edge and reach(1)
    assert ("reach", 1) not in r.facts()


def test_long_chain_deleted_in_the_middle():
    """CHECK goes 1,500 facts deep (reach(1501) back to reach(0)) on an explicit stack: no RecursionError.

    The chain 0 -> 1 -> ... -> 3000 with a bypass 1500 -> 1502: deleting the
    edge 1501 -> 1502 leaves reach(1502) a derivation through reach(1500), which
    CHECK proves by chaining back to the explicit reach(0).
    """
    chain = [("edge", i, i + 1) for i in range(3000)]
    load = [("reach", 0), ("edge", 1500, 1502), *chain]
    r = _bf(REACH)
    r.load(load)
    report = r.update([], [("edge", 1500, 1501)])
    assert (report.removed, report.added) == (2, 0) and ("reach", 1501) not in r.facts()
    assert r.facts() == scratch(REACH, set(load) - {("edge", 1500, 1501)})
    report = r.update([], [("reach", 0)])
    assert report.removed == 3000 and not [f for f in r.facts() if f[0] == "reach"]


def test_a_lower_fact_added_in_the_same_update_is_not_a_proof():
    """Proofs use only what survives of the old state; a fact derivable through a new edge is inserted.

    reach(2) loses edge(1, 2) and gains edge(0, 2) in one update: it is
    deleted and inserted again (no net change), its consequence reach(3) too.
    """
    load = [("reach", 0), ("edge", 0, 1), ("edge", 1, 2), ("edge", 2, 3)]
    steps = [
        ([("edge", 0, 2)], [("edge", 1, 2)]),
        ([("edge", 1, 2)], [("edge", 0, 2), ("edge", 0, 1)]),
    ]
    text = REACH + "low(X) :- reach(X), not edge(0, X).\n"
    check_against_objects(text, "bf", load, steps, against="bf")


def test_deletions_take_the_set_path():
    """The one-call interpreter runs DRed^c: with bf only insertions may use it."""
    r = _bf(REACH)
    r.load([("reach", 0), ("edge", 0, 1)])
    one = np.zeros((1, 2), np.int64)
    assert r.maintainer.small.small({"edge": one}, {})
    assert not r.maintainer.small.small({}, {"edge": one})
    assert _bf(REACH, "dredc").maintainer.small.small({}, {"edge": one})


@pytest.mark.parametrize("algorithm", ["bf", "dredc"])
def test_program_change(algorithm):
    """Removing a recursive rule: its heads are checked against the rules left (B/F) or over-deleted (DRed^c)."""
    text = TC + "path(X, Y) :- path(Y, X), sym(X).\n"
    load = [("edge", 1, 2), ("edge", 2, 3), ("sym", 3), ("sym", 1)]
    r = _bf(text, algorithm)
    r.load(load)
    r.change_program(delete="path(X, Y) :- path(Y, X), sym(X).")
    assert r.facts() == scratch(TC, set(load))
    r.change_program(add="path(X, Y) :- path(Y, X), sym(X).")
    r.update([], [("edge", 2, 3)])
    assert r.facts() == scratch(text, set(load) - {("edge", 2, 3)})


def test_a_repeated_variable_in_a_recursive_body_atom():
    """CHECK reads body facts whose columns repeat a free variable: q(1, 1) is proved through q(5, 5).

    From the head q(1, 1) the plan joins e(1, 1) first, then q(X, X) with X free.
    """
    text = "q(X, Y) :- s(X, Y).\nq(Y, W) :- q(X, X), e(Y, W).\n"
    load = [("s", 1, 1), ("s", 5, 5), ("e", 1, 1), ("e", 2, 2)]
    r = check_against_objects(text, "bf", load, [([], [("s", 1, 1)])], against="bf")
    assert ("q", 1, 1) in r.facts()


# ---------------------------------------------------------------- the compiled CHECK


def _run_bf(
    text: str, load: list[tuple], steps, budget: int | None = None, python: bool = False
) -> list:
    """Each update's (added, removed, instances per rule) under bf on the arrays core.

    `python`: CHECK in Python (as for plans with built-ins); `budget`: checks per compiled call.
    """
    with pytest.MonkeyPatch.context() as mp:
        if python:
            mp.setattr(bf_program.Checker, "build", classmethod(lambda cls, *a: None))
        if budget is not None:
            mp.setattr(bf_program, "BUDGET", budget)
        r = _bf(text)
        r.load(load)
        out = []
        for add, delete in steps:
            rep = r.update(add, [f for f in delete if f not in add])
            out.append((rep.added, rep.removed, dict(rep.rule_applications), r.facts()))
        return out


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_compiled_check_does_what_the_python_check_does(data):
    """The compiled CHECK proves the same facts and counts the same rule instances as the Python one.

    With a budget of one check per call, every call goes on from a stack left mid-search.
    """
    text, universe, load = random_case(data)
    steps = data.draw(updates(universe), label="updates")
    want = _run_bf(text, load, steps, python=True)
    assert _run_bf(text, load, steps) == want
    assert _run_bf(text, load, steps, budget=1) == want


def test_the_compiled_check_serves_plans_without_built_ins():
    """Plans with a comparison or arithmetic are checked in Python; the others compiled."""
    core = _bf(TC).maintainer.core
    comp = next(c for c in core.comps if c.recursive)
    assert bf_program.Checker.build(core, comp, _flags(core, comp)) is not None
    text = "n(X) :- s(X).\nn(Y) :- n(X), Y = X + 1, Y < 5.\n"
    core = _bf(text).maintainer.core
    comp = next(c for c in core.comps if c.recursive)
    assert bf_program.Checker.build(core, comp, _flags(core, comp)) is None


def _flags(core, comp) -> dict:
    zeros = {p: np.zeros(core.rels[p].n, np.uint8) for p in comp.preds}
    return {name: zeros for name in ("checked", "proved", "delayed", "survivors")}


def test_a_long_compiled_check_meets_the_work_limit():
    """The work of a search thousands of checks long is reported between calls: the limit stops it."""
    chain = [("edge", i, i + 1) for i in range(3000)]
    load = [("reach", 0), ("edge", 1500, 1502), *chain]
    r = Reasoner.from_text(
        REACH, options=EngineOptions("bf", core="arrays", limits=Limits.of(work=2000))
    )
    r.load(load)
    with pytest.raises(WorkLimitExceeded):
        r.update([], [("edge", 1500, 1501)])


def test_compiled_check_counts_a_long_search_as_the_python_check():
    """A search 1,500 facts deep with forward chaining: the same facts and instances, resumed or not.

    reach(1502) is proved back through reach(1500) to reach(0); proving
    reach(0) chains forward along the whole chain (instances counted too).
    """
    chain = [("edge", i, i + 1) for i in range(1600)]
    load = [("reach", 0), ("edge", 1500, 1502), *chain]
    steps = [([], [("edge", 1500, 1501)]), ([], [("edge", 700, 701)])]
    want = _run_bf(REACH, load, steps, python=True)
    assert _run_bf(REACH, load, steps) == want
    assert _run_bf(REACH, load, steps, budget=7) == want
