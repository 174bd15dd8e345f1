"""The arrays core (`EngineOptions(core="arrays")`, engine.compact) against the objects core and remat.

Oracle tests (as differential dataflow's tests/bfs.rs): hypothesis draws a
program -- joins, constants (ints and strings, so the term dictionary mixes
them), repeated variables, recursion (self and mutual), stratified negation
(with variables local to the negation), a symmetric-transitive relation (the
closure module) -- and a sequence of updates (adds and deletes, overlapping,
re-adding deleted facts, deleting facts that are not there). After the load
and after every update the arrays core's materialisation must equal a
from-scratch `remat` of the current explicit facts and the objects core's
incremental `dredc`, and its report (facts added and removed, no-ops) must
equal the objects core's.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from tests.support.compact import (
    EDGES,
    NODES,
    TC,
    check_against_objects,
    random_case,
    scratch,
    updates,
)
from tests.support.gen import examples

ARRAYS_ALGORITHMS = ("counting", "dred", "dredc", "remat")


@settings(max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_and_updates(data):
    text, universe, load = random_case(data)
    algorithm = data.draw(st.sampled_from(ARRAYS_ALGORITHMS), label="algorithm")
    check_against_objects(text, algorithm, load, data.draw(updates(universe), label="updates"))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=15), updates(EDGES))
def test_transitive_closure_with_cycles(load, steps):
    """DRed^c over a recursive component: cycles make over-deletion and rederivation matter."""
    text = TC + "cut(X) :- edge(X, Y), not path(Y, X).\n"
    check_against_objects(text, "dredc", load, steps)


SAME = [("link", x, y) for x in NODES for y in NODES] + [
    ("same", x, y) for x in NODES[:3] for y in NODES[:3]
]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(SAME), max_size=15), updates(SAME))
def test_symmetric_transitive_closure(load, steps):
    """The closure module: explicit and derived base edges, components that split and merge."""
    text = ("same(X, Y) :- same(Y, X).\nsame(X, Z) :- same(X, Y), same(Y, Z).\n"
            "same(X, Y) :- link(X, Y).\nalone(X) :- link(X, X), not same(X, a).\n")  # fmt: skip
    check_against_objects(text, "counting", load, steps)


@pytest.mark.parametrize("modules", [True, False], ids=["closure-module", "generic"])
def test_closure_module_and_generic_agree(modules):
    text = "s(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z).\ns(X, Y) :- e(X, Y).\n"
    r = Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays", modules=modules))
    r.load([("e", 1, 2), ("e", 2, 3), ("e", 4, 5)])
    assert ("s", 3, 1) in r.facts() and ("s", 1, 4) not in r.facts()
    r.update([("e", 3, 4)], [("e", 1, 2)])
    assert ("s", 2, 5) in r.facts() and ("s", 1, 2) not in r.facts()
    assert r.facts() == scratch(text, {("e", 2, 3), ("e", 4, 5), ("e", 3, 4)})
