"""A run's net explicit change on columns (engine.compact.net) against the update-by-update definition.

engine.compact.fed: in submission order the last operation on a fact wins,
no-ops (an add of an explicit fact, a delete of a non-explicit one) are
dropped as they come, against E as the earlier updates left it.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.engine.compact.net import net, unique_rows
from tests.support.profile import examples

FACTS = [(a, b) for a in range(3) for b in range(2)]


def _reference(ops, before):
    """The definition, one operation at a time: net adds, deletes, no-ops, and each fact's toggling updates."""
    now, toggles, noop = dict.fromkeys(FACTS, False), {}, [0, 0]
    now.update(dict.fromkeys(before, True))
    for seq, add, fact in ops:
        if now[fact] == add:
            noop[0 if add else 1] += 1
            continue
        now[fact] = add
        toggles.setdefault(fact, []).append(seq)
    adds = {f for f, seqs in toggles.items() if len(seqs) % 2 and now[f]}
    dels = {f for f, seqs in toggles.items() if len(seqs) % 2 and not now[f]}
    return adds, dels, noop, toggles


update = st.lists(st.tuples(st.booleans(), st.sampled_from(FACTS)), max_size=4).filter(
    lambda u: not any((not a, f) in u for a, f in u)  # an update never adds and deletes one fact
)


@settings(max_examples=examples(200), deadline=None)
@given(updates=st.lists(update, min_size=1, max_size=6), before=st.sets(st.sampled_from(FACTS)))
def test_the_columns_net_is_the_one_by_one_net(updates, before):
    ops = [(seq, add, f) for seq, u in enumerate(updates, start=1) for add, f in dict.fromkeys(u)]
    adds, dels, noop, toggles = _reference(ops, before)
    parts = {"r": [(np.array([s for s, _, _ in ops], np.int64), np.array([a for _, a, _ in ops], np.bool_),
                    np.array([f for _, _, f in ops], np.int64).reshape(len(ops), 2))]}  # fmt: skip
    got = net(
        parts, {"r": 2}, lambda _p, keys: np.array([tuple(k) in before for k in keys.tolist()]), 1
    )
    assert set(map(tuple, got.add.get("r", np.empty((0, 2))).tolist())) == adds
    assert set(map(tuple, got.delete.get("r", np.empty((0, 2))).tolist())) == dels
    assert [got.noop_adds, got.noop_deletes] == noop
    assert {f: (seqs[0], len(seqs)) for f, seqs in toggles.items()} == {
        f: tuple(int(x[0]) for x in got.toggles_of("r", np.array([f])))
        for t in got.toggled.values() for f in map(tuple, t.keys.tolist())
    }  # fmt: skip
    assert set(got.updates.tolist()) == {s for seqs in toggles.values() for s in seqs}


def test_the_same_fact_twice_in_one_update_is_one_operation():
    """["e", "a", "b"] listed twice in one update's additions adds it once: the second is no no-op."""
    parts = {"r": [(np.array([1, 1]), np.array([True, True]), np.array([[0, 1], [0, 1]]))]}
    got = net(parts, {"r": 2}, lambda _p, keys: np.zeros(len(keys), np.bool_), 1)
    assert got.add["r"].tolist() == [[0, 1]] and (got.noop_adds, got.noop_deletes) == (0, 0)


ROWS = st.integers(1, 3).flatmap(
    lambda width: st.lists(
        st.lists(st.one_of(st.integers(0, 5), st.integers(0, 2**40), st.integers(-3, 3)), min_size=width,
                 max_size=width),
        max_size=12,
    ).map(lambda rows: np.array(rows, np.int64).reshape(len(rows), width))
)  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(ROWS)
def test_unique_rows_is_numpys_unique_rows_also_when_packed(rows):
    """Packed into one key per row (small non-negative ids) or not: the same unique rows, order and inverse."""
    uniq, inverse = unique_rows(rows)
    want, want_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert uniq.tolist() == want.tolist() and inverse.tolist() == want_inverse.reshape(-1).tolist()
