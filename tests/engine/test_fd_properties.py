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
from hypothesis import HealthCheck, note, settings
from hypothesis import given as hgiven
from hypothesis import strategies as st

from fluxmat.engine import analyse, create, parse_program
from tests.support.gen import apply_update, examples, scenarios

FD = ("fd-dred", "fd-counting")

SETTINGS = settings(
    max_examples=examples(40),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def visible(facts) -> set[tuple]:
    return {f for f in facts if not f[0].startswith("__")}


def remat(text: str, explicit) -> set[tuple]:
    m = create("remat", analyse(parse_program(text)))
    m.load(sorted(explicit, key=repr))
    return visible(m.facts())


def bound(text: str, mats: list[set], updates) -> int:
    """A generous unit budget: proportional to rules x facts x updates."""
    rules = text.count(":-")
    size = max(len(x) for x in mats) + sum(len(a) + len(d) for a, d in updates) + 10
    return 50 * (rules + 1) * size * (len(updates) + 1)


schedules = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**16),
        "budgets": st.lists(st.integers(0, 8), min_size=8, max_size=8),
        "tail": st.lists(st.integers(1, 5), max_size=4),
    }
)


def drive(algorithm: str, case, schedule, interleaved: bool = True, module: str = "") -> None:
    gp, initial, updates = case
    note(f"program:\n{gp.text}")
    note(f"initial: {sorted(initial, key=repr)}")
    for i, (add, delete) in enumerate(updates, 1):
        note(f"update {i}: add={add} delete={delete}")
    note(f"schedule: {schedule}, interleaved={interleaved}")

    m = create(algorithm, analyse(parse_program(gp.text)))
    assert not module or module in m.closures, "the closure module is not taken"
    m.load(sorted(initial, key=repr))
    m.configure(seed=schedule["seed"], interleaved=interleaved)
    Es = [frozenset(initial)]
    for add, delete in updates:
        Es.append(apply_update(Es[-1], add, delete))
    mats = [remat(gp.text, e) for e in Es]
    limit = bound(gp.text, mats, updates)

    start = visible(m.facts())
    assert start == mats[0], "after load"
    state = set(start)  # rebuilt from the consistency points only
    snap = set(start)  # the materialisation at the previous point
    last = [0]  # index into Es of the last submitted update

    def check_point(where: str) -> None:
        nonlocal state, snap
        point = m.poll()
        if not m.quiescent:
            assert point is None, f"{where}: poll() while work is pending"
            return
        now = visible(m.facts())
        i = last[0]
        assert now == mats[i], (
            f"{where}: quiescent but differs from mat(P, E_{i}): "
            f"missing {sorted(mats[i] - now, key=repr)}, extra {sorted(now - mats[i], key=repr)}"
        )
        assert set(m.explicit()) == set(Es[i]), f"{where}: explicit facts differ from E_{i}"
        assert point is not None and point.through == f"u{i}", f"{where}: through {point}"
        added, removed = set(point.added), set(point.removed)
        assert len(added) == len(point.added) and len(removed) == len(point.removed)
        assert added == now - snap, f"{where}: point.added"
        assert removed == snap - now, f"{where}: point.removed"
        state = (state - removed) | added
        snap = now

    units = 0
    for i, (add, delete) in enumerate(updates, 1):
        m.submit(add, delete, id=f"u{i}")
        last[0] = i
        budget = schedule["budgets"][(i - 1) % len(schedule["budgets"])]
        if budget:
            units += m.step(budget)
            check_point(f"after update {i} + {budget} units")
    for budget in schedule["tail"]:
        units += m.step(budget)
        check_point(f"tail step {budget}")
    units += m.run(max_units=limit)
    check_point("after run")
    assert m.quiescent
    assert visible(m.facts()) == mats[-1]
    assert state == mats[-1], "consistency-point deltas do not rebuild the final materialisation"
    assert units <= limit + 1000


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
