"""Long rules: any body length, head width and number of tests compiles and evaluates exactly.

Python refuses a function with more than 20 nested loops or about 100 levels of indentation;
a plan nests a loop or an `if` per literal, so a long body is compiled in stages
(engine.plans: `Compiler.room`). Each case is checked against an independent reference
written here (walks of exactly n edges, computed frontier by frontier) or against `remat`,
in the library (every algorithm), through the `fluxmat` command (`materialise`, `replay`)
and through the streaming job's per-batch processor.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import ALGORITHMS, EngineOptions, Reasoner
from fluxmat.engine.compact.recompute import large_reach
from fluxmat.engine.parser import parse_program
from fluxmat.engine.syntax import postorder
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import NullPublisher

ROOT = Path(__file__).resolve().parent.parent.parent


def chain_program(n: int) -> str:
    """`long(X0, Xn) :- e(X0, X1), ..., e(Xn-1, Xn).` and a rule over it."""
    body = ", ".join(f"e(X{i}, X{i + 1})" for i in range(n))
    return f"long(X0, X{n}) :- {body}.\nends(X) :- long(_, X).\n"


def graph(seed: int, nodes: int = 14) -> set[tuple]:
    """At most one edge out of each node (so walks do not multiply), with cycles and joins."""
    rnd = random.Random(seed)
    return {("e", f"n{a}", f"n{rnd.randrange(nodes)}") for a in range(nodes) if rnd.random() < 0.85}


def reference(edges: set[tuple], n: int) -> set[tuple]:
    """The chain program's materialisation, computed without the engine."""
    succ: dict[str, set[str]] = {}
    for _, a, b in edges:
        succ.setdefault(a, set()).add(b)
    out = set(edges)
    for start in {a for _, a, _ in edges}:
        frontier = {start}
        for _ in range(n):
            frontier = {b for a in frontier for b in succ.get(a, ())}
        out |= {("long", start, x) for x in frontier} | {("ends", x) for x in frontier}
    return out


def updates(edges: set[tuple], seed: int, count: int = 4) -> list[tuple[set, set]]:
    """Updates that delete and re-add edges and redirect nodes (still one edge out of each)."""
    rnd, current, out = random.Random(seed), set(edges), []
    for _ in range(count):
        gone = set(rnd.sample(sorted(current), 2))
        sources = {a for _, a, _ in current - gone}
        free = [f"n{i}" for i in range(16) if f"n{i}" not in sources]
        new = {("e", a, f"n{rnd.randrange(14)}") for a in rnd.sample(free, 2)} - gone
        current = (current - gone) | new
        out.append((new, gone))
    return out


def replayed(edges, ups) -> set[tuple]:
    for add, delete in ups:
        edges = (set(edges) - delete) | add
    return set(edges)


def fluxmat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800)  # fmt: skip


def parse_facts(text: str) -> set[tuple]:
    out = set()
    for line in text.splitlines():
        pred, rest = line.rstrip(".").split("(", 1)
        out.add((pred, *rest.rstrip(")").split(", ")))
    return out


# ---------------------------------------------------------------- the library, every algorithm


@pytest.mark.parametrize("n", [40, 48])
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_a_long_body_is_maintained_by_every_algorithm(algorithm, n):
    """The issue's rule (40 atoms: `too many statically nested blocks` before) and a longer one,
    loaded and updated under every algorithm; equal to the reference after every update."""
    edges = graph(n)
    r = Reasoner.from_text(chain_program(n), algorithm)
    r.load(sorted(edges))
    assert set(r.facts()) == reference(edges, n)
    for add, delete in updates(edges, n):
        r.update(add=sorted(add), delete=sorted(delete))
        edges = (edges - delete) | add
        assert set(r.facts()) == reference(edges, n), algorithm


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("FLUXMAT_FULL_CORPUS"), reason="slow: make test-all")
@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_a_200_atom_body_is_maintained_by_every_algorithm(algorithm):
    edges = graph(7)
    r = Reasoner.from_text(chain_program(200), algorithm)
    r.load(sorted(edges))
    for add, delete in updates(edges, 7, count=2):
        r.update(add=sorted(add), delete=sorted(delete))
        edges = (edges - delete) | add
    assert set(r.facts()) == reference(edges, 200)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 17, 200])
def test_remat_over_bodies_of_any_length(n):
    """Around the stage boundaries (8 positive atoms fit in one stage) and far beyond."""
    edges = graph(n)
    r = Reasoner.from_text(chain_program(n), "remat")
    r.load(sorted(edges))
    assert set(r.facts()) == reference(edges, n)


def test_a_long_body_keeps_the_facts_of_its_instances():
    """Derivation explanations (and the fully dynamic algorithms' log) need every body fact of
    an instance, also those matched in earlier stages."""
    edges = {("e", f"n{i}", f"n{i + 1}") for i in range(30)}
    r = Reasoner.from_text(chain_program(24), "fd-dred")
    r.load(sorted(edges))
    proof = r.explain(("long", "n3", "n27"))
    assert proof is not None
    assert [p.fact for p in proof.body] == [("e", f"n{i}", f"n{i + 1}") for i in range(3, 27)]


# ---------------------------------------------------------------- many tests, wide heads


def test_a_body_with_hundreds_of_tests_and_negations():
    """120 negated atoms, 60 assignments and 60 filters in a cyclic body (over a hypertree
    decomposition and not): each nests an `if`, beyond Python's 100 levels of indentation."""
    negs = ", ".join(f"not m{i}(X)" for i in range(120))
    steps = ", ".join(f"N{i + 1} = N{i} + 1, N{i + 1} > N{i}" for i in range(60))
    text = (f"r(X, N60) :- a(X, Y), b(Y, Z), c(Z, W), d(W, X), {negs}, N0 = 0, {steps}.\n"
            "a(1, 2). b(2, 3). c(3, 4). d(4, 1). a(5, 6). b(6, 7). c(7, 8). d(8, 5). m119(5).\n")  # fmt: skip
    for algorithm, hypertree in (("remat", True), ("remat", False), ("dredc", False)):
        r = Reasoner.from_text(text, algorithm, hypertree=hypertree)
        r.load([])
        assert {f for f in r.facts() if f[0] == "r"} == {("r", 1, 60)}
        r.update(delete=[("m119", 5)])
        assert {f for f in r.facts() if f[0] == "r"} == {("r", 1, 60), ("r", 5, 60)}


def test_a_head_of_300_expressions_and_an_atom_of_300_arguments():
    args = ", ".join(f"X{i}" for i in range(300))
    text = (f"w({', '.join(f'X{i} + 1' for i in range(300))}) :- s({args}).\n"
            f"copy({args}) :- s({args}), t(X299).\n"
            f"s({', '.join(str(i) for i in range(300))}).\nt(299).\n")  # fmt: skip
    for algorithm in ("remat", "dred", "fd-counting"):
        r = Reasoner.from_text(text, algorithm)
        r.load([])
        facts = set(r.facts())
        assert ("w", *range(1, 301)) in facts and ("copy", *range(300)) in facts
        r.update(delete=[("t", 299)])
        assert ("copy", *range(300)) not in set(r.facts())


@pytest.mark.parametrize("core", ["arrays", "objects"])
def test_deep_arithmetic_many_rules_and_many_strata(core):
    """`N = 1 + 1 + ... + 1` (2,000 terms), 5,000 rules in a chain, 2,000 strata of negation.

    On both cores: the arrays core compared its built-ins' terms by the dataclass `__eq__` and
    wrote them by `__repr__` (a RecursionError), and walked the strata per predicate (quadratic).
    """
    text = ("n(N) :- z(0), N = " + " + ".join(["1"] * 2000) + ".\nz(0).\n"
            + "".join(f"p{i}(X) :- p{i - 1}(X).\n" for i in range(1, 5000)) + "p0(a).\n"
            + "".join(f"s{i}(X) :- d(X), not s{i - 1}(X).\n" for i in range(1, 2000))
            + "s0(X) :- d(X).\nd(a).\n")  # fmt: skip
    r = Reasoner.from_text(text, "remat", options=EngineOptions(core=core))
    r.load([])
    facts = set(r.facts())
    assert ("n", 2000) in facts and ("p4999", "a") in facts
    assert ("s1998", "a") in facts and ("s1999", "a") not in facts


def walked_reach(comps) -> dict[str, list[list[str]]]:
    """`large_reach` as a walk of every component per predicate (quadratic: the reference)."""
    out = {}
    for p in {q for comp in comps for q in (*comp.preds, *comp.inputs)}:
        reached, hit = {p}, []
        for comp in comps:
            if comp.inputs.isdisjoint(reached) and reached.isdisjoint(comp.preds):
                continue
            reached.update(comp.preds)
            if comp.recursive and not comp.stc:
                hit.append(comp.preds)
        out[p] = hit
    return out


@pytest.mark.parametrize("seed", range(30))
def test_what_a_deletion_reaches_is_found_in_one_walk(seed):
    """engine.compact.recompute.large_reach (the choice of the deletion path, once per program)
    equals the walk per predicate on random component graphs in dependency order."""
    rnd = random.Random(seed)
    comps = []
    for i in range(rnd.randrange(1, 40)):
        preds = [f"c{i}p{j}" for j in range(rnd.choice((1, 1, 2)))]
        lower = [p for c in comps for p in c.preds] + ["edb"]
        inputs = set(rnd.sample(lower, min(len(lower), rnd.randrange(0, 4))))
        recursive = rnd.random() < 0.4
        comps.append(SimpleNamespace(preds=preds, inputs=inputs | (set(preds) if recursive else set()),
                                     recursive=recursive, stc=recursive and rnd.random() < 0.2))  # fmt: skip
    assert large_reach(comps) == walked_reach(comps)


DEEP = 5000  # terms of the sums below; 30,000 was measured too (about 10 s on either core)


@pytest.mark.parametrize("core", ["arrays", "objects"])
@pytest.mark.parametrize("algorithm", ["dredc", "fd-counting"])
def test_a_sum_of_thousands_of_terms_everywhere_a_term_goes(core, algorithm):
    """A 5,000-term sum as an assignment (two in one rule), a filter (two, the second placed
    first: specs are compared to be taken off the pending list), a head expression and in
    a recursive rule, maintained through deletions (DRed^c rederives from the head: the
    assignment is checked), with many strata above it; the same facts on both cores."""
    s = " + ".join(["X"] * DEEP)
    text = (f"q(S) :- p(X), S = {s}.\nh({s}) :- p(X).\ng(X) :- p(X), {s} > X.\n"
            f"t(X, Y) :- p(X), p(Y), X < Y.\nt(X, Z) :- t(X, Y), t(Y, Z), {s} > 0.\n"
            f"w(S, T) :- p(X), S = {s}, T = {s} + 1.\n"
            f"v(Y, Z) :- p(Y), p(Z), {s.replace('X', 'Z')} > Z, {s.replace('X', 'Y')} > Y.\n"
            + "".join(f"c{i}(S) :- c{i - 1}(S).\n" for i in range(1, 300)) + "c0(S) :- q(S).\n"
            + "p(1). p(2).\n")  # fmt: skip
    r = Reasoner.from_text(text, algorithm, options=EngineOptions(core=core))
    r.load([])
    assert {f for f in r.facts() if f[0] in ("q", "h", "c299")} == {
        (p, DEEP * x) for p in ("q", "h", "c299") for x in (1, 2)}  # fmt: skip
    r.update(add=[("p", 3)], delete=[("p", 1)])
    facts = set(r.facts())
    assert {f for f in facts if f[0] == "c299"} == {("c299", DEEP * 2), ("c299", DEEP * 3)}
    assert {f for f in facts if f[0] in ("g", "t")} == {("g", 2), ("g", 3), ("t", 2, 3)}
    assert {f for f in facts if f[0] == "w"} == {("w", DEEP * x, DEEP * x + 1) for x in (2, 3)}
    assert {f for f in facts if f[0] == "v"} == {("v", y, z) for y in (2, 3) for z in (2, 3)}
    assert r.explain(("q", DEEP * 3)) is not None


# ---------------------------------------------------------------- the printed program


def shape(term) -> list:
    """A term's nodes in postfix, each as (kind, operator or value): compared without recursion."""
    return [(type(n).__name__, getattr(n, "op", getattr(n, "value", getattr(n, "name", None))))
            for n in postorder(term)]  # fmt: skip


def random_term(rnd: random.Random, size: int) -> str:
    """Chains of + - * / % of random lengths, some parenthesised (at most a few levels)."""
    parts = []
    for _ in range(size):
        chain = f" {rnd.choice('+-*/%')} ".join(rnd.choice(["X", "2", "-3"]) for _ in range(rnd.randrange(1, 30)))
        parts.append(f"({chain})" if rnd.random() < 0.3 else chain)
    return f" {rnd.choice('+-*')} ".join(parts)


@pytest.mark.parametrize("seed", range(20))
def test_a_printed_long_term_reads_back_as_the_same_term(seed):
    """Every BinOp is printed in parentheses; a term that would then nest deeper than the
    parser reads (a sum of hundreds of terms) is printed with the parentheses it needs only."""
    rnd = random.Random(seed)
    text = f"q(S) :- p(X), S = {random_term(rnd, rnd.choice((1, 5, 40)))}.\n"
    term = parse_program(text).rules[0].body[1].right
    again = parse_program(str(parse_program(text))).rules[0].body[1].right
    assert shape(again) == shape(term)


@pytest.mark.parametrize("core", ["arrays", "objects"])
def test_the_program_in_force_reads_back_with_a_long_sum(core):
    """The program text a job stores (Reasoner.program_text) and parses on restart, also after
    a program change (arrays core): a 500-term sum used to print 500 parentheses deep."""
    s = " + ".join(["X"] * 500)
    r = Reasoner.from_text(f"q(S) :- p(X), S = {s}.\np(1).\n", options=EngineOptions(core=core))
    r.load([])
    if core == "arrays":  # program changes are the arrays core's
        r.change_program(add=f"w(S) :- q(X), S = {s}.\n")
    again = Reasoner(parse_program(r.program_text()), options=EngineOptions(core=core))
    again.load([])
    assert set(again.facts()) == set(r.facts()) and ("q", 500) in set(r.facts())
    assert ("w", 250_000) in set(r.facts()) or core == "objects"


# ---------------------------------------------------------------- the command and the stream


@pytest.fixture(scope="module")
def chain200(tmp_path_factory):
    d = tmp_path_factory.mktemp("long")
    edges = graph(3)
    ups = updates(edges, 3, count=3)
    (d / "long.dl").write_text(chain_program(200))
    (d / "facts.dl").write_text("".join(f"e({a}, {b}).\n" for _, a, b in sorted(edges)))
    (d / "updates.jsonl").write_text("".join(
        json.dumps({"add": sorted(map(list, add)), "del": sorted(map(list, delete))}) + "\n"
        for add, delete in ups))  # fmt: skip
    return d, edges, ups


def test_materialise_a_200_atom_rule(chain200):
    d, edges, _ = chain200
    r = fluxmat("materialise", str(d / "long.dl"), "--facts", str(d / "facts.dl"))
    assert r.returncode == 0, r.stderr
    assert parse_facts(r.stdout) == reference(edges, 200)


@pytest.mark.parametrize("algorithm", ["dredc", "fd-dred"])
def test_replay_a_200_atom_rule(chain200, algorithm):
    d, edges, ups = chain200
    r = fluxmat("replay", str(d / "long.dl"), "--facts", str(d / "facts.dl"),
                "--updates", str(d / "updates.jsonl"), "--algorithm", algorithm)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert parse_facts(r.stdout) == reference(replayed(edges, ups), 200)


def test_the_stream_batch_processor_with_a_200_atom_rule(chain200):
    """The streaming job's per-batch logic (no Spark): every update message of every batch."""
    _, edges, ups = chain200
    p = BatchProcessor(Reasoner.from_text(chain_program(200), "fd-counting"), MemoryStateStore(),
                       NullPublisher())  # fmt: skip
    p.start(sorted(edges))
    rows = [(0, i, None, json.dumps({"add": sorted(map(list, a)), "del": sorted(map(list, d))}), 0)
            for i, (a, d) in enumerate(ups)]  # fmt: skip
    out = p.process(0, rows[:2])
    assert out.updates == 2 and not out.dead
    p.process(1, rows[2:])
    assert p.facts() == reference(replayed(edges, ups), 200)
