"""The ltc(R) module: linear closure `R(x, z) :- R(x, y), S(y, z).` in materialisation.

engine/modules/ltc.py. Checked: which strata the analysis hands to ltc, and
that `remat` with the module equals generic semi-naive evaluation on random
graphs with cycles, random explicit R facts and base rules, one or two base
relations, under random updates -- with every node's reachable set built over
the strongly connected components, and with one search per source (both forced).
And `dredc`'s upkeep of the same closure as reachability (engine.modules.reach),
with node sets as bitsets and as sets, against generic evaluation: facts,
reports and counters after every update; and the fully dynamic algorithms'
upkeep of it operation by operation (engine.fd.upkeep, engine.modules.reach), under random
interleavings, against `remat` at every quiescent state.

The ltc module is the objects core's: the tests of it choose that core. The
arrays core (the default) has no ltc module; it evaluates a linear closure by
reachability on a load or a recomputation (engine.compact.reach, tested in
tests/engine/test_compact_reach.py) whatever `modules` says (checked at the end).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fluxmat.engine.modules.ltc as ltc
import fluxmat.engine.modules.reach as reach
from fluxmat.engine import EngineOptions, Reasoner, analyse, create, parse_program
from fluxmat.engine.modules.reach import Reach
from tests.support.fd import FD, drive, schedules
from tests.support.gen import examples

LINEAR = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"


def kinds(text: str) -> list[tuple[str, str]]:
    return [(m.kind, m.pred) for m in analyse(parse_program(text)).modules]


@pytest.mark.parametrize(
    "text, expected",
    [
        (LINEAR, [("ltc", "path")]),
        ("p(X, Z) :- e(Y, Z), p(X, Y).\n", [("ltc", "p")]),  # body order, no base rule
        ("p(X, Z) :- p(X, Y), e(Y, Z).\np(X, Z) :- p(X, Y), f(Y, Z).\n", [("ltc", "p")]),
        ("p(X, Z) :- p(X, Y), e(Y, Z).\np(X, Y) :- p(Y, X).\n", []),  # another recursive rule
        ("p(X, Z) :- p(X, Y), p(Y, Z).\n", [("tc", "p")]),
        ("p(X, Z) :- p(X, Y), e(Y, Z), f(Z).\n", []),  # a third literal
        ("p(X, Z) :- p(Y, X), e(Y, Z).\n", []),  # not linear in x
        ("p(X, Z) :- p(X, Y), q(Y, Z).\nq(X, Y) :- p(X, Y).\n", []),  # base in the stratum
    ],
)
def test_ltc_pattern(text, expected):
    assert kinds(text) == expected


def test_ltc_is_used_by_remat_and_dredc():
    """remat evaluates the closure in the module (no rule instances of the linear
    rule); dredc loads the same way and keeps the closure as reachability in
    updates (no instances, no C_r); dred evaluates the rule generically."""
    facts = [("edge", i, i + 1) for i in range(30)]
    objects = lambda alg: Reasoner.from_text(LINEAR, options=EngineOptions(alg, core="objects"))  # noqa: E731
    r = objects("remat")  # the objects core's ltc module and its counts
    report = r.load(facts)
    assert report.module_inferences == {"ltc(path)": 465}  # 30 * 31 / 2 pairs
    assert set(report.rule_applications) == {0}  # the base rule only
    d = objects("dredc")
    assert d.maintainer.uses_modules
    assert set(d.load(facts).rule_applications) == {0}
    assert r.lines() == d.lines()
    # cutting the chain after node 14: the edge and 15 * 16 pairs go, no instance
    # of the linear rule is evaluated
    cut = d.update(delete=[("edge", 14, 15)])
    assert (cut.added, cut.removed) == (0, 1 + 15 * 16)
    assert set(cut.rule_applications) <= {0} and cut.module_inferences["ltc(path)"] > 0
    assert d.maintainer.counters(("path", 0, 29)) == (0, 0)  # no C_r for module pairs
    g = objects("dred")
    assert not g.maintainer.uses_modules
    assert g.load(facts).rule_applications.get(1) == 435


PROGRAMS = [
    LINEAR,
    "path(X, Z) :- path(X, Y), edge(Y, Z).\n",  # R0: explicit path facts only
    LINEAR + "path(X, Z) :- path(X, Y), link(Y, Z).\n",  # two bases
    "path(X, Y) :- start(X), edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
    "far(X) :- path(a, X), not edge(a, X).\n",  # few sources; negation above
]
NODES = ["a", "b", "c", "d", "e", "f", "g"]
SETTINGS = settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def cases(draw, min_updates: int = 0):
    text = draw(st.sampled_from(PROGRAMS))
    node = st.sampled_from(NODES)
    fact = st.one_of(
        st.tuples(st.sampled_from(["edge", "link", "path"]), node, node),
        st.tuples(st.just("start"), node),
    )
    initial = draw(st.sets(fact, max_size=25))
    explicit, updates = set(initial), []
    for _ in range(draw(st.integers(min_updates, 4))):  # deletions mostly of explicit facts
        present = sorted(explicit, key=repr)
        delete = set(draw(st.lists(st.sampled_from(present), max_size=4))) if present else set()
        delete |= draw(st.sets(fact, max_size=1))
        add = draw(st.sets(fact, max_size=4)) - delete
        updates.append((add, delete))
        explicit = (explicit - delete) | add
    return text, initial, updates


@pytest.mark.parametrize("dp_share", [0, 10**9], ids=["search", "components"])
@SETTINGS
@given(case=cases())
def test_ltc_equals_generic_evaluation(dp_share, case, monkeypatch):
    monkeypatch.setattr(ltc, "DP_SHARE", dp_share)
    text, initial, updates = case
    analysis = analyse(parse_program(text))
    assert [m.kind for m in analysis.modules] == ["ltc"]
    with_module = create("remat", analysis)
    assert with_module.uses_modules
    generic = create("remat", analysis, modules=False)
    for m in (with_module, generic):
        m.load(sorted(initial, key=repr))
    assert set(with_module.facts()) == set(generic.facts()), "load"
    for i, (add, delete) in enumerate(updates, 1):
        a, b = with_module.update(add, delete), generic.update(add, delete)
        assert set(with_module.facts()) == set(generic.facts()), f"update {i}"
        assert (a.added, a.removed) == (b.added, b.removed), f"update {i}: report"


def test_components_order_and_cycles():
    """Tarjan's components come sinks first; closures include whole cycles."""
    adj = {1: [2], 2: [3], 3: [1, 4], 4: [5], 5: [4], 6: [1]}
    order = ltc.components([6], adj)
    comp = {v: ci for ci, members in enumerate(order) for v in members}
    assert sorted(map(sorted, order)) == [[1, 2, 3], [4, 5], [6]]
    assert comp[4] < comp[1] < comp[6]  # every edge leaves for an earlier component
    reach = ltc.closures(adj, order, comp)
    assert reach[comp[6]] == {1, 2, 3, 4, 5, 6} and reach[comp[4]] == {4, 5}
    assert ltc.search(adj, [3]) == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("dense", [True, False], ids=["bitsets", "sets"])
@SETTINGS
@given(case=cases())
def test_dredc_ltc_upkeep_equals_generic_evaluation(dense, case, monkeypatch):
    """dredc with the ltc module after every update: the facts and the report's
    delta of generic evaluation, C_nr of a fresh load, and the module's rows are R."""
    if not dense:
        monkeypatch.setattr(reach, "BITSET_NODES", -1)
        monkeypatch.setattr(reach, "BYTES_PER_FACT", -1)
    text, initial, updates = case
    analysis = analyse(parse_program(text))
    m = create("dredc", analysis)
    assert m.uses_modules
    generic = create("dredc", analysis, modules=False)
    for x in (m, generic):
        x.load(sorted(initial, key=repr))
    (module,) = m.closures.values()
    assert module.upkeep.sets is (reach._Bitsets if dense else reach._Sets)
    explicit = set(initial)
    for i, (add, delete) in enumerate(updates, 1):
        a, b = m.update(add, delete), generic.update(add, delete)
        explicit = (explicit - delete) | add
        assert set(m.facts()) == set(generic.facts()), f"update {i}"
        assert (a.added, a.removed) == (b.added, b.removed), f"update {i}: report"
        assert set(module.upkeep.facts()) == m.rel("path").facts, f"update {i}: rows"
        fresh = create("dredc", analysis)
        fresh.load(sorted(explicit, key=repr))
        mine = {f: m.counters(f)[0] for f in m.facts(include_internal=True)}
        assert mine == {f: fresh.counters(f)[0] for f in fresh.facts(include_internal=True)}, (
            f"update {i}: C_nr differs from a fresh load"
        )


def test_reach_cycles_and_repeated_edges():
    """A cycle split by one deletion; an edge in two base relations goes with both."""
    state = Reach([(1, 2), (2, 3), (3, 1), (3, 4), (3, 4)], [(0, 1)])
    assert sorted(state.facts()) == [(0, 1), (0, 2), (0, 3), (0, 4)]
    lost, gained = state.update([(3, 4)], [], [], [])  # (3, 4) is still in the other
    assert (lost, gained) == ([], [])
    lost, gained = state.update([(3, 4)], [], [], [])
    assert (lost, gained) == ([(0, 4)], [])
    lost, gained = state.update([(1, 2)], [], [], [])  # the cycle breaks at 1 -> 2
    assert sorted(lost) == [(0, 2), (0, 3)] and gained == []
    lost, gained = state.update([], [(1, 5), (5, 3)], [], [(7, 5)])  # new nodes
    assert lost == [] and sorted(gained) == [(0, 3), (0, 5), (7, 1), (7, 3), (7, 5)]
    lost, gained = state.update([], [], [(0, 1)], [])
    assert sorted(lost) == [(0, 1), (0, 3), (0, 5)] and gained == []
    assert sorted(state.facts()) == [(7, 1), (7, 3), (7, 5)]


def test_reach_skips_edges_that_change_no_reach():
    """A lost edge whose target another successor still reaches, by paths that no
    lost edge lies on, and a new edge whose target's reach is already covered,
    recompute nothing; a witness that needs a lost edge (itself, or another edge
    of the same batch) does not count."""
    alt = Reach([(1, 2), (1, 3), (3, 2)], [(0, 1)])
    before = alt.work
    assert alt.update([(1, 2)], [], [], []) == ([], []) and alt.work == before
    assert alt.update([], [(1, 2)], [], []) == ([], []) and alt.work == before
    lost, gained = alt.update([(1, 2), (3, 2)], [], [], [])  # 3 is no witness now
    assert lost == [(0, 2)] and gained == []
    loop = Reach([(1, 1), (1, 2)], [(0, 1)])  # 1 reaches 2 only over the lost edge
    assert loop.update([(1, 2)], [], [], []) == ([(0, 2)], [])


@pytest.mark.parametrize("algorithm", FD)
@SETTINGS
@given(case=cases(min_updates=1), schedule=schedules)
def test_fd_ltc_module_quiescent_states_equal_remat(algorithm, case, schedule):
    """fd-dred / fd-counting take the ltc module (R0 facts linked and unlinked, S
    facts entering and leaving I as they are inserted and deleted): every quiescent
    state, every consistency point and the final state (tests/support/fd.py's drive)."""
    text, initial, updates = case
    ordered = [(sorted(a, key=repr), sorted(d, key=repr)) for a, d in updates]
    drive(algorithm, (SimpleNamespace(text=text), initial, ordered), schedule, module="path")


@pytest.mark.parametrize("algorithm", ["remat", "dredc", "fd-dred"])
def test_arrays_core_has_no_ltc_module_and_modules_change_nothing(algorithm):
    """The arrays core (the default): no module evaluates the linear closure's rules (no module
    inferences) -- it is inserted by reachability on a load or a recomputation whatever `modules`
    says, and `modules_used` names it as such (ltc both ways); its rule instances are reported as semi-naive evaluation
    counts them, the same with `modules` on and off; the facts are the objects core's."""
    facts = [("edge", i, i + 1) for i in range(30)]
    seen = []
    for modules in (True, False):
        r = Reasoner.from_text(
            LINEAR, options=EngineOptions(algorithm, core="arrays", modules=modules)
        )
        assert {m.kind for m in r.modules_used()} == {"ltc"}  # by reachability (engine.compact.reach)
        load = r.load(facts)
        cut = r.update(delete=[("edge", 14, 15)])
        assert load.module_inferences == cut.module_inferences == {}
        assert load.rule_applications[1] > 0 and (cut.added, cut.removed) == (0, 1 + 15 * 16)
        seen.append((dict(load.rule_applications), dict(cut.rule_applications), r.lines()))
    assert seen[0] == seen[1]
    reference = Reasoner.from_text(LINEAR, options=EngineOptions(algorithm, core="objects"))
    reference.load(facts)
    reference.update(delete=[("edge", 14, 15)])
    assert seen[0][2] == reference.lines()
