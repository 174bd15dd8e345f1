"""The arrays core runs what the objects core runs: body expressions, rules without a positive body atom.

* Expressions in body atoms (`q(X, Y + 1)`, also in a negated atom) are
  rewritten by the analysis into a fresh variable and a comparison
  (engine.analysis.lift_body_expressions). The parser asks for the written-out
  form, so these programs are built as syntax trees (as a library user or a
  translator builds them). Random programs with them, random updates: both
  cores equal a from-scratch `remat` after every update.
* Rules without a positive body atom (`p(1) :- not q(1).`, `r(X) :- X = 3.`)
  join the unit relation on the arrays core (engine.compact.unit): evaluated
  once, re-evaluated when what they negate changes. Random programs of
  tests.support.gen with such rules added, random updates, under every
  algorithm the arrays core runs (fd-counting with its state exported and
  restored into a new reasoner mid-way); and added by a program change.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Fed, Reasoner, parse_program
from fluxmat.engine.syntax import Negation, Program, Rule
from tests.support.gen import INT, SYM, apply_update, facts, program_cases, update_sequences
from tests.support.profile import examples

SETTINGS = settings(max_examples=examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])  # fmt: skip


def _scratch(program: Program, explicit) -> set[tuple]:
    oracle = Reasoner(program, options=EngineOptions("remat", modules=False))
    oracle.maintainer.load(sorted(explicit, key=repr))
    return oracle.facts()


# ---------------------------------------------------------------- body expressions as syntax trees


def _literal(text: str):
    """A body literal; an atom may hold expressions (parsed as a head, where the parser allows them)."""
    negated = text.startswith("not ")
    atom_text = text[4:] if negated else text
    if re.match(r"[a-z]\w*\(", atom_text):
        atom = parse_program(f"{atom_text} :- z(X).").rules[0].head
        return Negation(atom, atom.pos) if negated else atom
    return parse_program(f"z(X) :- z(X), {text}.").rules[0].body[1]


def tree(rules: list[tuple[str, list[str]]]) -> Program:
    """A program of (head, body literals) with expressions allowed in body atoms."""
    out = []
    for head, body in rules:
        h = parse_program(f"{head} :- z(X).").rules[0].head
        out.append(Rule(h, tuple(_literal(b) for b in body), h.pos))
    return Program(tuple(out), ())


def test_a_body_expression_matches_the_facts_holding_its_value():
    program = tree([
        ("next(X, Y)", ["e(X, Y)", "f(Y + 1)"]),
        ("twice(X)", ["f(X)", "e(X, X * 2)"]),
        ("gap(X)", ["f(X)", "not f(X - 1)"]),
        ("even(X)", ["f(X)", "not e(X % 2, 2)"]),
    ])  # fmt: skip
    load = [("e", 1, 2), ("e", 2, 4), ("e", 0, 0), ("e", 1, 0), ("f", 3), ("f", 1), ("f", 2)]
    want = {("next", 0, 0), ("next", 1, 0), ("next", 1, 2), ("twice", 1), ("twice", 2)}
    want |= {("gap", 1), ("even", 2)} | set(load)
    for core in ("objects", "arrays"):
        r = Reasoner(program, options=EngineOptions("dredc", core=core))
        r.load(load)
        assert r.facts() == want, core
        r.update(add=[("f", 0)], delete=[("f", 3)])
        assert r.facts() == _scratch(program, (set(load) | {("f", 0)}) - {("f", 3)}), core


def test_a_body_expression_over_variables_bound_nowhere_else_is_unsafe():
    from fluxmat.engine import AnalysisError

    try:
        Reasoner(tree([("p(X)", ["f(X + 1)"])]), options=EngineOptions(core="arrays"))
    except AnalysisError as err:
        assert "variable X" in str(err) and "not bound" in str(err)
    else:
        raise AssertionError("an expression cannot bind its variables")


OPS = ("+", "-", "*")
PREDS = {"e": 2, "f": 1, "p": 2, "q": 1, "r": 1}
LAYER = {"e": 0, "f": 0, "p": 1, "q": 2, "r": 3}


@st.composite
def _expression_rule(draw, head: str) -> tuple[str, list[str]]:
    """A safe rule for `head` whose other body atoms hold expressions over the variables bound first."""
    pool = sorted(p for p in PREDS if LAYER[p] <= LAYER[head])
    first = draw(st.sampled_from(pool))
    names = ["X", "Y"][: PREDS[first]]
    body, bound, fresh = [f"{first}({', '.join(names)})"], list(names), iter("ZWUV")

    def expression() -> str:
        v, op = draw(st.sampled_from(bound)), draw(st.sampled_from(OPS))
        other = draw(st.sampled_from([*bound, "0", "1", "2", "-1"]))
        return f"{v} {op} {other}"

    for _ in range(draw(st.integers(1, 2))):
        negated = draw(st.booleans())
        lower = sorted(p for p in PREDS if LAYER[p] < LAYER[head])
        pred = draw(st.sampled_from(lower if negated else pool))
        args = [expression()]
        for _ in range(PREDS[pred] - 1):
            roll = draw(st.integers(0, 3 if negated else 4))
            if roll == 4:
                args.append(next(fresh))
                bound.append(args[-1])
            else:
                args.append(expression() if roll < 2 else draw(st.sampled_from(bound)))
        if draw(st.booleans()):
            args.reverse()
        body.append(("not " if negated else "") + f"{pred}({', '.join(args)})")
    head_args = [draw(st.sampled_from(bound)) for _ in range(PREDS[head])]
    return f"{head}({', '.join(head_args)})", body


@st.composite
def _expression_programs(draw) -> Program:
    rules = [("p(X, Y)", ["e(X, Y)"])]
    for head in ("p", "q", "r"):
        rules += [draw(_expression_rule(head)) for _ in range(draw(st.integers(1, 2)))]
    return tree(rules)


INTS = st.integers(-1, 3)
EDB_FACT = st.one_of(st.tuples(st.just("e"), INTS, INTS), st.tuples(st.just("f"), INTS))


@SETTINGS
@given(_expression_programs(), st.sets(EDB_FACT, max_size=10),
       st.lists(st.tuples(st.sets(EDB_FACT, max_size=3), st.sets(EDB_FACT, max_size=3)),
                min_size=1, max_size=5))  # fmt: skip
def test_random_body_expressions_equal_remat_on_both_cores(program, initial, updates):
    reasoners = {
        (core, alg): Reasoner(program, options=EngineOptions(alg, core=core))
        for core, alg in (("arrays", "dredc"), ("arrays", "counting"), ("objects", "dredc"))
    }
    explicit = set(initial)
    for r in reasoners.values():
        r.load(sorted(explicit, key=repr))
    want = _scratch(program, explicit)
    assert all(r.facts() == want for r in reasoners.values())
    for add, delete in updates:
        delete = delete - add
        explicit = (explicit - delete) | add
        want = _scratch(program, explicit)
        for key, r in reasoners.items():
            r.update(sorted(add, key=repr), sorted(delete, key=repr))
            assert r.facts() == want, (key, str(program))


# ---------------------------------------------------------------- rules without a positive body atom


def test_rules_without_a_positive_atom_fire_once_and_follow_what_they_negate():
    text = "p(1) :- not q(1).\nr(X) :- X = 3.\ns(X) :- X = 1 + 1, not q(X).\nt(Y) :- p(X), Y = X + 1.\n"
    for alg in ("dredc", "counting", "fd-counting"):
        r = Reasoner.from_text(text, options=EngineOptions(alg, core="arrays"))
        r.load()
        assert r.facts() == {("p", 1), ("r", 3), ("s", 2), ("t", 2)}, alg
        assert r.explicit() == set(), alg  # the unit fact is not shown
        r.update(add=[("q", 1), ("q", 2)])
        assert r.facts() == {("q", 1), ("q", 2), ("r", 3)}, alg
        r.update(delete=[("q", 1)])
        assert r.facts() == {("q", 2), ("p", 1), ("r", 3), ("t", 2)}, alg


@st.composite
def _unit_rule(draw, gp, head: str) -> str:
    """A rule for `head` with no positive atom: constants and assignments, negated lower atoms."""
    body, bound = [], {INT: [], SYM: []}
    args = []
    for kind in gp.schema[head]:
        if kind == INT and draw(st.booleans()):
            v = f"A{len(body)}"
            a, b = draw(st.integers(-1, 2)), draw(st.integers(0, 1))
            body.append(f"{v} = {a} + {b}" if draw(st.booleans()) else f"{v} = {a}")
            bound[INT].append(v)
            args.append(v)
        else:
            args.append(str(draw(st.sampled_from((-1, 0, 1) if kind == INT else ("a", "b", "c")))))
    lower = sorted(p for p in gp.schema if gp.layer[p] < gp.layer[head])
    for _ in range(draw(st.integers(0 if body else 1, 2))):
        q = draw(st.sampled_from(lower))
        terms = []
        for kind in gp.schema[q]:
            pool = [*bound[kind], *((["0", "1"]) if kind == INT else ["a", "b"])]
            terms.append(draw(st.sampled_from(pool)))
        body.append(f"not {q}({', '.join(terms)})")
    return f"{head}({', '.join(args)}) :- {', '.join(body)}."


@st.composite
def _unit_scenarios(draw):
    gp = draw(program_cases())
    extra = [draw(_unit_rule(gp, h)) for h in gp.idb for _ in range(draw(st.integers(0, 2)))]
    if not extra:
        extra = [draw(_unit_rule(gp, gp.idb[0]))]
    initial = draw(facts(gp.schema))
    return gp.text + "\n".join(extra) + "\n", initial, draw(update_sequences(gp.schema, initial))


@SETTINGS
@given(_unit_scenarios(), st.sampled_from(("dredc", "counting")))
def test_random_rules_without_a_positive_atom_equal_remat(case, algorithm):
    text, explicit, updates = case
    program = parse_program(text)
    r = Reasoner(program, options=EngineOptions(algorithm, core="arrays"))
    r.load(sorted(explicit, key=repr))
    assert r.facts() == _scratch(program, explicit), text
    for add, delete in updates:
        r.update(add, delete)
        explicit = apply_update(explicit, add, delete)
        assert r.facts() == _scratch(program, explicit), text
        assert r.explicit() == set(explicit)


@settings(SETTINGS, max_examples=examples(25))
@given(_unit_scenarios(), st.sampled_from(("fd-counting", "fd-dred")), st.integers(0, 7))
def test_fully_dynamic_rules_without_a_positive_atom_restart_from_their_state(case, algorithm, at):
    text, explicit, updates = case
    program = parse_program(text)

    def fresh() -> Reasoner:
        return Reasoner(program, options=EngineOptions(algorithm, core="arrays"))

    r, store = fresh(), MemoryStateStore()
    r.load(sorted(explicit, key=repr))
    store.commit(0, r.export_changes(), {})
    for n, (add, delete) in enumerate(updates, start=1):
        r.feed([Fed(n, add, delete)])
        explicit = apply_update(explicit, add, delete)
        store.commit(n, r.export_changes(), {})
        if n == at:
            r = fresh()
            r.restore(store.load())
        assert r.facts() == _scratch(program, explicit), text


def test_a_program_change_adds_and_removes_rules_without_a_positive_atom():
    base = "p(X) :- e(X, Y).\n"
    r = Reasoner.from_text(base, options=EngineOptions("dredc", core="arrays"))
    load = [("e", 1, 2), ("e", 2, 3)]
    r.load(load)
    r.change_program(add="q(7) :- not p(3).\nw(X) :- X = 4, not p(X).")
    after = parse_program(base + "q(7) :- not p(3).\nw(X) :- X = 4, not p(X).\n")
    assert r.facts() == _scratch(after, load) and ("q", 7) in r.facts()
    r.update(add=[("e", 3, 1), ("e", 4, 4)])
    assert r.facts() == _scratch(after, [*load, ("e", 3, 1), ("e", 4, 4)])
    r.change_program(delete="q(7) :- not p(3).")
    assert ("q", 7) not in r.facts()
