"""An OWL ontology as an RDF graph: reading, lists, and where an axiom is in the file.

The pure reading side of `connectors.owl2rl`: the triples of the ontology (any
RDF format connectors.rdf reads), indexed by subject, with RDF lists and the
*owner* of every blank node (the subject that refers to it), so a warning
about a restriction can name the line of the class it belongs to.

Terms are kept as strings: an IRI is its value, a blank node `_:id`; literals
stay pyoxigraph `Literal`s.
"""

from __future__ import annotations

import gzip
import io
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox

from fluxmat.connectors.rdf import FORMATS, format_of, syntax_error
from fluxmat.connectors.rdf_guard import READ_ERRORS, Parse, printable
from fluxmat.connectors.xml_guard import check_xml
from fluxmat.engine.errors import InputMemoryError, ParseError
from fluxmat.engine.syntax import Pos

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
STANDARD_PREFIXES = {"rdf": RDF, "rdfs": RDFS, "owl": OWL, "xsd": XSD}
MAX_ONTOLOGY_BYTES = 1 << 28  # 256 MiB: an ontology is held as text (for positions); a .gz may not expand beyond


def _term(t) -> str | ox.Literal:
    kind = type(t)
    if kind is ox.NamedNode:
        return t.value
    if kind is ox.BlankNode:
        return "_:" + t.value
    if kind is ox.Literal:
        return t
    raise ParseError(f"RDF-star quoted triples are not supported: {printable(str(t))}")


def is_bnode(term) -> bool:
    return isinstance(term, str) and term.startswith("_:")


@dataclass
class Graph:
    """The triples of one ontology file, indexed for the translation."""

    path: Path
    text: str
    triples: list[tuple]
    prefixes: dict[str, str]

    def __post_init__(self) -> None:
        self.spo: dict = defaultdict(lambda: defaultdict(list))
        self.owner: dict[str, object] = {}
        self._anchors: dict[str, str | None] = {}
        for s, p, o in self.triples:
            self.spo[s][p].append(o)
            if is_bnode(o) and o not in self.owner and o != s:
                self.owner[o] = s
        self._lines = Locator(self.text)

    def objects(self, s, p) -> list:
        return self.spo.get(s, {}).get(p, [])

    def one(self, s, p):
        found = self.objects(s, p)
        return found[0] if found else None

    def types(self, s) -> list:
        return self.objects(s, RDF + "type")

    def items(self, head) -> list | None:
        """The members of the RDF list starting at `head` (None when it is malformed)."""
        out: list = []
        seen: set = set()
        while head != RDF + "nil":
            if head in seen or not is_bnode(head):
                return None
            seen.add(head)
            first, rest = self.objects(head, RDF + "first"), self.objects(head, RDF + "rest")
            if len(first) != 1 or len(rest) != 1:
                return None
            out.append(first[0])
            head = rest[0]
        return out

    def anchor(self, term) -> str | None:
        """The IRI a blank node belongs to (its owner, transitively), or the term itself.

        Memoised along the chain, so blank nodes nested n deep cost O(n) in all, not O(n^2).
        """
        chain, seen = [], set()
        while is_bnode(term) and term in self.owner and term not in seen and term not in self._anchors:
            seen.add(term)
            chain.append(term)
            term = self.owner[term]
        if term in self._anchors:
            found = self._anchors[term]
        else:
            found = None if is_bnode(term) or not isinstance(term, str) else term
        for t in chain:
            self._anchors[t] = found
        return found

    def where(self, term) -> Pos:
        """The position of the description of `term` (or of what it belongs to) in the file."""
        iri = self.anchor(term)
        line, col = self._lines.find(iri) if iri else (0, 0)
        return Pos(str(self.path), line, col)


class Locator:
    """Finds where an IRI is described in an ontology's text (first description wins).

    Looked for, in order: `rdf:ID="local"`, `rdf:about="iri"`, `rdf:about="#local"` (RDF/XML),
    `<iri>` and `prefix:local` at the start of a line (Turtle, N-Triples), then
    any mention of the full IRI. Not found: line 0 (the file is named alone).
    """

    def __init__(self, text: str):
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._cache: dict[str, tuple[int, int]] = {}

    def _pos(self, offset: int) -> tuple[int, int]:
        from bisect import bisect_right

        line = bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def find(self, iri: str) -> tuple[int, int]:
        if iri in self._cache:
            return self._cache[iri]
        local = re.split(r"[#/]", iri)[-1]
        q = re.escape
        patterns = []
        if local:
            patterns.append(rf'rdf:ID="{q(local)}"')
        patterns.append(rf'rdf:about="{q(iri)}"')
        if local:
            patterns.append(rf'rdf:about="[^"]*{q("#" + local)}"')
        patterns.append(rf"(?m)^[ \t]*<{q(iri)}>")
        if local:
            patterns.append(rf"(?m)^[ \t]*[A-Za-z0-9_\-]*:{q(local)}(?=[\s;,.])")
        patterns.append(q(iri))
        found = (0, 0)
        for pattern in patterns:
            m = re.search(pattern, self.text)
            if m:
                start = m.start()
                while start < m.end() and self.text[start] in " \t":
                    start += 1
                found = self._pos(start)
                break
        self._cache[iri] = found
        return found


_XMLNS = re.compile(r'xmlns(?::([A-Za-z][\w\-.]*))?\s*=\s*"([^"]*)"')


def _xml_prefixes(text: str, stem: str) -> dict[str, str]:
    """Namespace declarations of an RDF/XML file (the default one named after the file)."""
    out: dict[str, str] = {}
    for name, ns in _XMLNS.findall(text):
        if not ns or ns[-1] not in "#/":
            continue
        if not name:
            name = stem if re.fullmatch(r"[A-Za-z][A-Za-z0-9_\-]*[A-Za-z0-9_]", stem) else "ns"
        out.setdefault(name, ns)
    return out


def _read_bytes(path: Path) -> bytes:
    """The file's bytes (decompressed when `*.gz`, at most MAX_ONTOLOGY_BYTES of them)."""
    try:
        if not str(path).lower().endswith(".gz"):
            return path.read_bytes()
        with gzip.open(path, "rb") as stream:
            data = stream.read(MAX_ONTOLOGY_BYTES + 1)
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, *READ_ERRORS) as exc:
        raise ParseError(f"{path}: cannot read: {exc}") from None
    if len(data) > MAX_ONTOLOGY_BYTES:
        raise ParseError(f"{path}: decompresses to more than {MAX_ONTOLOGY_BYTES:,} bytes (the limit for an "
                         "ontology, which is held in memory as text)")  # fmt: skip
    return data


def read_graph(path: str | Path, fmt: str | None = None) -> Graph:
    """Parse an ontology file (RDF/XML, Turtle, ... by extension or `fmt`).

    Raises:
        InputMemoryError: memory ran out while reading (names the file, and the
            line when known).
    """
    try:
        return _graph(Path(path), fmt)
    except InputMemoryError:
        raise
    except MemoryError:
        raise InputMemoryError(str(path)) from None


def _graph(path: Path, fmt: str | None) -> Graph:
    rdf_format = format_of(path, fmt)
    if rdf_format is None:
        raise ParseError(
            f"{path}: not an RDF file (expected one of {', '.join(sorted(FORMATS))}, "
            "by extension .owl .rdf .ttl .nt ...)"
        )
    data = _read_bytes(path)
    text = data.decode("utf-8", errors="replace")
    if rdf_format == "rdfxml":  # entity expansion and nesting bounded before the parser sees it
        check_xml(data, str(path))
    parse = Parse(io.BytesIO(data), FORMATS[rdf_format].ox, str(path), base_iri=path.resolve().as_uri())
    try:
        triples = [(_term(q.subject), q.predicate.value, _term(q.object)) for q in parse]
        prefixes = parse.prefixes
    except MemoryError:
        raise InputMemoryError(str(path), parse.line()) from None
    except SyntaxError as exc:
        raise syntax_error(exc, data, rdf_format, str(path)) from None
    except ParseError as exc:
        if exc.pos is not None:
            raise
        raise ParseError(f"{path}: {exc.message}") from None
    if rdf_format == "rdfxml":
        prefixes = {**_xml_prefixes(text, path.name.split(".")[0]), **prefixes}
    return Graph(path, text, triples, prefixes)
