"""External oracle: fluxmat's materialisation against clingo's unique stable model.

A stratified program has exactly one stable model, and it is the materialisation
mat(P, E) (docs/reference/language.md: stratified negation, `not q(X, _)` meaning "no
q(X, .) exists", comparisons and arithmetic assignment). Each program is
translated from fluxmat's AST into clingo syntax, grounded and solved; the model
must be unique and equal, predicate by predicate, to fluxmat's facts (internal
`__` predicates excluded, ints compared as ints).

Random programs come from tests/support/gen.py (compared with `remat` on the initial
facts); four hand-written programs are compared under every algorithm after the
load and after each of a fixed sequence of updates.

clingo is a test dependency (pyproject `test` extra, installed by CI): when it
cannot be imported these tests FAIL rather than skip.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, note, settings

from fluxmat.engine import ALGORITHMS, Iri, analyse, create, parse_program
from fluxmat.engine.syntax import Atom, BinOp, Comparison, Const, Negation, Program, Rule, Term, Var
from tests.support.gen import apply_update, examples, facts, program_cases

try:
    import clingo
except ImportError as exc:  # pragma: no cover - exercised only when the oracle is missing
    clingo = None
    CLINGO_IMPORT_ERROR: ImportError | None = exc
else:
    CLINGO_IMPORT_ERROR = None


def require_clingo():
    if clingo is None:
        pytest.fail(f"clingo is required for the oracle tests (pip install clingo): "
                    f"{CLINGO_IMPORT_ERROR}")  # fmt: skip
    return clingo


# ---------------------------------------------------------------- translation

_CLINGO_ID = re.compile(r"_*[a-z][A-Za-z0-9_']*\Z")
_CLINGO_VAR = re.compile(r"_*[A-Z][A-Za-z0-9_']*\Z")
_CLINGO_KEYWORDS = frozenset({"not"})
CLINGO_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "%": "\\"}


def clingo_value(value) -> str:
    """A constant in clingo syntax: ints and identifiers bare, other strings quoted."""
    if isinstance(value, bool) or isinstance(value, Iri):
        raise NotImplementedError(f"no clingo translation for constant {value!r}")
    if isinstance(value, int):
        return str(value)
    if _CLINGO_ID.match(value) and value not in _CLINGO_KEYWORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


def clingo_pred(pred: str) -> str:
    if not _CLINGO_ID.match(pred) or pred in _CLINGO_KEYWORDS:
        raise NotImplementedError(f"no clingo translation for predicate {pred!r}")
    return pred


def _vars(term: Term) -> list[str]:
    if isinstance(term, Var):
        return [term.name]
    if isinstance(term, BinOp):
        return _vars(term.left) + _vars(term.right)
    return []


def _literal_vars(lit) -> list[str]:
    if isinstance(lit, Atom):
        return [v for a in lit.args for v in _vars(a)]
    if isinstance(lit, Negation):
        return _literal_vars(lit.atom)
    return _vars(lit.left) + _vars(lit.right)


class _RuleTranslator:
    def __init__(self, rule: Rule):
        self.rule = rule

    def var(self, name: str) -> str:
        # fluxmat stores `?x` as `x` and numbers anonymous positive `_` as `_1`, `_2`;
        # clingo variables must look like `_*[A-Z]...`.
        if name == "_" or _CLINGO_VAR.match(name):
            return name
        return "V_" + name

    def term(self, term: Term, anonymous: frozenset[str] = frozenset()) -> str:
        if isinstance(term, Var):
            return "_" if term.name in anonymous else self.var(term.name)
        if isinstance(term, Const):
            return clingo_value(term.value)
        # clingo's `/` truncates and `\` is the matching remainder, as fluxmat's / and %
        op = CLINGO_OPS[term.op]
        return f"({self.term(term.left)} {op} {self.term(term.right)})"

    def atom(self, atom: Atom, anonymous: frozenset[str] = frozenset()) -> str:
        pred = clingo_pred(atom.pred)
        if not atom.args:
            return pred
        return f"{pred}({', '.join(self.term(a, anonymous) for a in atom.args)})"

    def negation(self, index: int, neg: Negation) -> str:
        # docs/reference/language.md: a variable occurring only inside one negated atom is quantified
        # inside the negation; in clingo that is `_`, provided it occurs there once.
        elsewhere = set(_literal_vars(self.rule.head))
        for j, other in enumerate(self.rule.body):
            if j != index:
                elsewhere.update(_literal_vars(other))
        mine = _literal_vars(neg.atom)
        local = frozenset(v for v in mine if v not in elsewhere and v != "_")
        for v in local:
            if mine.count(v) > 1:
                raise NotImplementedError(f"local variable {v} repeated in 'not {neg.atom}'")
        return f"not {self.atom(neg.atom, local)}"

    def comparison(self, c: Comparison) -> str:
        op = "=" if c.op == ":=" else c.op
        return f"{self.term(c.left)} {op} {self.term(c.right)}"

    def translate(self) -> str:
        body = []
        for i, lit in enumerate(self.rule.body):
            if isinstance(lit, Atom):
                body.append(self.atom(lit))
            elif isinstance(lit, Negation):
                body.append(self.negation(i, lit))
            else:
                body.append(self.comparison(lit))
        head = self.atom(self.rule.head)
        return f"{head} :- {', '.join(body)}." if body else f"{head}."


def clingo_fact(fact: tuple) -> str:
    pred, args = fact[0], fact[1:]
    if not args:
        return f"{clingo_pred(pred)}."
    return f"{clingo_pred(pred)}({', '.join(clingo_value(a) for a in args)})."


def to_clingo(program: Program, explicit=()) -> str:
    """The program's rules and facts plus `explicit` facts, in clingo syntax."""
    lines = [_RuleTranslator(r).translate() for r in program.rules]
    lines += [_RuleTranslator(Rule(f, ())).translate() for f in program.facts]
    lines += [clingo_fact(f) for f in sorted(explicit, key=repr)]
    return "\n".join(lines) + "\n"


def _from_symbol(sym):
    c = require_clingo()
    if sym.type == c.SymbolType.Number:
        return sym.number
    if sym.type == c.SymbolType.String:
        return sym.string
    if sym.type == c.SymbolType.Function and not sym.arguments and sym.positive:
        return sym.name
    raise AssertionError(f"unexpected clingo term {sym}")


def clingo_model(text: str) -> set[tuple]:
    """The unique stable model of `text` as Python facts `(pred, *values)`."""
    c = require_clingo()
    messages: list[str] = []
    ctl = c.Control(["0"], logger=lambda code, msg: messages.append(msg))
    try:
        ctl.add("base", [], text)
        ctl.ground([("base", [])])
    except RuntimeError as exc:
        raise AssertionError(f"clingo rejected the translation: {exc}: {messages}\n{text}") from exc
    models: list[set[tuple]] = []
    ctl.solve(on_model=lambda m: models.append(
        {(s.name, *(_from_symbol(a) for a in s.arguments)) for s in m.symbols(atoms=True)}
    ))  # fmt: skip
    assert len(models) == 1, (
        f"a stratified program has one stable model, clingo found {len(models)}"
    )
    return models[0]


def program_preds(program: Program) -> set[str]:
    """The non-internal predicates of the analysed program."""
    return {p for p in analyse(program).arity if not p.startswith("__")}


def restrict(facts_, preds: set[str]) -> set[tuple]:
    return {f for f in facts_ if f[0] in preds}


def fluxmat_model(algorithm: str, program: Program, explicit) -> set[tuple]:
    m = create(algorithm, analyse(program))
    m.load(sorted(explicit, key=repr))
    return set(m.facts())


def assert_same(got: set[tuple], expected: set[tuple], what: str) -> None:
    missing = sorted(expected - got, key=repr)
    extra = sorted(got - expected, key=repr)
    assert not missing and not extra, f"{what}: missing (in clingo only) {missing}; extra {extra}"


# ---------------------------------------------------------------- translation sanity


def test_clingo_is_installed():
    require_clingo()


def test_translation_quotes_strings_and_projects_negation_locals():
    program = parse_program(
        'r(?x, "New York") :- p(?x, 3), not q(?x, Y, _), ?x != "not", N = 3 + 1, N < 5.'
    )
    assert to_clingo(program, [("p", "New York", 3), ("q", "a", 1, 2)]) == (
        'r(V_x, "New York") :- p(V_x, 3), not q(V_x, _, _), V_x != "not", N = (3 + 1), N < 5.\n'
        'p("New York", 3).\n'
        "q(a, 1, 2).\n"
    )


def test_clingo_model_reads_ints_strings_and_identifiers():
    assert clingo_model('p(1, a, "New York"). q(X) :- p(X, _, _).') == {
        ("p", 1, "a", "New York"),
        ("q", 1),
    }


# ---------------------------------------------------------------- generated programs


@settings(max_examples=examples(150), deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(data=program_cases().flatmap(lambda gp: facts(gp.schema).map(lambda fs: (gp, fs))))
def test_generated_program_matches_clingo(data):
    gp, explicit = data
    note(f"program:\n{gp.text}")
    note(f"facts: {sorted(explicit, key=repr)}")
    program = parse_program(gp.text)
    text = to_clingo(program, explicit)
    note(f"clingo:\n{text}")
    preds = program_preds(program)
    assert_same(
        restrict(fluxmat_model("remat", program, explicit), preds),
        restrict(clingo_model(text), preds),
        "remat vs clingo",
    )


# ---------------------------------------------------------------- fixed programs

TRANSITIVE_CLOSURE = """
tc(X, Y) :- edge(X, Y).
tc(X, Z) :- tc(X, Y), edge(Y, Z).
"""

SAME_GENERATION = """
sg(X, Y) :- par(X, P), par(Y, P), X != Y.
sg(X, Y) :- par(X, A), sg(A, B), par(Y, B).
"""

NEGATION_OVER_CLOSURE = """
reach(X, Y) :- edge(X, Y).
reach(X, Z) :- reach(X, Y), edge(Y, Z).
node(X) :- edge(X, _).
node(Y) :- edge(_, Y).
node(X) :- vertex(X).
unreachable(X, Y) :- node(X), node(Y), not reach(X, Y).
source(X) :- node(X), not reach(_, X).
isolated(X) :- node(X), not reach(X, Loc), not reach(_, X).
"""

PATH_LENGTHS = """
len(X, Y, 1) :- edge(X, Y).
len(X, Z, N) :- len(X, Y, M), edge(Y, Z), N = M + 1, N <= 4.
longer(X, Y, N) :- len(X, Y, N), len(X, Y, M), M < N.
shortest(X, Y, N) :- len(X, Y, N), not longer(X, Y, N).
"""

NONRECURSIVE_JOIN = """
two(X, Z) :- edge(X, Y), edge(Y, Z), X != Z.
lonely(X) :- edge(X, _), not two(X, _).
succ(X, N + 1) :- weight(X, N), N < 3.
"""


def _chain(*nodes):
    return {("edge", a, b) for a, b in zip(nodes, nodes[1:], strict=False)}


GRAPH = _chain("a", "b", "c", "d", "b") | {
    ("edge", "New York", "a"),
    ("edge", "e", "e"),
    ("vertex", "z"),
    ("vertex", "a"),
}
GRAPH_UPDATES = [
    # Illich & Glimm's running theme: deleting an edge on a cycle must not leave
    # facts that only supported each other (no derivation left).
    ([], [("edge", "c", "d")]),
    ([("edge", "d", "a"), ("edge", "c", "d")], [("edge", "a", "b")]),
    ([("edge", "a", "b"), ("vertex", "e")], [("edge", "e", "e"), ("edge", "New York", "a")]),
    ([("edge", "b", "b"), ("edge", "x", "y")], [("edge", "nothing", "here")]),
    ([], sorted(_chain("a", "b", "c", "d", "b"))),
]

TREE = {("par", c, p) for c, p in [("b", "a"), ("c", "a"), ("d", "b"), ("e", "c"), ("f", "c")]}
TREE_UPDATES = [
    ([("par", "g", "b")], [("par", "c", "a")]),
    ([("par", "c", "a"), ("par", "h", "g")], [("par", "b", "a")]),
    ([("par", "b", "a")], [("par", "e", "c"), ("par", "f", "c")]),
]

WEIGHTED = GRAPH | {("weight", "a", 0), ("weight", "b", 2), ("weight", "c", 3)}
WEIGHTED_UPDATES = [
    *GRAPH_UPDATES[:2],
    ([("weight", "d", 1)], [("weight", "b", 2)]),
    *GRAPH_UPDATES[2:],
]

FIXED = {
    "transitive-closure": (TRANSITIVE_CLOSURE, GRAPH, GRAPH_UPDATES),
    "same-generation": (SAME_GENERATION, TREE, TREE_UPDATES),
    "negation-over-closure": (NEGATION_OVER_CLOSURE, GRAPH, GRAPH_UPDATES),
    "path-lengths": (PATH_LENGTHS, GRAPH, GRAPH_UPDATES),
    "nonrecursive-join": (NONRECURSIVE_JOIN, WEIGHTED, WEIGHTED_UPDATES),
}


# counting refuses recursive programs (checked in test_properties), so it only runs
# on the non-recursive cases.
FIXED_RUNS = [
    (name, algorithm)
    for name in sorted(FIXED)
    for algorithm in sorted(ALGORITHMS)
    if algorithm != "counting" or not analyse(parse_program(FIXED[name][0])).is_recursive
]


@pytest.mark.parametrize(("name", "algorithm"), FIXED_RUNS)
def test_fixed_program_matches_clingo_after_every_update(name, algorithm):
    text, initial, updates = FIXED[name]
    program = parse_program(text)
    analysis = analyse(program)
    preds = program_preds(program)
    m = create(algorithm, analysis)
    m.load(sorted(initial, key=repr))
    explicit = frozenset(initial)
    for i, (add, delete) in enumerate([([], []), *updates]):
        if i:
            m.update(add, delete)
            explicit = apply_update(explicit, add, delete)
        expected = restrict(clingo_model(to_clingo(program, explicit)), preds)
        assert_same(restrict(set(m.facts()), preds), expected, f"{name}/{algorithm} state {i}")


def test_fixed_programs_are_not_trivial():
    """Guard the hand-written cases: each derives facts of every rule head."""
    for name, (text, initial, _) in FIXED.items():
        program = parse_program(text)
        model = clingo_model(to_clingo(program, initial))
        heads = {r.head.pred for r in program.rules}
        assert heads <= {f[0] for f in model}, name


def test_division_truncates_and_by_zero_is_undefined_as_in_clingo():
    """fluxmat's `/` truncates toward zero and `%` is its remainder (the dividend's
    sign), as clingo's `/` and `\\`; division by zero derives nothing in both."""
    program = parse_program("q(X, Y, X / Y, X % Y) :- p(X), p(Y).")
    explicit = {("p", v) for v in (-7, 0, 2, 7)}
    got = restrict(fluxmat_model("remat", program, explicit), {"q"})
    assert_same(got, restrict(clingo_model(to_clingo(program, explicit)), {"q"}), "remat vs clingo")
    assert {("q", -7, 2, -3, -1), ("q", 7, -7, -1, 0), ("q", 7, 2, 3, 1), ("q", 0, -7, 0, 0)} <= got
    assert len(got) == 12 and not any(f[2] == 0 for f in got)
