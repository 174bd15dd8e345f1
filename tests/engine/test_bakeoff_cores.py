"""The bake-off candidates (tests/benchmarks/bakeoff) agree with today's engine on small random programs.

Each candidate loads random explicit facts for a random positive program
(recursive rules, constants, repeated variables, predicates both explicit and
derived), then takes a sequence of random updates; after the load, every
update and a snapshot round trip, its materialisation must equal what
`engine.Reasoner` (fd-counting, through the bake-off's `CurrentCore`) holds.
A candidate whose library is not installed is skipped.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from tests.benchmarks.bakeoff.current import CurrentCore
from tests.benchmarks.bakeoff.run import CANDIDATES, core_class
from tests.benchmarks.bakeoff.workload import Rule

ARITY = {"e": 2, "b": 2, "s": 1, "c": 2, "d": 1, "f": 2, "g": 1}
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


def _norm(facts: dict[str, set]) -> dict[str, set]:
    return {p: set(s) for p, s in facts.items() if s}


def _available(name: str):
    try:
        return core_class(name)
    except ImportError as exc:
        pytest.skip(f"{name}: {exc}")


@pytest.mark.parametrize("name", [n for n in CANDIDATES if n != "current"])
@pytest.mark.parametrize("seed", range(12))
def test_candidate_matches_current_engine(name, seed, tmp_path):
    cls = _available(name)
    rng = random.Random(seed)
    rules = random_rules(rng)
    explicit = random_facts(rng, 14)
    ref, cand = CurrentCore(rules, dict(ARITY)), cls(rules, dict(ARITY))
    ref.load(encode(explicit))
    cand.load(encode(explicit))
    assert _norm(cand.facts()) == _norm(ref.facts()), "after load"
    for step in range(10):
        dele = set(rng.sample(sorted(explicit), min(len(explicit), rng.randrange(0, 4))))
        add = random_facts(rng, rng.randrange(0, 4)) - explicit
        explicit = (explicit - dele) | add
        ref.update(encode(add), encode(dele))
        cand.update(encode(add), encode(dele))
        assert _norm(cand.facts()) == _norm(ref.facts()), f"after update {step}"
    cand.save(str(tmp_path / "snap"))
    back = cls.restore(str(tmp_path / "snap"), rules, dict(ARITY))
    assert _norm(back.facts()) == _norm(ref.facts()), "after restore"
    dele = set(rng.sample(sorted(explicit), min(len(explicit), 3)))
    ref.update({}, encode(dele))
    back.update({}, encode(dele))
    assert _norm(back.facts()) == _norm(ref.facts()), "an update after restore"
