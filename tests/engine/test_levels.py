"""`dredc`'s levels: overdeletion stops at facts that keep a well-founded derivation.

docs/algorithms.md, "Levels in DRed^c". Every fact of a recursive stratum
without modules has a level (the round that first derived it) and C_wf, the
number of its instances whose same-stratum body facts all have lower levels. The
tests check the invariant that makes this sound (every fact keeps C_nr > 0 or
C_wf > 0, with C_wf equal to a brute-force count over I and the stored levels)
after every update of random programs, and that the levels really cut the work
on the paper's Example 3 and on a ladder graph. Results against `remat` are
covered for `dredc` (levels on, the default) by tests/engine/test_properties.py and
the golden and corpus tests; `levels=False` is the paper's Algorithm 2
(tests/engine/test_paper_examples.py).

Levels, C_wf and the report's `overdeleted`, `rederived` and `recomputed_strata`
are the objects core's `dredc` (`--core objects`): these tests choose it. The
arrays core (the default) ignores `levels`; its results on the large deletion
are checked against remat too.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import given as hgiven

from fluxmat.engine import EngineOptions, Reasoner, analyse, create, parse_program
from fluxmat.engine.algorithms.dredc import DRedC
from tests.support.gen import apply_update, examples, scenarios

SETTINGS = settings(
    max_examples=examples(60),
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _dredc(text: str, levels: bool = True, core: str = "objects") -> Reasoner:
    """`dredc` on the objects core by default: its levels, C_wf and report details are read."""
    return Reasoner.from_text(text, options=EngineOptions("dredc", core=core, levels=levels))


def brute_force_wf(m: DRedC) -> dict[str, Counter]:
    """C_wf recounted: every instance over I whose levelled body is below its head."""
    out: dict[str, Counter] = {}
    for s in m.analysis.strata:
        if s.index not in m.levels.strata:
            continue
        for rule, items in m.ev.derive(s.recursive, m.OLD, m.OLD, instances=True):
            head_level = m.levels.level[rule.head.pred]
            c = out.setdefault(rule.head.pred, Counter())
            for head, pos, _neg in items:
                if all(m.levels.level[p][pos[i]] < head_level[head] for i, p in m.levels.same[rule.id]):
                    c[head] += 1
    return out


def check_invariant(m: DRedC, where: str) -> None:
    wf = brute_force_wf(m)
    for pred in m.levels.preds:
        facts = m.rel(pred).facts
        assert set(m.levels.level.get(pred, {})) == facts, f"{where}: levels of {pred} cover I exactly"
        stored = {f: n for f, n in m.levels.cwf.get(pred, {}).items() if n}
        assert set(m.levels.cwf.get(pred, {})) <= facts, f"{where}: C_wf of facts not in I"
        assert stored == dict(wf.get(pred, {})), f"{where}: C_wf of {pred} != brute force"
        cnr = m.cnr.get(pred, {})
        unsupported = [f for f in facts if cnr.get(f, 0) <= 0 and stored.get(f, 0) <= 0]
        assert not unsupported, f"{where}: {pred} facts with C_nr = C_wf = 0: {unsupported}"


@SETTINGS
@hgiven(case=scenarios())
def test_levels_invariant_after_every_update(case):
    """C_wf is exact and every fact of a levelled stratum is supported (C_nr or C_wf)."""
    gp, initial, updates = case
    analysis = analyse(parse_program(gp.text))
    m = create("dredc", analysis, modules=False)
    assert isinstance(m, DRedC)
    m.load(sorted(initial, key=repr))
    check_invariant(m, "after load")
    for i, (add, delete) in enumerate(updates, 1):
        m.update(add, delete)
        check_invariant(m, f"update {i}")


def test_levels_invariant_catches_a_wrong_counter():
    """The invariant check above fails when C_wf is off by one (it can fail)."""
    r = _dredc(LADDER_PROGRAM)
    r.load(ladder(6))
    check_invariant(r.maintainer, "load")
    m = r.maintainer
    pred, fact = "reach", m.encode(("reach", 4))[1]
    m.levels.cwf[pred][fact] += 1
    with pytest.raises(AssertionError, match="C_wf of reach"):
        check_invariant(m, "tampered")


# ------------------------------------------------------------------ Example 3

EXAMPLE3 = "a(Y) :- a(X), b(X, Y).\n"
EXAMPLE3_E = [
    ("a", "a"), ("a", "b"), ("a", "d"),
    ("b", "a", "c"), ("b", "b", "c"), ("b", "c", "d"), ("b", "d", "e"),
]  # fmt: skip


@pytest.mark.parametrize("levels, overdeleted", [(False, 2), (True, 1)])
def test_example3_levels_keep_a_c(levels, overdeleted):
    """Hu et al. 2018 Example 3: A(c) is derived in round 1 from A(a) and A(b), both
    explicit, so it has two well-founded derivations; deleting A(a) leaves one, and
    with levels only A(a) is overdeleted (the paper's DRed^c overdeletes A(a), A(c))."""
    r = _dredc(EXAMPLE3, levels)
    r.load(EXAMPLE3_E)
    m = r.maintainer
    if levels:
        c = m.encode(("a", "c"))[1]
        assert (m.levels.level["a"][c], m.levels.cwf["a"][c]) == (1, 2)
    report = r.update(delete=[("a", "a")])
    assert report.details["overdeleted"] == overdeleted
    assert sorted(f[1] for f in r.facts() if f[0] == "a") == list("bcde")


# ------------------------------------------------------------------ ladder

LADDER_PROGRAM = "reach(Y) :- reach(X), e(X, Y).\n"


def ladder(n: int) -> list[tuple]:
    """reach(0); edges i -> i+1 and i -> i+2 up to n: every node from 3 on has two
    well-founded derivations or more."""
    edges = [("e", i, j) for i in range(n) for j in (i + 1, i + 2) if j <= n]
    return [("reach", 0), *edges]


@pytest.mark.parametrize("n", [20, 80])
def test_ladder_levels_overdelete_only_what_goes(n):
    """Deleting e(0, 1) removes reach(1) only. With levels that is all dredc
    overdeletes; without, it overdeletes everything reachable from 1 and
    rederives all but one of them."""
    out = {}
    for levels in (True, False):
        r = _dredc(LADDER_PROGRAM, levels)
        r.load(ladder(n))
        report = r.update(delete=[("e", 0, 1)])
        assert report.removed_facts["reach"] == {r.maintainer.encode(("reach", 1))[1]}
        assert report.removed == 2  # reach(1) and the edge
        out[levels] = (report.details["overdeleted"], report.details["rederived"])
    assert out[True] == (2, 0)  # e(0, 1) and reach(1)
    assert out[False] == (n + 1, n - 1)  # e(0, 1) and reach(1..n); reach(2..n) come back


# ------------------------------------------------------------------ recomputing a stratum


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param({"recompute_input": 0.0, "recompute_min": 0}, id="on-input-change"),
        pytest.param(
            {"recompute_input": 1e9, "recompute_share": 0.0, "recompute_min": 0},
            id="mid-overdeletion",
        ),
    ],
)
@SETTINGS
@hgiven(case=scenarios())
def test_recomputed_strata_equal_remat_and_keep_the_invariant(limits, case):
    """With the limits at zero every affected levelled stratum is recomputed (from
    the start, or once overdeletion has begun): the result equals remat, the
    report's difference is exact, and counters and levels satisfy the invariant."""
    gp, initial, updates = case
    analysis = analyse(parse_program(gp.text))
    m = create("dredc", analysis, modules=False)
    for k, v in limits.items():
        setattr(m, k, v)
    m.load(sorted(initial, key=repr))
    explicit = frozenset(initial)
    for i, (add, delete) in enumerate(updates, 1):
        before = set(m.facts())
        report = m.update(add, delete)
        explicit = apply_update(explicit, add, delete)
        fresh = create("remat", analysis)
        fresh.load(sorted(explicit, key=repr))
        after = set(m.facts())
        assert after == set(fresh.facts()), f"update {i}: differs from remat"
        assert report.added == len(after - before) and report.removed == len(before - after)
        check_invariant(m, f"update {i}")
        if any(p in m.levels.preds for p in report.removed_facts):
            assert report.details["recomputed_strata"] >= 1, f"update {i}: not recomputed"


def test_large_deletion_recomputes_the_stratum():
    """Deleting every other node's first edge on a ladder changes far more than 5%
    of what the reach stratum reads: dredc recomputes it; a one-edge deletion
    afterwards does not. Both equal remat."""
    facts = ladder(3000)
    gone = [f for f in facts if f[0] == "e" and f[1] % 2 == 1 and f[2] == f[1] + 1]
    dredc = _dredc(LADDER_PROGRAM)
    dredc.load(facts)
    big = dredc.update(delete=gone)
    small = dredc.update(delete=[("e", 2000, 2001)])
    assert (big.details["recomputed_strata"], small.details["recomputed_strata"]) == (1, 0)
    remat = Reasoner.from_text(LADDER_PROGRAM, "remat")
    remat.load(sorted(set(facts) - set(gone) - {("e", 2000, 2001)}))
    assert dredc.lines() == remat.lines()
    arrays = _dredc(LADDER_PROGRAM, core="arrays")  # the default core (its own recomputation)
    arrays.load(facts)
    arrays.update(delete=gone)
    arrays.update(delete=[("e", 2000, 2001)])
    assert arrays.lines() == remat.lines()
