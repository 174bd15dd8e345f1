"""Fully dynamic updates and the stream's state on the arrays core (engine.compact.fed, engine.compact.state).

Oracle tests: hypothesis draws a program (recursion, negation, a closure
module; tests.test_compact_core's generator) and batches of updates fed with
and without overlap, polled at random points. The arrays core's deltas and
materialisation must equal the objects engine's `fd-counting` (the oracle)
and a from-scratch `remat`, every named cause must be the one update whose
sequential application changed the fact, and an arrays engine restored from
its exported state (accumulated in a MemoryStateStore as the job does) must
equal the original and keep maintaining correctly.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import AnalysisError, EngineOptions, Fed, Reasoner, StateMismatch
from tests.support.compact import programs
from tests.support.profile import examples

VALUES = (1, 2, "a", "b")


def _universe(text: str) -> list[tuple]:
    out = [("e", x, y) for x in VALUES for y in VALUES] + [("f", x) for x in VALUES]
    arity = Reasoner.from_text(text).analysis.arity
    return out + [(p, *VALUES[: arity[p]]) for p in ("p", "q", "r", "s") if p in arity]


def _valid(text: str) -> bool:
    try:
        Reasoner.from_text(text)
    except AnalysisError:
        return False
    return True


def _scratch(text: str, explicit) -> set[tuple]:
    r = Reasoner.from_text(text, options=EngineOptions("remat", modules=False, core="objects"))
    r.load(sorted(explicit, key=repr))
    return r.facts()


def arrays(text: str, algorithm: str = "fd-counting") -> Reasoner:
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays"))


def _batches(universe: list[tuple]):
    facts = st.lists(st.sampled_from(universe), max_size=4)
    update = st.tuples(facts, facts)
    batch = st.tuples(
        st.lists(update, min_size=1, max_size=5), st.booleans(), st.booleans(), st.booleans()
    )
    return st.lists(
        batch, min_size=1, max_size=6
    )  # (updates, overlap, poll after it, restore after it)


class _Oracle:
    """E applied update by update, and which updates changed each fact since the last poll."""

    def __init__(self, text: str, explicit: set):
        self.text, self.explicit = text, set(explicit)
        self.mat = _scratch(text, self.explicit)
        self.changed: dict[tuple, list[int]] = {}

    def apply(self, n: int, add, delete) -> None:
        self.explicit = (self.explicit - set(delete)) | set(add)
        after = _scratch(self.text, self.explicit)
        for f in self.mat ^ after:
            self.changed.setdefault(f, []).append(n)
        self.mat = after


def check_fed(text: str, algorithm: str, load: list, batches) -> None:
    a, o = arrays(text, algorithm), Reasoner.from_text(text, "fd-counting")
    store = MemoryStateStore()
    a.load(load), o.load(load)
    store.commit(-1, a.export_changes(), {})
    a.poll(), o.poll()
    oracle, n = _Oracle(text, set(load)), 0
    for b, (updates, overlap, poll, restore) in enumerate(batches):
        fed = []
        for add, delete in updates:
            n += 1
            delete = [f for f in delete if f not in add]
            fed.append(Fed(n, add, delete, id=f"u{n}"))
            oracle.apply(n, add, delete)
        got = a.feed(fed, overlap=overlap)
        o.feed(fed, overlap=overlap)
        where = f"batch {b}"
        assert a.facts() == o.facts() == oracle.mat, where
        assert a.explicit() == oracle.explicit, where
        assert a.last_id == o.last_id == f"u{n}" and a.pending == 0, where
        if poll:
            _check_point(a.poll(), o.poll(), oracle, got.keys, where)
        store.commit(b, a.export_changes(), {})
        if restore:
            pending_poll = not poll  # a restored engine starts a new delta: the oracle does too
            a = arrays(text, algorithm)
            a.restore(store.load())
            assert a.facts() == o.facts() and a.explicit() == oracle.explicit, where
            assert a.last_id == f"u{n}", where
            if pending_poll:
                o.poll()
            oracle.changed.clear()


def _check_point(pa, po, oracle: _Oracle, keys: dict, where: str) -> None:
    assert sorted(pa.added, key=repr) == sorted(po.added, key=repr), where
    assert sorted(pa.removed, key=repr) == sorted(po.removed, key=repr), where
    assert pa.through == po.through, where
    for facts, by in ((pa.added, pa.added_by), (pa.removed, pa.removed_by)):
        assert len(facts) == len(by), where
        for f, seq in zip(facts, by, strict=True):
            if seq:  # named: exactly this update, alone, changed the fact
                assert oracle.changed[f] == [keys.get(seq, seq)], (where, f, seq, oracle.changed[f])
    oracle.changed.clear()


SETTINGS = settings(max_examples=examples(80), deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])  # fmt: skip


@SETTINGS
@given(st.data())
def test_fed_updates_equal_objects_fd_counting_and_remat(data):
    text = data.draw(programs(), label="program")
    if not _valid(text):
        return
    universe = _universe(text)
    load = data.draw(st.lists(st.sampled_from(universe), max_size=10), label="load")
    algorithm = data.draw(st.sampled_from(["fd-counting", "fd-dred"]), label="algorithm")
    check_fed(text, algorithm, load, data.draw(_batches(universe), label="batches"))


TC = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\ncut(X) :- node(X), not path(X, X).\n"
POOL = [("edge", x, y) for x in "abcd" for y in "abcd"] + [("node", x) for x in "abcd"]


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.sampled_from(POOL), max_size=8), _batches(POOL))
def test_fed_recursion_and_negation(load, batches):
    check_fed(TC, "fd-counting", load, batches)


def test_a_run_nets_the_last_operation_on_each_fact():
    r = arrays(TC)
    r.load([("edge", "a", "b")])
    r.poll()
    r.feed([Fed(1, [("edge", "b", "c")]), Fed(2, (), [("edge", "b", "c")]), Fed(3, [("edge", "b", "c")]),
            Fed(4, (), [("edge", "a", "b")]), Fed(5, [("node", "q")], (), id="n")])  # fmt: skip
    p = r.poll()
    assert set(p.added) == {("edge", "b", "c"), ("path", "b", "c"), ("node", "q"), ("cut", "q")}
    assert set(p.removed) == {("edge", "a", "b"), ("path", "a", "b")}
    causes = dict(zip(p.added + p.removed, p.added_by + p.removed_by, strict=True))
    assert (
        causes[("edge", "a", "b")] == 4
    )  # a predicate no rule derives: the one update that toggled it
    assert causes[("edge", "b", "c")] == 0  # toggled by three updates
    assert causes[("node", "q")] == 5
    assert (
        causes[("cut", "q")] == 0
    )  # its predicate depends on edge and node: several updates reached it
    assert p.through == "n" and r.last_id == "n"


def test_rejected_updates_stop_only_themselves_as_with_objects():
    for r in (arrays(TC), Reasoner.from_text(TC, "fd-counting")):
        r.load()
        bad = []
        r.feed(
            [Fed(1, [("edge", "a")]), Fed(2, [("edge", "a", "b")])],
            rejected=lambda k, e, bad=bad: bad.append((k, str(e))),
        )
        assert [k for k, _ in bad] == [1] and "has 1 argument" in bad[0][1]
        assert ("path", "a", "b") in r.facts()


OBJECTS = EngineOptions(core="objects")  # the other core of these refusals


def test_state_is_refused_by_the_other_core_naming_both():
    a, o = arrays(TC), Reasoner.from_text(TC, "fd-counting", options=OBJECTS)
    a.load([("edge", "a", "b")]), o.load([("edge", "a", "b")])
    sa, so = MemoryStateStore(), MemoryStateStore()
    sa.commit(0, a.export_changes(), {}), so.commit(0, o.export_changes(), {})
    with pytest.raises(StateMismatch, match="kept by core=arrays .*runs core=objects"):
        Reasoner.from_text(TC, "fd-counting", options=OBJECTS).restore(sa.load())
    with pytest.raises(StateMismatch, match="kept by core=objects .*runs core=arrays"):
        arrays(TC).restore(so.load())
    with pytest.raises(StateMismatch, match="another program"):
        arrays(TC + "x(X) :- node(X).\n").restore(sa.load())


def test_state_columns_round_trip_and_keep_maintaining():
    r = arrays(TC)
    r.load([("edge", "a", "b"), ("edge", "b", "a"), ("node", "a"), ("node", "c")])
    store = MemoryStateStore()
    store.commit(0, r.export_changes(), {})
    r.feed([Fed(1, [("edge", "b", "c")], [("edge", "b", "a")])])
    store.commit(1, r.export_changes(), {})
    cols = r.state_columns()
    back = arrays(TC)
    back.restore_columns(cols)
    assert back.facts() == r.facts() and back.explicit() == r.explicit()
    assert back.state_meta()["fingerprint"] == r.state_meta()["fingerprint"]
    for e in (r, back):
        e.feed([Fed(2, [("edge", "c", "a")], [("edge", "a", "b")])])
    assert back.facts() == r.facts() == _scratch(TC, r.explicit())
    mine, theirs = back.export_changes().as_texts(), r.export_changes().as_texts()
    assert mine.facts == theirs.facts and mine.facts  # the same term ids: the same texts


def test_a_fact_changed_and_changed_back_within_a_run_has_several_causes():
    """A run whose net change is empty still changed the fact twice: a later change of it is the third."""
    r = arrays(TC)
    r.load([("edge", "a", "a")])
    r.poll()
    r.feed(
        [Fed(1, (), [("edge", "a", "a")]), Fed(2, [("edge", "a", "a")])]
    )  # deleted and added back
    r.feed([Fed(3, (), [("edge", "a", "a")])])
    p = r.poll()
    assert ("edge", "a", "a") in p.removed and set(p.removed_by) == {0}
