"""Facts on the wire, for clients: the JSON form of delta and update messages, decoded and encoded.

The same rules as the job's codec (tests compare the two on many facts), kept
here so that a client needs neither Spark nor the engine:

* a fact is the JSON array `[pred, arg, ...]`; the predicate is kept as the
  job wrote it (compacted with the program's prefixes, `pre:local`);
* an integer is a JSON integer;
* `"<iri>"` is an IRI (`Iri`), when the text between the brackets has no
  white space, `<`, `>` or `"`;
* any other string is a string; `{"@value": "<x>"}` is the string `"<x>"`
  (that would otherwise read as an IRI);
* `{"@value": lexical, "@type": datatype}` and `{"@value": lexical,
  "@language": tag}` are RDF literals (`Literal`), except that an
  `xsd:string` literal is a plain string and a canonical `xsd:integer` an
  integer (as RDF term equality and the engine have it).

N-Triples deltas (`"format": "ntriples"`) carry triples as text: `s rdf:type C`
is the fact `C[s]`, any other triple `s p o` is `p[s, o]`, blank node `_:b` the
IRI `urn:fluxmat:bnode:b` (parsed with pyoxigraph, imported only then).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

try:  # faster JSON when installed (fluxmat installs it)
    import orjson
except ImportError:  # pragma: no cover - the client works with the standard library alone
    orjson = None

__all__ = ["BNODE", "Iri", "Literal", "WireError", "decode_fact", "decode_value", "encode_fact",
           "encode_value", "fact_key", "ntriples_facts"]  # fmt: skip

XSD = "http://www.w3.org/2001/XMLSchema#"
XSD_STRING = XSD + "string"
XSD_INTEGER = XSD + "integer"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
BNODE = "urn:fluxmat:bnode:"
_IRI = re.compile('<[^\\s<>"\ud800-\udfff]*>\\Z')
_CANONICAL_INTEGER = re.compile(r"(?:0|-?[1-9][0-9]{0,3999})\Z")
_IRI_CACHE = 200_000  # decoded "<...>" strings kept (LUBM repeats each IRI many times)
_IRIS: dict[str, object] = {}
_LITERAL_KEYS = ({"@value"}, {"@value", "@type"}, {"@value", "@language"})


class WireError(ValueError):
    """A value that is not a fact or constant in the wire form (says what was found)."""


@dataclass(frozen=True, slots=True)
class Iri:
    """An IRI constant (without the angle brackets)."""

    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


@dataclass(frozen=True, slots=True)
class Literal:
    """An RDF literal other than a plain string or a canonical integer, kept exactly."""

    lexical: str
    datatype: str
    lang: str = ""


def literal(lexical: str, datatype: str = XSD_STRING, lang: str = ""):
    """The constant of an RDF literal: `str`, `int` (canonical xsd:integer) or `Literal`."""
    if lang:
        return Literal(lexical, RDF_LANG_STRING, lang)
    if datatype == XSD_STRING:
        return lexical
    if datatype == XSD_INTEGER and _CANONICAL_INTEGER.match(lexical):
        return int(lexical)
    return Literal(lexical, datatype)


def decode_value(item):
    """The constant of one wire argument.

    Raises:
        WireError: not an integer, a string or a JSON-LD value object.
    """
    t = type(item)
    if t is str:
        return Iri(item[1:-1]) if item[:1] == "<" and _IRI.match(item) else item
    if t is int:
        return item
    if t is dict and set(item) in _LITERAL_KEYS and all(type(v) is str for v in item.values()):
        lang, datatype = item.get("@language"), item.get("@type")
        if lang:
            return literal(item["@value"], lang=lang)
        if datatype:
            return literal(item["@value"], datatype)
        if len(item) == 1:
            return item["@value"]
    raise WireError(f"expected an integer, a string or a literal object, found {_show(item)}")


def encode_value(value):
    """A constant as its wire JSON value (the inverse of `decode_value`)."""
    t = type(value)
    if t is Iri:
        return f"<{value.value}>"
    if t is Literal:
        if value.lang:
            return {"@value": value.lexical, "@language": value.lang}
        return {"@value": value.lexical, "@type": value.datatype}
    if t is str and value[:1] == "<" and _IRI.match(value):
        return {"@value": value}
    return value


def decode_fact(item) -> tuple:
    """A wire fact `[pred, arg, ...]` as the tuple `(pred, value, ...)`.

    Raises:
        WireError: not a non-empty array with a predicate name first, or a bad argument.
    """
    if type(item) is not list or not item or type(item[0]) is not str or not item[0]:
        raise WireError(f"expected a fact [predicate, arg, ...], found {_show(item)}")
    out = [item[0]]
    try:
        for arg in item[1:]:
            t = type(arg)
            if t is int or (t is str and arg[:1] != "<"):  # the common cases, inline
                out.append(arg)
            elif t is str:
                iri = _IRIS.get(arg)
                if iri is None:
                    iri = decode_value(arg)
                    if len(_IRIS) >= _IRI_CACHE:
                        _IRIS.clear()
                    _IRIS[arg] = iri
                out.append(iri)
            else:
                out.append(decode_value(arg))
    except WireError as exc:
        raise WireError(f"in fact {_show(item)}: {exc}") from None
    return tuple(out)


def encode_fact(fact: tuple) -> list:
    """A fact tuple `(pred, value, ...)` as its wire array."""
    return [fact[0], *map(encode_value, fact[1:])]


_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def fact_key(fact: tuple) -> str:
    """A fact's arguments as canonical JSON text (one text per fact: a database's key column).

    Compact JSON with raw non-ASCII: orjson writes exactly json's bytes for these
    values (strings, objects of strings, integers up to 64 bits) several times
    faster; a larger integer (which orjson refuses) goes through json.
    """
    args = [encode_value(v) for v in fact[1:]]
    if orjson is not None:
        try:
            return orjson.dumps(args).decode("utf-8")
        except TypeError:  # an integer beyond 64 bits
            pass
    return _compact(args)


def ntriples_facts(text: str, where: str = "") -> list[tuple]:
    """The facts of N-Triples text (see the module docstring).

    Raises:
        WireError: the text is not N-Triples (with its line and column).
    """
    if not text:
        return []
    import pyoxigraph as ox  # only N-Triples deltas need it

    def value(term):
        kind = type(term)
        if kind is ox.NamedNode:
            return Iri(term.value)
        if kind is ox.BlankNode:
            return Iri(BNODE + term.value)
        if kind is ox.Literal:
            return literal(term.value, term.datatype.value, term.language or "")
        raise WireError(f"{where}: unsupported RDF term {term}")

    out = []
    try:
        for t in ox.parse(text.encode("utf-8"), ox.RdfFormat.N_TRIPLES):
            obj = t.object
            if t.predicate.value == RDF_TYPE and type(obj) is not ox.Literal:
                cls = obj.value if type(obj) is ox.NamedNode else BNODE + obj.value
                out.append((cls, value(t.subject)))
            else:
                out.append((t.predicate.value, value(t.subject), value(obj)))
    except SyntaxError as exc:
        raise WireError(f"{where}: invalid N-Triples: {exc}") from None
    return out


def _show(value) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
