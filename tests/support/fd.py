"""Driving the fully dynamic algorithms on random cases: schedules of updates, checks of every quiescent state."""

from __future__ import annotations

from hypothesis import note
from hypothesis import strategies as st

from fluxmat.engine import analyse, create, parse_program
from tests.support.gen import apply_update

FD = ("fd-dred", "fd-counting")


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
