"""The arrays core's load path: tables filled in one pass, indexes left stale by large inserts.

A large insert inside an update (engine.compact.relation.DEFER_MIN) stops
maintaining a relation's indexes until a plan probes them or the update ends
(`Rel.flush`); growing and restoring fill the tables in one pass
(kernels.fill_distinct, fill_indexes). Checked against the key-by-key path
(the same rows, the same index chains) and, end to end, against `remat` from
scratch with every insert deferred.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact import relation
from fluxmat.engine.compact.relation import Rel
from tests.support.compact import TC, random_case, scratch, updates
from tests.support.gen import examples

MASKS = [(0,), (1,), (0, 1), (1, 2), (0, 2)]


def _chains(rel: Rel) -> list[dict[tuple, list[int]]]:
    """Per index, each key's rows as its chain lists them (newest first)."""
    out = []
    for k, mask in enumerate(rel.masks):
        by: dict[tuple, list[int]] = {}
        for key in {tuple(rel.cols[r, list(mask)]) for r in range(rel.n)}:
            vals = np.zeros(rel.arity, np.int64)
            vals[list(mask)] = key
            r = rel.islots[k][K.find(rel.cols, rel.islots[k], vals, rel.imask[k])]
            while r >= 0:
                by.setdefault(key, []).append(int(r))
                r = rel.inext[k][r]
        out.append(by)
    return out


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 3), st.data())
def test_deferred_indexes_equal_maintained_ones(arity, data):
    """Rows, full-key lookups and every index chain equal the key-by-key path's after each flush."""
    masks = [m for m in MASKS if max(m) < arity]
    batches = data.draw(
        st.lists(st.lists(st.tuples(*[st.integers(0, 6)] * arity), max_size=40), max_size=6)
    )
    kept, lazy = Rel("p", arity, masks), Rel("p", arity, masks)
    lazy.defer = True
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(relation, "DEFER_MIN", 0)
        for batch in batches:
            keys = np.array(batch, np.int64).reshape(len(batch), arity)
            n = lazy.n
            assert kept.insert(keys).tolist() == lazy.insert(keys).tolist()
            assert lazy.stale == (len(batch) >= max(1, n // 2))
            lazy.flush()
            assert not lazy.stale
            assert _chains(lazy) == _chains(kept)
            assert lazy.lookup(kept.cols[: kept.n]).tolist() == list(range(kept.n))


def test_fill_distinct_reports_a_repeated_row():
    cols = np.array([[1, 2], [3, 4], [1, 2]], np.int64)
    slots = np.full(16, -1, np.int32)
    assert K.fill_distinct(cols, 3, slots, np.ones(2, np.bool_)) == 2
    slots.fill(-1)
    assert K.fill_distinct(cols, 2, slots, np.ones(2, np.bool_)) == -1


def _set_path(reasoner: Reasoner) -> Reasoner:
    reasoner.maintainer.small.threshold = -1  # every update set-at-a-time (engine.compact.core)
    return reasoner


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                  HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_every_insert_deferred_equals_remat(data):
    """Random programs (recursion, negation, the closure module) with every insert leaving indexes stale."""
    text, universe, load = random_case(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(relation, "DEFER_MIN", 0)
        arrays = _set_path(Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays")))
        arrays.load(load)
        current = set(load)
        assert arrays.facts() == scratch(text, current)
        for add, delete in data.draw(updates(universe), label="updates"):
            delete = [f for f in delete if f not in add]
            arrays.update(add, delete)
            current = (current - set(delete)) | set(add)
            assert arrays.facts() == scratch(text, current), f"+{add} -{delete}"
    assert not any(rel.stale for rel in arrays.maintainer.core.rels.values())


def test_large_transitive_closure_load_and_updates():
    """A load large enough to defer by itself (DEFER_MIN), then deletions and insertions set-at-a-time."""
    rng = np.random.default_rng(7)
    edges = {tuple(sorted(map(int, rng.choice(300, 2, replace=False)))) for _ in range(1200)}
    facts = sorted(("edge", u, v) for u, v in edges)
    arrays = _set_path(Reasoner.from_text(TC, options=EngineOptions("remat", core="arrays")))
    arrays.load(facts)
    assert arrays.facts() == scratch(TC, set(facts))
    gone, new = facts[::7], [("edge", u, u + 1) for u in range(0, 290, 3)]
    arrays.update(new, gone)
    assert arrays.facts() == scratch(TC, (set(facts) - set(gone)) | set(new))


def _columns_of(facts: list[tuple]):
    r = Reasoner.from_text(TC, options=EngineOptions("fd-counting", core="arrays"))
    r.load(facts)
    r.export_changes()
    return r, r.state_columns()


def test_restore_loads_rows_in_bulk_and_keeps_maintaining():
    facts = [("edge", i, i + 1) for i in range(40)] + [("edge", 40, 0)]
    r, cols = _columns_of(facts)
    back = Reasoner.from_text(TC, options=EngineOptions("fd-counting", core="arrays"))
    back.restore_columns(cols)
    assert back.facts() == r.facts() and back.explicit() == r.explicit()
    _set_path(back).update([("edge", 3, 50)], [("edge", 40, 0)])
    assert back.facts() == scratch(TC, (set(facts) - {("edge", 40, 0)}) | {("edge", 3, 50)})


def test_restore_refuses_a_fact_stored_twice():
    from fluxmat.engine import StateDamaged

    _r, cols = _columns_of([("edge", 1, 2), ("edge", 2, 3)])
    tids, values = cols.facts["path"]
    cols.facts["path"] = (np.concatenate([tids, tids[:1]]), np.concatenate([values, values[:1]]))
    back = Reasoner.from_text(TC, options=EngineOptions("fd-counting", core="arrays"))
    with pytest.raises(StateDamaged, match="stored twice"):
        back.restore_columns(cols)


@pytest.mark.parametrize("algorithm", ["remat", "dredc"])
def test_facts_no_rule_names_survive_a_new_core(algorithm):
    """A second load, and a `remat` update, build a new core: a relation no rule names keeps its facts."""
    r = _set_path(Reasoner.from_text(TC, options=EngineOptions(algorithm, core="arrays")))
    r.load([("g", 1, 1), ("edge", 1, 2)])
    r.update([("edge", 2, 3)], [])
    assert ("g", 1, 1) in r.facts()
    r.load([("g", 2, 2)])
    assert r.facts() == {("g", 2, 2)}
