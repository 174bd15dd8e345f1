"""The arrays core's small-update path (engine.compact.small) against its set-at-a-time path, the objects core and remat.

Oracle tests: hypothesis draws a program with joins, constants, recursion,
stratified negation and often a symmetric-transitive relation (the generator
of tests/test_compact_core.py) and a sequence of updates. Three reasoners
take the same load and updates: the arrays core with every update in one
compiled call (threshold above any update), the arrays core with every update
set-at-a-time (threshold below any), and the objects core (`dredc`). After
the load and every update the three must hold what `remat` from scratch
gives, and report the same facts added and removed and the same no-ops.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluxmat.engine import AnalysisError, EngineOptions, Reasoner
from fluxmat.engine.compact import small, small_warm
from tests.support.compact import EDGES, IDB, TC, VALUES, programs, updates
from tests.support.profile import examples

ONE_CALL, SET = 10**9, -1  # thresholds: every update in one call / every update set-at-a-time


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    small.prepare(wait=True)  # compiled (or loaded from numba's cache) in this process


def _scratch(text: str, explicit: set[tuple]) -> set[tuple]:
    """The materialisation from scratch (remat, no modules): the oracle."""
    oracle = Reasoner.from_text(text, options=EngineOptions("remat", modules=False))
    oracle.load(explicit)
    return oracle.facts()


def _universe(text: str) -> list[tuple] | None:
    """Candidate explicit facts (EDB facts over the values, one fact per derived predicate); None: not stratified."""
    try:
        arity = Reasoner.from_text(text).analysis.arity
    except AnalysisError:
        return None
    edb = [("e", x, y) for x in VALUES for y in VALUES] + [("f", x) for x in VALUES]
    return edb + [(p, *VALUES[: arity[p]]) for p in (*IDB, "s") if p in arity]


def _arrays(text: str, threshold: int) -> Reasoner:
    r = Reasoner.from_text(text, options=EngineOptions("counting", core="arrays"))
    r.maintainer.small.threshold = threshold
    return r


def _same(reasoners: dict[str, Reasoner], reports: dict, want: set, where: str) -> None:
    for name, r in reasoners.items():
        assert r.facts() == want, f"{name} {where}"
    got = {
        name: (rep.added, rep.removed, rep.noop_adds, rep.noop_deletes)
        for name, rep in reports.items()
    }
    assert len(set(got.values())) <= 1, f"{where}: {got}"


def check(text: str, load: list[tuple], steps) -> None:
    reasoners = {"one call": _arrays(text, ONE_CALL), "set-at-a-time": _arrays(text, SET),
                 "objects": Reasoner.from_text(text, options=EngineOptions("dredc"))}  # fmt: skip
    reports = {name: r.load(load) for name, r in reasoners.items()}
    current = set(load)
    _same(reasoners, {}, _scratch(text, current), "after the load")
    assert len({rep.added for rep in reports.values()}) == 1
    for n, (add, delete) in enumerate(steps, start=1):
        delete = [f for f in delete if f not in add]
        reports = {name: r.update(add, delete) for name, r in reasoners.items()}
        current = (current - set(delete)) | set(add)
        _same(reasoners, reports, _scratch(text, current), f"after update {n}: +{add} -{delete}")
    assert reasoners["one call"].maintainer.small.taken["set"] == 0
    assert reasoners["set-at-a-time"].maintainer.small.taken["one call"] == 0


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                 HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_random_programs_one_call_set_objects_scratch(data):
    text = data.draw(programs(), label="program")
    universe = _universe(text)
    assume(universe is not None)
    load = data.draw(st.lists(st.sampled_from(universe), max_size=12), label="load")
    check(text, load, data.draw(updates(universe), label="updates"))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.sampled_from(EDGES), max_size=15), updates(EDGES))
def test_recursion_with_negation_and_cycles(load, steps):
    """DRed^c with cycles (over-deletion and rederivation matter) under a negation of the recursive relation."""
    check(TC + "cut(X) :- edge(X, Y), not path(Y, X).\n", load, steps)


def test_seed_113230_symmetric_rule_over_a_chain():
    """The bake-off prototype's wrong load (seed=113230), shrunk: see docs/performance/compact-core-hybrid.md.

    c is closed under c(X, Z) :- c(X, Y), e(Y, Z) and c(Y, X) :- c(X, Y);
    from e(4, 3) alone it holds c(4, 3), c(3, 4) and c(3, 3), never c(4, 4).
    """
    text = "c(X, Y) :- e(X, Y).\nc(X, Z) :- c(X, Y), e(Y, Z).\nc(Y, X) :- c(X, Y).\n"
    check(text, [("e", 4, 3)], [([("e", 3, 4)], [("e", 4, 3)]), ([], [("e", 3, 4)])])


def test_both_paths_are_taken_by_size():
    """Below the threshold an update runs in one call, above it set-at-a-time; both give the same facts."""
    text = TC + "cut(X) :- edge(X, Y), not path(Y, X).\n"
    r = _arrays(text, 4)
    chain = [("edge", i, i + 1) for i in range(10)]
    r.load(chain)  # 10 changes: set-at-a-time
    r.update([("edge", 10, 0)], [("edge", 5, 6)])  # 2 changes: one call
    assert r.maintainer.small.taken == {"one call": 1, "set": 1}
    assert r.facts() == _scratch(text, set(chain) - {("edge", 5, 6)} | {("edge", 10, 0)})


def test_relations_grow_inside_the_call():
    """Many rows inserted by one call: relations grow (tables rebuilt) inside it and stay consistent."""
    r = _arrays(TC, ONE_CALL)
    chain = [("edge", i, i + 1) for i in range(40)]
    r.load(chain)
    assert r.sizes()["facts"] == 40 + 40 * 41 // 2
    r.update([], [("edge", 20, 21)])
    assert r.facts() == _scratch(TC, set(chain) - {("edge", 20, 21)})


def test_background_compile_reports_ready():
    """The first `ready()` starts compiling in another process (which loads numba's cache here); then ready."""
    compiler = small.Compiler()
    assert not compiler.ready()
    assert compiler.proc is not None and compiler.proc.wait() == 0
    assert compiler.ready()


def test_a_small_update_starts_the_compile_and_the_set_path_serves_meanwhile(monkeypatch):
    """A load never starts the compile; the first small update does, and runs set-at-a-time; once compiled, one call."""
    monkeypatch.setattr(small, "COMPILER", small.Compiler())
    r = _arrays(TC, small.THRESHOLD)
    r.load([("edge", 1, 2)])
    assert small.COMPILER.state == "cold"
    r.update([("edge", 2, 3)], [])
    assert small.COMPILER.state == "compiling"
    assert small.COMPILER.proc.wait() == 0  # numba's cache is warm here: it only loads
    r.update([("edge", 3, 4)], [])
    assert r.maintainer.small.taken == {"one call": 1, "set": 2}
    assert r.facts() == _scratch(TC, {("edge", 1, 2), ("edge", 2, 3), ("edge", 3, 4)})


def test_small_update_reports_rule_instances():
    """The one-call path reports the rule instances it ran, as the set-at-a-time path does."""
    text = "q(X) :- e(X, Y), not f(Y).\n"
    reports = []
    for threshold in (ONE_CALL, SET):
        r = _arrays(text, threshold)
        r.load([("e", 1, 2), ("e", 2, 3)])
        reports.append(r.update([("f", 3)], [("e", 1, 2)]))
    assert reports[0].rule_applications == reports[1].rule_applications
    assert reports[0].total_applications > 0


def test_a_core_without_relations_takes_the_set_path():
    """An empty program loaded with no facts has no relations for the compiled call to read."""
    small.prepare(wait=True)
    r = Reasoner.from_text("", options=EngineOptions("counting", core="arrays"))
    r.load([])
    r.change_program(add="q(X) :- e(X, X).")
    r.update(add=[("e", 1, 1)])
    assert r.facts() == {("e", 1, 1), ("q", 1)}


def test_a_program_change_that_brings_builtins_is_seen_by_the_next_small_update():
    """Whether the call can serve is kept per program: a change to a rule with a comparison sends updates set-at-a-time.

    The change keeps the number of components, so only the change itself (which re-attaches the core) can tell.
    """
    r = _arrays("p(X, Y) :- e(X, Y).\n", ONE_CALL)
    r.load([("e", 1, 2)])
    taken = r.maintainer.small.taken
    calls = taken["one call"]
    r.update([("e", 2, 3)], [])
    assert taken["one call"] == calls + 1
    r.change_program(add="p(X, Y) :- e(X, Y), X < Y.", delete="p(X, Y) :- e(X, Y).")
    sets = taken["set"]
    r.update([("e", 5, 4), ("e", 6, 7)], [("e", 1, 2)])
    assert taken["one call"] == calls + 1 and taken["set"] == sets + 1
    assert r.facts() == {("e", 2, 3), ("e", 5, 4), ("e", 6, 7), ("p", 2, 3), ("p", 6, 7)}


def test_a_compile_that_could_not_be_cached_is_logged_and_the_set_path_serves(caplog):
    """The compile process exits NOT_CACHED: one warning line, and the process never compiles it itself."""
    compiler = small.Compiler()
    compiler.proc = subprocess.Popen(
        [sys.executable, "-c", f"raise SystemExit({small.NOT_CACHED})"]
    )
    compiler.state = "compiling"
    compiler.proc.wait()
    assert not compiler.ready() and compiler.state == "failed"
    assert (
        "small-update interpreter not available (numba's cache could not be written)" in caplog.text
    )
    assert not compiler.ready()


def test_the_compile_process_fails_when_the_interpreter_is_not_cached(monkeypatch, capsys):
    """small_warm's exit status: 0 when numba's cache holds the interpreter, NOT_CACHED when it does not."""
    assert small_warm.main() == 0
    monkeypatch.setattr(small_warm.small_cache, "cached", lambda py_func: False)
    assert small_warm.main() == small.NOT_CACHED
    assert "numba's cache could not be written" in capsys.readouterr().err
