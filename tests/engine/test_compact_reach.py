"""Linear transitive closures on the arrays core evaluated by reachability (engine.compact.reach).

Which components qualify (plans.linear_closure); on random programs around
such a closure, the arrays core equals the objects core and `remat` from
scratch after the load and every update, with every relation's rows
distinct; counters, presence and rule instances equal those of the
semi-naive rounds; limits stop a load between chunks; the table kernels the
load uses (kernels.append_new, the fills by home slot) on tables large
enough to be filled in many buckets.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, FactLimitExceeded, Limits, Reasoner
from fluxmat.engine.compact import kernels as K
from fluxmat.engine.compact import reach
from fluxmat.engine.compact.plans import compile_program
from fluxmat.engine.compact.relation import Rel
from fluxmat.engine.compact.small import SmallPath
from fluxmat.engine.storage import Dictionary
from tests.support.compact import check_against_objects, scratch
from tests.support.gen import examples

LINEAR = {  # the recursive rule -> left-linear
    "p(X, Z) :- p(X, Y), e(Y, Z).": False,
    "p(X, Z) :- e(Y, Z), p(X, Y).": False,
    "p(X, Z) :- e(X, Y), p(Y, Z).": True,
    "p(X, Z) :- p(Y, Z), e(X, Y).": True,
}


@pytest.fixture(autouse=True)
def set_path(monkeypatch):
    """Every load and update set-at-a-time: with the small-update interpreter ready in this
    process (compiled by an earlier test), a small load would be one compiled call, which runs
    the semi-naive rounds, and these tests are about the reachability path."""
    monkeypatch.setattr(SmallPath, "small", lambda self, add, delete: False)


NOT_LINEAR = [
    "p(X, Z) :- p(X, Y), p(Y, Z).",
    "p(X, X) :- p(X, Y), e(Y, X).",
    "p(X, Z) :- p(X, Y), e(Z, Y).",
    "p(Y, Z) :- p(X, Y), e(Y, Z).",
    "p(X, Z) :- p(X, X), e(X, Z).",
    "p(X, 1) :- p(X, Y), e(Y, 1).",
    "p(X, Z) :- p(X, Y), e(Y, Z), f(Z).",
    "p(X, Z) :- p(X, Y), e(Y, Z), not f(Z).",
    "p(X, Z) :- p(X, Y), e(Y, Z), Z < 5.",
    "p(X, Z) :- p(X, Y), e(Y, Z).\np(X, Z) :- e(X, Y), p(Y, Z).",
]
BASE = "p(X, Y) :- e(X, Y).\nf(X) :- e(X, X).\n"


def _reach_of(text: str):
    analysis = Reasoner.from_text(text).analysis
    comps, _, _ = compile_program(analysis, Dictionary().intern, True)
    (comp,) = [c for c in comps if c.preds == ["p"]]
    return comp.reach


@pytest.mark.parametrize("rule", sorted(LINEAR))
def test_a_linear_closure_is_recognised(rule):
    rid, e, left = _reach_of(BASE + rule)
    assert (e, left) == ("e", LINEAR[rule])
    assert [r.id for r in Reasoner.from_text(BASE + rule).analysis.rules if r.recursive] == [rid]


@pytest.mark.parametrize("rule", NOT_LINEAR)
def test_other_recursive_rules_are_not(rule):
    assert _reach_of(BASE + rule) is None


# ---------------------------------------------------------------- against the objects core

NODES = (1, 2, 3, "a", "b")


@st.composite
def closure_programs(draw) -> str:
    """A linear closure of e with base rules from e and g, and rules above it (one negated)."""
    lines = [draw(st.sampled_from(sorted(LINEAR)))]
    lines += draw(st.lists(st.sampled_from(["p(X, Y) :- e(X, Y).", "p(X, Y) :- g(Y, X).",
                                            "p(X, X) :- g(X, 1)."]), min_size=1, max_size=3))  # fmt: skip
    lines += draw(st.lists(st.sampled_from(["q(X) :- g(X, _), not p(X, X).", "r(X, Y) :- p(X, Y), g(Y, X).",
                                            "r(X, Y) :- p(Y, X), p(X, Y)."]), max_size=2))  # fmt: skip
    return "\n".join(dict.fromkeys(lines))


UNIVERSE = [(pred, x, y) for pred in ("e", "g", "p") for x in NODES for y in NODES]


class _Spy:
    """Counts how often reach.fixpoint evaluated a closure (returned rows, not None)."""

    def __init__(self, mp: pytest.MonkeyPatch):
        self.hits, self.real = 0, reach.fixpoint
        mp.setattr(reach, "fixpoint", self)

    def __call__(self, *args):
        out = self.real(*args)
        self.hits += out is not None
        return out


def _distinct_rows(arrays: Reasoner) -> None:
    for rel in arrays.maintainer.core.rels.values():
        rows = rel.cols[: rel.n]
        assert len(np.unique(rows, axis=0)) == rel.n, rel.pred


def _set_path(reasoner: Reasoner) -> None:
    reasoner.maintainer.small.threshold = -1  # every update set-at-a-time (engine.compact.core)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_closures_equal_the_objects_core(data):
    """Loads, insertions, deletions (DRed^c and recomputation), remat: same facts and reports."""
    text = data.draw(closure_programs(), label="program")
    algorithm = data.draw(st.sampled_from(["dredc", "remat"]), label="algorithm")
    facts = st.lists(st.sampled_from(UNIVERSE), max_size=8)
    load = data.draw(st.lists(st.sampled_from(UNIVERSE), max_size=25), label="load")
    steps = data.draw(st.lists(st.tuples(facts, facts), max_size=5), label="updates")
    with pytest.MonkeyPatch.context() as mp:
        spy = _Spy(mp)
        mp.setattr(reach, "CHUNK", data.draw(st.sampled_from([1, 3, reach.CHUNK]), label="chunk"))
        arrays = check_against_objects(text, algorithm, load, steps, tune=_set_path)
    _distinct_rows(arrays)
    if any(f[0] == "e" for f in load) and "p(X, Y) :- e(X, Y)." in text:
        assert spy.hits


# ---------------------------------------------------------------- the same state as semi-naive rounds


def _state(r: Reasoner) -> dict:
    """Per relation: each row's fact with its counter, presence and explicit flag."""
    out = {}
    for p, rel in r.maintainer.core.rels.items():
        n = rel.n
        out[p] = sorted(zip(map(tuple, rel.cols[:n].tolist()), rel.cnt[:n].tolist(),
                            rel.alive[:n].tolist(), rel.expl[:n].tolist(), strict=True))  # fmt: skip
    return out


def _graph(seed: int, nodes: int, edges: int) -> list[tuple]:
    rng = np.random.default_rng(seed)
    return sorted({("e", int(u), int(v)) for u, v in rng.integers(0, nodes, (edges, 2))})


@pytest.mark.parametrize("rule", sorted(LINEAR))
def test_counters_presence_and_instances_equal_the_rounds(rule):
    """Against the same program with reachability switched off: state and reports, load and updates.

    The graph has cycles; the first update inserts (semi-naive rounds either
    way: not every fact is a seed), the second deletes enough to recompute.
    """
    text = BASE + rule + "\np(X, Y) :- g(X, Y)."
    load = _graph(1, 40, 90) + [("g", 3, 3), ("p", 5, 7)]
    steps = [(_graph(2, 45, 10) + [("g", 41, 2)], []), ([("e", 7, 8)], _graph(1, 40, 90)[::2])]
    runs = []
    for off in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            spy = _Spy(mp)
            if off:
                mp.setattr(reach, "fixpoint", lambda *_a: None)
            r = Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays"))
            reports = [r.load(load)]
            _set_path(r)
            reports += [r.update(add, delete) for add, delete in steps]
            runs.append(
                ([(x.added, x.removed, dict(x.rule_applications)) for x in reports], _state(r))
            )
            assert off or spy.hits == 2  # the load and the recomputation
    assert runs[0] == runs[1]


# ---------------------------------------------------------------- limits and stamps


def test_a_fact_limit_stops_the_load_between_chunks(monkeypatch):
    monkeypatch.setattr(reach, "CHUNK", 50)
    chain = [("e", i, i + 1) for i in range(60)]
    r = Reasoner.from_text(BASE + "p(X, Z) :- p(X, Y), e(Y, Z).",
                           options=EngineOptions("remat", core="arrays", limits=Limits(facts=300)))  # fmt: skip
    with pytest.raises(FactLimitExceeded):
        r.load(chain)
    assert r.maintainer.core.rels["p"].n < 60 * 61 // 2 // 2


def test_stamps_start_again_before_they_overflow(monkeypatch):
    """`Rel.seen` holds int32 stamps: near the end of their range they are reset first."""
    text = BASE + "p(X, Z) :- p(X, Y), e(Y, Z)."
    cycle = [("e", i, (i + 1) % 30) for i in range(30)]
    r = Reasoner.from_text(text, options=EngineOptions("dredc", core="arrays"))
    r.load(cycle)
    rel = r.maintainer.core.rels["p"]
    monkeypatch.setattr(reach, "STAMP_MAX", rel.node_stamp + 10)
    _set_path(r)
    r.update([("e", 40, 0)], cycle[:20])  # recomputes the component: 30 sources
    assert 0 < rel.node_stamp <= 30
    assert r.facts() == scratch(text, set(cycle[20:]) | {("e", 40, 0)})


# ---------------------------------------------------------------- table kernels


def test_appended_rows_are_found_and_not_inserted_again():
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(0, 5000, (20000, 2)), axis=0)
    rel = Rel("p", 2, [(1,)])
    first, rest = keys[:3000], keys[3000:]
    rel.insert(first)
    rows = rel.add_new(rest)
    assert rows.tolist() == list(range(len(first), len(keys)))
    assert rel.lookup(keys).tolist() == list(range(len(keys)))
    assert rel.insert(keys[::-1]).tolist() == list(range(len(keys)))[::-1]
    assert rel.n == len(keys)
    kept = Rel("p", 2, [(1,)])
    kept.insert(keys)
    assert _chains(rel, keys[:, 1]) == _chains(kept, keys[:, 1])


def _chains(rel: Rel, values: np.ndarray) -> dict[int, list[int]]:
    """Per value of column 1, the rows index 0 chains for it."""
    out = {}
    for v in np.unique(values).tolist():
        r = rel.islots[0][K.find(rel.cols, rel.islots[0], np.array([0, v], np.int64), rel.imask[0])]
        out[v] = []
        while r >= 0:
            out[v].append(int(r))
            r = rel.inext[0][r]
    return out


def test_large_tables_filled_by_home_slot_find_every_row():
    """Past 4,096 slots the fills go bucket by bucket: every row is found, a repeat is reported."""
    rng = np.random.default_rng(4)
    keys = np.unique(rng.integers(0, 10**6, (30000, 3)), axis=0)
    rel = Rel("p", 3, [(0,), (1, 2)])
    rel.load_rows(keys)
    assert rel.lookup(keys).tolist() == list(range(len(keys)))
    slots = np.full(len(rel.slots), -1, np.int32)
    twice = np.concatenate([keys, keys[17:18]])
    assert K.fill_distinct(twice, len(twice), slots, rel.full) == len(keys)
