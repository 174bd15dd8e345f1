"""The arrays core's state with equality (engine.compact.eq_state): export, restore, go on exactly.

Motik, Horrocks & Kim 2015 rewriting on the arrays core, fully dynamic
(`fd-counting~`, `fd-dred~`): after every update the state is exported to a
store; at a random point a NEW reasoner is restored from the store (as texts,
or as the columns a local snapshot holds) and the remaining updates go to it.
After every update the materialisation (with equality) equals the
axiomatised oracle from scratch, and the restored engine's classes and
compact materialisation equal the exporting engine's; at the end an engine
restored from the store (written incrementally since the last full export)
equals the one that wrote it.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Fed, Reasoner, StateMismatch
from fluxmat.engine.equality.program import legacy_const_relations
from fluxmat.engine.fd.snapshot import pred_json
from tests.support.equality import OWL, PAPER, oracle, scenarios
from tests.support.profile import examples

SETTINGS = settings(max_examples=examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip


def _eq(text: str, algorithm: str = "fd-counting") -> Reasoner:
    return Reasoner.from_text(
        text, algorithm, equality="rewrite", options=EngineOptions(core="arrays")
    )


def _same(a: Reasoner, b: Reasoner) -> None:
    assert a.facts() == b.facts() and a.explicit() == b.explicit()
    assert a.maintainer.rewritten() == b.maintainer.rewritten()
    assert _classes(a) == _classes(b)


def _classes(r: Reasoner) -> set[frozenset]:
    values = r.maintainer.dictionary.values
    return {frozenset(values[m] for m in ms) for ms in r.maintainer.pi.members.values()}


@SETTINGS
@given(scenarios(), st.sampled_from(("fd-counting", "fd-dred")), st.integers(0, 5), st.booleans())
def test_restored_engine_goes_on_as_if_it_never_stopped(case, algorithm, at, columns):
    text, initial, updates = case
    r, store = _eq(text, algorithm), MemoryStateStore()
    r.load(sorted(initial, key=repr))
    store.commit(0, r.export_changes(), {})
    explicit = set(initial)
    for n, (add, delete) in enumerate(updates, start=1):
        r.feed([Fed(n, sorted(add, key=repr), sorted(delete, key=repr))])
        explicit = (explicit - set(delete)) | set(add)
        store.commit(n, r.export_changes(), {})
        if n == at:
            back = _eq(text, algorithm)
            if columns:
                back.restore_columns(r.state_columns())
            else:
                back.restore(store.load())
            _same(back, r)
            assert back.last_id == r.last_id
            r = back
        assert r.facts() == oracle(text, explicit), (text, n)
    last = _eq(text, algorithm)  # what the store holds after the incremental exports
    last.restore(store.load())
    _same(last, r)


def test_merges_since_the_last_export_are_stored_incrementally():
    """A merge, a second merge of the merged class, then a restore: the classes are the store's."""
    text = PAPER.replace("r(a, b). r(c, d). r(a, d).", "")
    r, store = _eq(text), MemoryStateStore()
    r.load([("r", "a", "x")])
    store.commit(0, r.export_changes(), {})
    r.feed([Fed(1, [("r", "b", "x")], [])])  # a ~ b
    store.commit(1, r.export_changes(), {})
    r.feed([Fed(2, [("r", "c", "x"), ("r", "c", "y")], [])])  # c joins; x ~ y
    store.commit(2, r.export_changes(), {})
    back = _eq(text)
    back.restore(store.load())
    _same(back, r)
    assert back.maintainer.representative("c") == "a"
    for e in (r, back):
        e.feed([Fed(3, [], [("r", "b", "x")])])  # a split: both rebuild
    _same(back, r)
    explicit = {("r", "a", "x"), ("r", "c", "x"), ("r", "c", "y")}
    assert back.facts() == oracle(text, explicit)


def test_a_state_with_equality_is_refused_without_it_and_by_another_program():
    r, store = _eq(PAPER), MemoryStateStore()
    r.load()
    store.commit(0, r.export_changes(), {})
    plain = Reasoner.from_text(PAPER, "fd-counting", options=EngineOptions(core="arrays"))
    with pytest.raises(StateMismatch, match="another program or algorithm"):
        plain.restore(store.load())
    with pytest.raises(StateMismatch, match="another program or algorithm"):
        _eq(PAPER + "\nq(X) :- r(X, X).").restore(store.load())


def test_a_state_stored_with_the_former_names_of_the_constants_relations_restores():
    """Earlier versions named a rule's constants' relation by the rule's place (`__const1`); a state
    they stored restores with today's names (a digest of the rule), and goes on exactly."""
    text = OWL + "q(X) :- e(X, a).\nr(X) :- e(X, b), f(c).\nowl:sameAs(X, Y) :- q(X), q(Y).\n"
    r, store = _eq(text), MemoryStateStore()
    r.load([("e", "x", "a"), ("e", "y", "a"), ("e", "y", "b"), ("f", "c")])
    store.commit(0, r.export_changes(), {})
    snap = store.load()
    former = {
        pred_json(new): pred_json(old) for old, new in legacy_const_relations(r.program).items()
    }
    assert len(former) == 2 and set(former) <= set(snap.terms.values())
    snap.terms = {t: former.get(text_, text_) for t, text_ in snap.terms.items()}
    back = _eq(text)
    back.restore(snap)
    _same(back, r)
    for engine in (back, r):
        engine.feed([Fed(1, [("e", "z", "a")], [])])
    _same(back, r)
    assert ("r", "z") in back.facts()  # z ~ x ~ y by q: r(y) holds for all three


def test_a_snapshot_with_the_former_names_restores_and_its_next_export_writes_everything():
    text = OWL + "q(X) :- e(X, a).\nowl:sameAs(X, Y) :- q(X), q(Y).\n"
    r, store = _eq(text), MemoryStateStore()
    r.load([("e", "x", "a"), ("e", "y", "a")])
    store.commit(0, r.export_changes(), {})
    cols = r.state_columns()
    former = {
        pred_json(new): pred_json(old) for old, new in legacy_const_relations(r.program).items()
    }
    cols.terms = {t: former.get(text_, text_) for t, text_ in cols.terms.items()}
    old = {new: old for old, new in legacy_const_relations(r.program).items()}
    cols.facts = {old.get(p, p): v for p, v in cols.facts.items()}
    back = _eq(text)
    back.restore_columns(cols)
    _same(back, r)
    assert back.export_changes().full  # the store's relation names are replaced, not patched
