"""Deletions in recursive components of the arrays core: DRed^c or recomputing the component.

DRed^c (Hu, Motik, Horrocks 2018) over-deletes every fact with a derivation
that used a deleted fact and rederives those with another one; in a deep
transitive closure that is most of the closure. Past a share of the
component's present facts (engine.compact.recompute.RECOMPUTE_FRACTION) the
arrays core stops over-deleting and recomputes the component from its inputs.
Both ways must leave mat(P, E) of the current explicit facts: the oracle is
`remat` from scratch on the objects core, and the objects core's incremental
`dredc` (same reports). `core.deletions.taken` counts the components
maintained each way, so every test checks which way it took; setting
`core.deletions.fraction` to 0 (always recompute) or infinity (never) forces
one way on random programs. Updates run set-at-a-time (`small.threshold =
-1`): the one-call path for small updates (engine.compact.small) runs DRed^c
in its compiled interpreter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.compact.plans import HEAD, compile_program
from fluxmat.engine.compact.recompute import RECOMPUTE_FRACTION
from fluxmat.engine.storage import Dictionary
from tests.support.compact import (
    EDGES,
    TC,
    check_against_objects,
    random_case,
    scratch,
    updates,
)
from tests.support.gen import examples

FRACTIONS = (0.0, RECOMPUTE_FRACTION, math.inf)  # always recompute, the default, never
CHAIN = [("edge", i, i + 1) for i in range(40)]  # path: 820 facts, each with one derivation


def _arrays(text: str, algorithm: str = "dredc") -> Reasoner:
    r = Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays"))
    r.maintainer.small.threshold = -1  # set-at-a-time: where the choice is made
    return r


def _load(r: Reasoner, facts, fraction: float = RECOMPUTE_FRACTION) -> None:
    r.load(facts)
    r.maintainer.core.deletions.fraction = fraction  # a load builds a new core


def _check(text: str, fraction: float, load, steps, algorithm: str = "dredc") -> dict:
    """The oracle (arrays == remat from scratch == objects dredc) set-at-a-time at this fraction."""

    def tune(arrays: Reasoner) -> None:
        arrays.maintainer.small.threshold = -1
        arrays.maintainer.core.deletions.fraction = fraction

    noops = algorithm != "fd-counting"  # a run counts its no-ops its own way (engine.compact.fed)
    arrays = check_against_objects(text, algorithm, load, steps, tune, noops)
    return arrays.maintainer.core.deletions.taken


# ---------------------------------------------------------------- oracles


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                 HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_either_way(data):
    """Random programs (recursion, mutual recursion, negation over lower strata), both ways forced."""
    text, universe, load = random_case(data)
    fraction = data.draw(st.sampled_from(FRACTIONS), label="fraction")
    _check(text, fraction, load, data.draw(updates(universe), label="updates"))


NEGATED = TC + "cut(X) :- edge(X, Y), not path(Y, X).\nfar(X, Y) :- path(X, Y), not edge(X, Y).\n"


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=20), updates(EDGES), st.sampled_from(FRACTIONS))
def test_closure_with_cycles_and_negation_above(load, steps, fraction):
    """A recomputed closure's delta feeds the negation and the join above it exactly."""
    _check(NEGATED, fraction, load, steps)


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=20), updates(EDGES))
def test_fully_dynamic_runs_take_the_fallback_too(load, steps):
    """fd-counting on the arrays core (engine.compact.fed) applies runs through the same choice."""
    _check(NEGATED, 0.0, load, steps, algorithm="fd-counting")


# ---------------------------------------------------------------- which way


def test_a_deep_deletion_recomputes_the_component():
    """Deleting the chain's middle edge over-deletes the 420 of 820 paths across it: recomputed."""
    taken = _check(TC, RECOMPUTE_FRACTION, CHAIN, [([], [CHAIN[20]])])
    assert taken == {"dred": 0, "recompute": 1}


def test_a_shallow_deletion_stays_with_dred():
    """Deleting the chain's last edge over-deletes the 40 paths into its end: DRed^c."""
    taken = _check(TC, RECOMPUTE_FRACTION, CHAIN, [([], [CHAIN[-1]]), (CHAIN[-1:], CHAIN[-3:-2])])
    assert taken == {"dred": 2, "recompute": 0}


def test_counters_stay_exact_through_a_recomputation():
    """Facts with a non-recursive derivation keep their counters: a later deletion needs them."""
    text = TC + "path(X, Y) :- shortcut(X, Y).\n"
    load = [*CHAIN, ("shortcut", 0, 39), ("shortcut", 1, 2)]
    steps = [([], [CHAIN[0]]), ([], [("shortcut", 1, 2)]), ([], [CHAIN[20]]), ([CHAIN[0]], [])]
    taken = _check(text, 0.0, load, steps)
    assert taken == {"dred": 0, "recompute": 2}  # the other two over-delete nothing


def test_removing_the_base_rule_of_a_closure_recomputes_it():
    """A program change that takes the base rule out empties the closure through the fallback."""
    r = _arrays(TC + "far(X) :- path(0, X), not edge(0, X).\n")
    _load(r, CHAIN)
    report = r.change_program(delete="path(X, Y) :- edge(X, Y).")
    assert r.maintainer.core.deletions.taken["recompute"] == 1
    assert report.removed == 820 + 39
    fresh = Reasoner.from_text(r.program_text(), options=EngineOptions("remat"))
    fresh.load(CHAIN)
    assert r.facts() == fresh.facts()


# ---------------------------------------------------------------- rederivation and remat


def test_rederivation_probes_the_lower_relation_first():
    """From the head `path(x, z)`: the edges into z (few), not every path from x (many)."""
    analysis = Reasoner.from_text(TC).analysis
    _, plans, _ = compile_program(analysis, Dictionary().intern, True)
    (head_plan,) = [pl for pl in plans if pl.position == HEAD]
    assert [s.pred for s in head_plan.steps] == ["edge", "path"]


@pytest.mark.parametrize("steps", [[([], [CHAIN[1]])], [(CHAIN[:1], CHAIN[5:7])]])
def test_remat_evaluates_from_scratch(steps):
    """`remat` on the arrays core: an update costs the rule instances of a load of the new E."""
    r = Reasoner.from_text(TC, options=EngineOptions("remat", core="arrays"))
    r.load(CHAIN)
    current = set(CHAIN)
    for add, delete in steps:
        report = r.update(add, delete)
        current = (current - set(delete)) | set(add)
        fresh = Reasoner.from_text(TC, options=EngineOptions("remat", core="arrays"))
        assert report.total_applications == fresh.load(current).total_applications
        assert r.facts() == fresh.facts() == scratch(TC, current)


def test_deletions_into_a_large_closure_run_set_at_a_time():
    """The one-call path has no fallback: a deletion reaching a closure of 11,175 rows goes set-at-a-time."""
    text = TC + "mark(X) :- flag(X).\n"
    r = Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays"))
    r.load([("edge", i, i + 1) for i in range(150)])
    small, one = r.maintainer.small, np.zeros((1, 2), np.int64)
    assert small.small({"edge": one}, {})  # an insertion: one call
    assert not small.small({}, {"edge": one})  # reaches path: set-at-a-time
    assert small.small({}, {"flag": one[:, :1]})  # does not reach it
    r.load(CHAIN)  # 820 rows: one call
    assert r.maintainer.small.small({}, {"edge": one})
