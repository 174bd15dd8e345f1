"""RDF files and messages <-> facts, mapped as RDFox maps them (parser: pyoxigraph).

This module is the one place where RDF terms become engine constants and back
(meant to move into the wire codec when it exists):

* a triple `s rdf:type C` (C an IRI or a blank node) is the unary fact `C[s]`,
  whose predicate is the IRI of C; any other triple `s p o` is `p[s, o]`. So an
  RDFox rule file such as `lubm.dlog` applies to LUBM's RDF as it is;
* IRIs are `Iri` constants; literals go through `engine.syntax.literal`
  (an `xsd:string` is a `str`, a canonical `xsd:integer` an `int`, every other
  literal an `RdfLiteral` with its lexical form, datatype and language tag, so
  it is written back exactly as read);
* blank nodes are skolemised: in a file, the n-th distinct blank node becomes
  the IRI `urn:fluxmat:bnode:<tag>_<n>`, where `<tag>` is derived from the
  file's absolute path (so two files never share a blank node, and loading the
  same file twice gives the same IRIs); in update messages `_:label` becomes
  `urn:fluxmat:bnode:label` (labels are shared by every message of a stream, so
  a later message can delete what an earlier one added). On output such IRIs
  are written as blank nodes again (`_:<tag>_<n>`, `_:label`), which read back
  as the same node in an update;
* in N-Quads and TriG the graph name is ignored (the triples of every graph
  are read);
* back from facts (`triple_of`): a fact of arity 1 or 2 whose predicate is an
  absolute IRI and whose first argument is an IRI is a triple; every other fact
  (`edge(a, b)`, arity 3, a literal subject) is not, and the writers return it
  so the caller can report it.

Formats: N-Triples, N-Quads, Turtle, TriG and RDF/XML, chosen by extension
(`.nt .nq .ttl .trig .rdf .owl .xml`, each also with `.gz`) or by name. Every
syntax error is a `ParseError` with file, line and column (pyoxigraph reports
them for the line-based formats and Turtle/TriG; for RDF/XML the position is
where the parser stopped, found by re-reading the file in small steps).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import xml.parsers.expat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from fluxmat.connectors.rdf_guard import BOM, READ_ERRORS, Parse, printable
from fluxmat.connectors.xml_guard import check_xml_stream
from fluxmat.engine.errors import InputMemoryError, ParseError
from fluxmat.engine.syntax import XSD_INTEGER, Iri, Pos, RdfLiteral, literal

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
BNODE = "urn:fluxmat:bnode:"


@dataclass(frozen=True)
class Format:
    """An RDF serialisation: its pyoxigraph format and the file extensions that select it."""

    name: str
    ox: ox.RdfFormat
    extensions: tuple[str, ...]


FORMATS = {
    f.name: f
    for f in (
        Format("ntriples", ox.RdfFormat.N_TRIPLES, (".nt",)),
        Format("nquads", ox.RdfFormat.N_QUADS, (".nq",)),
        Format("turtle", ox.RdfFormat.TURTLE, (".ttl",)),
        Format("trig", ox.RdfFormat.TRIG, (".trig",)),
        Format("rdfxml", ox.RdfFormat.RDF_XML, (".rdf", ".owl", ".xml")),
    )
}
UPDATE_FORMATS = ("ntriples", "nquads")  # the RDF an update message may carry


def format_of(path: str | Path, override: str | None = None) -> str | None:
    """The RDF format of a facts file (`override` wins), or None when it is not RDF."""
    if override:
        return override if override in FORMATS else None
    name = str(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    for f in FORMATS.values():
        if name.endswith(f.extensions):
            return f.name
    return None


# ---------------------------------------------------------------- RDF terms -> constants


class Terms:
    """Turns parsed RDF terms into constants and triples into facts.

    Args:
        scope: the skolemisation scope: a file's tag (blank nodes numbered in
            order of appearance) or None (labels kept: update messages).
    """

    def __init__(self, scope: str | None = None):
        self.scope = scope
        self._iris: dict[str, Iri] = {}
        self._bnodes: dict[str, Iri] = {}

    def iri(self, value: str) -> Iri:
        found = self._iris.get(value)
        if found is None:
            found = self._iris[value] = Iri(value)
        return found

    def bnode(self, label: str) -> Iri:
        found = self._bnodes.get(label)
        if found is None:
            name = label if self.scope is None else f"{self.scope}_{len(self._bnodes) + 1}"
            found = self._bnodes[label] = Iri(BNODE + name)
        return found

    def value(self, term):
        kind = type(term)
        if kind is ox.NamedNode:
            return self.iri(term.value)
        if kind is ox.Literal:
            return literal(term.value, term.datatype.value, term.language or "")
        if kind is ox.BlankNode:
            return self.bnode(term.value)
        raise ParseError(f"RDF-star quoted triples are not supported: {term}")

    def fact(self, s, p, o) -> tuple:
        pred = p.value
        if pred == RDF_TYPE and type(o) is not ox.Literal:
            return (o.value if type(o) is ox.NamedNode else self.bnode(o.value).value,
                    self.value(s))  # fmt: skip
        return (pred, self.value(s), self.value(o))


# ---------------------------------------------------------------- constants -> RDF terms

_XSD_INTEGER = ox.NamedNode(XSD_INTEGER)
_RDF_TYPE = ox.NamedNode(RDF_TYPE)


def term_of(value):
    """The RDF term of a constant (None for an IRI that is not a valid absolute IRI)."""
    if isinstance(value, Iri):
        if value.value.startswith(BNODE):
            return ox.BlankNode(value.value[len(BNODE) :])
        try:
            return ox.NamedNode(value.value)
        except ValueError:
            return None
    if isinstance(value, RdfLiteral):
        if value.lang:
            return ox.Literal(value.lexical, language=value.lang)
        return ox.Literal(value.lexical, datatype=ox.NamedNode(value.datatype))
    if isinstance(value, int):
        return ox.Literal(str(value), datatype=_XSD_INTEGER)
    return ox.Literal(value)


class Triples:
    """Facts -> triples, with a cache of predicate IRIs (None: not an IRI)."""

    def __init__(self) -> None:
        self._preds: dict[str, ox.NamedNode | None] = {}

    def predicate(self, pred: str):
        if pred in self._preds:
            return self._preds[pred]
        node = None
        if ":" in pred and not pred.startswith(BNODE):
            try:
                node = ox.NamedNode(pred)
            except ValueError:
                node = None
        self._preds[pred] = node
        return node

    def triple(self, fact: tuple) -> ox.Triple | None:
        """The triple of `fact`, or None when it is not one (see the module docstring)."""
        if len(fact) not in (2, 3) or not isinstance(fact[1], Iri):
            return None
        subject = term_of(fact[1])
        if subject is None or isinstance(subject, ox.Literal):
            return None
        if len(fact) == 2:  # C[s]: the class may be a (skolemised) blank node
            cls = ox.BlankNode(fact[0][len(BNODE) :]) if fact[0].startswith(BNODE) else self.predicate(fact[0])
            return None if cls is None else ox.Triple(subject, _RDF_TYPE, cls)
        pred = self.predicate(fact[0])
        if pred is None:
            return None
        obj = term_of(fact[2])
        return None if obj is None else ox.Triple(subject, pred, obj)


def triple_of(fact: tuple) -> ox.Triple | None:
    """The triple of one fact (None when it is not one)."""
    return Triples().triple(fact)


# ---------------------------------------------------------------- reading


def _open(path: Path):
    if str(path).lower().endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")  # noqa: SIM115 - closed by the caller


def file_tag(path: str | Path) -> str:
    """The blank-node scope of a file: 8 hex digits of its absolute path's digest."""
    return hashlib.sha256(str(Path(path).resolve()).encode("utf-8")).hexdigest()[:8]


def read_rdf(path: str | Path, fmt: str) -> list[tuple]:
    """The facts of an RDF file (gzip-compressed when named `*.gz`), parsed within connectors.rdf_guard's bounds."""
    path = Path(path)
    terms = Terms(file_tag(path))
    fact = terms.fact
    quads = None
    try:
        if fmt == "rdfxml":  # entity expansion and nesting bounded before the parser sees it
            with _open(path) as stream:
                check_xml_stream(stream, str(path))
        with _open(path) as stream:
            quads = Parse(stream, FORMATS[fmt].ox, str(path), base_iri=path.resolve().as_uri())
            return [fact(q.subject, q.predicate, q.object) for q in quads]
    except MemoryError:
        raise InputMemoryError(str(path), None if quads is None else quads.line()) from None
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, *READ_ERRORS) as exc:
        raise ParseError(f"{path}: cannot read: {exc}") from None
    except SyntaxError as exc:
        data = b""
        if exc.lineno is None:  # RDF/XML: the file is read again to find the position
            with _open(path) as stream:
                data = stream.read()
        raise syntax_error(exc, data, fmt, str(path)) from None
    except ParseError as exc:
        if exc.pos is not None:
            raise
        raise ParseError(f"{path}: {exc.message}") from None


def parse_rdf_text(text: str, fmt: str, where: str) -> list[tuple]:
    """The facts of an RDF text inside an update (N-Triples or N-Quads; labels kept)."""
    terms = Terms(None)
    data = _utf8(text, where).removeprefix(BOM)
    try:
        return [terms.fact(q.subject, q.predicate, q.object) for q in ox.parse(data, FORMATS[fmt].ox)]
    except SyntaxError as exc:
        err = syntax_error(exc, data, fmt, "")
        raise ParseError(f"{where}: line {err.pos.line}, column {err.pos.col}: {err.message}") from None
    except ParseError as exc:
        raise ParseError(f"{where}: {exc.message}") from None


def _utf8(text: str, where: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, e.g. JSON's "\\ud800"
        raise ParseError(f"{where}: not valid Unicode text: {ascii(text[exc.start])[1:-1]} (a lone surrogate) "
                         f"at character {exc.start + 1}") from None  # fmt: skip


def graph_of(item: object) -> str | None:
    """The one named graph of an N-Quads update message (`--partition-by graph`), else None.

    None when the update is not N-Quads, is malformed, has quads in the default
    graph or in more than one graph: it then has no key (a dead letter).
    """
    if not isinstance(item, dict) or item.get("format") != "nquads":
        return None
    graphs = set()
    for key in ("add", "del"):
        text = item.get(key, "")
        if not isinstance(text, str):
            return None
        try:
            graphs.update(q.graph_name for q in ox.parse(text.encode("utf-8"), ox.RdfFormat.N_QUADS))
        except SyntaxError:
            return None
    if len(graphs) != 1:
        return None
    (graph,) = graphs
    return graph.value if isinstance(graph, ox.NamedNode) else None


def rdf_update(item: dict, where: str) -> tuple[tuple, tuple]:
    """(add, delete) facts of an update message carrying RDF text.

    `{"id": optional, "format": "ntriples" | "nquads", "add": "<s> <p> <o> . ...",
    "del": "..."}`; errors name the key and the line and column inside its text.
    """
    unknown = sorted(set(item) - {"add", "del", "id", "format"})
    if unknown:
        raise ParseError(
            f"{where}: unknown key '{unknown[0]}' in update (expected 'add', 'del', 'id' or 'format')"
        )
    fmt = item["format"]
    if fmt not in UPDATE_FORMATS:
        raise ParseError(
            f"{where}: unknown update format {fmt!r} (expected {' or '.join(map(repr, UPDATE_FORMATS))})"
        )
    out = []
    for key in ("add", "del"):
        text = item.get(key, "")
        if not isinstance(text, str):
            raise ParseError(f"{where}: '{key}' must be {fmt} text in a {fmt} update")
        out.append(tuple(parse_rdf_text(text, fmt, f"{where}: {key}")))
    return out[0], out[1]


_POSITION = re.compile(r"^Parser error at line \d+ (?:between columns \d+ and \d+|column \d+): ")
_QUOTED = re.compile(r"'([^']{1,200})'")


def syntax_error(exc: SyntaxError, data: bytes, fmt: str, source: str) -> ParseError:
    """A pyoxigraph syntax error as a ParseError with line and column."""
    message = printable(_POSITION.sub("", str(exc.msg if exc.msg else exc)))
    line, col = exc.lineno, exc.offset
    if line is None:
        line, col = _locate(data, fmt, message)
    return ParseError(message, Pos(source or "<input>", line, col or 1))


class _Stepper(io.RawIOBase):
    """A reader handing out `step` bytes at a time, so the parser's stop is known."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step, self.pos = data, step, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = min(len(buf), self.step, len(self.data) - self.pos)
        buf[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


def _locate(data: bytes, fmt: str, message: str) -> tuple[int, int]:
    """(line, column) of an error the parser gave no position for (RDF/XML)."""
    try:  # not even well-formed XML: expat knows where
        xml.parsers.expat.ParserCreate().Parse(data, True)
    except xml.parsers.expat.ExpatError as err:
        return err.lineno, err.offset + 1
    stepper = _Stepper(data, 1 if len(data) < (4 << 20) else 64)
    try:
        for _ in ox.parse(stepper, FORMATS[fmt].ox):
            pass
    except SyntaxError:
        pass
    end = max(stepper.pos - 1, 0)
    quoted = _QUOTED.search(message)
    if quoted:  # the offending token, e.g. an invalid IRI: its last occurrence before the stop
        found = data.rfind(quoted.group(1).encode("utf-8"), 0, end + 1)
        if found >= 0:
            end = found
    line = data.count(b"\n", 0, end) + 1
    col = end - (data.rfind(b"\n", 0, end) + 1) + 1
    return line, col


# ---------------------------------------------------------------- writing

OUTPUT_FORMATS = ("facts", "ntriples", "nquads", "turtle")


def _triples(facts: Iterable[tuple]) -> tuple[list[ox.Triple], list[tuple]]:
    """The facts that are triples, as triples, and the others, in order."""
    conv = Triples()
    triples: list[ox.Triple] = []
    others: list[tuple] = []
    for fact in facts:
        t = conv.triple(fact)
        if t is None:
            others.append(fact)
        else:
            triples.append(t)
    return triples, others


def write_rdf(facts: Iterable[tuple], fmt: str, prefixes: dict[str, str] | None = None) -> tuple[bytes, list[tuple]]:
    """Serialise the facts that are triples; return the text and the facts that are not.

    N-Triples and N-Quads (the default graph) are canonical N-Triples lines,
    sorted; Turtle uses `prefixes` and is sorted by subject.
    """
    triples, others = _triples(facts)
    if fmt in ("ntriples", "nquads"):
        lines = sorted(str(t) + " .\n" for t in triples)
        return "".join(lines).encode("utf-8"), others
    triples.sort(key=str)
    return ox.serialize(triples, format=FORMATS[fmt].ox, prefixes=prefixes or None), others


def ntriples_lines(facts: Iterable[tuple]) -> tuple[list[str], list[tuple]]:
    """N-Triples lines (without newline) of the facts that are triples, and the others, in order."""
    triples, others = _triples(facts)
    return [str(t) + " ." for t in triples], others
