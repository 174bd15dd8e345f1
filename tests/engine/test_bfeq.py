"""B/F~ (`bf` with equality="rewrite", Motik et al. 2015): incremental under equality changes.

tests/engine/test_equality.py compares every rewrite algorithm with the axiomatised
oracle; here B/F~ must also (a) never recompute, (b) leave exactly the state a
fresh load of the same explicit facts builds (classes, compact facts, the
explicit-fact indexes), and (c) touch only the part of the data an update can
affect.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.equality import SAME_AS, expand
from tests.support.equality import OWL, PAPER, oracle
from tests.support.gen import examples

# functional and inverse-functional r (the paper's bijective relation), a chain
# rule over e and a rule with a constant
RULES = [
    "owl:sameAs(Y1, Y2) :- r(X, Y1), r(X, Y2).",
    "owl:sameAs(Y1, Y2) :- r(Y1, X), r(Y2, X).",
    "p(X, Y) :- e(X, Y).",
    "p(X, Z) :- p(X, Y), e(Y, Z).",
    "q(X) :- p(X, c0).",
    "owl:sameAs(X, Y) :- s(X, Y).",
    "e(Y, X) :- r(X, Y), q(X).",
    "p(c4, X) :- q(X), e(X, c3).",
]
CONSTS = tuple(f"c{i}" for i in range(6))


def bfeq(text: str) -> Reasoner:
    return Reasoner.from_text(text, "bf", equality="rewrite", options=EngineOptions(core="objects"))  # B/F~


def state(m) -> tuple:
    classes = {rep: frozenset(ms) for rep, ms in m.classes.nontrivial().items()}
    return classes, set(m.compact), dict(m.norm_of), {k: set(v) for k, v in m.by_normal.items()}


def test_paper_section_3_1_is_incremental():
    r = bfeq(PAPER)
    r.load()
    m = r.maintainer
    report = r.update(delete=[("r", "a", "d")])
    assert report.details["equality_recomputed"] == 0
    assert report.details["doubtful"] >= 1 and report.details["checked"] >= 1
    assert set(m.rewritten()) == {
        ("r", "a", "b"),
        ("r", "c", "d"),
        *((SAME_AS, x, x) for x in "abcd"),
    }
    assert report.removed == 6 and report.added == 0


def test_an_update_checks_only_what_it_can_affect():
    """Deleting one equality among 200 unrelated classes checks a bounded number of facts."""
    text = OWL + "owl:sameAs(Y1, Y2) :- r(X, Y1), r(X, Y2).\np(X) :- t(X)."
    facts = []
    for i in range(200):
        facts += [("r", f"x{i}", f"y{i}"), ("r", f"x{i}", f"z{i}"), ("t", f"z{i}")]
    r = bfeq(text)
    r.maintainer.load(facts)
    assert r.maintainer.representative("z7") == "y7"
    before = r.facts()
    report = r.update(delete=[("r", "x7", "z7")])  # splits {y7, z7}: t(z7) no longer means t(y7)
    assert report.details["checked"] < 20 and report.details["doubtful"] < 20
    assert r.maintainer.representative("z7") == "z7"
    after = [f for f in facts if f != ("r", "x7", "z7")]
    assert r.facts() == oracle(text, after)
    assert ("t", "y7") not in r.facts() and ("p", "z7") in r.facts()
    gone = {
        ("r", "x7", "z7"),
        ("t", "y7"),
        ("p", "y7"),
        (SAME_AS, "y7", "z7"),
        (SAME_AS, "z7", "y7"),
    }
    assert before - r.facts() == gone and report.removed == 5 and report.added == 0


def test_inserting_an_equality_merges_classes_in_place():
    text = OWL + "p(X, Z) :- p(X, Y), e(Y, Z)."
    facts = [("e", f"n{i}", f"n{i + 1}") for i in range(30)] + [("p", "s", "n0")]
    r = bfeq(text)
    r.maintainer.load(facts)
    loaded = len(r.maintainer.compact)
    report = r.update(add=[(SAME_AS, "n3", "n20")])  # a cycle: n3..n20 collapse into one class
    assert report.details["equality_recomputed"] == 0
    assert r.facts() == oracle(text, [*facts, (SAME_AS, "n3", "n20")])
    assert len(r.maintainer.compact) < loaded
    report = r.update(delete=[(SAME_AS, "n3", "n20")])  # and split again
    assert r.facts() == oracle(text, facts)
    assert r.maintainer.representative("n20") == "n20"


def test_merging_a_rule_constant_rewrites_and_reevaluates_the_rule():
    """Algorithm 6 lines 55-58: `e(X, c3)` becomes `e(X, c0)` and matches facts already processed."""
    text = OWL + "p(X, Y) :- e(X, Y).\nq(X) :- p(X, c0).\np(c4, X) :- q(X), e(X, c3)."
    facts = [("e", "c1", "c0")]
    r = bfeq(text)
    r.maintainer.load(facts)
    assert ("p", "c4", "c1") not in r.facts()
    r.update(add=[(SAME_AS, "c3", "c0")])
    assert ("p", "c4", "c1") in r.facts()
    assert r.facts() == oracle(text, [*facts, (SAME_AS, "c3", "c0")])
    r.update(delete=[(SAME_AS, "c3", "c0")])
    assert r.facts() == oracle(text, facts)


def test_a_rule_constant_split_off_again_is_the_constant_for_later_updates():
    """Algorithm 2 with Algorithm 6 lines 55-56: after a split, Gamma = pi'(P) again.

    `e(X, c3)` became `e(X, c0)` while c3 ~ c0; once that equality is deleted, a
    later insertion must fire the rule with c3 again, not with c0.
    """
    text = OWL + "p(X, Y) :- e(X, Y).\nq(X) :- p(X, c0).\np(c4, X) :- q(X), e(X, c3)."
    facts = [("e", "c1", "c0")]
    r = bfeq(text)
    r.maintainer.load(facts)
    r.update(add=[(SAME_AS, "c3", "c0")])
    r.update(delete=[(SAME_AS, "c3", "c0")])
    later = [("e", "c5", "c0"), ("e", "c6", "c0"), ("e", "c6", "c3")]
    r.update(add=later)  # q(c5) and q(c6) hold; only c6 has an edge to c3
    assert ("p", "c4", "c6") in r.facts() and ("p", "c4", "c5") not in r.facts()
    assert r.facts() == oracle(text, [*facts, *later])


def test_each_rule_instance_is_considered_once():
    """Theorem 1.2: annotated queries find every instance of a rule exactly once."""
    text = OWL + "p(X, Y) :- e(X, Y).\np(X, Z) :- p(X, Y), p(Y, Z)."
    edges = [("e", i, j) for i in range(8) for j in range(8) if (i * 5 + j * 3) % 7 < 2]
    r = bfeq(text)
    report = r.maintainer.load(edges)
    paths = {f[1:] for f in r.facts() if f[0] == "p"}
    instances = len(edges) + sum(1 for x, y in paths for y2, z in paths if y == y2)
    assert report.details["rule_instances"] == instances


@st.composite
def scenarios(draw):
    rules = draw(st.lists(st.sampled_from(RULES), min_size=1, max_size=5, unique=True))
    text = OWL + "\n".join(rules)
    fact = st.one_of(
        st.tuples(
            st.sampled_from(["r", "e", "s"]), st.sampled_from(CONSTS), st.sampled_from(CONSTS)
        ),
        st.tuples(st.just(SAME_AS), st.sampled_from(CONSTS), st.sampled_from(CONSTS)),
    )
    initial = draw(st.sets(fact, max_size=12))
    updates, current = [], set(initial)
    for _ in range(draw(st.integers(1, 6))):
        delete = draw(st.sets(st.sampled_from(sorted(current)), max_size=4)) if current else set()
        add = draw(st.sets(fact, max_size=3)) - delete
        updates.append((add, delete))
        current = (current - delete) | add
    return text, initial, updates


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=scenarios())
def test_bfeq_state_equals_a_fresh_load_after_every_update(case):
    text, initial, updates = case
    note(text)
    r = bfeq(text)
    r.maintainer.load(initial)
    explicit = set(initial)
    for add, delete in updates:
        note(f"update +{sorted(add)} -{sorted(delete)}")
        before = r.facts()
        report = r.update(add, delete)
        explicit = (explicit - delete) | add
        assert report.details["equality_recomputed"] == 0
        fresh = bfeq(text)
        fresh.maintainer.load(explicit)
        assert state(r.maintainer) == state(fresh.maintainer)
        after = r.facts()
        assert (
            after
            == fresh.facts()
            == set(expand(fresh.maintainer.compact, fresh.maintainer.classes))
        )
        assert report.added == len(after - before) and report.removed == len(before - after)
    assert r.facts() == oracle(text, explicit)


def test_equality_benchmark_systems_agree():
    """tests/benchmarks/equality.py at a small size: all five systems, every task, one result."""
    from tests.benchmarks.equality import SYSTEMS, run_equality

    info, rows = run_equality(cap_s=60, n=300)
    assert info["equalities"] > 0 and info["compact"] < info["materialisation"]
    assert {r.system for r in rows} == {system[0] for system in SYSTEMS}
    assert len(rows) == 5 * len(SYSTEMS) and all(r.check.startswith("ok") for r in rows)
    assert all("recomputed" not in r.check for r in rows if r.system.startswith("bf (B/F~)"))
