"""The quiescence theorem of the fully dynamic algorithms, on random cases.

For random programs (recursion, cycles, stratified negation), initial facts and
update sequences from tests/support/gen.py, and random schedules -- a random seed for the
engine's fair scheduler, random budgets 0..k of work between submits (updates
arrive mid-propagation; budget 0 = several submits before any step) -- both
`fd-dred` and `fd-counting` must satisfy:

* whenever the engine is quiescent (checked after every `step` call), the
  materialisation equals mat(P, E_i) of the last submitted update U_i, computed
  from scratch by `remat`, and `explicit()` equals E_i;
* `run(max_units=BOUND)` terminates (no `NotQuiescent`) with mat(P, E_n);
* the consistency points: each polled delta is the exact change since the
  previous point, `through` names the last submitted update, and applying all
  deltas in order to the initial materialisation rebuilds the final one;
* the same with the sequential schedule (`configure(interleaved=False)`).

Scale with FLUXMAT_HYPOTHESIS_SCALE (tests/support/gen.py `examples`).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import given as hgiven

from tests.support.fd import FD, drive, schedules
from tests.support.gen import examples, scenarios

SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("algorithm", FD)
@SETTINGS
@hgiven(case=scenarios(), schedule=schedules)
def test_quiescent_states_equal_remat_interleaved(algorithm, case, schedule):
    drive(algorithm, case, schedule, interleaved=True)


@pytest.mark.parametrize("algorithm", FD)
@SETTINGS
@hgiven(case=scenarios(recursion=True), schedule=schedules)
def test_quiescent_states_equal_remat_recursive(algorithm, case, schedule):
    """The same, recursive programs only (cycles: where recursion stops matter)."""
    drive(algorithm, case, schedule, interleaved=True)


@pytest.mark.parametrize("algorithm", FD)
@settings(SETTINGS, max_examples=examples(25))
@hgiven(case=scenarios(), schedule=schedules)
def test_quiescent_states_equal_remat_sequential(algorithm, case, schedule):
    drive(algorithm, case, schedule, interleaved=False)


@pytest.mark.parametrize("algorithm", FD)
@SETTINGS
@hgiven(case=scenarios(closure="stc"), schedule=schedules)
def test_quiescent_states_equal_remat_stc_module(algorithm, case, schedule):
    """The same with p1 symmetric-transitive: its stc module is kept operation by
    operation (engine.fd.upkeep, engine.modules.components), its rules never evaluated."""
    drive(algorithm, case, schedule, interleaved=True, module="p1")


@pytest.mark.parametrize("algorithm", FD)
@SETTINGS
@hgiven(case=scenarios(closure="tc"), schedule=schedules)
def test_quiescent_states_equal_remat_tc_module(algorithm, case, schedule):
    """The same with p1 transitive: its tc module is kept operation by operation as
    reachability (engine.modules.reach.Reachability), its rule never evaluated."""
    drive(algorithm, case, schedule, interleaved=True, module="p1")
