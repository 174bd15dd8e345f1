"""stc modules in the fully dynamic algorithms (engine.fd.upkeep, engine.modules.components).

Random programs and interleavings are in tests/engine/test_fd_properties.py
(`test_quiescent_states_equal_remat_stc_module`); here: where the module is
taken, what it saves (logged instances, deletions), the cases where a pair the
module derives is also a base fact, and the state round trip.
"""

from __future__ import annotations

import random

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.fd.snapshot import export_changes, fingerprint, restore
from fluxmat.engine.modules.reach import Reachability

FD = ("fd-dred", "fd-counting")
CLOSURE = """
r(X, Y) :- e(X, Y).
r(X, Y) :- g(X, Y).
r(Y, X) :- r(X, Y).
r(X, Z) :- r(X, Y), r(Y, Z).
"""
STC = CLOSURE + "alone(X) :- n(X), not r(X, X).\nfar(X) :- n(X), not r(X, a).\n"
LTC = (  # r0 = e, paths along g and e; cycles; negation above
    "r(X, Y) :- e(X, Y).\nr(X, Z) :- r(X, Y), g(Y, Z).\nr(X, Z) :- r(X, Y), e(Y, Z).\n"
    "alone(X) :- n(X), not r(X, X).\nfar(X) :- n(X), not r(X, a).\n"
)


def engine(alg: str, program: str = STC, modules: bool = True):
    # the objects core: these tests read its fully dynamic engine's modules, log and snapshots
    return Reasoner.from_text(program, alg, modules=modules, options=EngineOptions(core="objects")).maintainer


def remat(program: str, explicit) -> set[tuple]:
    m = engine("remat", program)
    m.load(sorted(explicit))
    return set(m.facts())


def chain(prefix: str, n: int) -> list[tuple]:
    return [("e", f"{prefix}{i}", f"{prefix}{i + 1}") for i in range(n - 1)]


def edges(m) -> set[tuple]:
    return {m.decode("r", f) for f in m.closures["r"].edges}


@pytest.mark.parametrize("alg", FD)
def test_the_module_is_taken_only_where_it_applies(alg):
    assert set(engine(alg).closures) == {"r"}
    assert engine(alg).uses_modules
    assert engine(alg, modules=False).closures == {}
    other = STC + "r(X, Y) :- r(X, Z), e(Z, Y).\n"  # a further recursive rule of r's stratum
    assert engine(alg, other).closures == {}
    tc = "r(X, Y) :- e(X, Y).\nr(X, Z) :- r(X, Y), r(Y, Z).\n"
    assert isinstance(engine(alg, tc).closures["r"], Reachability)
    assert engine(alg, tc + "r(X, Y) :- r(Y, X), e(X, X).\n").closures == {}
    assert engine("fd-counting").active_rules == [
        r for r in engine("fd-counting").analysis.rules if r.id not in (2, 3)
    ]


def test_the_log_holds_base_instances_only():
    """A chain of n nodes is one component: n^3 + n^2 rule instances of r's
    transitivity and symmetry without the module, none with it."""
    n = 12
    facts = chain("a", n)
    with_module, without = engine("fd-counting", CLOSURE), engine("fd-counting", CLOSURE, False)
    with_module.load(facts)
    without.load(facts)
    assert set(with_module.facts()) == set(without.facts()) == remat(CLOSURE, facts)
    assert with_module.log_size() == n - 1
    assert without.log_size() == (n - 1) + n**2 + n**3
    for m in (with_module, without):  # every counter agrees where both have one
        assert m.counters(("r", "a0", "a1")) == (0, 1)


@pytest.mark.parametrize("alg", FD)
def test_deleting_a_bridge_deletes_exactly_the_pairs_across(alg):
    """Two chains of 5 joined by one edge: deleting it removes the 2 * 5 * 5
    pairs across, and nothing inside either side is deleted or rederived."""
    facts = chain("a", 5) + chain("b", 5) + [("e", "a4", "b0")]
    m = engine(alg, CLOSURE)
    m.load(facts)
    report = m.update([], [("e", "a4", "b0")])
    assert set(m.facts()) == remat(CLOSURE, facts[:-1])
    assert report.removed == 1 + 2 * 5 * 5
    assert report.details["executed"] == 1 + 2 * 5 * 5
    assert report.details["rederivations"] == 0
    plain = engine(alg, CLOSURE, modules=False)
    plain.load(facts)
    logged = plain.log_size()
    plain_report = plain.update([], [("e", "a4", "b0")])
    if alg == "fd-dred":  # without the module DRed overdeletes both sides and rederives
        assert plain_report.details["rederivations"] > 0
    else:  # counting is exact too, but through the logged instances across
        assert logged - plain.log_size() > 2 * 5 * 5 * 5


@pytest.mark.parametrize("alg", FD)
@pytest.mark.parametrize("leaf_first", [False, True])
def test_cutting_off_a_leaf_deletes_its_pairs_only(alg, leaf_first):
    """An end cut off alone from a 12-chain (either way round in the edge): the
    search from both ends finds the leaf's side complete first; the 1 + 2 * 12
    pairs across and its own R(x, x) go, the chain's 144 pairs stay."""
    edge = ("e", "x", "a11") if leaf_first else ("e", "a11", "x")
    facts = chain("a", 12) + [edge]
    m = engine(alg, CLOSURE)
    m.load(facts)
    report = m.update([], [edge])
    assert set(m.facts()) == remat(CLOSURE, facts[:-1])
    assert report.removed == 1 + 2 * 12 + 1


@pytest.mark.parametrize("alg", FD)
@pytest.mark.parametrize("via", ["rule", "explicit"])
def test_a_derived_pair_that_becomes_a_base_fact_holds_its_component(alg, via):
    """r(a, c) is first derived by the module, then also by a base rule (g) or
    explicit; when e(b, c) goes, r(a, c) still connects a and c."""
    facts = [("e", "a", "b"), ("e", "b", "c"), ("n", "c")]
    m = engine(alg)
    m.load(facts)
    extra = ("g", "a", "c") if via == "rule" else ("r", "a", "c")
    m.update([extra], [])
    linked = ("r", "a", "c") in edges(m)
    # FD-DRed does not evaluate instances whose head is present: the split deletes
    # r(a, c), and its rederivation finds g(a, c) and links it then.
    assert linked == (alg == "fd-counting" or via == "explicit")
    report = m.update([], [("e", "b", "c")])
    assert (report.details["rederivations"] > 0) == (not linked)
    expected = remat(STC, [("e", "a", "b"), ("n", "c"), extra])
    assert ("r", "c", "b") in expected and ("alone", "c") not in expected
    assert set(m.facts()) == expected


@pytest.mark.parametrize("alg", FD)
def test_a_base_fact_that_was_not_linked_is_linked_when_its_deletion_is_refused(alg):
    """The safety net: a base fact left unlinked (here by hand) is linked when a
    split determines its deletion, so the pairs it connects come back."""
    facts = [("e", "a", "b"), ("e", "b", "c"), ("e", "a", "c")]
    m = engine(alg, CLOSURE)
    m.load(facts)
    comps = m.closures["r"]
    ac = m.encode(("r", "a", "c"))[1]
    comps.edges.discard(ac)
    comps._touch(*ac, -1)
    m.update([], [("e", "b", "c")])
    assert ("r", "a", "c") in edges(m)
    assert set(m.facts()) == remat(CLOSURE, [("e", "a", "b"), ("e", "a", "c")])


@pytest.mark.parametrize("program", [STC, LTC], ids=["stc", "ltc"])
@pytest.mark.parametrize("alg", FD)
def test_state_round_trip_keeps_the_components(alg, program):
    """Export at quiescent points, restore into a fresh engine, and go on: both
    engines stay equal to `remat` (the restored one rebuilt its components, or
    its reachability over R0 and S)."""
    rnd = random.Random(5)
    pool = [(p, x, y) for p in ("e", "g") for x in "abcde" for y in "abcde" if x != y]
    pool += [("n", x) for x in "abcde"]
    a = engine(alg, program)
    a.load(rnd.sample(pool, 10))
    store = MemoryStateStore()
    store.commit(-1, export_changes(a), {"through": None, "added": [], "removed": [], "dead": []})
    checked = 0
    for batch in range(30):
        add = set(rnd.sample(pool, 3))
        a.submit(add, set(rnd.sample(pool, 3)) - add)
        a.step(rnd.randint(0, 6))
        if rnd.random() < 0.5:
            a.run()
        if not a.quiescent:
            continue
        store.commit(batch, export_changes(a), {"through": batch, "added": [], "removed": [], "dead": []})
        b = engine(alg, program)
        assert set(b.closures) == {"r"}
        restore(b, store.load())
        # FD-Counting's edges are the present facts explicit or with a logged base
        # instance; FD-DRed's may lack base facts that were derived by the module first
        ea, eb = (edges(m) for m in (a, b))
        assert ea == eb if alg == "fd-counting" else ea <= eb
        add = set(rnd.sample(pool, 3))
        delete = set(rnd.sample(sorted(a.explicit()), 2)) - add
        for m in (a, b):
            m.update(add, delete)
        assert set(b.facts()) == set(a.facts()) == remat(program, a.explicit())
        checked += 1
    assert checked >= 5
    assert fingerprint(engine(alg, program)) != fingerprint(engine(alg, program, modules=False))


@pytest.mark.parametrize("alg", FD)
def test_tc_module_cut_and_rejoin_a_chain(alg):
    """tc: a chain of n nodes logs its n - 1 base instances only; cutting it in the
    middle deletes exactly the pairs across the cut, rejoining it brings them back."""
    n = 12
    tc = "r(X, Y) :- e(X, Y).\nr(X, Z) :- r(X, Y), r(Y, Z).\n"
    facts = chain("a", n)
    m = engine(alg, tc)
    m.load(facts)
    assert set(m.facts()) == remat(tc, facts)
    if alg == "fd-counting":
        assert m.log_size() == n - 1
    cut = facts[n // 2 - 1]  # e(a5, a6): 6 nodes on each side
    report = m.update(delete=[cut])
    assert report.removed == 1 + 6 * 6 and report.added == 0
    assert set(m.facts()) == remat(tc, [f for f in facts if f != cut])
    report = m.update(add=[cut])
    assert (report.added, report.removed) == (1 + 6 * 6, 0)
    assert set(m.facts()) == remat(tc, facts)
