"""`Reasoner` is the engine's one door; `EngineOptions` one value; one fully dynamic driver."""

import ast
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.engine import (
    ALGORITHMS,
    FULLY_DYNAMIC,
    EngineOptions,
    Fed,
    FluxmatError,
    Limits,
    Reasoner,
    WorkLimitExceeded,
)
from fluxmat.engine.errors import AlgorithmError
from fluxmat.engine.fd import FullyDynamic
from tests.support.gen import examples
from tests.support.shared import in_repo, scratch_copy

ROOT = Path(__file__).resolve().parent.parent.parent
OUTSIDE = ("connectors", "stream", "ops")
# the engine's public surface besides the package itself: language, values, printing, limits, proofs
PUBLIC = {"engine", "engine.errors", "engine.limits", "engine.options", "engine.printer", "engine.wire",
          "engine.syntax", "engine.parser", "engine.lexer", "engine.why"}  # fmt: skip


def door_violations(root: Path) -> list[str]:
    """Places outside engine/ that reach past the door: `.maintainer`, or an internal module."""
    out = []
    for pkg in OUTSIDE:
        for path in sorted((root / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            where = path.relative_to(root)
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr == "maintainer":
                    out.append(f"{where}:{node.lineno} .maintainer")
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    module = in_repo(node.module)
                    if module.split(".")[0] == "engine" and module not in PUBLIC:
                        out.append(f"{where}:{node.lineno} {module}")
                elif isinstance(node, ast.Import):
                    out.extend(f"{where}:{node.lineno} {in_repo(a.name)}" for a in node.names
                               if in_repo(a.name).split(".")[0] == "engine"
                               and in_repo(a.name) not in PUBLIC)  # fmt: skip
    return out


def test_nothing_outside_the_engine_reaches_past_the_reasoner(tmp_path):
    assert door_violations(ROOT) == []
    copy = scratch_copy(tmp_path, OUTSIDE, "stream/batch.py", "\n\nfrom engine.fd.core import FullyDynamic  # noqa\n"
                        "def _peek(reasoner):\n    return reasoner.maintainer.I\n")  # fmt: skip
    found = door_violations(copy)
    assert any("engine.fd.core" in v for v in found) and any(".maintainer" in v for v in found)


def test_the_fully_dynamic_names_are_the_fully_dynamic_algorithms():
    assert set(FULLY_DYNAMIC) == {n for n, cls in ALGORITHMS.items() if issubclass(cls, FullyDynamic)}


def test_options_are_one_checked_value():
    with pytest.raises(FluxmatError, match="unknown schedule 'random'"):
        EngineOptions(schedule="random")
    with pytest.raises(FluxmatError, match="at least 0"):
        EngineOptions(budget=-1)
    # the objects core: its fully dynamic engine is the one whose updates interleave (maintainer.interleaved)
    r = Reasoner.from_text("p(X) :- q(X).", options=EngineOptions(algorithm="fd-dred", seed=7, core="objects"))
    assert r.name == "fd-dred" and r.options.seed == 7
    assert Reasoner.from_text("p(X) :- q(X).", "remat", options=r.options).name == "remat"
    r.reconfigure(schedule="interleaved", budget=3)
    assert r.options.interleaved and r.options.budget == 3 and r.maintainer.interleaved
    with pytest.raises(AlgorithmError, match="cannot change algorithm"):
        r.reconfigure(algorithm="remat")


PATH = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\nnode(X) :- edge(X, Y), not blocked(X)."
NODES = "abcde"


def _edges(rng: random.Random, k: int) -> list[tuple]:
    return [("edge", rng.choice(NODES), rng.choice(NODES)) for _ in range(k)] + \
        [("blocked", rng.choice(NODES)) for _ in range(rng.randint(0, 1))]  # fmt: skip


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(["fd-dred", "fd-counting"]),
       st.sampled_from(["sequential", "interleaved"]), st.integers(0, 6))  # fmt: skip
def test_feed_ends_in_the_materialisation_of_the_last_update(seed, alg, schedule, budget):
    """Under every schedule and budget, `feed` leaves mat(P, E_n), and the delta it reports is exact."""
    rng = random.Random(seed)
    initial = _edges(rng, 4)
    r = Reasoner.from_text(PATH, options=EngineOptions(alg, schedule=schedule, budget=budget, seed=seed))
    r.load(initial)
    r.poll()
    before = r.facts()
    explicit = set(initial)
    updates = []
    for i in range(rng.randint(1, 6)):
        add = _edges(rng, rng.randint(0, 3))
        delete = [f for f in sorted(explicit) if rng.random() < 0.3 and f not in add]
        updates.append(Fed(i, add, delete, id=f"u{i}"))
        explicit = (explicit - set(delete)) | set(add)
    seen = []
    result = r.feed(updates, after_each=lambda fed, seq: seen.append(fed.key))
    assert seen == list(range(len(updates))) and result.submitted == len(updates)
    ref = Reasoner.from_text(PATH, "remat")
    ref.load(explicit)
    assert r.facts() == ref.facts()
    point = r.poll()
    assert point is not None and point.through == f"u{len(updates) - 1}"
    assert before - set(point.removed) | set(point.added) == ref.facts()


def test_feed_rejects_only_the_bad_update_and_names_the_update_a_limit_was_charged_to():
    r = Reasoner.from_text(PATH, "fd-counting")
    r.load([("edge", "a", "b")])
    bad = Fed("line 2", [("edge", "x")])  # wrong arity
    rejected = []
    r.feed([Fed("line 1", [("edge", "b", "c")]), bad, Fed("line 3", [("edge", "c", "d")])],
           rejected=lambda key, exc: rejected.append((key, str(exc))))  # fmt: skip
    assert [k for k, _ in rejected] == ["line 2"] and "argument" in rejected[0][1]
    assert ("path", "a", "d") in r.facts()
    with pytest.raises(FluxmatError, match="^line 2: "):  # without `rejected`: raised, with its key
        r.feed([bad])
    chain = [("edge", f"n{i}", f"n{i + 1}") for i in range(60)]
    r.reconfigure(limits=Limits(work=500))
    with pytest.raises(WorkLimitExceeded) as caught:
        r.feed([Fed("small", [("edge", "d", "e")]), Fed("chain", chain)], overlap=False)
    assert caught.value.key == "chain"


def test_a_rejected_update_leaves_no_arity_behind():
    """A rejected update leaves no trace (`Maintainer.encode_update`): the arities
    of the new predicates it named are forgotten, so a later update may use them
    with other arities."""
    r = Reasoner.from_text(PATH, "fd-counting")
    r.load([("edge", "a", "b")])
    bad = Fed("bad", [("fresh", "x"), ("other", "y", "z")], [("fresh", "x")])  # added and deleted
    rejected = []
    r.feed([bad, Fed("good", [("fresh", "x", "y"), ("other", "w")])], rejected=lambda k, e: rejected.append(k))
    assert rejected == ["bad"]
    assert ("fresh", "x", "y") in r.facts() and ("other", "w") in r.facts()
