"""Program changes on the arrays core (`Reasoner.change_program`, engine.compact.program).

Property test: hypothesis draws a pool of rules (joins, constants, repeated
variables, recursion through positive atoms, negation) and a sequence of
steps interleaving fact updates with rule additions, deletions, a deletion
plus an addition in one change, and whole new programs. After every step the
arrays engine's facts must equal a from-scratch evaluation (a fresh objects
`remat` reasoner over the rules the test itself tracks and the explicit
facts), and the reported deltas, folded from the load, must give the same
facts. A change the oracle refuses (unsafe, unstratifiable) must be refused
by the engine too, leaving facts, program and version unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.errors import AlgorithmError, FluxmatError
from tests.support.compact import fold_report
from tests.support.profile import examples

ARRAYS = EngineOptions(algorithm="counting", core="arrays")
ARITY = {"e": 2, "f": 1, "p": 2, "q": 1, "r": 2}
IDB = ("p", "q", "r")
VALUES = ("a", "b", 1)


@st.composite
def rules(draw) -> str:
    head = draw(st.sampled_from(IDB))
    body, bound = [], []
    for _ in range(draw(st.integers(1, 3))):
        p = draw(st.sampled_from(sorted(ARITY)))
        terms = [draw(st.sampled_from(["X", "Y", "Z", "a", "1"])) for _ in range(ARITY[p])]
        bound += [t for t in terms if t[0].isupper()]
        body.append(f"{p}({', '.join(terms)})")
    variables = sorted(set(bound)) or ["a"]
    if draw(st.integers(0, 2)) == 0:
        q = draw(st.sampled_from(sorted(ARITY)))
        args = [draw(st.sampled_from([*variables, "_", "b"])) for _ in range(ARITY[q])]
        body.append(f"not {q}({', '.join(args)})")
    args = [draw(st.sampled_from([*variables, "b"])) for _ in range(ARITY[head])]
    return f"{head}({', '.join(args)}) :- {', '.join(body)}."


FACTS = st.sampled_from([("e", x, y) for x in VALUES for y in VALUES] + [("f", x) for x in VALUES]
                        + [("p", "a", "b"), ("q", 1)])  # fmt: skip
STEPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 7)),
    st.tuples(st.just("del"), st.integers(0, 7)),
    st.tuples(st.just("swap"), st.integers(0, 7), st.integers(0, 7)),
    st.tuples(st.just("whole"), st.lists(st.integers(0, 7), max_size=5)),
    st.tuples(st.just("facts"), st.sets(FACTS, max_size=4), st.sets(FACTS, max_size=4)),
)


def oracle(rule_texts: list[str], explicit: set) -> set:
    """The materialisation from scratch (objects core, remat); raises what the program's analysis raises."""
    fresh = Reasoner.from_text("\n".join(rule_texts), algorithm="remat")
    fresh.load(explicit)
    return fresh.facts()


def _change(step, current: list[str], pool: list[str]) -> tuple[list[str], dict]:
    """The rule list after a program step, and the `change_program` arguments for it."""
    kind = step[0]
    if kind == "add":
        return [*current, pool[step[1]]], {"add": pool[step[1]]}
    if kind == "whole":
        chosen = [pool[i] for i in step[1]]
        return chosen, {"whole": "\n".join(chosen)}
    if not current:
        return current, {}
    gone = current[step[-1] % len(current)]
    rest = list(current)
    rest.remove(gone)
    if kind == "del":
        return rest, {"delete": gone}
    return [*rest, pool[step[1]]], {"delete": gone, "add": pool[step[1]]}


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(rules(), min_size=8, max_size=8), start=st.lists(st.integers(0, 7), max_size=4),
       initial=st.sets(FACTS, max_size=8), steps=st.lists(STEPS, min_size=1, max_size=8))  # fmt: skip
def test_changes_equal_evaluation_from_scratch(pool, start, initial, steps):
    current = [pool[i] for i in start]
    try:
        expected = oracle(current, initial)
    except FluxmatError:
        return
    r = Reasoner.from_text("\n".join(current), options=ARRAYS)
    r.load(initial)
    explicit, folded = set(initial), r.facts()
    assert folded == expected
    for i, step in enumerate(steps):
        note(f"step {i}: {step} on {current}")
        if step[0] == "facts":
            add, delete = step[1], step[2] - step[1]
            explicit = (explicit - delete) | add
            folded = fold_report(folded, r, r.update(add, delete))
        else:
            rules_after, kwargs = _change(step, current, pool)
            try:
                expected = oracle(rules_after, explicit)
            except FluxmatError:
                before = (r.facts(), r.program_text(), r.program_version)
                with pytest.raises(FluxmatError):
                    r.change_program(**kwargs)
                assert (r.facts(), r.program_text(), r.program_version) == before
                continue
            version = r.program_version
            folded = fold_report(folded, r, r.change_program(**kwargs))
            current = rules_after
            assert r.program_version == version + 1
        assert r.explicit() == explicit, f"step {i}"
        assert r.facts() == oracle(current, explicit), f"step {i}"
        assert folded == r.facts(), f"step {i}: folded deltas"


# ---------------------------------------------------------------- examples


def _arrays(text: str, facts=()) -> Reasoner:
    r = Reasoner.from_text(text, options=ARRAYS)
    r.load(facts)
    return r


EDGES = [("edge", "a", "b"), ("edge", "b", "c"), ("edge", "c", "d")]


def test_added_recursive_rule_derives_what_follows_and_removal_retracts_it():
    r = _arrays("path(X, Y) :- edge(X, Y).\nfar(X) :- path(a, X), not edge(a, X).", EDGES)
    report = r.change_program(add="path(X, Z) :- path(X, Y), edge(Y, Z).")
    assert ("far", "c") in r.facts() and ("far", "d") in r.facts()
    assert report.added == 5  # path(a,c), path(a,d), path(b,d), far(c), far(d)
    report = r.change_program(delete="path(X, Z) :- path(X, Y), edge(Y, Z).")
    assert report.removed == 5 and report.added == 0
    assert r.facts() == _arrays(r.program_text(), EDGES).facts()
    assert r.program_version == 3
    assert [h["version"] for h in r.program_history] == [2, 3]
    assert r.program_history[1]["changes"][0] == "- path(X, Z) :- path(X, Y), edge(Y, Z).  (<add>:1:1)"


def test_a_derivation_with_other_support_stays():
    r = _arrays("p(X) :- e(X).\np(X) :- f(X).", [("e", 1), ("f", 1), ("f", 2)])
    report = r.change_program(delete="p(X) :- f(X).")
    assert ("p", 1) in r.facts() and ("p", 2) not in r.facts()
    assert (report.added, report.removed) == (0, 1)


def test_stratification_change_recursive_to_not():
    text = "t(X, Y) :- e(X, Y).\nt(X, Z) :- t(X, Y), t(Y, Z).\nu(X) :- t(X, X)."
    r = _arrays(text, [("e", 1, 2), ("e", 2, 1), ("e", 2, 3)])
    r.change_program(whole="t(X, Y) :- e(X, Y).\nu(X) :- t(X, Y), not e(Y, X).")
    assert r.facts() == _arrays(r.program_text(), [("e", 1, 2), ("e", 2, 1), ("e", 2, 3)]).facts()
    assert ("u", 2) in r.facts() and ("t", 1, 1) not in r.facts()


def test_refused_changes_change_nothing():
    r = _arrays("p(X) :- e(X).\nq(X) :- e(X), not p(X).", [("e", 1)])
    before = (r.facts(), r.program_text(), r.program_version)
    cases = [
        ({"add": "p(X) :- e(X), not q(X)."}, "not stratifiable"),
        ({"add": "p(X) :- e(Y)."}, "unsafe"),
        ({"add": "p(X, Y) :- e(X), e(Y)."}, "arity clash"),
        ({"add": "e(X, Y) :- q(X), q(Y)."}, "arity clash"),
        ({"add": "q(X) :- e(X"}, "<add>:1:"),
        ({"delete": "q(X) :- e(X)."}, "not in the program in force"),
    ]
    for kwargs, message in cases:
        with pytest.raises(FluxmatError, match=message):
            r.change_program(**kwargs)
        assert (r.facts(), r.program_text(), r.program_version) == before


def test_arity_against_the_state_names_the_place():
    r = _arrays("p(X) :- e(X).", [("g", 1, 2), ("e", 1)])
    with pytest.raises(FluxmatError, match=r"<add>:1:\d+: predicate g has 1 arguments here but 2"):
        r.change_program(add="q(X) :- g(X).")


def test_objects_core_refuses_with_one_clear_error():
    # the arrays core is the default: the objects core only when chosen
    r = Reasoner.from_text("p(X) :- e(X).", options=EngineOptions("dredc", core="objects"))
    with pytest.raises(
        AlgorithmError, match=r"program changes need the arrays core \(--core arrays\)"
    ):
        r.change_program(add="q(X) :- e(X).")


def test_program_facts_are_explicit_facts_of_the_change():
    r = _arrays("p(X) :- e(X).\ne(1).")
    report = r.change_program(whole="p(X) :- e(X).\ne(2).")
    assert r.facts() == {("e", 2), ("p", 2)} and (report.added, report.removed) == (2, 2)


def test_closure_component_gains_and_loses_its_rules():
    closure = "s(X, Y) :- e(X, Y).\ns(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z)."
    facts = [("e", 1, 2), ("e", 3, 4), ("e", 2, 5)]
    r = _arrays("s(X, Y) :- e(X, Y).\ns(X, Z) :- s(X, Y), s(Y, Z).", facts)
    r.change_program(add="s(X, Y) :- s(Y, X).")
    assert r.facts() == _arrays(closure, facts).facts()
    r.update(delete=[("e", 1, 2)])  # the closure module maintains it from here
    assert r.facts() == _arrays(closure, [("e", 2, 5), ("e", 3, 4)]).facts()
    r.update(add=[("e", 4, 5)])
    assert r.facts() == _arrays(closure, [("e", 2, 5), ("e", 3, 4), ("e", 4, 5)]).facts()
    r.change_program(delete="s(X, Y) :- s(Y, X).")
    assert r.facts() == _arrays(r.program_text(), [("e", 2, 5), ("e", 3, 4), ("e", 4, 5)]).facts()


def test_auxiliary_negation_relations_keep_their_meaning():
    """`not e(X, _)` is kept through an auxiliary relation; another one added before it must not take its name."""
    facts = [("f", 1), ("f", 2), ("e", 1, 3)]
    r = _arrays("p(X) :- f(X), not e(X, _).", facts)
    whole = "q(X) :- f(X), not e(_, _).\np(X) :- f(X), not e(X, _)."
    report = r.change_program(whole=whole)
    assert r.facts() == _arrays(whole, facts).facts() and ("p", 2) in r.facts()
    assert (report.added, report.removed) == (0, 0)  # q: e(_, _) holds; p: unchanged


def test_changes_with_the_small_update_path_ready():
    """A change runs set-at-a-time even when small updates go through the compiled call, and the
    call serves the new program afterwards (the same relations and components, other rules)."""
    from fluxmat.engine.compact import small

    small.prepare(wait=True)
    r = Reasoner.from_text("p(X, Y) :- e(X, Y).\nq(X) :- f(X).", options=ARRAYS)
    r.load([("e", "a", "b"), ("f", "a")])
    r.change_program(delete="p(X, Y) :- e(X, Y).", add="p(Y, X) :- e(X, Y).")
    r.update(add=[("e", "b", 1), ("f", "b")], delete=[("f", "a")])
    rules = ["p(Y, X) :- e(X, Y).", "q(X) :- f(X)."]
    explicit = {("e", "a", "b"), ("e", "b", 1), ("f", "b")}
    assert r.facts() == oracle(rules, explicit)
    assert r.maintainer.small.taken["one call"] >= 1  # the compiled call served the update
