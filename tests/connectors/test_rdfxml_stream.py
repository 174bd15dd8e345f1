"""RDF/XML facts are read as a stream: the file is never held in memory whole.

The entity and nesting checks (connectors.xml_guard) read the file a chunk at a
time, then the parser reads it again; memory for reading is a chunk and the
DOCTYPE, not the file. An entity reference cut in two by a chunk boundary is
still counted.
"""

from __future__ import annotations

import tracemalloc

import pytest

from fluxmat.connectors.rdf import read_rdf
from fluxmat.connectors.xml_guard import CHUNK, MAX_ENTITY_CHARS, MAX_EXPANDED_CHARS, check_xml
from fluxmat.engine.errors import ParseError

HEAD = ('<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        'xmlns:ex="http://example.org/ns#">\n')  # fmt: skip
TRIPLE = '<rdf:Description rdf:about="http://example.org/a"><ex:p rdf:resource="http://example.org/b"/>' \
         "</rdf:Description>\n"  # fmt: skip


def test_an_rdfxml_file_is_read_without_holding_it_whole(tmp_path):
    path = tmp_path / "big.rdf"
    padding = "<!--" + "x" * 2000 + "-->\n"  # 2 KB between triples: the file is large, its facts are few
    n = 8000
    path.write_text(HEAD + (TRIPLE + padding) * n + "</rdf:RDF>\n", encoding="utf-8")
    size = path.stat().st_size
    tracemalloc.start()
    try:
        facts = read_rdf(path, "rdfxml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(facts) == n
    assert size > 16 * 2**20
    assert peak < size / 8, f"peak {peak:,} bytes for a file of {size:,}"


def with_entity(refs_before: int) -> tuple[bytes, int]:
    """A document whose last reference `&big;` is cut by a chunk boundary; its offset."""
    value = "y" * (MAX_ENTITY_CHARS - 10)
    head = (f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [\n<!ENTITY big "{value}">\n]>\n'
            '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://example.org/ns#">\n'
            '<rdf:Description rdf:about="http://example.org/a">\n').encode()  # fmt: skip
    body = head + b"<ex:p>&big;</ex:p>\n" * refs_before
    boundary = (len(body) // CHUNK + 2) * CHUNK
    body += b" " * (boundary - 3 - len(body) - len(b"<ex:p>"))  # `&bi` | `g;` across the boundary
    offset = len(body) + len(b"<ex:p>")
    return body + b"<ex:p>&big;</ex:p>\n</rdf:Description>\n</rdf:RDF>\n", offset


def test_an_entity_reference_across_a_chunk_boundary_is_counted():
    refs = MAX_EXPANDED_CHARS // (MAX_ENTITY_CHARS - 10)  # this many stay within the bound
    fits, _ = with_entity(refs - 1)
    check_xml(fits, "fits.rdf")
    over, offset = with_entity(refs)
    assert over[offset : offset + 5] == b"&big;"
    assert (offset + 3) % CHUNK == 0  # the chunk ends inside the reference
    with pytest.raises(ParseError, match="entity references expand to more than") as err:
        check_xml(over, "over.rdf")
    line = over.count(b"\n", 0, offset) + 1
    col = offset - over.rfind(b"\n", 0, offset)
    assert (err.value.pos.line, err.value.pos.col) == (line, col)
