"""Benchmark workloads: a program, its explicit facts and how to name them.

* `dag`: transitive closure over a random DAG (2,000 nodes, 10,000 distinct
  edges u < v drawn uniformly, fixed seed).
* `lubm`: the corpus program `lubm.dlog` over generated LUBM-style data
  (tests/benchmarks/lubm_gen.py): `LUBM_UNIVERSITIES` universities of
  `LUBM_DEPARTMENTS` departments each, fixed seed (1 x 10: 67,753 generated,
  66,753 explicit after holding out `extra`; materialisation 168,255 facts).
* `lubm-corpus`: `lubm.dlog` over the initial line of the largest corpus LUBM
  stream (`streams/scale-data/lubm/run0-400-40-1000.jsonl`, 400 facts); not in the
  part of the corpus under tests/data: it needs FLUXMAT_CORPUS naming the whole corpus.
* `stc`, `sspe`, `exp`: symmetric-transitive cliques, single-source path
  enumeration with arithmetic, cyclic expression rules
  (tests/benchmarks/synthetic.py).

Every generated workload takes `scale` (run.py --scale), which multiplies its
default size: DAG nodes and edges, LUBM departments, STC components, SSPE
nodes and edges, Exp expressions.

Each workload also holds `extra`: `EXTRA` facts that are not explicit, for the
mixed "delete+insert" update task (fresh DAG edges; LUBM facts held out of the
generated data, so the explicit set is the generated one minus these).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from fluxmat.engine import Program, parse_program
from tests.benchmarks import synthetic as syn
from tests.support.shared import corpus_dir as shared_corpus_dir

DAG_PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
DAG_NODES = 2_000
DAG_EDGES = 10_000
SEED = 20240611
EXTRA = 1_000
LUBM_UNIVERSITIES = 1
LUBM_DEPARTMENTS = 10
LUBM_STREAM = Path("streams") / "scale-data" / "lubm" / "run0-400-40-1000.jsonl"


@dataclass
class Workload:
    name: str
    text: str  # program text (fluxmat syntax)
    program: Program
    facts: list[tuple]  # explicit facts (pred, *args)
    source: str  # where the facts come from, for the report
    extra: list[tuple] = field(default_factory=list)  # non-explicit facts to insert

    @property
    def recursive(self) -> bool:
        from fluxmat.engine import analyse

        return analyse(self.program).is_recursive


def random_dag(nodes: int = DAG_NODES, edges: int = DAG_EDGES, seed: int = SEED) -> list[tuple]:
    """`edges` distinct pairs u < v, uniform over all such pairs, as int nodes."""
    rng = random.Random(seed)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < edges:
        u, v = rng.sample(range(nodes), 2)
        chosen.add((u, v) if u < v else (v, u))
    return [("edge", u, v) for u, v in sorted(chosen)]


def fresh_edges(facts: list[tuple], nodes: int, n: int, seed: int = SEED) -> list[tuple]:
    """`n` distinct edges u < v that are not in `facts` (uniform, fixed seed)."""
    rng = random.Random(seed + 1)
    have = {(f[1], f[2]) for f in facts}
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < n:
        u, v = sorted(rng.sample(range(nodes), 2))
        if (u, v) not in have:
            chosen.add((u, v))
    return [("edge", u, v) for u, v in sorted(chosen)]


def dag(
    nodes: int = DAG_NODES, edges: int = DAG_EDGES, seed: int = SEED, scale: float = 1.0
) -> Workload:
    nodes, edges = syn.scaled(nodes, scale), syn.scaled(edges, scale)
    facts = random_dag(nodes, edges, seed)
    return Workload(
        "dag", DAG_PROGRAM, parse_program(DAG_PROGRAM, "<dag>"), facts,
        f"random DAG: {nodes} nodes, {len(facts)} edges u<v, seed {seed}",
        fresh_edges(facts, nodes, EXTRA, seed),
    )  # fmt: skip


def corpus_dir(*needed: Path) -> Path:
    """The Illich & Glimm corpus: $FLUXMAT_CORPUS (the whole corpus) when set, else the part
    under tests/data; exits with a message when a `needed` file (relative) is not there."""
    root = shared_corpus_dir(full=True)
    for rel in needed:
        if not (root / rel).is_file():
            raise SystemExit(f"{root / rel}: not in the corpus; tests/data holds only part of it: "
                             "point FLUXMAT_CORPUS at the whole corpus (programs/, streams/)")  # fmt: skip
    return root


def _lubm_program() -> tuple[str, Program]:
    path = corpus_dir() / "programs" / "lubm.dlog"
    text = path.read_text(encoding="utf-8")
    return text, parse_program(text, str(path))


def lubm(
    universities: int = LUBM_UNIVERSITIES,
    departments: int = LUBM_DEPARTMENTS,
    seed: int = SEED,
    scale: float = 1.0,
) -> Workload:
    """Generated LUBM data; `EXTRA` random generated facts are held out as `extra`."""
    from tests.benchmarks.lubm_gen import generate

    departments = syn.scaled(departments, scale)
    text, program = _lubm_program()
    # Python facts are not prefix-expanded by the engine: expand like read_updates does
    generated = generate(universities, departments, seed, prefixes=dict(program.prefixes))
    held = set(random.Random(seed).sample(generated, min(EXTRA, len(generated) // 10)))
    facts = [f for f in generated if f not in held]
    extra = [f for f in generated if f in held]
    return Workload(
        "lubm", text, program, facts,
        f"lubm.dlog ({len(program.rules)} rules) over lubm_gen: {universities} "
        f"universit{'y' if universities == 1 else 'ies'} x {departments} departments, "
        f"seed {seed} ({len(generated)} generated, {len(extra)} held out)",
        extra,
    )  # fmt: skip


def lubm_corpus(scale: float = 1.0) -> Workload:
    """Fixed size (the corpus stream's first line); `scale` is ignored."""
    from fluxmat.connectors.files import read_updates

    text, program = _lubm_program()
    stream = corpus_dir(LUBM_STREAM) / LUBM_STREAM
    first = next(iter(read_updates(stream, dict(program.prefixes))))
    return Workload(
        "lubm-corpus", text, program, list(first.add),
        f"lubm.dlog ({len(program.rules)} rules) over the initial line of {LUBM_STREAM}",
    )  # fmt: skip


def _synthetic(name: str, text: str, facts: list[tuple], source: str, seed: int) -> Workload:
    kept, extra = syn.hold_out(facts, EXTRA, seed)
    return Workload(
        name, text, parse_program(text, f"<{name}>"), kept,
        f"{source}, seed {seed} ({len(facts)} generated, {len(extra)} held out)", extra,
    )  # fmt: skip


def stc(
    components: int = syn.STC_COMPONENTS, size: int = syn.STC_SIZE,
    degree: int = syn.STC_DEGREE, seed: int = SEED, scale: float = 1.0,
) -> Workload:  # fmt: skip
    components = syn.scaled(components, scale)
    facts = syn.stc_facts(components, size, degree, seed)
    source = f"{components} cliques x {size} nodes, {degree} edges per node"
    return _synthetic("stc", syn.STC_PROGRAM, facts, source, seed)


def sspe(
    nodes: int = syn.SSPE_NODES, edges: int = syn.SSPE_EDGES,
    max_weight: int = syn.SSPE_MAX_WEIGHT, seed: int = SEED, scale: float = 1.0,
) -> Workload:  # fmt: skip
    nodes, edges = syn.scaled(nodes, scale), syn.scaled(edges, scale)
    facts = syn.sspe_facts(nodes, edges, max_weight, seed)
    return _synthetic("sspe", syn.SSPE_PROGRAM, facts,
                      f"random DAG: {nodes} nodes, {edges} edges u<v, weights 1..{max_weight}, "
                      "source 0", seed)  # fmt: skip


def exp(
    expressions: int = syn.EXP_EXPRESSIONS, valuations: int = syn.EXP_VALUATIONS,
    depth: int = syn.EXP_DEPTH, seed: int = SEED, scale: float = 1.0,
) -> Workload:  # fmt: skip
    expressions = syn.scaled(expressions, scale)
    facts = syn.exp_facts(expressions, valuations, depth, seed)
    return _synthetic("exp", syn.EXP_PROGRAM, facts,
                      f"{expressions} expression trees of depth <= {depth} x {valuations} "
                      "value sets", seed)  # fmt: skip


WORKLOADS = {
    "dag": dag, "lubm": lubm, "lubm-corpus": lubm_corpus, "stc": stc, "sspe": sspe, "exp": exp,
}  # fmt: skip


def render_table(header, rows, right, markdown: bool = False) -> str:
    """A text (or markdown) table; columns in `right` are right-aligned."""
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(c) + " |" for c in rows]
        return "\n".join(out)
    cells = [tuple(header), *rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]

    def line(c):
        return "  ".join(
            (v.rjust(widths[i]) if i in right else v.ljust(widths[i])) for i, v in enumerate(c)
        ).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
