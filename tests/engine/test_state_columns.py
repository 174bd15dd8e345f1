"""The engine's state as integer columns (engine.fd.columns): a restore from them is the engine it was taken from."""

import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner, StateMismatch
from fluxmat.engine.fd.columns import NotAtExport
from fluxmat.engine.fd.snapshot import StateDamaged, export_changes, term_ids

PROGRAM = (
    "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), path(Y, Z).\n"
    "lonely(X) :- node(X), not path(X, _).\n"
    'named(X, "n", <http://e/x>, 7) :- node(X).\n'
)
POOL = (
    [("edge", x, y) for x in "abcd" for y in "abcd"]
    + [("node", x) for x in "abcd"]
    + [("node", "é")]
)


def _reasoner(alg):
    return Reasoner.from_text(PROGRAM, alg)


def _same(a, b):
    """Everything observable of two engines is equal (facts, explicit, stamps, log, counters, term ids)."""
    fa, fb = a.maintainer, b.maintainer
    assert b.facts() == a.facts()
    assert b.explicit() == a.explicit()
    assert {fb.decode(*k): v for k, v in fb.born.items()} == {
        fa.decode(*k): v for k, v in fa.born.items()
    }
    assert (fb.clock, fb.last_seq, fb.last_id) == (fa.clock, fa.last_seq, fa.last_id)
    if hasattr(fa, "log_entries"):
        assert fb.log_size() == fa.log_size()
        dec = lambda m: {m.decode(*k): v for k, v in m.support_counts().items()}  # noqa: E731
        assert dec(fb) == dec(fa)
    ta, tb = term_ids(fa), term_ids(fb)
    decode = lambda m, t: ({m.dictionary.values[e]: i for e, i in t[0].items()}, t[1], t[2])  # noqa: E731
    assert decode(fb, tb) == decode(fa, ta)


@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(4))
def test_columns_restore_the_engine_and_it_goes_on_the_same(alg, seed):
    """After every commit a fresh engine restored from the columns equals the committing one; given the
    next update it gives the same delta, and its changes, committed to a copy of the store, restore
    (from the store's texts) to the same engine: its term ids are the store's."""
    rnd = random.Random(seed)
    a, store = _reasoner(alg), MemoryStateStore()
    a.load(rnd.sample(POOL, 6))
    store.commit(-1, a.export_changes(), {})
    for batch in range(12):
        b = _reasoner(alg)
        b.restore_columns(a.state_columns())
        _same(a, b)
        assert b.export_changes().size() == 0  # the store already holds it: nothing to write
        add = set(rnd.sample(POOL, 2))
        delete = set(rnd.sample(POOL, 2)) - add
        ra, rb = a.update(add, delete), b.update(add, delete)
        assert (ra.added, ra.removed) == (rb.added, rb.removed)
        copy = copy_store(store)
        copy.commit(batch, b.export_changes(), {})
        c = _reasoner(alg)
        c.restore(copy.load())
        assert (c.facts(), c.explicit(), c.sizes()) == (b.facts(), b.explicit(), b.sizes())
        store.commit(batch, a.export_changes(), {})


def copy_store(store):
    copy = MemoryStateStore()
    copy.meta = dict(store.meta)
    copy.tables = {name: dict(t) for name, t in store.tables.items()}
    return copy


def test_columns_are_refused_before_the_export():
    a = _reasoner("fd-counting")
    a.load([("edge", "a", "b")])
    with pytest.raises(NotAtExport):
        a.state_columns()  # the load is not exported yet
    export_changes(a.maintainer)
    a.update([("edge", "b", "c")], [])
    with pytest.raises(NotAtExport):
        a.state_columns()
    export_changes(a.maintainer)
    a.update([("edge", "c", "a")], [])  # no new constant: only the journal tells
    with pytest.raises(NotAtExport):
        a.state_columns()


def test_columns_of_another_program_are_refused():
    a = _reasoner("fd-counting")
    a.load([("edge", "a", "b")])
    export_changes(a.maintainer)
    other = Reasoner.from_text("path(X, Y) :- edge(X, Y).", "fd-counting")
    with pytest.raises(StateMismatch):
        other.restore_columns(a.state_columns())


def test_damaged_columns_are_refused():
    a = _reasoner("fd-counting")
    a.load([("edge", "a", "b"), ("node", "a")])
    export_changes(a.maintainer)
    cols = a.state_columns()
    ids, stamps = cols.facts["edge"]
    cols.facts["edge"] = (ids + 1000, stamps)  # term ids the snapshot does not hold
    with pytest.raises(StateDamaged):
        _reasoner("fd-counting").restore_columns(cols)
