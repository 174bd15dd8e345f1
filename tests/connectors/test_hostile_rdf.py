"""Hostile and careless RDF input, through every door that reads it (connectors.rdf_guard).

Each input either loads correctly or ends in one `fluxmat: error:` line naming the file
(with line and column where the parser knows them) and what was wrong: never a traceback,
a hang, a network access or memory without bound. In the streaming job such a message is a
dead letter and the batch goes on. Inputs are generated; bounds are lowered in-process
(`MAX_STATEMENT_BYTES`) so that they are hit with kilobytes, and hit once for real with a
17 MiB line through the command line.
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.connectors import rdf_guard
from fluxmat.connectors.owl import read_graph
from fluxmat.connectors.owl2rl import translate
from fluxmat.connectors.rdf import BNODE, read_rdf
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.connectors.xml_guard import MAX_XML_DEPTH
from fluxmat.engine import Reasoner
from fluxmat.engine.errors import ParseError
from fluxmat.engine.syntax import Iri
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters

ROOT = Path(__file__).resolve().parent.parent.parent
P = "@prefix : <http://e/> .\n"
XML_HEAD = ('<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
            'xmlns:ex="http://e/">\n')  # fmt: skip
FORMAT_OF = {
    ".nt": "ntriples",
    ".nq": "nquads",
    ".ttl": "turtle",
    ".trig": "trig",
    ".rdf": "rdfxml",
}


def fluxmat(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def one_error(r: subprocess.CompletedProcess, path: Path, what: str) -> str:
    """The run failed with exactly one `fluxmat: error: PATH...` line containing `what`."""
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fluxmat: error: {path}"), r.stderr[-2000:]
    assert what in lines[0], lines[0]
    assert lines[0].isprintable(), repr(lines[0])
    return lines[0]


def refused(path: Path, fmt: str, what: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        read_rdf(path, fmt)
    assert what in str(info.value), str(info.value)
    assert str(info.value).startswith(str(path)), str(info.value)
    return info.value


@pytest.fixture
def program(tmp_path):
    p = tmp_path / "p.dl"
    p.write_text("@prefix e: <http://e/> .\nq(X) :- e:p[X, Y] .\n")
    return p


# ---------------------------------------------------------------- deep nesting


def test_turtle_nested_blank_nodes_and_collections_20000_deep_load_correctly(tmp_path):
    n = 20_000
    nested = tmp_path / "nested.ttl"
    nested.write_text(P + ":a :p " + "[ :p " * n + ":b" + " ]" * n + " .\n")
    facts = read_rdf(nested, "turtle")
    succ = {s: o for _, s, o in facts}
    node, steps = Iri("http://e/a"), 0
    while node in succ:
        node, steps = succ[node], steps + 1
    assert len(facts) == len(succ) == n + 1 and (node, steps) == (Iri("http://e/b"), n + 1)
    lists = tmp_path / "lists.trig"
    lists.write_text(P + "{ :a :p " + "( " * n + ":b" + " )" * n + " . }\n")
    facts = read_rdf(lists, "trig")
    assert len(facts) == 2 * n + 1  # rdf:first and rdf:rest of every list, and :a :p the outer one


def test_nesting_beyond_the_statement_bound_is_refused_where_reading_stopped(tmp_path, monkeypatch):
    """What the parser holds before a nested statement completes is bounded (here lowered to 64 KiB)."""
    monkeypatch.setattr(rdf_guard, "MAX_STATEMENT_BYTES", 1 << 16)
    path = tmp_path / "deep.ttl"
    path.write_text(P + ":ok :p :fine .\n:a :p " + "[ :p " * 20_000 + ":b" + " ]" * 20_000 + " .\n")
    err = refused(path, "turtle", "more than 65,536 bytes without a complete triple")
    assert err.pos.line == 3 and err.pos.col > 65_536


def xml_nested(depth: int) -> str:
    """RDF/XML whose elements nest `depth` deep (odd: rdf:RDF, a node, pairs of property and node, a leaf)."""
    inner = (depth - 3) // 2
    return (XML_HEAD + '<rdf:Description rdf:about="http://e/a">' + "<ex:p><rdf:Description>" * inner
            + "<ex:q>x</ex:q>" + "</rdf:Description></ex:p>" * inner + "</rdf:Description>\n</rdf:RDF>\n")  # fmt: skip


def test_rdfxml_nested_deeper_than_the_bound_is_refused_at_the_first_element_too_deep(tmp_path):
    """The RDF/XML parser's time per element grows with depth: 100,000 deep took many minutes."""
    ok = tmp_path / "ok.rdf"
    ok.write_text(xml_nested(MAX_XML_DEPTH - 1))
    assert len(read_rdf(ok, "rdfxml")) == MAX_XML_DEPTH // 2 - 1  # 255 deep: loads
    deep = tmp_path / "deep.rdf"
    deep.write_text(xml_nested(1_001))  # 100,000 deep kept the parser busy for many minutes
    err = refused(deep, "rdfxml", f"elements nested more than {MAX_XML_DEPTH} deep")
    line = deep.read_text().splitlines()[err.pos.line - 1]
    # the first element too deep: rdf:RDF on line 2, then MAX_XML_DEPTH - 1 start tags on line 3 before it
    assert (
        err.pos.line == 3
        and line[err.pos.col - 1] == "<"
        and line[: err.pos.col - 1].count("<") == MAX_XML_DEPTH - 1
    )
    with pytest.raises(ParseError, match="nested more than"):
        read_graph(deep)


def test_an_ontology_nested_deep_costs_linear_work_to_place_its_warnings(tmp_path):
    """Graph.anchor (the IRI a blank node belongs to) walked the whole owner chain each time: O(n^2)."""
    n = 3_000
    path = tmp_path / "deep.ttl"
    path.write_text(P + ":a :p " + "[ :p " * n + ":b" + " ]" * n + " .\n")
    g = read_graph(path)

    class Counting(dict):
        steps = 0

        def __getitem__(self, key):
            Counting.steps += 1
            return super().__getitem__(key)

    g.owner = Counting(g.owner)
    bnodes = [o for _, _, o in g.triples if isinstance(o, str) and o.startswith("_:")]
    assert len(bnodes) == n and all(g.anchor(b) == "http://e/a" for b in reversed(bnodes))
    assert Counting.steps <= 2 * n
    assert len(translate(path).facts) == n + 1


# ---------------------------------------------------------------- huge terms and lines


@pytest.mark.parametrize("suffix", [".nt", ".nq", ".ttl", ".trig", ".rdf"])
@pytest.mark.parametrize("what", ["literal", "iri"])
def test_a_term_beyond_the_statement_bound_is_refused_in_every_format(
    tmp_path, monkeypatch, suffix, what
):
    monkeypatch.setattr(rdf_guard, "MAX_STATEMENT_BYTES", 1 << 16)
    big = "x" * (1 << 17)
    if suffix == ".rdf":
        body = (f'<rdf:Description rdf:about="http://e/{big}"/>' if what == "iri"
                else f'<rdf:Description rdf:about="http://e/a"><ex:p>{big}</ex:p></rdf:Description>')  # fmt: skip
        text = XML_HEAD + body + "\n</rdf:RDF>\n"
    else:
        term = f"<http://e/{big}>" if what == "iri" else f'"{big}"'
        triple = f"<http://e/a> <http://e/p> {term} ."
        text = f"{{ {triple} }}\n" if suffix == ".trig" else triple + "\n"
    path = tmp_path / f"big{suffix}"
    path.write_text(
        "<http://e/ok> <http://e/p> <http://e/b> .\n" * 3 + text
        if suffix in (".nt", ".nq")
        else text
    )
    refused(path, FORMAT_OF[suffix], "more than 65,536 bytes without a complete triple")


def test_a_17_mib_line_ends_in_one_error_line_through_the_command_line(tmp_path, program):
    """The real bound (16 MiB): pyoxigraph's own buffer limit, once a misleading 'out of memory'."""
    path = tmp_path / "huge.nt"
    path.write_bytes(b'<http://e/a> <http://e/p> "' + b"x" * (17 << 20) + b'" .\n')
    line = one_error(fluxmat("materialise", str(program), "--facts", str(path)), path,
                     "more than 16,777,216 bytes without a complete triple")  # fmt: skip
    assert line.startswith(f"fluxmat: error: {path}:1:")


def test_a_gzip_bomb_is_stopped_by_the_statement_bound_and_an_ontology_by_its_size_bound(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(rdf_guard, "MAX_STATEMENT_BYTES", 1 << 16)
    bomb = tmp_path / "bomb.nt.gz"
    bomb.write_bytes(gzip.compress(b"#" * (8 << 20)))  # 8 KiB that expand to 8 MiB of one comment
    refused(bomb, "ntriples", "without a complete triple")
    from fluxmat.connectors import owl

    monkeypatch.setattr(owl, "MAX_ONTOLOGY_BYTES", 1 << 20)
    with pytest.raises(ParseError, match="decompresses to more than 1,048,576 bytes"):
        read_graph(bomb)


def test_a_truncated_or_corrupt_gzip_is_an_error_not_the_triples_read_so_far(tmp_path):
    data = gzip.compress(
        "".join(f"<http://e/a{i}> <http://e/p> <http://e/b> .\n" for i in range(50_000)).encode()
    )
    cut = tmp_path / "cut.nt.gz"
    cut.write_bytes(data[: len(data) // 2])
    refused(cut, "ntriples", "cannot read: Compressed file ended")
    plain = tmp_path / "plain.nt.gz"
    plain.write_bytes(b"<http://e/a> <http://e/p> <http://e/b> .\n")
    refused(plain, "ntriples", "cannot read: Not a gzipped file")
    with pytest.raises(ParseError, match=f"^{plain}: cannot read"):
        read_graph(plain)


def test_a_million_blank_nodes_stay_distinct_and_scoped_to_their_file(tmp_path):
    n = 50_000  # a million take a minute or more; the mapping is the same
    path = tmp_path / "bnodes.nt"
    path.write_text("".join(f"_:b{i} <http://e/p> _:c{i} .\n" for i in range(n)))
    facts = read_rdf(path, "ntriples")
    nodes = {f[1] for f in facts} | {f[2] for f in facts}
    assert len(facts) == n and len(nodes) == 2 * n
    assert all(v.value.startswith(BNODE) for v in nodes)


# ---------------------------------------------------------------- bytes that are not RDF text


@pytest.mark.parametrize("suffix", [".nt", ".ttl", ".rdf"])
def test_invalid_utf8_is_refused_at_its_line_and_column(tmp_path, suffix):
    path = tmp_path / f"latin1{suffix}"
    if suffix == ".rdf":
        path.write_bytes(XML_HEAD.encode() + b'<rdf:Description rdf:about="http://e/a"><ex:p>caf\xe9</ex:p>'
                         b"</rdf:Description>\n</rdf:RDF>\n")  # fmt: skip
    else:
        path.write_bytes(
            b'<http://e/a> <http://e/p> "ok" .\n<http://e/a> <http://e/p> "caf\xe9" .\n'
        )
    err = refused(path, FORMAT_OF[suffix], "UTF-8")
    assert err.pos is not None and err.pos.line in (2, 3)


def test_nul_bytes_and_binary_files_give_one_printable_error_line(tmp_path, program):
    nul = tmp_path / "nul.nt"
    nul.write_bytes(
        b'<http://e/a> <http://e/p> "a\x00b" .\n<http://e/a\x00> <http://e/p> <http://e/b> .\n'
    )
    line = one_error(fluxmat("materialise", str(program), "--facts", str(nul)), nul, "\\x00")
    assert line.startswith(f"fluxmat: error: {nul}:2:1:")
    binary = tmp_path / "binary.ttl"
    binary.write_bytes(bytes(range(256)) * 64)
    one_error(fluxmat("materialise", "--ontology", str(binary)), binary, "")
    assert rdf_guard.printable("a\x00b\ufeff\x1b[31m") == "a\\x00b\\ufeff\\x1b[31m"


@pytest.mark.parametrize("suffix", [".nt", ".ttl", ".rdf"])
def test_a_byte_order_mark_is_skipped(tmp_path, suffix):
    path = tmp_path / f"bom{suffix}"
    body = {".nt": "<http://e/a> <http://e/p> <http://e/b> .\n", ".ttl": P + ":a :p :b .\n",
            ".rdf": XML_HEAD + '<rdf:Description rdf:about="http://e/a"><ex:p rdf:resource="http://e/b"/>'
            "</rdf:Description>\n</rdf:RDF>\n"}[suffix]  # fmt: skip
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert read_rdf(path, FORMAT_OF[suffix]) == [
        ("http://e/p", Iri("http://e/a"), Iri("http://e/b"))
    ]
    assert len(read_graph(path).triples) == 1


# ---------------------------------------------------------------- IRIs: @base, prefixes, remote documents


def test_base_and_prefix_tricks_resolve_as_turtle_says(tmp_path):
    path = tmp_path / "base.ttl"
    path.write_text("<rel> <http://e/p> <x> .\n@base <http://e/d/> .\n<a> <p> <b> .\n@base <../up/> .\n"
                    "<c> <p> <d> .\n@prefix : <http://e/one/> .\n@prefix : <http://e/two/> .\n:e :p :f .\n")  # fmt: skip
    facts = read_rdf(path, "turtle")
    assert facts[0] == ("http://e/p", Iri(path.resolve().parent.as_uri() + "/rel"),
                        Iri(path.resolve().parent.as_uri() + "/x"))  # fmt: skip
    assert facts[1:] == [("http://e/d/p", Iri("http://e/d/a"), Iri("http://e/d/b")),
                         ("http://e/up/p", Iri("http://e/up/c"), Iri("http://e/up/d")),
                         ("http://e/two/p", Iri("http://e/two/e"), Iri("http://e/two/f"))]  # fmt: skip
    undefined = tmp_path / "undefined.ttl"
    undefined.write_text(P + ":a :p x:b .\n")
    err = refused(undefined, "turtle", "x: has not been declared")
    assert (err.pos.line, err.pos.col) == (2, 7)


def test_nothing_named_by_the_input_is_fetched(tmp_path, program):
    """JSON-LD is not an input format (its remote @context would be fetched); XML external entities are refused."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/context.jsonld"
    try:
        jsonld = tmp_path / "data.jsonld"
        jsonld.write_text(json.dumps({"@context": url, "@id": "http://e/a", "p": "x"}))
        one_error(fluxmat("materialise", str(program), "--facts", str(jsonld)), jsonld, "")
        r = fluxmat("materialise", str(program), "--facts", str(jsonld), "--facts-format", "jsonld")
        assert r.returncode == 2 and "invalid choice: 'jsonld'" in r.stderr
        xml = tmp_path / "external.rdf"
        xml.write_text(f'<?xml version="1.0"?>\n<!DOCTYPE rdf:RDF [<!ENTITY x SYSTEM "{url}">]>\n{XML_HEAD}'
                       "<ex:A rdf:about=\"http://e/a\"><ex:p>&x;</ex:p></ex:A></rdf:RDF>\n")  # fmt: skip
        one_error(
            fluxmat("materialise", str(program), "--facts", str(xml)), xml, "external entities"
        )
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


# ---------------------------------------------------------------- RDF-star and every door


def test_rdf_star_is_an_error_in_an_ontology_too(tmp_path, program):
    path = tmp_path / "star.ttl"
    path.write_text(P + "<< :a :p :b >> :q :c .\n")
    one_error(fluxmat("owl2rl", str(path)), path, "RDF-star quoted triples are not supported")


@pytest.mark.parametrize("door", ["facts", "ontology", "owl2rl", "sparql"])
def test_each_door_refuses_a_hostile_file_with_one_line(tmp_path, program, door):
    path = tmp_path / "deep.rdf"
    path.write_text(xml_nested(2 * MAX_XML_DEPTH))
    args = {"facts": ["materialise", str(program), "--facts", str(path)],
            "ontology": ["materialise", "--ontology", str(path)],
            "owl2rl": ["owl2rl", str(path)],
            "sparql": ["sparql", str(program), "SELECT * WHERE { ?s ?p ?o }", "--facts", str(path)]}[door]  # fmt: skip
    one_error(fluxmat(*args), path, f"elements nested more than {MAX_XML_DEPTH} deep")


def test_hostile_rdf_update_messages_are_dead_letters_and_the_job_goes_on():
    pub = DeadLetters()
    p = BatchProcessor(Reasoner.from_text("q(X) :- p(X).", "fd-counting"), MemoryStateStore(), pub)
    p.start([])
    t = "<http://e/a> <http://e/p> <http://e/b> ."
    messages = [
        {"format": "ntriples", "add": '<http://e/a> <http://e/p> "\ud800" .'},  # a lone surrogate
        {"format": "ntriples", "add": "<http://e/a\u0000> <http://e/p> <http://e/b> ."},
        {"format": "nquads", "add": f"<< {t[:-2]} >> <http://e/p> <http://e/b> ."},
        {"format": "ntriples", "add": "\ufeff" + t},  # a BOM: skipped
        {"add": [["p", "c"]]},
    ]
    rows = [(0, i, None, json.dumps(m), 0) for i, m in enumerate(messages)]
    out = p.process(0, rows)
    reasons = {offset: reason for reason, offset in pub.dead}
    assert out.dead == 3 and sorted(reasons) == [0, 1, 2], reasons
    assert (
        reasons[0]
        == "partition 0 offset 0: add: not valid Unicode text: \\ud800 (a lone surrogate) at character 28"
    )
    assert (
        reasons[1].startswith("partition 0 offset 1: add: line 1, column 1:")
        and "'\\x00'" in reasons[1]
    )
    assert all(r.isprintable() for r in reasons.values())
    assert ("http://e/p", Iri("http://e/a"), Iri("http://e/b")) in p.facts() and (
        "q",
        "c",
    ) in p.facts()


def test_a_sparql_query_nested_too_deep_is_refused_at_its_first_bracket_too_deep(tmp_path, program):
    """5,000 nested groups overflowed the query parser's stack: 'ended without an answer'."""
    from fluxmat.connectors.sparql import MAX_NESTING, SparqlError, TripleStore

    store = TripleStore([("http://e/p", Iri("http://e/a"), Iri("http://e/b"))])
    ok = "SELECT * WHERE " + "{" * 200 + "?s ?p ?o" + "}" * 200
    assert store.answer(ok).count == 1
    assert (
        store.answer('SELECT * WHERE { ?s ?p ?o FILTER(?o != "' + "(" * 5000 + '") }').count == 1
    )  # in a string
    deep = "SELECT * WHERE " + "{" * 5000 + "?s ?p ?o" + "}" * 5000
    with pytest.raises(
        SparqlError, match=f"^<query>:1:{16 + MAX_NESTING}: brackets nested more than"
    ):
        store.answer(deep)
    facts = tmp_path / "one.nt"
    facts.write_text("<http://e/a> <http://e/p> <http://e/b> .\n")
    query = tmp_path / "deep.rq"
    query.write_text(deep)
    one_error(
        fluxmat("sparql", str(program), str(query), "--facts", str(facts)),
        query,
        "brackets nested more than",
    )
