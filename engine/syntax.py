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
from dataclasses import dataclass, field


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


def literal(lexical: str, datatype: str = XSD_STRING, lang: str = "") -> Value:
    """The constant of an RDF literal: `str`, `int` (canonical xsd:integer) or `RdfLiteral`."""
    if lang:
        return RdfLiteral(lexical, RDF_LANG_STRING, lang)
    if datatype == XSD_STRING:
        return lexical
    if datatype == XSD_INTEGER and _CANONICAL_INTEGER.match(lexical):
        return int(lexical)
    return RdfLiteral(lexical, datatype)


def json_value(value: Value):
    """A constant as a JSON value: IRIs as "<...>", literals as JSON-LD value objects."""
    if isinstance(value, Iri):
        return f"<{value.value}>"
    if isinstance(value, RdfLiteral):
        if value.lang:
            return {"@value": value.lexical, "@language": value.lang}
        return {"@value": value.lexical, "@type": value.datatype}
    return value


def is_json_literal(item: dict) -> bool:
    """Whether `item` is a JSON-LD value object `{"@value": str, "@type" | "@language": str}`."""
    if set(item) not in ({"@value", "@type"}, {"@value", "@language"}):
        return False
    return all(isinstance(v, str) for v in item.values()) and bool(item.get("@type", item.get("@language")))


def value_from_json(item) -> Value:
    """The inverse of `json_value` for values it produced (no validation)."""
    if isinstance(item, str) and len(item) > 2 and item[0] == "<" and item[-1] == ">":
        return Iri(item[1:-1])
    if isinstance(item, dict):
        if "@language" in item:
            return literal(item["@value"], lang=item["@language"])
        return literal(item["@value"], item["@type"])
    return item


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
        return f"({self.left} {self.op} {self.right})"


Term = Var | Const | BinOp


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
_KEYWORDS = frozenset({"not"})


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
    return json.dumps(value, ensure_ascii=False)


def format_pred(pred: str) -> str:
    """Print a predicate name: bare when it is an identifier, else as an IRI."""
    if _BARE_PRED.match(pred) and pred not in _KEYWORDS:
        return pred
    return f"<{pred}>"
