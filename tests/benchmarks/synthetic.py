"""Generators of the synthetic workloads STC, SSPE and Exp (fixed seeds, scalable).

* STC: a symmetric-transitive relation whose closure is a set of cliques, like
  Claros' `relatedPlaces` (Hu, Motik & Horrocks 2019): `components` groups of
  `size` nodes; each group gets a random spanning tree plus random extra
  edges, `degree` edges per node in all. The program axiomatises `related`
  as symmetric and transitive; explicit facts are `related` edges.
* SSPE: single-source path enumeration with arithmetic (Hu, Motik & Horrocks
  2018, Example 2, rules (6) and (7)): a random DAG of weighted edges
  `b(X, Y, W)` (u < v, weight 1..`max_weight`) and
  `d(Y, Z) :- b(0, Y, Z).  d(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.`:
  every path length from node 0. Finite because the graph is acyclic.
* Exp: expression trees evaluated by three recursive cyclic rules of 9 body
  atoms each, one per operation (+, -, *), after Zhang et al. 2023's Exp
  benchmark (whose exact rules are not published; the shape is): `expressions`
  random binary trees of depth at most `depth`, `valuations` value sets;
  leaves carry a value in 0..999 per value set, and inner nodes compute theirs
  modulo 1,000 (keeps every value inside clingo's 32-bit integers and makes
  Python, SQL and ASP arithmetic agree). Rule bodies join the node with both
  children, all three with the expression, the expression with the value set
  and both children's values: cycles N-L-E and L-S-R-E, hypertree width 2.

Every generator returns `(facts, extra)`: `extra` holds `EXTRA` generated facts
held out of the explicit set, inserted by the mixed update task.
"""

from __future__ import annotations

import random

STC_PROGRAM = """\
% symmetric-transitive closure (Claros relatedPlaces)
related(Y, X) :- related(X, Y).
related(X, Z) :- related(X, Y), related(Y, Z).
"""
STC_COMPONENTS = 40
STC_SIZE = 30
STC_DEGREE = 20

SSPE_PROGRAM = """\
% Hu, Motik & Horrocks 2018, Example 2 (SSPE), rules (6) and (7), source node 0
d(Y, Z) :- b(0, Y, Z).
d(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.
"""
SSPE_NODES = 5_000
SSPE_EDGES = 50_000
SSPE_MAX_WEIGHT = 3

EXP_MODULUS = 1000
EXP_PROGRAM = """\
% expression trees (after Zhang et al. 2023, Exp): three cyclic rules of 9 body atoms
value(N, S, Z) :- add(N), left(N, L), right(N, R), expr(N, E), expr(L, E), expr(R, E),
    valset(E, S), value(L, S, X), value(R, S, Y), Z = (X + Y) % 1000.
value(N, S, Z) :- sub(N), left(N, L), right(N, R), expr(N, E), expr(L, E), expr(R, E),
    valset(E, S), value(L, S, X), value(R, S, Y), Z = (X - Y + 1000) % 1000.
value(N, S, Z) :- mul(N), left(N, L), right(N, R), expr(N, E), expr(L, E), expr(R, E),
    valset(E, S), value(L, S, X), value(R, S, Y), Z = (X * Y) % 1000.
"""
EXP_EXPRESSIONS = 60
EXP_VALUATIONS = 60
EXP_DEPTH = 5
EXP_OPS = ("add", "sub", "mul")


def hold_out(facts: list[tuple], n: int, seed: int) -> tuple[list[tuple], list[tuple]]:
    """Split off `n` random facts (at most a tenth) as the mixed update's insertions."""
    held = set(random.Random(seed).sample(facts, min(n, len(facts) // 10)))
    return [f for f in facts if f not in held], [f for f in facts if f in held]


def stc_facts(components: int, size: int, degree: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    edges: set[tuple[int, int]] = set()
    for c in range(components):
        base = c * size
        nodes = list(range(base, base + size))
        chosen: set[tuple[int, int]] = set()
        for i in range(1, size):  # a random spanning tree keeps the group connected
            chosen.add((nodes[i], nodes[rng.randrange(i)]))
        target = min(size * degree // 2, size * (size - 1) // 2)
        while len(chosen) < target:
            u, v = rng.sample(nodes, 2)
            if (v, u) not in chosen:
                chosen.add((u, v))
        for u, v in chosen:  # random orientation: symmetry has work to do
            edges.add((u, v) if rng.random() < 0.5 else (v, u))
    return [("related", u, v) for u, v in sorted(edges)]


def sspe_facts(nodes: int, edges: int, max_weight: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    chosen: set[tuple[int, int]] = set()
    for v in rng.sample(range(1, nodes), min(5, nodes - 1)):  # the source reaches something
        chosen.add((0, v))
    while len(chosen) < edges:
        u, v = rng.sample(range(nodes), 2)
        chosen.add((u, v) if u < v else (v, u))
    return [("b", u, v, rng.randint(1, max_weight)) for u, v in sorted(chosen)]


def exp_facts(expressions: int, valuations: int, depth: int, seed: int) -> list[tuple]:
    """Random trees: a node at depth d < `depth` is inner with probability 0.75 (root: 1)."""
    rng = random.Random(seed)
    out: list[tuple] = []
    counter = 0
    for e in range(expressions):
        for s in range(valuations):
            out.append(("valset", e, s))
        leaves: list[int] = []

        def node(d: int, e: int = e, leaves: list[int] = leaves) -> int:
            nonlocal counter
            n = counter
            counter += 1
            out.append(("expr", n, e))
            if d < depth and (d == 0 or rng.random() < 0.75):
                out.append((rng.choice(EXP_OPS), n))
                out.append(("left", n, node(d + 1)))
                out.append(("right", n, node(d + 1)))
            else:
                leaves.append(n)
            return n

        node(0)
        for leaf in leaves:
            for s in range(valuations):
                out.append(("value", leaf, s, rng.randrange(EXP_MODULUS)))
    return out


def scaled(x: int, scale: float) -> int:
    return max(1, round(x * scale))
