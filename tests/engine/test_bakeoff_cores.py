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

import pytest

from tests.benchmarks.bakeoff.current import CurrentCore
from tests.benchmarks.bakeoff.run import CANDIDATES, core_class
from tests.support.bakeoff import ARITY, encode, random_facts, random_rules


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
