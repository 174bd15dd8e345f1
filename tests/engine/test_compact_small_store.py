"""The small-update interpreter's store and numba cache (engine.compact.small, small_rel, small_cache).

The store hands the interpreter flat views of the relations' own arrays; the
set-at-a-time path replaces those arrays when a relation grows, and the
interpreter replaces them when it grows one inside its call. Oracle tests
(as differential dataflow's tests/bfs.rs): one reasoner whose updates take
either path by size, in random order, must hold what `remat` from scratch
gives after every update.

numba keys a cached function by the file that defines it; the interpreter's
cache entries carry a hash of every file compiled into them, so an edit to
any of them (kernels, plans, relations) recompiles the interpreter.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from numba.core.registry import CPUDispatcher

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.compact import small, small_cache, small_plan, small_rel, small_run
from tests.support.compact import EDGES, TC, VALUES, programs, stratified, updates
from tests.support.profile import examples

EDB = [("e", x, y) for x in VALUES for y in VALUES] + [("f", x) for x in VALUES]


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    small.prepare(wait=True)


def _scratch(text: str, explicit: set[tuple]) -> set[tuple]:
    oracle = Reasoner.from_text(text, options=EngineOptions("remat", modules=False))
    oracle.load(explicit)
    return oracle.facts()


def _mixed(text: str, load: list[tuple], steps, threshold: int) -> Reasoner:
    """Updates of at most `threshold` changes in one call, larger ones set-at-a-time; checked after each."""
    r = Reasoner.from_text(text, options=EngineOptions("counting", core="arrays"))
    r.maintainer.small.threshold = threshold
    r.load(load)
    current = set(load)
    assert r.facts() == _scratch(text, current), "after the load"
    for n, (add, delete) in enumerate(steps, start=1):
        delete = [f for f in delete if f not in add]
        r.update(add, delete)
        current = (current - set(delete)) | set(add)
        assert r.facts() == _scratch(text, current), f"after update {n}: +{add} -{delete}"
    return r


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_with_updates_on_both_paths_in_turn(data):
    """Random programs (recursion, negation, symmetric closure); each update takes the path its size picks."""
    text = data.draw(programs(), label="program")
    assume(stratified(text))
    load = data.draw(st.lists(st.sampled_from(EDB), max_size=12), label="load")
    steps = data.draw(updates(EDB), label="updates")
    _mixed(text, load, steps, data.draw(st.integers(1, 6), label="threshold"))


@settings(max_examples=examples(30), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=15), updates(EDGES))
def test_transitive_closure_with_negation_on_both_paths(load, steps):
    """DRed^c over cycles, a negation of the recursive relation, the paths taking turns."""
    _mixed(TC + "cut(X) :- edge(X, Y), not path(Y, X).\n", load, steps, 3)


def test_one_call_after_the_set_path_grew_the_relations():
    """A set-at-a-time update that grows every relation replaces their arrays; the next call reads the new ones."""
    chain = [("edge", i, i + 1) for i in range(30)]
    r = _mixed(TC, chain[:2], [(chain[2:], []), ([("edge", 30, 0)], [("edge", 10, 11)])], 2)
    assert r.maintainer.small.taken == {"one call": 2, "set": 1}
    path = r.maintainer.core.rels["path"]
    assert path.cap >= path.n > 16  # grown past its first capacity


def test_arrays_grown_inside_the_call_are_the_relations_own():
    """After a call that grew a relation, the `Rel` holds the grown arrays (the set path then uses them)."""
    chain = [("edge", i, i + 1) for i in range(12)]
    r = _mixed(TC, chain, [([("edge", 12, 0)], [])], 10**9)
    rel = r.maintainer.core.rels["path"]
    assert rel.n > 16 and rel.cols.shape == (rel.cap, 2) and len(rel.inext[0]) == rel.cap
    r.maintainer.small.threshold = -1  # the set path reads what the call left
    r.update([], [("edge", 5, 6)])
    assert r.facts() == _scratch(TC, set(chain) - {("edge", 5, 6)} | {("edge", 12, 0)})


def _dispatchers() -> list[CPUDispatcher]:
    mods = (small_plan, small_rel, small_run)
    return [v for m in mods for v in vars(m).values() if isinstance(v, CPUDispatcher)]


def test_the_stamp_covers_every_file_the_interpreter_compiles_from():
    """Every numba function the interpreter's modules call is defined in a file of SOURCES."""
    called = {Path(d.py_func.__code__.co_filename).resolve() for d in _dispatchers()}
    called |= {Path(small_run.K.find.py_func.__code__.co_filename).resolve()}
    assert called <= set(small_cache.SOURCES)
    assert {Path(small_plan.__file__), Path(small_rel.__file__), Path(small_run.__file__)} <= set(
        small_cache.STAMPED
    )


def test_an_edit_to_any_source_changes_the_stamp(tmp_path, monkeypatch):
    """The stamp hashes the contents of every file, not only the one defining a function."""
    copies = []
    for path in small_cache.SOURCES:
        copy = tmp_path / path.name
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    monkeypatch.setattr(small_cache, "SOURCES", tuple(copies))
    stamps = []
    for copy in copies:
        small_cache.sources_stamp.cache_clear()
        before = small_cache.sources_stamp()
        copy.write_bytes(copy.read_bytes() + b"\n# edited\n")
        small_cache.sources_stamp.cache_clear()
        stamps.append(small_cache.sources_stamp() != before)
    small_cache.sources_stamp.cache_clear()
    assert all(stamps)


def test_numba_keeps_the_interpreter_under_the_sources_stamp(tmp_path, monkeypatch):
    """The interpreter's entry in numba's cache carries the stamp of all sources: another stamp misses it."""
    assert small_cache.cached(small_run.cascade.py_func)
    edited = tmp_path / "small_plan.py"
    edited.write_bytes(Path(small_plan.__file__).read_bytes() + b"# edited\n")
    assert small_cache.SOURCES[0].name == edited.name
    monkeypatch.setattr(small_cache, "SOURCES", (*small_cache.SOURCES[1:], edited))
    small_cache.sources_stamp.cache_clear()
    try:
        assert not small_cache.cached(small_run.cascade.py_func)
    finally:
        monkeypatch.undo()
        small_cache.sources_stamp.cache_clear()
