"""Benchmark workloads: a program, its explicit facts and how to name them.

* `dag`: transitive closure over a random DAG (2,000 nodes, 10,000 distinct
  edges u < v drawn uniformly, fixed seed).
* `lubm`: the corpus program `lubm.dlog` over the initial line of the largest
  corpus LUBM stream (`streams/scale-data/lubm/run0-400-40-1000.jsonl`).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from engine import Program, parse_program

DAG_PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
DAG_NODES = 2_000
DAG_EDGES = 10_000
SEED = 20240611
LUBM_STREAM = Path("streams") / "scale-data" / "lubm" / "run0-400-40-1000.jsonl"


@dataclass
class Workload:
    name: str
    text: str  # program text (fluxmat syntax)
    program: Program
    facts: list[tuple]  # explicit facts (pred, *args)
    source: str  # where the facts come from, for the report

    @property
    def recursive(self) -> bool:
        from engine import analyse

        return analyse(self.program).is_recursive


def random_dag(nodes: int = DAG_NODES, edges: int = DAG_EDGES, seed: int = SEED) -> list[tuple]:
    """`edges` distinct pairs u < v, uniform over all such pairs, as int nodes."""
    rng = random.Random(seed)
    chosen: set[tuple[int, int]] = set()
    while len(chosen) < edges:
        u, v = rng.sample(range(nodes), 2)
        chosen.add((u, v) if u < v else (v, u))
    return [("edge", u, v) for u, v in sorted(chosen)]


def dag(nodes: int = DAG_NODES, edges: int = DAG_EDGES, seed: int = SEED) -> Workload:
    facts = random_dag(nodes, edges, seed)
    return Workload(
        "dag", DAG_PROGRAM, parse_program(DAG_PROGRAM, "<dag>"), facts,
        f"random DAG: {nodes} nodes, {len(facts)} edges u<v, seed {seed}",
    )  # fmt: skip


def corpus_dir() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "illich-glimm"
    if (default / "streams").is_dir():
        return default
    env = os.environ.get("FLUXMAT_CORPUS")
    if env and (Path(env) / "streams").is_dir():
        return Path(env)
    raise SystemExit(
        f"Illich & Glimm corpus not found at {default} nor at $FLUXMAT_CORPUS ({env!r})"
    )


def lubm() -> Workload:
    from connectors.files import read_updates

    corpus = corpus_dir()
    path = corpus / "programs" / "lubm.dlog"
    text = path.read_text(encoding="utf-8")
    program = parse_program(text, str(path))
    stream = corpus / LUBM_STREAM
    first = next(iter(read_updates(stream, dict(program.prefixes))))
    return Workload(
        "lubm", text, program, list(first.add),
        f"lubm.dlog ({len(program.rules)} rules) over the initial line of {LUBM_STREAM}",
    )  # fmt: skip


WORKLOADS = {"dag": dag, "lubm": lubm}
