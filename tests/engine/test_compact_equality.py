"""Equality (`equality="rewrite"`) on the arrays core against the objects core and from scratch.

Random programs deriving owl:sameAs (rules with sameAs heads and bodies, rule
constants) and random updates adding and deleting facts and equalities: after
the load and every update the arrays core (each of its algorithms) must give,
through the door, what the objects core gives -- the expanded
materialisation, the rewritten facts and representatives, query answers and
the published delta of each update -- and what a fresh arrays reasoner
computes from scratch over the same explicit facts.
Also: merges are incremental (no recomputation) and rewrite rows; the CLI.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.equality import SAME_AS
from fluxmat.engine.feed import Fed
from fluxmat.engine.parser import parse_pattern
from tests.support.cli import fluxmat, ok, write
from tests.support.equality import CONSTS, OWL, oracle, scenarios
from tests.support.gen import examples

ARRAYS = ("counting", "dred", "dredc", "remat")
FED = ("fd-counting", "fd-dred")
PATTERNS = (
    "p(X, Y)",
    "p(X, a)",
    "p(b, X)",
    "owl:sameAs(a, X)",
    "owl:sameAs(X, X)",
    "q(X)",
    "e(X, X)",
)
SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def reasoner(text: str, algorithm: str, core: str) -> Reasoner:
    return Reasoner.from_text(text, algorithm, equality="rewrite", options=EngineOptions(core=core))


def delta(r: Reasoner, report) -> tuple[set, set]:
    """The published delta of an update as Python facts (added, removed)."""
    m = r.maintainer
    return tuple(
        {m.decode(p, f) for p, fs in changes.items() for f in fs}
        for changes in (report.added_facts, report.removed_facts)
    )  # type: ignore[return-value]


def answers(r: Reasoner) -> dict[str, set]:
    out = {}
    for text in PATTERNS:
        pattern = parse_pattern(text, r.prefixes)
        out[text] = set(r.match(pattern)) if r.maintainer.arity.get(pattern.pred) else set()
    return out


def same_view(a: Reasoner, b: Reasoner) -> None:
    """a and b agree on J, I, pi and query answers."""
    assert a.facts() == b.facts()
    assert a.maintainer.rewritten() == b.maintainer.rewritten()
    assert {c: a.maintainer.representative(c) for c in CONSTS} == {
        c: b.maintainer.representative(c) for c in CONSTS
    }
    assert answers(a) == answers(b)
    assert all(a.maintainer.contains(f) for f in b.facts())


@SETTINGS
@given(case=scenarios(), algorithm=st.sampled_from(ARRAYS))
def test_arrays_equals_objects_and_from_scratch_after_every_update(case, algorithm):
    _compare(case, algorithm, "dredc")


@SETTINGS
@given(case=scenarios())
def test_bf_on_arrays_equals_bf_on_objects(case):
    """Backward/Forward on the rewritten program (engine.compact.bf) against the objects core's B/F~."""
    _compare(case, "bf", "bf")


def _compare(case, algorithm: str, objects_algorithm: str) -> None:
    text, initial, updates = case
    note(text)
    arrays = reasoner(text, algorithm, "arrays")
    objects = reasoner(text, objects_algorithm, "objects")
    got, want = arrays.maintainer.load(initial), objects.maintainer.load(initial)
    assert got.added == want.added == len(objects.facts())
    same_view(arrays, objects)
    explicit = set(initial)
    for add, delete in updates:
        note(f"update +{sorted(add)} -{sorted(delete)}")
        before = arrays.facts()
        got, want = arrays.update(add, delete), objects.update(add, delete)
        explicit = (explicit - delete) | add
        assert (
            delta(arrays, got)
            == delta(objects, want)
            == (arrays.facts() - before, before - arrays.facts())
        )
        assert (got.added, got.removed, got.noop_adds, got.noop_deletes) == (
            want.added, want.removed, want.noop_adds, want.noop_deletes
        )  # fmt: skip
        same_view(arrays, objects)
        scratch = reasoner(text, algorithm, "arrays")
        scratch.maintainer.load(explicit)
        same_view(arrays, scratch)
        assert arrays.explicit() == explicit
    assert arrays.facts() == oracle(text, explicit)


CHAIN = OWL + "owl:sameAs(Y1, Y2) :- r(X, Y1), r(X, Y2).\ns(Y) :- r(b, Y).\n"


@pytest.mark.parametrize("algorithm", ARRAYS)
def test_a_derived_equality_merges_incrementally_and_rewrites_rows(algorithm):
    r = reasoner(CHAIN, algorithm, "arrays")
    r.load([("r", "a", "c"), ("r", "b", "d"), ("t", "d", "d")])
    report = r.update(add=[("r", "a", "b")])  # r(a, b), r(a, c): b ~ c; then r(b, d) -> s(d) ...
    assert report.details["equality_recomputed"] == 0
    m = r.maintainer
    assert m.representative("c") == "b" and m.representative("b") == "b"
    assert ("s", "d") in r.facts() and ("r", "c", "d") in r.facts()  # by replacement
    assert all("c" not in f[1:] for f in m.rewritten())  # stored rewritten to b
    added, removed = delta(r, report)
    explicit = [("r", "a", "c"), ("r", "b", "d"), ("t", "d", "d"), ("r", "a", "b")]
    assert not removed and added == oracle(CHAIN, explicit) - oracle(CHAIN, explicit[:3])
    report = r.update(delete=[("r", "a", "b")])  # can split the class: recomputed from E
    assert report.details["equality_recomputed"] == 1
    assert r.facts() == oracle(CHAIN, explicit[:3])


def test_cli_materialise_and_replay_with_equality_on_the_arrays_core(tmp_path):
    """`--core arrays --equality rewrite` prints what the objects core prints; replay defaults to dredc."""
    text = OWL + "owl:sameAs(X, Y) :- p(X, Y).\nq(Y) :- r(X), owl:sameAs(X, Y).\np(a, b). r(a).\n"
    prog = write(tmp_path / "eq.dl", text)
    flags = ("--equality", "rewrite")
    out = ok(fluxmat("materialise", str(prog), *flags, "--core", "arrays"))
    assert out == ok(fluxmat("materialise", str(prog), *flags)) and "q(b)." in out.splitlines()
    updates = write(tmp_path / "u.jsonl", '{"del": [["p", "a", "b"]]}\n')
    stats = tmp_path / "stats.jsonl"
    out = ok(fluxmat("replay", str(prog), "--updates", str(updates), *flags, "--core", "arrays",
                     "--stats", str(stats)))  # fmt: skip
    assert out.splitlines() == ["owl:sameAs(a, a).", "q(a).", "r(a)."]
    assert '"algorithm": "dredc~"' in stats.read_text(encoding="utf-8")


def test_same_as_facts_with_new_constants_and_predicates(tmp_path):
    """New terms grow pi; a new predicate brings a reflexivity rule (a rebuild)."""
    r = reasoner(OWL + "p(X, Y) :- e(X, Y).", "dredc", "arrays")
    r.load([("e", "a", "b")])
    r.update(add=[(SAME_AS, "b", "z9"), ("g", "z9")])
    assert r.maintainer.representative("z9") == "b"
    assert ("g", "b") in r.facts() and ("p", "a", "z9") in r.facts()
    assert r.facts() == oracle(
        OWL + "p(X, Y) :- e(X, Y).", [("e", "a", "b"), (SAME_AS, "b", "z9"), ("g", "z9")]
    )


@pytest.mark.parametrize("algorithm", ARRAYS)
def test_a_rewritten_fact_stays_while_one_of_its_explicit_preimages_remains(algorithm):
    text = OWL + "q(X) :- p(X)."
    r = reasoner(text, algorithm, "arrays")
    r.load([(SAME_AS, "a", "b"), ("p", "a"), ("p", "b")])  # both rewrite to p(a)
    report = r.update(delete=[("p", "b")])
    assert report.details["equality_recomputed"] == 0 and (report.added, report.removed) == (0, 0)
    assert r.facts() == oracle(text, [(SAME_AS, "a", "b"), ("p", "a")])
    report = r.update(delete=[("p", "a")])
    assert report.removed == 4 and r.facts() == oracle(text, [(SAME_AS, "a", "b")])


@SETTINGS
@given(case=scenarios(), algorithm=st.sampled_from(FED), overlap=st.booleans())
def test_fed_updates_with_equality_poll_the_net_delta_from_scratch(case, algorithm, overlap):
    """fd-counting, fd-dred: a feed ends in the from-scratch state; the poll is the net change of J."""
    text, initial, updates = case
    note(text)
    r = reasoner(text, algorithm, "arrays")
    r.maintainer.load(initial)
    before, explicit, changed = r.facts(), set(initial), {}
    feeds = [
        Fed(n, sorted(add), sorted(delete), id=f"u{n}")
        for n, (add, delete) in enumerate(updates, 1)
    ]
    if overlap:  # one feed: the updates are submitted before they run
        r.feed(feeds, overlap=True)
    for fed in feeds if not overlap else ():
        was = r.facts()
        r.feed([fed], overlap=False)
        for f in r.facts() ^ was:
            changed[f] = fed.key if f not in changed else 0
    for add, delete in updates:
        explicit = (explicit - delete) | add
    point = r.poll()
    after = r.facts()
    assert after == oracle(text, explicit) and r.explicit() == explicit
    assert (set(point.added), set(point.removed)) == (after - before, before - after)
    assert point.through == f"u{len(updates)}" and r.pending == 0
    if not overlap:  # one update per feed: the cause is the one update that changed the fact
        causes = dict(
            zip(point.added + point.removed, point.added_by + point.removed_by, strict=True)
        )
        assert causes == {f: c for f, c in changed.items() if f in causes}


def test_fed_update_reports_its_delta_and_keeps_a_state():
    r = reasoner(CHAIN, "fd-dred", "arrays")
    r.load([("r", "a", "c"), ("r", "b", "d")])
    report = r.update(add=[("r", "a", "b")])
    assert report.algorithm == "fd-dred~" and ("r", "c", "d") in r.facts()
    assert r.poll().added == [] and r.work_counts()["updates"] == 1
    assert r.state_meta()["core"] == "arrays"  # its state: tests/engine/test_compact_eq_state.py


def test_a_rebuild_ignores_an_explicit_relation_left_empty():
    """Deleting a fact of a predicate the state never held (a no-op) leaves an empty explicit relation;
    an update that rebuilds (a new predicate) must not take it for a predicate of the program."""
    r = Reasoner.from_text(
        OWL + "p(X, Y) :- e(X, Y).",
        options=EngineOptions("dredc", core="arrays", equality="rewrite"),
    )
    r.load([("e", "a", "b")])
    report = r.update(add=[("g", "a")], delete=[("f", "a")])
    assert report.details["equality_recomputed"] == 1 and ("g", "a") in r.facts()
    assert r.facts() == oracle(OWL + "p(X, Y) :- e(X, Y).", [("e", "a", "b"), ("g", "a")])
