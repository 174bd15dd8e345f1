"""Program changes with equality (`equality="rewrite"`) on the arrays core (engine.compact.eq_program).

Property test: hypothesis draws a pool of rules over owl:sameAs (sameAs heads
and bodies, rule constants: tests.support.equality), explicit facts with
equalities, and a sequence of steps interleaving fact updates with rule
additions, deletions, a deletion plus an addition in one change, whole new
programs, and program facts (sameAs among them) added and deleted. After
every step the arrays engine (each algorithm, the fully dynamic ones
included) must give what the objects core's `remat` with equality computes
from scratch over the program the test tracks and the explicit facts; the
reported deltas, folded from the load, must give the same facts; with a fully
dynamic algorithm the polled deltas too. Each change must take the path its
kind allows: in place when the classes can only grow, else a rebuild.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.equality import SAME_AS
from fluxmat.engine.errors import AnalysisError, FluxmatError
from fluxmat.engine.feed import Fed
from fluxmat.engine.program_change import rule_changes
from tests.support.compact import fold_report
from tests.support.equality import OWL, PREDS, facts_of, rules
from tests.support.gen import examples

ALGORITHMS = ("counting", "dredc", "remat", "fd-counting", "fd-dred")
PROGRAM_FACTS = (
    "owl:sameAs(b, e).",
    "e(e, a).",
    "f(e).",
    "owl:sameAs(e, c).",
)  # only they hold `e`
STEPS = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 5)),
    st.tuples(st.just("del"), st.integers(0, 5)),
    st.tuples(st.just("swap"), st.integers(0, 5), st.integers(0, 5)),
    st.tuples(st.just("whole"), st.lists(st.integers(0, 5), max_size=4)),
    st.tuples(st.just("pfact"), st.integers(0, len(PROGRAM_FACTS) - 1)),
    st.tuples(st.just("facts"), facts_of(sorted(PREDS)), facts_of(sorted(PREDS))),
)


def rewrite(text: str, algorithm: str) -> Reasoner:
    options = EngineOptions(algorithm=algorithm, core="arrays", equality="rewrite")
    return Reasoner.from_text(text, options=options)


def program(rules_now: list[str], facts_now: list[str]) -> str:
    return OWL + "\n".join([*rules_now, *facts_now]) + "\n"


def from_scratch(text: str, explicit: set) -> set:
    """The objects core's `remat` with equality over `text` and `explicit` (the oracle)."""
    fresh = Reasoner.from_text(text, "remat", equality="rewrite")
    fresh.load(explicit)
    return fresh.facts()


def fold_poll(facts: set, r: Reasoner) -> set:
    point = r.poll()
    added, removed = set(point.added), set(point.removed)
    assert not added & facts and removed <= facts, (
        "a polled delta adds present or removes absent facts"
    )
    return (facts - removed) | added


def _change(step, rules_now: list[str], facts_now: list[str], pool: list[str]):
    """(rules after, program facts after, `change_program` arguments) for a program step."""
    kind = step[0]
    if kind == "add":
        return [*rules_now, pool[step[1]]], facts_now, {"add": OWL + pool[step[1]]}
    if kind == "whole":
        chosen = [pool[i] for i in step[1]]
        return chosen, facts_now, {"whole": program(chosen, facts_now)}
    if kind == "pfact":
        fact = PROGRAM_FACTS[step[1]]
        if fact in facts_now:
            return rules_now, [f for f in facts_now if f != fact], {"delete": OWL + fact}
        return rules_now, [*facts_now, fact], {"add": OWL + fact}
    if not rules_now:
        return rules_now, facts_now, None
    gone = rules_now[step[-1] % len(rules_now)]
    rest = list(rules_now)
    rest.remove(gone)
    if kind == "del":
        return rest, facts_now, {"delete": OWL + gone}
    return [*rest, pool[step[1]]], facts_now, {"delete": OWL + gone, "add": OWL + pool[step[1]]}


def _splits(before: str, after: str) -> bool:
    """Whether the change may split a class (the engine must rebuild; engine.compact.eq_program)."""
    old, new = (Reasoner.from_text(t).analysis for t in (before, after))
    removed = rule_changes(
        old, new
    ).removed  # a rule whose recursiveness changes is removed and added
    facts_removed = set(map(str, old.program.facts)) - set(map(str, new.program.facts))
    old_derives = any(r.head.pred == SAME_AS for r in old.program.rules)
    new_derives = any(r.head.pred == SAME_AS for r in new.program.rules)
    if removed and old_derives:
        return True
    same_removed = any(f.startswith(f"<{SAME_AS}>") for f in facts_removed)
    return bool(facts_removed) and (old_derives or new_derives or same_removed)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    algorithm=st.sampled_from(ALGORITHMS),
    pool=st.lists(rules(), min_size=6, max_size=6),
    start=st.lists(st.integers(0, 5), max_size=3),
    initial=facts_of(sorted(PREDS)),
    steps=st.lists(STEPS, min_size=1, max_size=6),
)
def test_changes_equal_remat_with_equality_from_scratch(algorithm, pool, start, initial, steps):
    rules_now, facts_now = [pool[i] for i in start], []
    r = rewrite(program(rules_now, facts_now), algorithm)
    r.load(initial)
    explicit, seen, fed = set(initial), r.facts(), r.fully_dynamic
    if fed:
        r.poll()
    assert seen == from_scratch(program(rules_now, facts_now), explicit)
    for i, step in enumerate(steps):
        note(f"step {i}: {step} on {rules_now} {facts_now}")
        reported = None
        if step[0] == "facts":
            add, delete = step[1], step[2] - step[1]
            explicit = (explicit - delete) | add
            if fed:  # through the driver: the delta is polled below (`update` polls by itself)
                r.feed([Fed(i, sorted(add), sorted(delete))])
            else:
                reported = fold_report(seen, r, r.update(add, delete))
        else:
            rules_after, facts_after, kwargs = _change(step, rules_now, facts_now, pool)
            if kwargs is None:
                continue
            before_text, after_text = (
                program(rules_now, facts_now),
                program(rules_after, facts_after),
            )
            version = r.program_version
            report = r.change_program(**kwargs)
            reported = fold_report(seen, r, report)
            assert r.program_version == version + 1
            recomputed = report.details["equality_recomputed"]
            assert recomputed == _splits(before_text, after_text), f"step {i}: {report.details}"
            rules_now, facts_now = rules_after, facts_after
        expected = from_scratch(program(rules_now, facts_now), explicit)
        assert r.facts() == expected, f"step {i}"
        assert reported is None or reported == expected, f"step {i}: the reported delta"
        if fed:
            assert fold_poll(seen, r) == expected, f"step {i}: the polled delta"
        seen = expected


# ---------------------------------------------------------------- examples

RULES = "p(X, Y) :- e(X, Y).\nq(X) :- p(X, c).\n"
E = [("e", "a", "b"), (SAME_AS, "b", "c"), ("f", "d")]


def test_an_added_rule_deriving_sameas_merges_classes_in_place_and_rewrites_rule_constants():
    r = rewrite(OWL + RULES, "dredc")
    r.load(E)
    report = r.change_program(add=OWL + "owl:sameAs(X, Y) :- q(X), f(Y).")
    text = OWL + RULES + "owl:sameAs(X, Y) :- q(X), f(Y).\n"
    assert report.details["equality_recomputed"] == 0  # in place: classes only grow
    assert r.facts() == from_scratch(text, set(E))
    assert ("q", "d") in r.facts() and r.maintainer.representative("d") == "a"
    report = r.change_program(add="s(X) :- p(d, X).")  # a constant in a merged class: pi(d) = a
    assert ("s", "c") in r.facts() and report.details["equality_recomputed"] == 0
    assert r.facts() == from_scratch(text + "s(X) :- p(d, X).\n", set(E))


def test_removing_a_rule_while_rules_derive_sameas_splits_the_class_by_a_rebuild():
    text = OWL + RULES + "owl:sameAs(X, Y) :- q(X), f(Y).\n"
    r = rewrite(text, "fd-counting")
    r.load(E)
    r.poll()
    report = r.change_program(delete="q(X) :- p(X, c).")
    assert report.details["equality_recomputed"] == 1
    assert r.facts() == from_scratch(
        OWL + "p(X, Y) :- e(X, Y).\nowl:sameAs(X, Y) :- q(X), f(Y).\n", set(E)
    )
    assert r.maintainer.representative("d") == "d"
    point = r.poll()
    assert ("q", "d") in point.removed and (SAME_AS, "a", "d") in point.removed


def test_other_rules_keep_their_constants_relation_when_one_is_removed():
    """A rule's constants live in a relation named by the rule's text: removing an earlier rule
    renames nothing, so the change is in place and the later rule's instances stay."""
    text = OWL + "r(X) :- e(X, a).\nq(X) :- p(X, c), f(d).\np(X, Y) :- e(X, Y).\n"
    r = rewrite(text, "counting")
    r.load([("e", "b", "a"), ("e", "d", "c"), ("f", "d")])
    report = r.change_program(delete="r(X) :- e(X, a).")  # q's two constants: no other arity
    assert report.details["equality_recomputed"] == 0
    assert (report.added, report.removed) == (0, 1)  # r(b) only
    assert ("q", "d") in r.facts()
    assert report.rule_applications.get(0, 0) == 0  # q's rule (now rule 0) was not evaluated again


def test_refused_changes_change_nothing():
    r = rewrite(OWL + RULES, "dredc")
    r.load(E)
    before = (r.facts(), r.program_text(), r.program_version)
    cases = [
        (
            {"add": "s(X) :- f(X), not q(X)."},
            AnalysisError,
            "equality rewriting supports positive rules",
        ),
        ({"add": "s(X) :- f(X), X != a."}, AnalysisError, "built-in"),
        ({"add": "e(X) :- f(X)."}, FluxmatError, "predicate e has 1 arguments here but 2"),
        ({"add": "f(X, Y) :- e(X, Y)."}, FluxmatError, "predicate f has 2 arguments"),
    ]
    for kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            r.change_program(**kwargs)
        assert (r.facts(), r.program_text(), r.program_version) == before


def test_rules_to_add_and_delete_are_read_with_the_programs_prefixes():
    """`owl:sameAs` in a change without its own @prefix is the program's owl:sameAs, not a new predicate."""
    r = rewrite(OWL + RULES, "dredc")
    r.load(E)
    same = "owl:sameAs(X, Y) :- q(X), f(Y)."
    r.change_program(add=same)
    assert r.maintainer.representative("d") == "a"
    assert r.facts() == from_scratch(OWL + RULES + same + "\n", set(E))
    r.change_program(delete=same)  # found in the program in force: the same rule once the prefix is read
    assert r.maintainer.representative("d") == "d" and r.facts() == from_scratch(OWL + RULES, set(E))
    r.change_program(add="@prefix owl: <http://example.org/other#> .\n" + same)  # its own declaration wins
    assert r.maintainer.representative("d") == "d"
    assert any(f[0] == "http://example.org/other#sameAs" for f in r.facts())


def test_the_work_of_a_batch_with_a_rebuilding_change_is_never_negative():
    """A change that removes a rule (here a rebuild) takes that rule's counts with it: the work
    since a mark taken before it is counted from 0, never negative (a job's Prometheus counters
    are increased by it, and a counter refuses a negative step)."""
    same = "owl:sameAs(X, Y) :- p(X, Z), p(Y, Z)."
    r = rewrite(OWL + "p(X, Y) :- e(X, Y).\n" + same + "\n", "fd-counting")
    r.load([("e", "a", "c"), ("e", "b", "c"), ("e", "d", "x")])
    r.poll()
    mark = r.work_mark()
    assert r.change_program(delete=same).details["equality_recomputed"] == 1
    counts, rules = r.work_since(mark)
    assert all(n >= 0 for n in counts.values()), counts
    assert all(applied >= 0 for applied, _, _ in rules.values()), rules
