"""Equality by rewriting (`equality="rewrite"`, Motik et al. 2015) against its axiomatisation.

The oracle: P plus the equality axioms for owl:sameAs (reflexivity on every
constant of a fact, symmetry, transitivity, replacement in every position of
every predicate), evaluated by `remat` with sameAs as an ordinary predicate.
Rewrite mode, expanded, must give exactly that materialisation, from scratch
and after every update.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, note, settings

from fluxmat.engine import AlgorithmError, AnalysisError, EngineOptions, Reasoner
from fluxmat.engine.algorithms import EQUALITY_ALGORITHMS
from fluxmat.engine.equality import SAME_AS, Classes, expand
from tests.support.equality import OWL, PAPER, oracle, scenarios
from tests.support.gen import examples

ARRAYS_ALGORITHMS = (
    "counting",
    "dred",
    "dredc",
    "remat",
)  # the arrays core (engine.compact.equality)
CASES = [("objects", a) for a in EQUALITY_ALGORITHMS] + [("arrays", a) for a in ARRAYS_ALGORITHMS]
CORES = ("objects", "arrays")


def rewrite(text: str, algorithm: str = "remat", core: str = "objects") -> Reasoner:
    return Reasoner.from_text(text, algorithm, equality="rewrite", options=EngineOptions(core=core))


@pytest.mark.parametrize(("core", "algorithm"), CASES)
def test_paper_section_3_1_deleting_an_equality_restores_rewritten_facts(core, algorithm):
    """'r(a, d) is deleted: a ~ c and b ~ d no longer hold, so I' contains I.'"""
    r = rewrite(PAPER, algorithm, core)
    r.load()
    m = r.maintainer
    # I = {<a, R, b>, a ~ a, b ~ b}, pi = {c -> a, d -> b}
    assert set(m.rewritten()) == {("r", "a", "b"), (SAME_AS, "a", "a"), (SAME_AS, "b", "b")}
    assert {c: m.representative(c) for c in "abcd"} == {"a": "a", "b": "b", "c": "a", "d": "b"}
    assert r.facts() == oracle(PAPER, r.program_facts())
    assert ("r", "c", "b") in r.facts()  # by replacement: not explicit, not derived by P

    report = r.update(delete=[("r", "a", "d")])
    # I' = I u {<c, R, d>, c ~ c, d ~ d}, pi' the identity
    assert set(m.rewritten()) == {
        ("r", "a", "b"), ("r", "c", "d"),
        *((SAME_AS, x, x) for x in "abcd"),
    }  # fmt: skip
    assert {c: m.representative(c) for c in "abcd"} == {c: c for c in "abcd"}
    explicit = [("r", "a", "b"), ("r", "c", "d")]
    assert r.facts() == oracle(PAPER, explicit)
    assert report.removed == 6 and report.added == 0  # r(a,d), r(c,b), a~c, c~a, b~d, d~b

    r.update(add=[("r", "a", "d")])  # and back
    assert r.facts() == oracle(PAPER, r.program_facts())


@pytest.mark.parametrize("core", CORES)
def test_rewritten_lines_and_expanded_lines(core):
    r = rewrite(OWL + "owl:sameAs(a, b). p(b, c). q(X) :- p(X, c).", core=core)
    r.load()
    assert r.rewritten_lines() == ["owl:sameAs(a, a).", "owl:sameAs(c, c).", "p(a, c).", "q(a)."]
    assert "q(b)." in r.lines() and "owl:sameAs(b, a)." in r.lines()


@pytest.mark.parametrize("core", CORES)
def test_constants_in_rules_are_rewritten(core):
    text = OWL + "owl:sameAs(b, a). p(a). q(X) :- p(X), s(X, b). s(a, a)."
    r = rewrite(text, core=core)
    r.load()
    assert r.facts() == oracle(text, r.program_facts())
    assert ("q", "b") in r.facts()


@pytest.mark.parametrize("core", CORES)
def test_iri_sameas_and_mixed_constants(core):
    text = "<http://www.w3.org/2002/07/owl#sameAs>(1, x). p(x, <http://e/y>). p(1, 2)."
    r = rewrite(text, core=core)
    r.load()
    assert r.maintainer.representative("x") == 1  # integers precede strings
    assert r.facts() == oracle(text, r.program_facts())


def test_default_mode_treats_sameas_as_an_ordinary_predicate():
    r = Reasoner.from_text(PAPER)
    r.load()
    same = {(SAME_AS, x, y) for group in ("ac", "bd") for x in group for y in group}
    assert r.facts() == same | {("r", "a", "b"), ("r", "c", "d"), ("r", "a", "d")}


def test_unsupported_algorithm_is_refused_naming_the_supported_ones():
    with pytest.raises(AlgorithmError, match="does not support equality=rewrite.*remat"):
        Reasoner.from_text(PAPER, "counting", equality="rewrite", options=EngineOptions(core="objects"))  # arrays runs it
    with pytest.raises(AlgorithmError, match="unknown equality mode 'axioms'"):
        Reasoner.from_text(PAPER, "remat", equality="axioms")


def test_arrays_core_refuses_what_it_does_not_run_with_equality():
    with pytest.raises(AnalysisError, match="equality rewriting supports positive rules"):
        rewrite(PAPER, "dredc", core="arrays").change_program(add="s(X) :- r(X, X), not r(X, a).")


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    "rule", ["p(X) :- q(X), not s(X).", "p(X) :- q(X), X != a.", "p(X + 1) :- q(X)."]
)
def test_rewrite_mode_refuses_negation_and_builtins(rule, core):
    with pytest.raises(AnalysisError, match="equality rewriting"):
        rewrite(rule, core=core)


def test_classes_pick_the_smallest_member():
    c = Classes()
    c.union("d", "c")
    c.union("b", "d")
    assert c.find("c") == "b" and c.members("b") == {"b", "c", "d"}
    expanded = sorted(expand([("p", "b", "x")], c))
    assert expanded == [("p", "b", "x"), ("p", "c", "x"), ("p", "d", "x")]


# ---------------------------------------------------------------- property tests

SETTINGS = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize(("core", "algorithm"), CASES)
@SETTINGS
@given(case=scenarios())
def test_rewrite_equals_axiomatised_oracle_after_every_update(core, algorithm, case):
    text, initial, updates = case
    note(text)
    r = rewrite(text, algorithm, core)
    r.maintainer.load(initial)
    explicit = set(initial)
    assert r.facts() == oracle(text, explicit)
    for add, delete in updates:
        note(f"update +{sorted(add)} -{sorted(delete)}")
        before = r.facts()
        report = r.update(add, delete)
        explicit = (explicit - delete) | add
        after = r.facts()
        assert after == oracle(text, explicit)
        assert report.added == len(after - before) and report.removed == len(before - after)
        m = r.maintainer
        assert set(expand(m.compact, m.classes)) == after  # the compact form represents J
        assert all(m.classes.normal(f) == f for f in m.compact)  # and holds normal facts only


@pytest.mark.parametrize(("core", "algorithm"), CASES)
def test_reports_name_what_ran(core, algorithm):
    """`bf` is B/F~ itself; the others are the recomputing wrapper around the algorithm (Remat~)."""
    r = rewrite(PAPER, algorithm, core)
    expected = "bf" if algorithm == "bf" else f"{algorithm}~"
    assert r.load().algorithm == expected
    assert r.update(delete=[("r", "a", "d")]).algorithm == expected


@pytest.mark.parametrize(("core", "algorithm"), [c for c in CASES if c != ("objects", "bf")])
def test_class_preserving_updates_are_maintained_incrementally(core, algorithm):
    """remat, dred, dredc: an update that can change the classes recomputes (bf does not).

    The arrays core merges classes incrementally (a rewrite of the affected rows).
    """
    text = OWL + "owl:sameAs(a, b). p(X, Y) :- e(X, Y). p(X, Z) :- p(X, Y), e(Y, Z)."
    r = rewrite(text, algorithm, core)
    r.load([("e", "b", "c")])
    report = r.update(add=[("e", "c", "d")], delete=[("e", "b", "c")])
    assert report.details["equality_recomputed"] == 0
    assert r.facts() == oracle(text, [*r.program_facts(), ("e", "c", "d")])
    report = r.update(add=[(SAME_AS, "c", "d")])
    assert report.details["equality_recomputed"] == (core == "objects")
    assert r.facts() == oracle(text, [*r.program_facts(), ("e", "c", "d"), (SAME_AS, "c", "d")])


def test_cli_equality_flag(tmp_path, capsys):
    from fluxmat.ops.cli import main

    prog = tmp_path / "eq.dl"
    prog.write_text(
        "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
        "owl:sameAs(X, Y) :- p(X, Y).\nq(Y) :- r(X), owl:sameAs(X, Y).\np(a, b). r(a).\n",
        encoding="utf-8",
    )
    assert main(["materialise", str(prog)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "owl:sameAs(a, b).",
        "p(a, b).",
        "q(b).",
        "r(a).",
    ]
    assert main(["materialise", str(prog), "--equality", "rewrite"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {"q(a).", "q(b).", "r(b).", "p(b, a).", "owl:sameAs(b, b)."} <= set(out) and len(
        out
    ) == 12
    updates = tmp_path / "u.jsonl"
    updates.write_text('{"del": [["p", "a", "b"]]}\n', encoding="utf-8")
    stats = tmp_path / "stats.jsonl"
    assert main(["replay", str(prog), "--updates", str(updates), "--equality", "rewrite",
                 "--stats", str(stats), "--core", "objects"]) == 0  # fmt: skip (B/F~: the objects core's)
    assert capsys.readouterr().out.splitlines() == [
        "owl:sameAs(a, a).",
        "q(a).",
        "r(a).",
    ]  # reflexivity
    line = json.loads(stats.read_text(encoding="utf-8").splitlines()[-1])
    assert line["algorithm"] == "bf" and line["equality_recomputed"] == 0  # B/F~ by default
    assert main(["replay", str(prog), "--updates", str(updates), "--equality", "rewrite",
                 "--algorithm", "fd-counting", "--core", "objects"]) == 1  # fmt: skip (arrays runs it)
    assert "does not support equality=rewrite" in capsys.readouterr().err
