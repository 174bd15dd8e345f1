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

Nesting is bounded too (`check_depth`): the RDF/XML parser's time per element grows with
the depth of the element, so a document nested 100,000 elements deep (5 MB) kept it busy
for many minutes. Elements deeper than `MAX_XML_DEPTH` are refused with the line and
column of the first one (the bound libxml2 applies by default). The check reads the
document once more with expat (no entity is fetched); a document with fewer start tags
than the bound is not read at all. `check_xml` applies both checks.
"""

from __future__ import annotations

import re
import xml.parsers.expat

from fluxmat.engine.errors import ParseError
from fluxmat.engine.syntax import Pos

MAX_ENTITY_CHARS = 1 << 20  # 1 MiB of text for one entity
MAX_EXPANDED_CHARS = 1 << 24  # 16 MiB of text from all entity references of a document
MAX_XML_DEPTH = 256  # elements nested in each other

_DOCTYPE = re.compile(rb"<!DOCTYPE\b")
_DECL = re.compile(rb"<!ENTITY\s+(%\s+)?([^\s%\"'>]+)\s+(?:\"([^\"]*)\"|'([^']*)'|(SYSTEM|PUBLIC)\b)")
_ANY_DECL = re.compile(rb"<!ENTITY\b")
_REF = re.compile(rb"&([A-Za-z_:][-A-Za-z0-9._:]*);")


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


def check_entities(data: bytes, source: str) -> None:
    """Raise ParseError when the XML text `data` declares entities beyond the bounds above."""
    subset = _subset(data)
    if subset is None:
        return
    decls = _declarations(data, *subset, source)
    if not decls:
        return
    lengths = _lengths(decls, data, source)
    expanded = 0
    for m in _REF.finditer(data, subset[1]):
        expanded += lengths.get(m.group(1).decode("utf-8", errors="replace"), 0)
        if expanded > MAX_EXPANDED_CHARS:
            raise ParseError(f"entity references expand to more than {MAX_EXPANDED_CHARS:,} "
                             "characters", _pos(data, m.start(), source))  # fmt: skip


class _TooDeep(Exception):
    def __init__(self, line: int, col: int):
        self.line, self.col = line, col


def check_depth(data: bytes, source: str, limit: int = MAX_XML_DEPTH) -> None:
    """Raise ParseError when elements of the XML text `data` nest deeper than `limit`."""
    if data.count(b"<") <= limit:
        return
    parser = xml.parsers.expat.ParserCreate()
    depth = 0

    def start(name, attrs) -> None:
        nonlocal depth
        depth += 1
        if depth > limit:
            raise _TooDeep(parser.CurrentLineNumber, parser.CurrentColumnNumber + 1)

    def end(name) -> None:
        nonlocal depth
        depth -= 1

    parser.StartElementHandler, parser.EndElementHandler = start, end
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError:
        return  # not well-formed: the RDF/XML parser says where
    except _TooDeep as deep:
        where = Pos(source, deep.line, deep.col)
        raise ParseError(f"elements nested more than {limit} deep", where) from None


def check_xml(data: bytes, source: str) -> None:
    """Both bounds: entity expansion, then nesting depth."""
    check_entities(data, source)
    check_depth(data, source)
