"""The bake-off's columnar candidate against the current engine on random positive recursive programs.

After the load and after every random update, the candidate's materialisation
must equal the fd-counting engine's; a save and restore must give it back.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("polars")

from fluxmat.engine import EngineOptions, Reasoner, parse_program  # noqa: E402
from tests.benchmarks.bakeoff.columnar import ColumnarCore  # noqa: E402
from tests.benchmarks.bakeoff.columnar_bench import convert_rules  # noqa: E402

ARITY = {"a": 2, "b": 2, "c": 2, "d": 1, "e": 2}
DERIVED = ["c", "d", "e"]
FIXED = ["c(X, Z) :- c(X, Y), c(Y, Z).", "c(X, Y) :- a(X, Y).", "e(X, Y) :- e(Y, X).", "e(X, Y) :- b(X, Y)."]


def _atom(rng: random.Random, pred: str, pool: list[str]) -> str:
    terms = [str(rng.randrange(4)) if rng.random() < 0.1 else rng.choice(pool) for _ in range(ARITY[pred])]
    return f"{pred}({', '.join(terms)})"


def random_program(rng: random.Random) -> str:
    """FIXED (a transitive closure, a symmetric relation) plus random positive rules over a..e."""
    rules = list(FIXED)
    for _ in range(rng.randint(2, 5)):
        pool = ["X", "Y", "Z"][: rng.randint(1, 3)]
        body = [_atom(rng, rng.choice(list(ARITY)), pool) for _ in range(rng.randint(1, 3))]
        used = sorted({v for v in pool if any(v in b for b in body)})
        if not used:
            continue
        head = rng.choice(DERIVED)
        terms = [str(rng.randrange(4)) if rng.random() < 0.15 else rng.choice(used) for _ in range(ARITY[head])]
        rules.append(f"{head}({', '.join(terms)}) :- {', '.join(body)}.")
    return "\n".join(rules)


def random_fact(rng: random.Random) -> tuple:
    pred = rng.choice(["a", "a", "b", "b", "c", "d"])
    return (pred, *(rng.randrange(6) for _ in range(ARITY[pred])))


def columns(facts) -> dict[str, np.ndarray]:
    out: dict[str, list] = {}
    for f in facts:
        out.setdefault(f[0], []).append(f[1:])
    return {p: np.array(rows, dtype=np.int64).reshape(-1, ARITY[p]) for p, rows in out.items()}


def as_tuples(core: ColumnarCore) -> set[tuple]:
    return {(p, *row) for p, rows in core.facts().items() for row in rows}


@pytest.mark.parametrize("seed", range(25))
def test_columnar_matches_the_engine_after_every_update(seed, tmp_path):
    rng = random.Random(seed)
    text = random_program(rng)
    program = parse_program(text)
    ref = Reasoner.from_text(text, options=EngineOptions("fd-counting"))
    core = ColumnarCore(convert_rules(program, int), dict(ARITY))
    explicit = {random_fact(rng) for _ in range(rng.randint(5, 25))}
    ref.load(explicit)
    core.load(columns(explicit))
    assert as_tuples(core) == ref.facts(), text
    for step in range(8):
        size = rng.choice([1, 1, 3, 10])
        dele = set(rng.sample(sorted(explicit), min(size, len(explicit))))
        add = {random_fact(rng) for _ in range(size)} - explicit
        explicit = (explicit - dele) | add
        ref.update(add, dele)
        core.update(columns(add), columns(dele))
        assert as_tuples(core) == ref.facts(), (text, step)
    core.save(str(tmp_path / "snap"))
    back = ColumnarCore.restore(str(tmp_path / "snap"), convert_rules(program, int), dict(ARITY))
    assert as_tuples(back) == as_tuples(core)
    back.update(columns(explicit), {})  # re-adding explicit facts changes nothing
    assert as_tuples(back) == ref.facts()


def test_a_snapshot_of_another_program_or_a_truncated_one_is_refused(tmp_path):
    program = parse_program("\n".join(FIXED))
    core = ColumnarCore(convert_rules(program, int), dict(ARITY))
    core.load(columns({("a", 1, 2), ("a", 2, 3), ("b", 1, 1)}))
    core.save(str(tmp_path / "snap"))
    other = parse_program("\n".join(FIXED[:-1]))
    with pytest.raises(ValueError, match="another format or program"):
        ColumnarCore.restore(str(tmp_path / "snap"), convert_rules(other, int), dict(ARITY))
    victim = next(p for p in (tmp_path / "snap").iterdir() if p.suffix == ".arrow" and p.stat().st_size > 200)
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(ValueError, match="unreadable|truncated"):
        ColumnarCore.restore(str(tmp_path / "snap"), convert_rules(program, int), dict(ARITY))
