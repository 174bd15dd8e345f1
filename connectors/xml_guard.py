"""Bounds on XML entity expansion, checked before an RDF/XML text reaches the parser.

An RDF/XML file may declare internal entities in its DOCTYPE (`<!ENTITY owl
"http://www.w3.org/2002/07/owl#">`, as many OWL files do). Nested entities make a
kilobyte expand to gigabytes ("billion laughs"), and the parser would try to hold all
of it. So, before parsing:

* each entity's expanded length is computed (without expanding anything) and must stay
  within `MAX_ENTITY_CHARS`; an entity that refers to itself, directly or not, is refused;
* the whole document's expansion (every `&name;` reference times its entity's length)
  must stay within `MAX_EXPANDED_CHARS`;
* external entities (`SYSTEM` / `PUBLIC`) and parameter entities (`<!ENTITY % ...>`)
  are refused: a reasoner has no business fetching files named by its input.

A refusal is a `ParseError` naming the source, the line and column of the declaration
(or of the DOCTYPE), and the limit. Documents without a DOCTYPE pass unchanged.

Nesting is bounded too: the RDF/XML parser's time per element grows with the depth of
the element, so a document nested 100,000 elements deep (5 MB) kept it busy for many
minutes. Elements deeper than `MAX_XML_DEPTH` are refused with the line and column of
the first one (the bound libxml2 applies by default).

`check_xml_stream` applies both checks in one pass over a stream (the file is then read
again by the parser): the DOCTYPE is held whole (at most `MAX_DOCTYPE_BYTES`), the rest
of the document a chunk at a time, counted with a regular expression and followed by
expat (no entity is fetched), so a large file is never held in memory.
"""

from __future__ import annotations

import io
import re
import xml.parsers.expat

from fluxmat.engine.errors import ParseError
from fluxmat.engine.syntax import Pos

MAX_ENTITY_CHARS = 1 << 20  # 1 MiB of text for one entity
MAX_EXPANDED_CHARS = 1 << 24  # 16 MiB of text from all entity references of a document
MAX_XML_DEPTH = 256  # elements nested in each other
MAX_DOCTYPE_BYTES = 1 << 24  # 16 MiB: the DOCTYPE is held whole while it is checked
CHUNK = 1 << 16

_DOCTYPE = re.compile(rb"<!DOCTYPE\b")
_DECL = re.compile(
    rb"<!ENTITY\s+(%\s+)?([^\s%\"'>]+)\s+(?:\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC)\b)"
)
_ANY_DECL = re.compile(rb"<!ENTITY\b")
_REF = re.compile(rb"&([A-Za-z_:][-A-Za-z0-9._:]*);")
_ELEMENT = re.compile(rb"<[^?!/]")


def _pos(data: bytes, offset: int, source: str) -> Pos:
    line = data.count(b"\n", 0, offset) + 1
    return Pos(source, line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1)


def _subset(data: bytes) -> tuple[int, int] | None:
    """Start and end offsets of the DOCTYPE's internal subset (`[...]`), or None."""
    m = _DOCTYPE.search(data)
    if m is None:
        return None
    open_ = data.find(b"[", m.end())
    close = data.find(b">", m.end())
    if open_ < 0 or (0 <= close < open_):
        return None
    end = data.find(b"]", open_)
    return (open_, end if end >= 0 else len(data))


def _declarations(data: bytes, start: int, end: int, source: str) -> dict[str, tuple[bytes, int]]:
    """Entity name -> (replacement text, offset of its declaration)."""
    found: dict[str, tuple[bytes, int]] = {}
    for any_decl in _ANY_DECL.finditer(data, start, end):
        m = _DECL.match(data, any_decl.start())
        where = _pos(data, any_decl.start(), source)
        if m is None:
            raise ParseError("malformed entity declaration in the DOCTYPE", where)
        if m.group(1) or m.group(5):
            kind = "parameter" if m.group(1) else "external"
            raise ParseError(f"{kind} entities are not supported in RDF/XML "
                             f"(<!ENTITY {m.group(2).decode(errors='replace')} ...>)", where)  # fmt: skip
        name = m.group(2).decode("utf-8", errors="replace")
        value = m.group(3) if m.group(3) is not None else m.group(4)
        found.setdefault(name, (value, any_decl.start()))  # XML: the first declaration wins
    return found


def _lengths(decls: dict[str, tuple[bytes, int]], data: bytes, source: str) -> dict[str, int]:
    """Each entity's expanded length, computed iteratively; refuses cycles and the limit."""
    lengths: dict[str, int] = {}
    for root in decls:
        stack, active = [root], {root}
        while stack:
            name = stack[-1]
            value, offset = decls[name]
            refs = [r.decode("utf-8", errors="replace") for r in _REF.findall(value)]
            missing = [r for r in refs if r in decls and r not in lengths]
            cyclic = [r for r in missing if r in active]
            if cyclic:
                raise ParseError(f"entity '{name}' refers to itself (through '{cyclic[0]}')",
                                 _pos(data, offset, source))  # fmt: skip
            if missing:
                stack.append(missing[0])
                active.add(missing[0])
                continue
            total = len(value) + sum(lengths.get(r, 0) - len(r) - 2 for r in refs if r in decls)
            if total > MAX_ENTITY_CHARS:
                raise ParseError(f"entity '{name}' expands to {total:,} characters, more than the "
                                 f"limit of {MAX_ENTITY_CHARS:,}", _pos(data, offset, source))  # fmt: skip
            lengths[name] = total
            stack.pop()
            active.discard(name)
    return lengths


class _TooDeep(Exception):
    def __init__(self, line: int, col: int):
        self.line, self.col = line, col


class _Guard:
    """Both bounds over a stream: the DOCTYPE is read whole, the rest a chunk at a time.

    The head (up to the end of the DOCTYPE's internal subset, or to the first element
    when there is none) is checked as a whole; after it, entity references are counted
    and nesting is tracked by expat chunk by chunk, so memory is bounded by the head
    (at most `MAX_DOCTYPE_BYTES`) and a chunk, not by the document.
    """

    def __init__(self, source: str, limit: int):
        self.source, self.limit = source, limit
        self.lengths: dict[str, int] = {}
        self.longest = 0  # the longest entity name
        self.expanded = 0
        # the buffer's first byte: its offset, the newlines before it, where its line starts
        self.offset = self.lines = self.line_start = 0
        self.carry = b""  # an unfinished `&name` at a chunk's end
        self.depth = 0
        self.expat: xml.parsers.expat.XMLParserType | None = xml.parsers.expat.ParserCreate()
        self.expat.StartElementHandler, self.expat.EndElementHandler = self._start, self._end

    def _start(self, name, attrs) -> None:
        self.depth += 1
        if self.depth > self.limit:
            raise _TooDeep(self.expat.CurrentLineNumber, self.expat.CurrentColumnNumber + 1)

    def _end(self, name) -> None:
        self.depth -= 1

    def head(self, data: bytes) -> int:
        """Check the DOCTYPE's entities in `data` (the head); where counting references starts."""
        subset = _subset(data)
        if subset is None:
            return 0
        decls = _declarations(data, *subset, self.source)
        if decls:
            self.lengths = _lengths(decls, data, self.source)
            self.longest = max(len(name.encode("utf-8")) for name in self.lengths)
        return subset[1]

    def _at(self, buf: bytes, offset: int) -> Pos:
        nl = buf.rfind(b"\n", 0, offset)
        col = offset - nl if nl >= 0 else self.offset + offset - self.line_start + 1
        return Pos(self.source, self.lines + buf.count(b"\n", 0, offset) + 1, col)

    def count(self, buf: bytes, start: int, final: bool) -> None:
        """Count the references in `buf` (from `start`); keep an unfinished one for the next chunk."""
        amp = buf.rfind(b"&", start)
        end = len(buf)
        if (
            not final
            and self.lengths
            and amp >= 0
            and b";" not in buf[amp:]
            and end - amp <= self.longest + 2
        ):
            end = amp
        if self.lengths:
            for m in _REF.finditer(buf, start, end):
                self.expanded += self.lengths.get(m.group(1).decode("utf-8", errors="replace"), 0)
                if self.expanded > MAX_EXPANDED_CHARS:
                    raise ParseError(f"entity references expand to more than {MAX_EXPANDED_CHARS:,} "
                                     "characters", self._at(buf, m.start()))  # fmt: skip
        self.carry = buf[end:]
        self._nest(buf[:end], final)
        nl = buf.rfind(b"\n", 0, end)
        if nl >= 0:
            self.line_start = self.offset + nl + 1
        self.lines += buf.count(b"\n", 0, end)
        self.offset += end

    def _nest(self, piece: bytes, final: bool) -> None:
        if self.expat is None:
            return
        try:
            self.expat.Parse(piece, final)
        except xml.parsers.expat.ExpatError:
            self.expat = None  # not well-formed: the RDF/XML parser says where
        except _TooDeep as deep:
            where = Pos(self.source, deep.line, deep.col)
            raise ParseError(f"elements nested more than {self.limit} deep", where) from None


def _head_complete(head: bytes) -> bool:
    """Whether `head` holds the whole DOCTYPE (or shows there is none before the first element)."""
    m = _DOCTYPE.search(head)
    if m is None:
        return _ELEMENT.search(head) is not None
    close, open_ = head.find(b">", m.end()), head.find(b"[", m.end())
    if open_ < 0 or 0 <= close < open_:
        return close >= 0
    return head.find(b"]", open_) >= 0


def _read_head(stream, source: str) -> bytes:
    head = bytearray()
    while not _head_complete(head):
        chunk = stream.read(CHUNK)
        if not chunk:
            break
        head += chunk
        if len(head) > MAX_DOCTYPE_BYTES:
            raise ParseError(
                f"the DOCTYPE is longer than {MAX_DOCTYPE_BYTES:,} bytes", Pos(source, 1, 1)
            )
    return bytes(head)


def check_xml_stream(stream, source: str, limit: int = MAX_XML_DEPTH) -> None:
    """Raise ParseError when the XML read from the binary `stream` breaks a bound above.

    Reads the stream to its end, holding the DOCTYPE and one chunk at a time.
    """
    guard = _Guard(source, limit)
    buf = _read_head(stream, source)
    start = guard.head(buf)
    while True:
        chunk = stream.read(CHUNK)
        guard.count(buf, start, final=not chunk)
        if not chunk:
            return
        buf, start = guard.carry + chunk, 0


def check_xml(data: bytes, source: str) -> None:
    """Both bounds (entity expansion and nesting depth) over the XML text `data`."""
    check_xml_stream(io.BytesIO(data), source)
