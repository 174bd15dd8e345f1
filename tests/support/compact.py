"""Random programs and updates for the arrays core's oracle tests (tests/engine/test_compact_core.py, test_small_updates.py)."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import assume
from hypothesis import strategies as st

from fluxmat.engine import AnalysisError, EngineOptions, Reasoner
from fluxmat.engine.syntax import RdfLiteral

VALUES = (1, 2, "a", "b")  # ints and strings share the term dictionary
EDB = {"e": 2, "f": 1}
IDB = ("p", "q", "r")
CLOSURE = "s(X, Y) :- s(Y, X).\ns(X, Z) :- s(X, Y), s(Y, Z).\ns(X, Y) :- e(X, Y).\n"


def _value(v) -> str:
    return str(v)


@st.composite
def _atom(draw, pred: str, arity: int, variables: list[str], anonymous: bool = False) -> str:
    choices = [*variables, *map(_value, VALUES[:2])] + (["_"] if anonymous else [])
    return f"{pred}({', '.join(draw(st.sampled_from(choices)) for _ in range(arity))})"


@st.composite
def _rule(draw, head: str, arities: dict[str, int], lower: list[str]) -> str:
    """A safe rule for `head`: positive atoms over any predicate, negated ones over `lower` only."""
    preds = sorted(arities)
    body, bound = [], []
    for _ in range(draw(st.integers(1, 3))):
        p = draw(st.sampled_from(preds))
        terms = [draw(st.sampled_from(["X", "Y", "Z", "1", "a"])) for _ in range(arities[p])]
        bound += [t for t in terms if t[0].isupper()]
        body.append(f"{p}({', '.join(terms)})")
    variables = sorted(set(bound)) or ["1"]
    if lower and draw(st.booleans()):
        q = draw(st.sampled_from(lower))
        body.append("not " + draw(_atom(q, arities[q], variables, anonymous=True)))
    head_atom = draw(_atom(head, arities[head], variables))
    return f"{head_atom} :- {', '.join(body)}."


@st.composite
def programs(draw) -> str:
    arities = {**EDB, **{p: draw(st.integers(0, 2)) for p in IDB}}
    if draw(st.booleans()):
        arities["s"] = 2
    lines = [CLOSURE] if "s" in arities else []
    for k, head in enumerate(IDB):
        lower = [*EDB, *IDB[:k]]
        for _ in range(draw(st.integers(1, 3))):
            lines.append(draw(_rule(head, arities, lower)))
    return "\n".join(lines)


def candidate_facts(reasoner: Reasoner) -> list[tuple]:
    """Candidate explicit facts: every EDB fact over the values, and some facts of derived predicates."""
    out = [("e", x, y) for x in VALUES for y in VALUES] + [("f", x) for x in VALUES]
    arity = reasoner.analysis.arity
    for p in (*IDB, "s"):
        n = arity.get(p)
        if n is not None:
            out.append((p, *VALUES[:n]))
    return out


def updates(universe: list[tuple]):
    facts = st.lists(st.sampled_from(universe), max_size=6)
    return st.lists(st.tuples(facts, facts), min_size=1, max_size=6)


TC = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
NODES = ("a", "b", "c", "d", 1, 2)
EDGES = [("edge", x, y) for x in NODES for y in NODES]


# ---------------------------------------------------------------- comparisons and arithmetic

XSD_INT = "http://www.w3.org/2001/XMLSchema#int"
MIXED = (0, 1, 2, 3, -2, 2**70, "a", "b", RdfLiteral("2", XSD_INT), RdfLiteral("x", XSD_INT))
_EXPRS = ("{x} + {y}", "{x} - {y}", "{x} * {y}", "{x} / {y}", "{x} % {y}", "{x} + 1", "{x} * 2")
_OPS = ("<", "<=", ">", ">=", "=", "!=")


@st.composite
def _builtin_rule(draw, head: str, arity: int, lower: list[str]) -> str:
    """`head` from e/f (and lower predicates) with comparisons, assignments and head expressions.

    Values of every type meet (ints, strings, a big int, typed literals), so comparisons of
    different types and undefined arithmetic (division by zero, strings, overflow) occur.
    """
    body = [draw(st.sampled_from(["e(X, Y)", "e(Y, X)", "e(X, X), f(Y)", "f(X), f(Y)"]))]
    bound = ["X", "Y"]
    terms = [*bound, "1", "2", "a", "0"]
    for k in range(draw(st.integers(0, 3))):
        x, y = draw(st.sampled_from(terms)), draw(st.sampled_from(terms))
        expr = draw(st.sampled_from(_EXPRS)).format(x=x, y=y)
        if draw(st.booleans()):
            var = f"Z{k}"
            body.append(f"{var} = {expr}")
            bound.append(var)
            terms.append(var)
        else:
            left = draw(st.sampled_from([expr, x]))
            body.append(f"{left} {draw(st.sampled_from(_OPS))} {draw(st.sampled_from(terms))}")
    if lower and draw(st.booleans()):
        q = draw(st.sampled_from(lower))
        body.append(f"not {q}({draw(st.sampled_from(bound))})")
    heads = [*bound, "X + Y", "X * 2", "a"]
    args = ", ".join(draw(st.sampled_from(heads)) for _ in range(arity))
    return f"{head}({args}) :- {', '.join(body)}."


@st.composite
def builtin_programs(draw) -> str:
    """Non-recursive p/1, q/2, then r/1 recursive through bounded arithmetic (it ends: |r| < 6)."""
    lines = [draw(_builtin_rule("p", 1, [])) for _ in range(draw(st.integers(1, 2)))]
    lines += [draw(_builtin_rule("q", 2, ["p"])) for _ in range(draw(st.integers(1, 2)))]
    op = draw(st.sampled_from(["+", "-", "*"]))
    lines.append(draw(_builtin_rule("r", 1, ["p"])))
    if draw(st.booleans()):
        lines.append(f"r(Z) :- r(X), f(Y), Z = X {op} Y, Z < 6, Z > -6.")
    else:
        lines.append(f"r(X {op} Y) :- r(X), f(Y), X {op} Y < 6, X {op} Y > -6.")
    return "\n".join(lines)


def builtin_facts() -> list[tuple]:
    """Candidate explicit facts for `builtin_programs`: e and f over MIXED."""
    return [("e", x, y) for x in MIXED for y in MIXED] + [("f", x) for x in MIXED]


# ---------------------------------------------------------------- the oracle


def _reasoners(text: str, algorithm: str, objects: str) -> tuple[Reasoner, Reasoner]:
    arrays = Reasoner.from_text(text, options=EngineOptions(algorithm, core="arrays"))
    return arrays, Reasoner.from_text(text, options=EngineOptions(objects))


def scratch(text: str, explicit: set[tuple]) -> set[tuple]:
    oracle = Reasoner.from_text(text, options=EngineOptions("remat", modules=False))
    oracle.load(explicit)
    return oracle.facts()


def stratified(text: str) -> bool:
    """Whether the program text analyses (safe, stratifiable)."""
    try:
        Reasoner.from_text(text)
    except AnalysisError:
        return False
    return True


def random_case(data) -> tuple[str, list[tuple], list[tuple]]:
    """Draw a random stratified program (others are assumed away), its candidate facts and a load of them."""
    text = data.draw(programs(), label="program")
    assume(stratified(text))
    universe = candidate_facts(Reasoner.from_text(text))
    load = data.draw(st.lists(st.sampled_from(universe), max_size=12), label="load")
    return text, universe, load


def check_against_objects(text: str, algorithm: str, load: list[tuple], steps,
                          tune: Callable[[Reasoner], None] | None = None, noops: bool = True,
                          against: str = "dredc") -> Reasoner:  # fmt: skip
    """After the load and every update: arrays == objects (`dredc`) == `remat` from scratch, same reports.

    `tune(arrays)` runs after the load (a test hook on the arrays core); `noops=False` leaves the
    reports' no-op counts unchecked (the fully dynamic runs count them per run); `against` is the
    objects core's algorithm. Returns the arrays reasoner.
    """
    arrays, objects = _reasoners(text, algorithm, against)
    assert arrays.load(load).added == objects.load(load).added
    if tune is not None:
        tune(arrays)
    current = set(load)
    assert arrays.facts() == objects.facts() == scratch(text, current)
    for n, (add, delete) in enumerate(steps, start=1):
        delete = [f for f in delete if f not in add]
        got, want = arrays.update(add, delete), objects.update(add, delete)
        current = (current - set(delete)) | set(add)
        where = f"update {n}: +{add} -{delete}"
        assert arrays.facts() == scratch(text, current), where
        assert arrays.facts() == objects.facts(), where
        assert arrays.explicit() == objects.explicit() == current, where
        assert (got.added, got.removed) == (want.added, want.removed), where
        if noops:
            assert (got.noop_adds, got.noop_deletes) == (want.noop_adds, want.noop_deletes), where
    return arrays


def fold_report(facts: set, r: Reasoner, report) -> set:
    """`facts` with a report's delta applied, checking it is a proper delta (program-change tests)."""
    m = r.maintainer
    added = {m.decode(p, f) for p, fs in report.added_facts.items() for f in fs}
    removed = {m.decode(p, f) for p, fs in report.removed_facts.items() for f in fs}
    assert not added & facts and removed <= facts, "a delta adds present or removes absent facts"
    return (facts - removed) | added
