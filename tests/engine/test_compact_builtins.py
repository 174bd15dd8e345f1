"""Comparisons and arithmetic on the arrays core (engine.compact.builtins) against the objects core.

Oracle tests (as differential dataflow's tests/bfs.rs): hypothesis draws a
program with comparisons, assignments and head expressions and a sequence of
updates; after the load and after every update the arrays core's
materialisation must equal a from-scratch `remat` on the objects core and the
objects core's incremental `dredc`, with the same report. Two generators:

* tests/support/gen.py's typed programs (ints and symbols kept apart;
  recursion through bounded arithmetic, negation, division by zero);
* tests/support/compact.py's `builtin_programs`, where values of every type
  meet: ints, strings, an integer beyond int64, `xsd:int` literals (computed
  by their integer value) and an ill-typed one (by its lexical form), so
  comparisons of different types, string concatenation, overflow into the
  exact Python path and undefined arithmetic all occur.

The fully dynamic algorithms (`fd-counting`, `fd-dred`) run the same checks
with updates fed in batches; a program change adds and removes rules with
built-ins; small updates of such programs take the set-at-a-time path; the
fact limit stops an arithmetic recursion without end as on the objects core.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.engine import AnalysisError, EngineOptions, Fed, Limits, ParseError, Reasoner
from fluxmat.engine.compact import small
from fluxmat.engine.limits import FactLimitExceeded
from tests.support.compact import (
    builtin_facts,
    builtin_programs,
    check_against_objects,
    scratch,
    updates,
)
from tests.support.gen import examples, scenarios

ARRAYS_ALGORITHMS = ("counting", "dred", "dredc", "remat")
SETTINGS = settings(max_examples=examples(100), deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])  # fmt: skip


def _arrays(text: str, algorithm: str = "dredc", **kw) -> Reasoner:
    return Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays", **kw))


def _valid(text: str) -> bool:
    try:
        Reasoner.from_text(text)
    except (AnalysisError, ParseError):
        return False
    return True


@SETTINGS
@given(st.data())
def test_typed_programs_with_arithmetic_equal_objects_and_remat(data):
    gp, initial, steps = data.draw(scenarios(), label="scenario")
    algorithm = data.draw(st.sampled_from(ARRAYS_ALGORITHMS), label="algorithm")
    check_against_objects(gp.text, algorithm, sorted(initial, key=repr), steps)


@SETTINGS
@given(st.data())
def test_values_of_every_type_meet_as_on_the_objects_core(data):
    text = data.draw(builtin_programs(), label="program")
    if not _valid(text):
        return
    algorithm = data.draw(st.sampled_from(ARRAYS_ALGORITHMS), label="algorithm")
    universe = builtin_facts()
    load = data.draw(st.lists(st.sampled_from(universe), max_size=14), label="load")
    check_against_objects(text, algorithm, load, data.draw(updates(universe), label="updates"))


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])  # fmt: skip
@given(st.data())
def test_fed_updates_equal_objects_fd_counting(data):
    text = data.draw(builtin_programs(), label="program")
    if not _valid(text):
        return
    algorithm = data.draw(st.sampled_from(["fd-counting", "fd-dred"]), label="algorithm")
    universe = builtin_facts()
    load = data.draw(st.lists(st.sampled_from(universe), max_size=10), label="load")
    a, o = _arrays(text, algorithm), Reasoner.from_text(text, "fd-counting")
    a.load(load), o.load(load)
    explicit, n = set(load), 0
    for batch in data.draw(st.lists(updates(universe), min_size=1, max_size=3), label="batches"):
        fed = []
        for add, delete in batch:
            n += 1
            delete = [f for f in delete if f not in add]
            fed.append(Fed(n, add, delete))
            explicit = (explicit - set(delete)) | set(add)
        overlap = data.draw(st.booleans(), label="overlap")
        a.feed(fed, overlap=overlap), o.feed(fed, overlap=overlap)
        assert a.facts() == o.facts() == scratch(text, explicit), f"after update {n}"
        pa, po = a.poll(), o.poll()
        assert sorted(pa.added, key=repr) == sorted(po.added, key=repr)
        assert sorted(pa.removed, key=repr) == sorted(po.removed, key=repr)


# ---------------------------------------------------------------- examples

SSPE = "d(Y, Z) :- b(a, Y, Z).\nd(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.\n"


def test_counting_with_comparisons_and_head_expressions():
    """Division truncates toward zero, `%` follows it, by zero derives nothing (engine.arith)."""
    text = (
        "q(X, Y, X / Y, X % Y) :- e(X, Y).\nbig(X) :- e(X, Y), X * X > Y + 100.\n"
        "ty(X, T) :- e(X, _), T = datatype(X).\n"
    )
    facts = [("e", -7, 2), ("e", 7, -2), ("e", 5, 0), ("e", 11, 3), ("e", 2**70, 3), ("e", "s", 1)]
    r = _arrays(text, "counting")
    r.load(facts)
    assert r.facts() == scratch(text, facts)
    assert {f for f in r.facts() if f[0] == "q"} == {
        ("q", -7, 2, -3, -1), ("q", 7, -2, -3, 1), ("q", 11, 3, 3, 2),
        ("q", 2**70, 3, 2**70 // 3, 2**70 % 3),
    }  # fmt: skip
    assert {f for f in r.facts() if f[0] == "big"} == {("big", 11), ("big", 2**70)}


def test_path_lengths_recursive_arithmetic_deletes_and_rederives():
    """Hu, Motik & Horrocks 2018, Example 2 (SSPE): path lengths from a, maintained by DRed^c."""
    facts = [("b", "a", "b1", 1), ("b", "b1", "c", 2), ("b", "a", "c", 5), ("b", "c", "d", 1)]
    r = _arrays(SSPE)
    r.load(facts)
    assert {f for f in r.facts() if f[:2] == ("d", "d")} == {("d", "d", 4), ("d", "d", 6)}
    r.update([("b", "b1", "c", 4)], [facts[1]])
    assert r.facts() == scratch(SSPE, [facts[0], facts[2], facts[3], ("b", "b1", "c", 4)])
    assert {f for f in r.facts() if f[:2] == ("d", "d")} == {("d", "d", 6)}


def test_infinite_arithmetic_recursion_stops_at_the_fact_limit_on_both_cores():
    """`n(Y) :- n(X), Y = X + 1` has no end: the fact limit stops it, on a load and on an update."""
    text = "n(Y) :- n(X), s(S), Y = X + S.\n"
    limits = Limits.of(facts=300)
    for options in (
        EngineOptions("dredc", core="arrays", limits=limits),
        EngineOptions("dredc", limits=limits),
    ):
        r = Reasoner.from_text(text, options=options)
        with pytest.raises(FactLimitExceeded, match=r"fact limit exceeded: .* \(limit 300\)"):
            r.load([("n", 0), ("s", 1)])
        r = Reasoner.from_text(text, options=options)
        r.load([("n", 0)])
        with pytest.raises(FactLimitExceeded, match=r"fact limit exceeded: .* \(limit 300\)"):
            r.update([("s", 1)])


def test_small_updates_of_programs_with_builtins_take_the_set_path():
    """The compiled one-call interpreter has no built-ins: such updates run set-at-a-time, correctly."""
    small.prepare(wait=True)
    text = "p(X, Y) :- e(X, Y), X < Y.\nq(Z) :- e(X, Y), Z = X + Y.\n" + SSPE
    facts = [("e", 1, 2), ("e", 3, 1), ("b", "a", "x", 2)]
    r = _arrays(text)
    r.load(facts)
    path = r.maintainer.small
    before = dict(path.taken)
    r.update([("e", 2, 5), ("b", "x", "y", 3)], [("e", 1, 2)])
    assert path.taken["one call"] == before["one call"] and path.taken["set"] == before["set"] + 1
    now = [("e", 3, 1), ("b", "a", "x", 2), ("e", 2, 5), ("b", "x", "y", 3)]
    assert r.facts() == scratch(text, now)
    plain = _arrays("p(X, Y) :- e(X, Y).\n")  # without built-ins the one call serves it
    plain.load(facts)
    calls = plain.maintainer.small.taken["one call"]
    plain.update([("e", 2, 5)], [])
    assert plain.maintainer.small.taken["one call"] == calls + 1


def test_program_change_adds_and_removes_rules_with_arithmetic():
    start = "d(Y, Z) :- b(a, Y, Z).\nfar(Y) :- d(Y, Z), Z > 3.\n"
    facts = [("b", "a", "b1", 1), ("b", "b1", "c", 2), ("b", "c", "d", 2)]
    r = Reasoner.from_text(start, options=EngineOptions("counting", core="arrays"))
    r.load(facts)
    rule = "d(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2."
    r.change_program(add=rule)
    assert r.facts() == scratch(start + rule, facts) and ("far", "d") in r.facts()
    r.change_program(delete=rule)
    assert r.facts() == scratch(start, facts) and ("far", "d") not in r.facts()


@pytest.mark.parametrize("core", ["objects", "arrays"])
def test_ordering_iris_is_false_not_a_crash(core):
    """Ordering is defined between two integers or two strings only: IRIs and mixed
    types compare false (the language reference); `<` between two IRIs raised TypeError."""
    text = ('p(<http://a>). p(<http://b>). p(1). p(2). p("s"). p("t").\n'
            "lt(X, Y) :- p(X), p(Y), X < Y.\nge(X, Y) :- p(X), p(Y), X >= Y.\n")  # fmt: skip
    r = Reasoner.from_text(text, options=EngineOptions("dredc", core=core))
    r.load()
    facts = set(r.facts())
    assert {f[1:] for f in facts if f[0] == "lt"} == {(1, 2), ("s", "t")}
    assert {f[1:] for f in facts if f[0] == "ge"} == {(1, 1), (2, 2), (2, 1), ("s", "s"), ("t", "t"), ("t", "s")}
