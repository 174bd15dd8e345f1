"""`fluxmat why` / `fluxmat query` (engine.why, ops.inspect) on the golden programs, on both cores.

Every fact of every golden program's materialisation is explained through the
door (`Reasoner.explain`) on the arrays core (the default: a read view of its
arrays, engine.compact.readview) and on the objects core, under `remat`
(rules evaluated backwards) and under the fully dynamic algorithms after a run
of updates (the objects core's FD-Counting answers from its derivation log).
Each proof is checked by an independent verifier that knows only the program's
AST: the root is the fact asked for, explicit leaves are explicit facts, every
derived node is a real instance of its rule (head and positive body unify with
one substitution, its comparisons hold and its negated atoms are absent), and no
fact is its own ancestor. The verifier itself is shown to reject tampered
proofs. `fluxmat why PROGRAM` (ops.inspect.from_files: `remat` on the default
core) answers every fact of every golden program with a verified proof.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.parser import parse_pattern
from fluxmat.engine.why import Explainer, Proof, depth_first, match, render
from fluxmat.ops.cli import main
from fluxmat.ops.inspect import from_files
from tests.support.gen import examples, scenarios
from tests.support.proofs import reach_through_updates, verify

GOLDEN = Path(__file__).parent.parent / "golden"
CASES = sorted(p for p in GOLDEN.glob("*/*.dl") if p.parent.name != "errors")
CORES = ["arrays", "objects"]


def _new(
    text: str, algorithm: str = "remat", core: str = "arrays", source: str = "<input>"
) -> Reasoner:
    return Reasoner.from_text(text, source=source, options=EngineOptions(algorithm, core=core))


def _explain_all(reasoner: Reasoner) -> int:
    facts = sorted(reasoner.facts(), key=repr)
    for fact in facts:
        proof = reasoner.explain(fact)
        assert proof is not None, f"{fact} is in mat but has no proof"
        verify(proof, reasoner, fact)
        assert render(proof, reasoner.show)[0].startswith(reasoner.show(fact))
    return len(facts)


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("algorithm", ["remat", "fd-counting", "fd-dred"])
@pytest.mark.parametrize("core", CORES)
def test_every_fact_of_every_golden_program_is_explained(path: Path, algorithm: str, core: str):
    reasoner = _new(path.read_text(encoding="utf-8"), algorithm, core, source=path.name)
    facts = reasoner.program_facts()
    if algorithm == "remat":
        reasoner.load()
    else:  # reach the program's facts through updates, so the log holds update-time instances
        reach_through_updates(reasoner, facts)
    expected = path.with_suffix(".out").read_text(encoding="utf-8").splitlines()
    assert reasoner.lines() == expected
    assert _explain_all(reasoner) == len(reasoner.facts())


@pytest.mark.parametrize("path", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_cli_why_proves_every_fact_of_every_golden_program_on_the_default_core(path: Path):
    """What `fluxmat why PROGRAM FACT` computes (ops.inspect.from_files, `remat`, no --core flag):
    the default core; every fact found, printed from its own line, its proof verified."""
    view = from_files(str(path), [])
    r = view.reasoner
    assert r.core == "arrays"
    for fact in sorted(r.facts(), key=repr):
        answer = view.why(r.show(fact))
        assert answer["found"] and answer["lines"][0].startswith(r.show(fact)), answer
        verify(r.explain(fact), r, fact)


def _reasoner(text: str, algorithm: str = "remat", core: str = "arrays") -> Reasoner:
    r = _new(text, algorithm, core)
    r.load()
    return r


PATH = """
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
edge(a, b). edge(b, c). edge(c, a). edge(c, d).
"""


@pytest.mark.parametrize("core", CORES)
def test_the_verifier_rejects_tampered_proofs(core):
    r = _reasoner(PATH, core=core)
    proof = r.explain(("path", "a", "d"))
    verify(proof, r, ("path", "a", "d"))
    wrong_child = r.explain(("path", "a", "d"))
    wrong_child.body[1] = Proof(("edge", "b", "c"), True)
    with pytest.raises(AssertionError, match="does not match"):
        verify(wrong_child, r, ("path", "a", "d"))
    fake_leaf = r.explain(("path", "a", "d"))
    fake_leaf.body[0] = Proof(("path", "a", "c"), True)
    with pytest.raises(AssertionError, match="explicit but is not"):
        verify(fake_leaf, r, ("path", "a", "d"))
    cyclic = r.explain(("path", "a", "b"))
    loop = Proof(("path", "a", "b"), False, cyclic.rule, [Proof(("edge", "a", "b"), True)])
    cyclic.body = [Proof(("path", "a", "b"), False, cyclic.rule, [loop])]
    with pytest.raises(AssertionError):
        verify(cyclic, r, ("path", "a", "b"))


@pytest.mark.parametrize("core", CORES)
def test_proofs_are_well_founded_on_cycles_and_shortest(core):
    r = _reasoner(PATH, core=core)
    proof = r.explain(("path", "a", "a"))  # a -> b -> c -> a
    verify(proof, r, ("path", "a", "a"))
    depth = max(len(above) for _n, above in depth_first(proof))
    assert depth == 3  # path(a,a) <- path(a,c) <- path(a,b) <- edge(a,b)
    assert r.explain(("path", "d", "a")) is None
    assert r.explain(("path", "zz", "a")) is None
    assert r.explain(("edge", "a", "b")).explicit


@pytest.mark.parametrize("core", CORES)
def test_deep_proofs_do_not_hit_the_recursion_limit(core):
    # reachability along a chain: a proof 3,000 steps deep over 6,001 facts (the
    # transitive closure of the same chain would first derive 4.5 million facts)
    chain = "".join(f"edge({i}, {i + 1}). " for i in range(3000))
    r = _reasoner("reach(0).\nreach(Y) :- reach(X), edge(X, Y).\n" + chain, core=core)
    proof = r.explain(("reach", 3000))
    assert max(len(above) for _n, above in depth_first(proof)) == 3000
    assert len(render(proof, str)) == 3001 + 3000  # reach(0..3000) and the 3,000 edges


def test_the_log_answers_for_fd_counting_after_deletions():
    # the objects core's derivation log, read by the Explainer directly (the arrays core keeps
    # no log: the same question through its read view is in tests/engine/test_why_arrays.py)
    r = _new(PATH, "fd-counting", "objects")
    r.load()
    r.update(delete=[("edge", "b", "c")], add=[("edge", "a", "c")])
    proof = Explainer(r.maintainer).explain(("path", "a", "d"))
    verify(proof, r, ("path", "a", "d"))
    assert "path(a, c)" in render(proof, r.maintainer.show_fact)[1]
    assert Explainer(r.maintainer).explain(("path", "b", "c")) is None


def test_query_patterns():
    r = _reasoner(PATH + "self(X) :- path(X, X).")
    m = r.maintainer
    got = lambda text: sorted(match(m, parse_pattern(text)))  # noqa: E731
    assert got("path(a, ?X)") == [("path", "a", x) for x in "abcd"]
    assert got("path(X, X)") == [("path", x, x) for x in "abc"]
    assert got("path(_, d)") == [("path", x, "d") for x in "abc"]
    assert got("path(d, _)") == []
    assert got("path(zz, ?Y)") == []
    with pytest.raises(Exception, match="unknown predicate nope/1"):
        got("nope(?X)")
    with pytest.raises(Exception, match="has 2 arguments"):
        got("path(?X)")


def test_cli_why_and_query(tmp_path, capsys):
    prog = tmp_path / "p.dl"
    prog.write_text(PATH, encoding="utf-8")
    assert main(["why", str(prog), "path(a, d)"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("path(a, d)  <- path(X, Z) :- path(X, Y), edge(Y, Z).")
    assert out[-1] == "└─ edge(c, d)  [explicit]"
    with pytest.raises(SystemExit) as exc:
        main(["why", str(prog), "path(d, a)"])
    assert exc.value.code == 3
    assert "path(d, a) is not in the materialisation" in capsys.readouterr().out
    assert main(["query", str(prog), "path(?X, d)"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == ["path(a, d).", "path(b, d).", "path(c, d)."]
    assert captured.err.strip() == "3 facts"
    assert main(["query", str(prog), "path(a, ?X)", "--json", "--limit", "2"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == {"pattern": "path(a, ?X)", "count": 4, "facts": ["path(a, a)", "path(a, b)"],
                      "truncated": True}  # fmt: skip
    assert main(["query", str(prog), "path(a, "]) == 1
    assert "<pattern>:1:8: expected a term" in capsys.readouterr().err
    assert main(["why", str(prog), "path(a, ?X)"]) == 1
    assert "error" in capsys.readouterr().err


@pytest.mark.parametrize("core", CORES)
def test_proofs_with_truncating_division_and_modulo(core):
    """The verifier divides as the engine does: -7 / 2 = -3 and -7 % 2 = -1 (floor
    division would say -4 and 1); instances dividing by zero never fire."""
    r = _reasoner("q(X, Y, X / Y, X % Y) :- p(X), p(Y).\n"
                  "r(X, Z) :- p(X), p(Y), Z = (X - 1) / Y, Z < 0.\np(-7). p(0). p(2). p(7).\n",
                  core=core)  # fmt: skip
    assert ("q", -7, 2, -3, -1) in r.facts() and ("r", -7, -4) in r.facts()
    assert _explain_all(r) == len(r.facts())
    floor = Proof(("q", -7, 2, -4, 1), False, r.explain(("q", -7, 2, -3, -1)).rule,
                  [Proof(("p", -7), True), Proof(("p", 2), True)])  # fmt: skip
    with pytest.raises(AssertionError, match="not in mat"):
        verify(floor, r, ("q", -7, 2, -4, 1))
    wrong = r.explain(("q", -7, 2, -3, -1))  # a body that computes another head
    wrong.body = [Proof(("p", 7), True) if kid.fact == ("p", 2) else kid for kid in wrong.body]
    with pytest.raises(AssertionError, match="head"):
        verify(wrong, r, ("q", -7, 2, -3, -1))


@pytest.mark.parametrize("core", CORES)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_every_fact_of_random_programs_has_a_verified_proof(core, case):
    """tests/support/gen.py programs (recursion, negation, + - * / % with negative numbers and
    division by zero), every fact explained under remat and checked by the verifier."""
    gp, initial, _updates = case
    r = _new(gp.text, "remat", core)
    r.load(sorted(initial, key=repr))
    assert _explain_all(r) == len(r.facts())


@pytest.mark.parametrize("order", ["fact last", "fact first", "options first"])
def test_the_fact_and_pattern_may_come_before_or_after_the_options(tmp_path, capsys, order):
    """`why PROGRAM --facts F FACT` was refused by argparse ("unrecognized arguments"); every order works."""
    program, facts = tmp_path / "p.dl", tmp_path / "f.dl"
    program.write_text(
        "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n", encoding="utf-8"
    )
    facts.write_text("edge(a, b).\nedge(b, c).\n", encoding="utf-8")
    flags = ["--facts", str(facts), "--max-facts", "100"]
    for command, question, shown in (
        ("why", "path(a, c)", "path(a, c)  <- "),
        ("query", "path(a, ?X)", "path(a, c)."),
    ):
        argv = {"fact last": [command, str(program), *flags, question],
                "fact first": [command, str(program), question, *flags],
                "options first": [command, *flags, str(program), question]}[order]  # fmt: skip
        assert main(argv) == 0, capsys.readouterr().err
        assert shown in capsys.readouterr().out
