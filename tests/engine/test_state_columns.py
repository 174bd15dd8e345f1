"""The engine's state as integer columns: a restore from them is the engine it was taken from.

On both cores (engine.fd.columns for the objects core, engine.compact.state for
the arrays core, the default) through the door: facts, explicit facts, the
stored metadata, the columns a restored engine gives back and what it does
next. On the objects core also its internals: birth stamps, clock, derivation
log and counters, term ids.
"""

import random

import numpy as np
import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner, StateMismatch
from fluxmat.engine.fd.columns import NotAtExport
from fluxmat.engine.fd.snapshot import StateDamaged, term_ids

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


CORES = ["arrays", "objects"]


def _reasoner(alg, core="arrays"):
    return Reasoner.from_text(PROGRAM, options=EngineOptions(alg, core=core))


def _columns(cols):
    """A StateColumns as sets (rows in any order): terms, facts with stamps, explicit facts, log."""
    rows = lambda a: {tuple(r) for r in a.reshape(len(a), -1).tolist()}  # noqa: E731
    return (cols.meta, cols.terms, cols.next_term,
            {p: rows(np.column_stack([ids, stamps])) for p, (ids, stamps) in cols.facts.items()},
            {p: rows(ids) for p, ids in cols.explicit.items() if len(ids)},
            {rid: rows(entries) for rid, entries in cols.log.items()})  # fmt: skip


def _same(a, b):
    """Everything observable of two engines is equal: through the door on both cores (facts,
    explicit, the stored metadata, the columns with their term ids and stamps); on the objects
    core its internals too (stamps, log, counters, term ids)."""
    assert b.facts() == a.facts()
    assert b.explicit() == a.explicit()
    assert (b.state_meta(), b.last_id) == (a.state_meta(), a.last_id)
    assert _columns(b.state_columns()) == _columns(a.state_columns())
    if a.core == "objects":
        _same_objects(a.maintainer, b.maintainer)


def _same_objects(fa, fb):
    """The objects core's internals (engine.fd.core): birth stamps, clock, log, counters, term ids."""
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


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
@pytest.mark.parametrize("seed", range(4))
def test_columns_restore_the_engine_and_it_goes_on_the_same(alg, seed, core):
    """After every commit a fresh engine restored from the columns equals the committing one; given the
    next update it gives the same delta, and its changes, committed to a copy of the store, restore
    (from the store's texts) to the same engine: its term ids are the store's."""
    rnd = random.Random(seed)
    a, store = _reasoner(alg, core), MemoryStateStore()
    a.load(rnd.sample(POOL, 6))
    store.commit(-1, a.export_changes(), {})
    for batch in range(12):
        b = _reasoner(alg, core)
        b.restore_columns(a.state_columns())
        _same(a, b)
        assert b.export_changes().size() == 0  # the store already holds it: nothing to write
        add = set(rnd.sample(POOL, 2))
        delete = set(rnd.sample(POOL, 2)) - add
        ra, rb = a.update(add, delete), b.update(add, delete)
        assert (ra.added, ra.removed) == (rb.added, rb.removed)
        copy = copy_store(store)
        copy.commit(batch, b.export_changes(), {})
        c = _reasoner(alg, core)
        c.restore(copy.load())
        assert (c.facts(), c.explicit(), _sizes(c)) == (b.facts(), b.explicit(), _sizes(b))
        store.commit(batch, a.export_changes(), {})


def _sizes(r):
    """`sizes` without the arrays core's `bytes`: its arrays' capacity depends on how they grew."""
    return {k: n for k, n in r.sizes().items() if k != "bytes"}


def copy_store(store):
    copy = MemoryStateStore()
    copy.meta = dict(store.meta)
    copy.tables = {name: dict(t) for name, t in store.tables.items()}
    return copy


@pytest.mark.parametrize("core", CORES)
def test_columns_are_refused_before_the_export(core):
    a = _reasoner("fd-counting", core)
    a.load([("edge", "a", "b")])
    with pytest.raises(NotAtExport):
        a.state_columns()  # the load is not exported yet
    a.export_changes()
    a.update([("edge", "b", "c")], [])
    with pytest.raises(NotAtExport):
        a.state_columns()
    a.export_changes()
    a.update([("edge", "c", "a")], [])  # no new constant: only the journal tells
    with pytest.raises(NotAtExport):
        a.state_columns()


@pytest.mark.parametrize("core", CORES)
def test_columns_of_another_program_are_refused(core):
    a = _reasoner("fd-counting", core)
    a.load([("edge", "a", "b")])
    a.export_changes()
    other = Reasoner.from_text(
        "path(X, Y) :- edge(X, Y).", options=EngineOptions("fd-counting", core=core)
    )
    with pytest.raises(StateMismatch):
        other.restore_columns(a.state_columns())


@pytest.mark.parametrize("core", CORES)
def test_damaged_columns_are_refused(core):
    a = _reasoner("fd-counting", core)
    a.load([("edge", "a", "b"), ("node", "a")])
    a.export_changes()
    cols = a.state_columns()
    ids, stamps = cols.facts["edge"]
    # term ids the snapshot does not hold; negative ones, which numpy would read from the end
    for damaged in (ids + 1000, ids - (max(cols.terms) + 1)):
        cols.facts["edge"] = (damaged, stamps)
        with pytest.raises(StateDamaged):
            _reasoner("fd-counting", core).restore_columns(cols)
