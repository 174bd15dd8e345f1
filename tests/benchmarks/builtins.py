"""Comparisons and arithmetic: the arrays core against the objects core on path lengths.

A random weighted graph (`--nodes` nodes, `--degree` edges per node, weights
1..9, seeded). The program computes the lengths of paths from the source
nodes up to a bound (recursion through `Z = Z1 + Z2, Z < bound`, as Hu,
Motik & Horrocks 2018 Example 2), plus non-recursive rules with comparisons,
arithmetic in heads and division. Each core loads the graph, then takes
`--batches` batches of `--changes` edge deletions and as many additions
(set-at-a-time on the arrays core: larger than its small-update threshold).
CPU seconds (process time) per phase; the two cores' results are checked equal.

    nice -n 10 python -m tests.benchmarks.builtins [--nodes N] [--batches B]
"""

from __future__ import annotations

import argparse
import os
import random
import time

from fluxmat.engine import EngineOptions, Reasoner

PROGRAM = """
d(Y, 0) :- src(Y).
d(Y, Z) :- d(X, Z1), w(X, Y, Z2), Z = Z1 + Z2, Z < {bound}.
near(Y) :- d(Y, Z), Z <= 5.
heavy(X, Y) :- w(X, Y, W), W > 6.
both(X, Y, A + B) :- w(X, Y, A), w(Y, X, B).
ratio(X, Y, A / B) :- w(X, Y, A), w(Y, X, B), A != B.
"""


def graph(nodes: int, degree: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    edges = {(x, rng.randrange(nodes)) for x in range(nodes) for _ in range(degree)}
    facts = [("w", x, y, rng.randint(1, 9)) for x, y in sorted(edges)]
    return facts + [("src", s) for s in range(0, nodes, max(1, nodes // 10))]


def run(core: str, text: str, facts: list[tuple], batches: list) -> tuple[dict, set]:
    r = Reasoner.from_text(
        text, options=EngineOptions("counting" if core == "arrays" else "dredc", core=core)
    )
    times = {}
    t = time.process_time()
    r.load(facts)
    times["load"] = time.process_time() - t
    t = time.process_time()
    for add, delete in batches:
        r.update(add, delete)
    times["updates"] = time.process_time() - t
    return times, r.facts()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--degree", type=int, default=3)
    ap.add_argument("--bound", type=int, default=30)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--changes", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    text = PROGRAM.format(bound=a.bound)
    facts = graph(a.nodes, a.degree, a.seed)
    rng = random.Random(a.seed + 1)
    current = [f for f in facts if f[0] == "w"]
    batches = []
    for _ in range(a.batches):
        delete = rng.sample(current, a.changes)
        add = [
            ("w", rng.randrange(a.nodes), rng.randrange(a.nodes), rng.randint(1, 9))
            for _ in range(a.changes)
        ]
        batches.append((add, delete))
    print(
        f"{len(facts):,} explicit facts, {a.batches} batches of {a.changes} deletions + {a.changes} additions"
    )
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    results = {}
    for core in ("arrays", "objects"):
        run(core, text, facts[:50], batches[:0])  # warm-up: numba's kernels loaded, plans compiled
        times, got = run(core, text, facts, batches)
        results[core] = got
        print(f"{core:8} load {times['load']:7.2f} s CPU   updates {times['updates']:7.2f} s CPU   "
              f"{len(got):,} facts")  # fmt: skip
    assert results["arrays"] == results["objects"], "the cores disagree"
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
