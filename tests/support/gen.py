"""Hypothesis strategies for random fluxmat programs, fact sets and update sequences.

Shared by the property and oracle tests. Everything is kept small (a handful of
predicates, constants a..e and 0..3, at most a dozen facts) so that one example
runs in milliseconds.

Programs are typed: every predicate column holds either symbols (a..e) or small
integers (0..3), so comparisons and arithmetic only ever see integers. That keeps
the semantics identical in fluxmat and in clingo (which orders integers before
symbols and leaves `a + 1` undefined, where fluxmat would return false / None).

* `program_cases()` draws a `GenProgram` (text plus schema); `programs()` is its
  text alone.
* `facts(schema)` draws a set of explicit facts; `update_sequences(schema,
  initial)` draws 1-8 `(add, delete)` pairs, disjoint within one pair, sometimes
  deleting non-explicit facts and adding explicit ones (no-ops).
* `scenarios()` draws all three together.

The language features generated: joins with repeated variables, constants,
recursion and mutual recursion (predicates of one layer may use each other),
`!=`, `=`, `<`, `<=` filters, bounded arithmetic with `+ - * / %` over negative
and positive integers (`N = M op K, N < 4, N > -4`, where K is a constant or a
variable and may be 0: division by zero leaves the rule instance undefined; head
terms `M + 1` guarded by `M < 3`, `M - 1` guarded by `M > -3`, and `M * -1`),
and stratified negation (only predicates of
strictly lower layers are negated, with bound variables, constants, `_` or a
variable local to the negated atom). Binary IDB predicates whose columns have
one type sometimes also get the transitivity rule `p(X, Z) :- p(X, Y), p(Y, Z).`
and sometimes the symmetry rule `p(Y, X) :- p(X, Y).` besides their other rules
(the tc / stc modules of Hu, Motik & Horrocks 2019; higher layers may negate p).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from fluxmat.engine import Iri
from fluxmat.engine.lexer import IRI_FULL
from tests.support.profile import examples  # noqa: F401 - the tests import it from here

SYM = "sym"
INT = "int"
SYMBOLS = ("a", "b", "c", "d", "e")
INTS = (-1, 0, 1, 2, 3)
INT_BOUND = 4  # arithmetic results are kept in -INT_BOUND < n < INT_BOUND: a finite domain
ARITH_OPS = ("+", "%", "-", "/", "*", "+", "-")
VAR_NAMES = ("X", "Y", "Z", "W", "U", "V", "S", "T", "K", "L", "M", "N", "O", "P", "Q", "R")

Fact = tuple  # (pred, *values)




Schema = dict[str, tuple[str, ...]]  # predicate -> column types


@dataclass(frozen=True)
class GenProgram:
    """A generated program: its text, column types and layering."""

    text: str
    schema: Schema = field(hash=False)
    layer: dict[str, int] = field(hash=False)  # 0 = EDB
    recursion_allowed: bool = True

    @property
    def edb(self) -> list[str]:
        return sorted(p for p, layer in self.layer.items() if layer == 0)

    @property
    def idb(self) -> list[str]:
        return sorted(p for p, layer in self.layer.items() if layer > 0)


def values(kind: str) -> st.SearchStrategy:
    return st.sampled_from(SYMBOLS if kind == SYM else INTS)


def _const(kind: str, value) -> str:
    return str(value)  # a..e are bare identifiers, ints print as themselves


class _RuleBuilder:
    """Draws one rule for `head` (layer `layer`) from the predicates of `schema`."""

    def __init__(self, draw, gp_schema: Schema, layer_of: dict[str, int], recursion: bool):
        self.draw = draw
        self.schema = gp_schema
        self.layer_of = layer_of
        self.recursion = recursion
        self.vars: dict[str, str] = {}  # name -> type, in order of binding
        self.fresh = iter(VAR_NAMES)
        self.body: list[str] = []
        self.locals = 0

    def new_var(self, kind: str) -> str:
        name = next(self.fresh)
        self.vars[name] = kind
        return name

    def of_kind(self, kind: str) -> list[str]:
        return [v for v, k in self.vars.items() if k == kind]

    def term_for(self, kind: str) -> str:
        """A body-atom argument: a bound variable (join), a fresh one, or a constant."""
        draw = self.draw
        existing = self.of_kind(kind)
        roll = draw(st.integers(0, 15))
        if roll == 0:
            return _const(kind, draw(values(kind)))
        if existing and roll <= 7:
            return draw(st.sampled_from(existing))
        return self.new_var(kind)

    def positive(self, head: str) -> None:
        draw = self.draw
        layer = self.layer_of[head]
        limit = layer if self.recursion else layer - 1
        same = [p for p in self.schema if self.layer_of[p] == layer] if self.recursion else []
        lower = [p for p in self.schema if self.layer_of[p] <= limit and p not in same]
        pool = same if same and lower and draw(st.integers(0, 2)) == 0 else lower or same
        pred = draw(st.sampled_from(sorted(pool)))
        args = [self.term_for(k) for k in self.schema[pred]]
        self.body.append(f"{pred}({', '.join(args)})")

    def arithmetic(self) -> None:
        """`N = M op K, N < 4, N > -4`: a new int variable, bounded so recursion terminates.

        K is a constant in -2..2 or a bound variable; either may be 0, so `/` and
        `%` meet division by zero (the instance does not fire, in clingo too).
        """
        ints = self.of_kind(INT)
        if not ints:
            return
        draw = self.draw
        m = draw(st.sampled_from(ints))
        op = draw(st.sampled_from(ARITH_OPS))
        if draw(st.booleans()):
            k = str(draw(st.integers(-2, 2)))
        else:
            k = draw(st.sampled_from(ints))
        n = self.new_var(INT)
        self.body.append(f"{n} = {m} {op} {k}")
        self.body.append(f"{n} < {INT_BOUND}")
        self.body.append(f"{n} > -{INT_BOUND}")

    def comparison(self) -> None:
        draw = self.draw
        kind = draw(st.sampled_from((SYM, INT)))
        vs = self.of_kind(kind)
        if not vs:
            return
        left = draw(st.sampled_from(vs))
        ops = ("!=", "!=", "=") if kind == SYM else ("!=", "<", "<=", "<", "=")
        op = draw(st.sampled_from(ops))
        others = [v for v in vs if v != left]
        if others and draw(st.booleans()):
            right = draw(st.sampled_from(others))
        else:
            right = _const(kind, draw(values(kind)))
        if draw(st.booleans()):
            left, right = right, left
            op = {"<": ">", "<=": ">="}.get(op, op)
        self.body.append(f"{left} {op} {right}")

    def negation(self, head: str) -> None:
        draw = self.draw
        lower = sorted(p for p in self.schema if self.layer_of[p] < self.layer_of[head])
        if not lower:
            return
        pred = draw(st.sampled_from(lower))
        args = []
        local = False
        for kind in self.schema[pred]:
            bound = self.of_kind(kind)
            roll = draw(st.integers(0, 9))
            if roll == 0:
                args.append("_")
            elif roll == 1 and not local:
                # a variable local to this negated atom, quantified inside it (docs/reference/language.md)
                local = True
                self.locals += 1
                args.append(f"Loc{self.locals}")
            elif roll == 2 or not bound:
                args.append(_const(kind, draw(values(kind))))
            else:
                args.append(draw(st.sampled_from(bound)))
        self.body.append(f"not {pred}({', '.join(args)})")

    def head_term(self, kind: str) -> str:
        draw = self.draw
        vs = self.of_kind(kind)
        if kind == INT and vs and draw(st.integers(0, 7)) == 0:
            # head arithmetic, guarded so the result stays in -3..3
            m = draw(st.sampled_from(vs))
            shape = draw(st.sampled_from(("+", "-", "*")))
            if shape == "*":
                return f"{m} * -1"
            self.body.append(f"{m} < {INT_BOUND - 1}" if shape == "+" else f"{m} > -{INT_BOUND - 1}")
            return f"{m} {shape} 1"
        if not vs or draw(st.integers(0, 12)) == 0:
            return _const(kind, draw(values(kind)))
        return draw(st.sampled_from(vs))

    def build(self, head: str) -> str:
        draw = self.draw
        for _ in range(draw(st.integers(1, 3))):
            self.positive(head)
        if self.schema[head].count(INT) and draw(st.integers(0, 3)) == 0:
            self.arithmetic()
        for _ in range(draw(st.integers(0, 1))):
            self.comparison()
        for _ in range(draw(st.sampled_from((0, 0, 1, 1, 2)))):
            self.negation(head)
        head_args = [self.head_term(k) for k in self.schema[head]]
        return f"{head}({', '.join(head_args)}) :- {', '.join(self.body)}."


@st.composite
def program_cases(draw, recursion: bool | None = None, closure: bool | str = False) -> GenProgram:
    """A safe, stratifiable program over EDB e/2, f/1 and 1-5 layered IDB predicates.

    `recursion=False` forbids positive atoms of a rule's own layer (the program is
    then non-recursive); None lets hypothesis choose. `closure=True` makes p1
    binary with one column type and gives it a transitivity rule (and sometimes
    the symmetry rule): the program then always has a tc or stc module.
    `closure="stc"`: p1 always gets both rules and its other rules read lower
    layers only (the stc module the fully dynamic algorithms take);
    `closure="tc"` likewise with the transitivity rule alone (their tc module).
    """
    if closure:
        recursion = True
    if recursion is None:
        recursion = draw(st.booleans())
    kinds = st.sampled_from((SYM, INT))
    schema: Schema = {
        "e": draw(st.sampled_from(((SYM, SYM), (SYM, SYM), (INT, INT), (SYM, INT)))),
        "f": (draw(kinds),),
    }
    layer_of = {"e": 0, "f": 0}
    n = 1
    for layer in range(1, draw(st.integers(1, 3)) + 1):
        for _ in range(draw(st.integers(1, 2))):
            pred = f"p{n}"
            n += 1
            if closure and n == 2:
                schema[pred] = (draw(kinds),) * 2
            else:
                schema[pred] = tuple(draw(kinds) for _ in range(draw(st.integers(1, 2))))
            layer_of[pred] = layer
    rules = []
    for head in sorted(p for p in schema if layer_of[p] > 0):
        only_closure = closure in ("stc", "tc") and head == "p1"
        for _ in range(draw(st.integers(1, 2))):
            rules.append(
                _RuleBuilder(draw, schema, layer_of, recursion and not only_closure).build(head)
            )
        if recursion and len(schema[head]) == 2 and len(set(schema[head])) == 1:
            kinds_ = (
                (closure,) if only_closure
                else ("tc", "stc") if closure and head == "p1"
                else ("", "", "tc", "tc", "stc", "sym")
            )  # fmt: skip
            kind = draw(st.sampled_from(kinds_))
            if "tc" in kind:
                rules.append(f"{head}(X, Z) :- {head}(X, Y), {head}(Y, Z).")
            if kind in ("stc", "sym"):
                rules.append(f"{head}(Y, X) :- {head}(X, Y).")
    return GenProgram("\n".join(rules) + "\n", schema, layer_of, recursion)


def programs(recursion: bool | None = None) -> st.SearchStrategy[str]:
    """Program text in fluxmat syntax (see `program_cases` for the details)."""
    return program_cases(recursion).map(lambda gp: gp.text)


def one_fact(schema: Schema, edb: tuple[str, ...] = ("e", "f")) -> st.SearchStrategy[Fact]:
    """A fact of a schema predicate; EDB predicates are drawn three times as often."""
    preds = sorted(schema)
    weighted = [p for p in preds for _ in range(3 if p in edb else 1)]

    @st.composite
    def _fact(draw) -> Fact:
        pred = draw(st.sampled_from(weighted))
        return (pred, *(draw(values(k)) for k in schema[pred]))

    return _fact()


def facts(schema: Schema, max_size: int = 14) -> st.SearchStrategy[frozenset[Fact]]:
    """A set of explicit facts over `schema` (IDB predicates included, as in RDF)."""
    return st.frozensets(one_fact(schema), min_size=min(3, max_size), max_size=max_size)


@st.composite
def update_sequences(
    draw, schema: Schema, initial: frozenset[Fact], max_updates: int = 8
) -> list[tuple[list[Fact], list[Fact]]]:
    """1-8 updates `(add, delete)`, each pair disjoint, as sorted lists.

    Deletes mostly hit explicit facts, sometimes not (no-ops); adds are mostly new,
    sometimes already explicit (no-ops).
    """
    explicit = set(initial)
    out = []
    for _ in range(draw(st.integers(1, max_updates))):
        present = sorted(explicit, key=repr)
        delete: set[Fact] = set()
        if present:
            delete |= set(draw(st.lists(st.sampled_from(present), max_size=4)))
        delete |= set(draw(st.lists(one_fact(schema), max_size=1)))
        add: set[Fact] = set(draw(st.lists(one_fact(schema), max_size=4)))
        if present and draw(st.integers(0, 3)) == 0:
            add.add(draw(st.sampled_from(present)))
        add -= delete
        out.append((sorted(add, key=repr), sorted(delete, key=repr)))
        explicit = (explicit - delete) | add
    return out


@st.composite
def scenarios(draw, recursion: bool | None = None, closure: bool | str = False):
    """(GenProgram, initial facts, update sequence); see `program_cases`."""
    gp = draw(program_cases(recursion, closure))
    initial = draw(facts(gp.schema))
    updates = draw(update_sequences(gp.schema, initial))
    return gp, initial, updates


def apply_update(explicit: frozenset[Fact], add, delete) -> frozenset[Fact]:
    """E := (E \\ delete) u add, the update semantics of engine.maintainer."""
    return frozenset((set(explicit) - set(delete)) | set(add))


# ------------------------------------------------------------------ facts as the wire carries them (engine.wire)

# IRIs as programs, facts files and messages can write them (engine.lexer.IRI_FULL)
IRI_TEXT = st.text(max_size=12).filter(lambda s: IRI_FULL.match(f"<{s}>") is not None)


STRINGS = st.one_of(
    st.text(max_size=12),  # quotes, spaces, unicode, backslashes
    IRI_TEXT.map(lambda s: f"<{s}>"),  # strings that look like IRIs
    st.sampled_from(["<x>", "<>", "<a b>", '"', "ex:a", "\\", "", " ", "ü", "@value"]),
)


CONSTANTS = st.one_of(
    st.integers(-(10**30), 10**30), st.integers(10**3999, 10**3999 + 5), STRINGS,
    IRI_TEXT.map(Iri), st.sampled_from([Iri("http://example.org/a"), Iri("p:x")]),
)  # fmt: skip


PREDS = st.one_of(
    st.sampled_from(["edge", "ex:q", "p:x", "http://example.org/r", "<x>", "ed ge", "q:local", "a:b:c"]),
    st.text(min_size=1, max_size=8),
)


FACTS = st.builds(lambda p, args: (p, *args), PREDS, st.lists(CONSTANTS, min_size=1, max_size=3))
