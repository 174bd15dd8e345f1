"""The abstract syntax of fluxmat programs (stage 1 of the pipeline: text -> AST).

This module only defines immutable data types and their printer; it knows nothing
about parsing, analysis or evaluation. Every node that came from a file carries a
`Pos` so later stages can report errors with file, line and column.

Constants are Python values: `int` for integers, `str` for identifiers and strings
(the identifier `a` and the string "a" are one constant), `Iri` for IRIs
(`<...>` or a prefixed name after expansion), and `RdfLiteral` for the other RDF
literals (`"chat"@fr`, `"05"^^xsd:int`), kept exactly as written. `literal()`
makes the value of an RDF literal: an `xsd:string` is a `str`, an `xsd:integer`
in canonical form an `int`, anything else an `RdfLiteral`. `json_value` /
`value_from_json` are the JSON form of a constant (IRIs as "<...>", literals as
JSON-LD value objects `{"@value": ..., "@type" | "@language": ...}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

# Integers have at most this many decimal digits (Python converts at most 4,300
# between text and int by default; staying below keeps every integer printable).
# A longer literal is an error; arithmetic whose result would be longer is
# undefined, like division by zero: the rule instance does not fire.
MAX_INT_DIGITS = 4000
_INT_LIMIT = 10**MAX_INT_DIGITS
INT_SAFE_BITS = _INT_LIMIT.bit_length() - 1  # every int of at most this many bits is in range


def int_in_range(value: int) -> bool:
    """Whether `value` has at most MAX_INT_DIGITS digits."""
    return value.bit_length() <= INT_SAFE_BITS or abs(value) < _INT_LIMIT


@dataclass(frozen=True, slots=True)
class Iri:
    """An IRI constant or predicate name, stored fully expanded."""

    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
XSD_INTEGER = XSD + "integer"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
# xsd:integer and the datatypes derived from it: their literals compare as integers
INTEGER_TYPES = frozenset(XSD + t for t in (
    "integer", "long", "int", "short", "byte", "nonNegativeInteger", "positiveInteger",
    "nonPositiveInteger", "negativeInteger", "unsignedLong", "unsignedInt", "unsignedShort",
    "unsignedByte",
))  # fmt: skip
_INTEGER = re.compile(r"[+-]?[0-9]{1,4000}\Z")
_CANONICAL_INTEGER = re.compile(r"(?:0|-?[1-9][0-9]{0,3999})\Z")


@dataclass(frozen=True, slots=True)
class RdfLiteral:
    """An RDF literal other than a plain string or a canonical integer, kept exactly as read.

    Two literals are one constant only when lexical form, datatype and language
    tag are equal (RDF term equality: `"05"^^xsd:int` is not `5`). `key` is what
    ordering comparisons and arithmetic use: the integer value for `xsd:integer`
    and its subtypes (when the lexical form is an integer), else the lexical form.
    """

    lexical: str
    datatype: str
    lang: str = ""
    key: int | str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key: int | str = self.lexical
        if self.datatype in INTEGER_TYPES and _INTEGER.match(self.lexical):
            key = int(self.lexical)
        object.__setattr__(self, "key", key)

    def __str__(self) -> str:
        return format_value(self)


Value = int | str | Iri | RdfLiteral
PyFact = tuple  # a fact as Python values: (pred: str, *args: Value)


def literal(lexical: str, datatype: str = XSD_STRING, lang: str = "") -> Value:
    """The constant of an RDF literal: `str`, `int` (canonical xsd:integer) or `RdfLiteral`."""
    if lang:
        return RdfLiteral(lexical, RDF_LANG_STRING, lang)
    if datatype == XSD_STRING:
        return lexical
    if datatype == XSD_INTEGER and _CANONICAL_INTEGER.match(lexical):
        return int(lexical)
    return RdfLiteral(lexical, datatype)


@dataclass(frozen=True, slots=True)
class Pos:
    """A source position (1-based line and column)."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOWHERE = Pos("<input>", 0, 0)


@dataclass(frozen=True, slots=True)
class Var:
    """A variable; `name` is as written without a leading `?`. `_` is anonymous."""

    name: str

    def __str__(self) -> str:
        first = self.name[:1]
        return self.name if first.isupper() or first == "_" else f"?{self.name}"


@dataclass(frozen=True, slots=True)
class Const:
    value: Value

    def __str__(self) -> str:
        return format_value(self.value)


@dataclass(frozen=True, slots=True)
class BinOp:
    """Arithmetic `left op right` with op in + - * / %."""

    op: str
    left: Term
    right: Term

    def __str__(self) -> str:
        return format_term(self)


@dataclass(frozen=True, slots=True)
class Call:
    """A built-in function applied to terms, `fn(arg, ...)` (engine.datatypes.FUNCTIONS)."""

    fn: str
    args: tuple

    def __str__(self) -> str:
        return format_term(self)


Term = Var | Const | BinOp | Call


def postorder(term: Term) -> Iterator[Term]:
    """Every node of `term`, children (left to right) before their parent.

    Iterative: a sum of thousands of terms is a BinOp chain thousands deep.
    """
    stack: list[tuple[Term, bool]] = [(term, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded or not isinstance(node, BinOp | Call):
            yield node
            continue
        stack.append((node, True))
        children = (node.left, node.right) if isinstance(node, BinOp) else node.args
        stack.extend((child, False) for child in reversed(children))


# Parentheses, unary minus signs and calls nest at most this deep in one term as read
# (engine.parser recurses on them; sums and products of any length do not nest).
MAX_NESTING = 100
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2}


def format_term(term: Term) -> str:
    """A term in program syntax, every BinOp in parentheses (iterative, see postorder).

    A term that would then nest deeper than the parser reads (`MAX_NESTING`: a sum of
    hundreds of terms is a BinOp chain hundreds deep) gets only the parentheses its
    operators need, so every printed program reads back.
    """
    every = _nesting(term) <= MAX_NESTING
    out: list[tuple[str, int]] = []  # (text, precedence: 3 for a leaf or a call)
    for node in postorder(term):
        if isinstance(node, BinOp):
            (right, rp), (left, lp) = out.pop(), out.pop()
            p = _PRECEDENCE[node.op]
            left = left if every or lp >= p else f"({left})"
            right = right if every or rp > p else f"({right})"
            out.append((f"({left} {node.op} {right})" if every else f"{left} {node.op} {right}", p))
        elif isinstance(node, Call):
            args = out[len(out) - len(node.args) :]
            del out[len(out) - len(node.args) :]
            out.append((f"{node.fn}({', '.join(a for a, _ in args)})", 3))
        else:
            out.append((str(node), 3))
    text, p = out[0]
    return text if every or p == 3 else f"({text})"


def _nesting(term: Term) -> int:
    """How deep `term` nests when every BinOp is in parentheses (a call nests one level too)."""
    depths: list[int] = []
    for node in postorder(term):
        n = len(node.args) if isinstance(node, Call) else 2 if isinstance(node, BinOp) else 0
        if not n:
            depths.append(0)
            continue
        deepest = max(depths[len(depths) - n :])
        del depths[len(depths) - n :]
        depths.append(deepest + 1)
    return depths[0]


@dataclass(frozen=True, slots=True)
class Atom:
    """`pred(args)`; `pred` is the predicate name after prefix expansion.

    `rdf` marks RDFox-style `pred[args]` atoms: as in RDFox, `C[?X]` (a class) and
    `C[?X, ?Y]` (a property) may share a name and are then different relations.
    """

    pred: str
    args: tuple[Term, ...]
    pos: Pos = field(default=NOWHERE, compare=False)
    rdf: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        if not self.args:
            return format_pred(self.pred)
        return f"{format_pred(self.pred)}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True, slots=True)
class Negation:
    """`not atom` (also written `!atom` or `NOT atom`)."""

    atom: Atom
    pos: Pos = field(default=NOWHERE, compare=False)

    def __str__(self) -> str:
        return f"not {self.atom}"


@dataclass(frozen=True, slots=True)
class Comparison:
    """`left op right` with op in = != < <= > >=.

    `X = expr` where X is not bound by the positive body is an assignment; the
    analysis decides which (see engine.analysis). `X := expr` is always one.
    """

    op: str
    left: Term
    right: Term
    pos: Pos = field(default=NOWHERE, compare=False)

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


Literal = Atom | Negation | Comparison


@dataclass(frozen=True, slots=True)
class Rule:
    head: Atom
    body: tuple[Literal, ...]
    pos: Pos = field(default=NOWHERE, compare=False)

    def __str__(self) -> str:
        if not self.body:
            return f"{self.head}."
        return f"{self.head} :- {', '.join(str(b) for b in self.body)}."


@dataclass(frozen=True, slots=True)
class Program:
    """A parsed program: rules, ground facts and the prefixes it declared."""

    rules: tuple[Rule, ...]
    facts: tuple[Atom, ...] = ()
    prefixes: tuple[tuple[str, str], ...] = ()
    source: str = "<input>"

    def __str__(self) -> str:
        lines = [f"@prefix {p}: <{iri}> ." for p, iri in self.prefixes]
        lines += [str(r) for r in self.rules]
        lines += [f"{f}." for f in self.facts]
        return "\n".join(lines)


_BARE = re.compile(r"[a-z][A-Za-z0-9_]*\Z")
_BARE_PRED = re.compile(r"[a-z][A-Za-z0-9_]*(:[A-Za-z0-9_]+)?\Z")
# A character of an IRI written `<...>`: no whitespace, `<`, `>`, `"`, nor a lone
# surrogate (it could not be written as UTF-8).
IRI_CHAR = '[^\\s<>"\ud800-\udfff]'
_IRI_TEXT = re.compile(IRI_CHAR + r"*\Z")
_SURROGATE = re.compile("[\ud800-\udfff]")
_KEYWORDS = frozenset({"not"})


def quote(text: str) -> str:
    r"""`text` as a string literal that reads back as `text`.

    JSON escapes, non-ASCII characters kept, except lone surrogates (which UTF-8
    cannot encode), written as `\uXXXX` escapes.
    """
    out = json.dumps(text, ensure_ascii=False)
    if _SURROGATE.search(out):
        out = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", out)
    return out


def format_value(value: Value) -> str:
    """Print a constant in program syntax: identifiers bare, other strings quoted."""
    if isinstance(value, bool):
        raise TypeError("booleans are not constants")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Iri):
        return f"<{value.value}>"
    if isinstance(value, RdfLiteral):
        text = json.dumps(value.lexical, ensure_ascii=False)
        return f"{text}@{value.lang}" if value.lang else f"{text}^^<{value.datatype}>"
    if _BARE.match(value) and value not in _KEYWORDS:
        return value
    return quote(value)


def format_pred(pred: str) -> str:
    """Print a predicate name so that it reads back as `pred`.

    Bare when it is an identifier (or `p:local`), else as an IRI `<pred>` when
    its characters allow, else quoted (`"ed ge"(a).`).
    """
    if _BARE_PRED.match(pred) and pred not in _KEYWORDS:
        return pred
    if _IRI_TEXT.match(pred):
        return f"<{pred}>"
    return quote(pred)
