"""Random programs and facts for the bake-off candidates (tests/benchmarks/bakeoff) against the engine."""

from __future__ import annotations

import random

import numpy as np

from tests.benchmarks.bakeoff.workload import Rule

ARITY = {"e": 2, "b": 2, "s": 1, "c": 2, "d": 1, "f": 2, "g": 1}


def random_rules(rng: random.Random) -> list[Rule]:
    """Safe positive rules: transitive closure of c over e, often a symmetric-transitive f, and random ones."""
    v = lambda n: ("var", n)  # noqa: E731
    rules = [Rule(("c", (v("X"), v("Y"))), (("e", (v("X"), v("Y"))),)),
             Rule(("c", (v("X"), v("Z"))), (("c", (v("X"), v("Y"))), ("e", (v("Y"), v("Z")))))]  # fmt: skip
    if rng.random() < 0.5:  # f is explicit too: its explicit facts are base edges of the closure
        rules += [Rule(("f", (v("X"), v("Y"))), (("b", (v("Y"), v("X"))),)),
                  Rule(("f", (v("X"), v("Y"))), (("f", (v("Y"), v("X"))),)),
                  Rule(("f", (v("X"), v("Z"))), (("f", (v("X"), v("Y"))), ("f", (v("Y"), v("Z")))))]  # fmt: skip
    for _ in range(rng.randrange(3, 7)):
        body = tuple(_atom(rng, rng.choice(list(ARITY)), VARS) for _ in range(rng.randrange(1, 4)))
        seen = sorted({t[1] for _, ts in body for t in ts if t[0] == "var"})
        if not seen:
            continue
        head_pred = rng.choice(DERIVED)
        rules.append(Rule(_atom(rng, head_pred, seen), body))
    return rules


def random_facts(rng: random.Random, n: int) -> set[tuple]:
    preds = ["e", "b", "s", "d", "f"]  # d and f are also derived
    return {(p, *(rng.randrange(DOMAIN) for _ in range(ARITY[p]))) for p in rng.choices(preds, k=n)}


def encode(facts) -> dict[str, np.ndarray]:
    out: dict[str, list] = {}
    for f in facts:
        out.setdefault(f[0], []).append(list(f[1:]))
    return {p: np.asarray(r, dtype=np.int64).reshape(len(r), ARITY[p]) for p, r in out.items()}


DERIVED = ["c", "d", "f", "g"]


VARS = ["X", "Y", "Z"]


DOMAIN = 5


def _atom(rng, pred, allowed):
    terms = []
    for _ in range(ARITY[pred]):
        if rng.random() < 0.1:
            terms.append(("const", rng.randrange(DOMAIN)))
        else:
            terms.append(("var", rng.choice(allowed)))
    return (pred, tuple(terms))
