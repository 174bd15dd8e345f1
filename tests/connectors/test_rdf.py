"""RDF in and out: golden files in every format, round trips, literals, and format errors.

* `tests/rdf/people.*` hold one graph in Turtle, N-Triples, N-Quads (two named
  graphs), TriG, RDF/XML and gzip-compressed N-Triples; `people.dlog` (RDFox
  syntax) runs over each, and the result must be `people.expected.nt` (worked
  out by hand) as a graph -- blank nodes compared up to renaming, literals
  with their datatypes and language tags exactly -- plus the two facts that are
  not triples as comments (`people.expected.other`).
* Round trip (hypothesis): a random graph written by pyoxigraph in a random
  format, read into facts and written back as N-Triples, is the same graph;
  the facts also survive program syntax and the JSON wire form.
* Every format error is one `fluxmat: error:` line naming file:line:column.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.files import read_facts, read_updates
from fluxmat.connectors.rdf import read_rdf, write_rdf
from fluxmat.engine import fact_from_json, parse_facts
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import RdfLiteral
from fluxmat.engine.wire import json_value
from fluxmat.ops.cli import main
from tests.support.gen import examples

ROOT = Path(__file__).resolve().parent.parent.parent
RDF_DIR = Path(__file__).parent.parent / "rdf"
PEOPLE = ["people.ttl", "people.nt", "people.nq", "people.trig", "people.rdf", "people.nt.gz"]
XSD = "http://www.w3.org/2001/XMLSchema#"


def graph(data: bytes, fmt=ox.RdfFormat.N_TRIPLES) -> set[str]:
    """The triples of `data` (graph names dropped), blank nodes canonically renamed."""
    quads = [ox.Quad(q.subject, q.predicate, q.object) for q in ox.parse(data, fmt)]
    ds = ox.Dataset(quads)
    ds.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
    return {str(q) for q in ds}


def run_cli(capsysbinary, *args: str) -> tuple[int, bytes, str]:
    code = main(list(args))
    out, err = capsysbinary.readouterr()
    return code, out, err.decode("utf-8")


def one_error(*args: str, cwd: Path = ROOT) -> str:
    """Run the CLI as a user does; exactly one `fluxmat: error:` line, no traceback."""
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *args], cwd=cwd, capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("fluxmat: error: ")]
    assert len(errors) == 1, r.stderr
    return errors[0]


# ---------------------------------------------------------------- golden files


@pytest.mark.parametrize("name", PEOPLE)
def test_golden_materialisation_in_every_format(name, capsysbinary):
    """people.dlog over the same graph in every format gives the hand-checked result."""
    code, out, err = run_cli(capsysbinary, "materialise", str(RDF_DIR / "people.dlog"),
                             "--facts", str(RDF_DIR / name), "--format", "ntriples")  # fmt: skip
    assert code == 0, err
    text = out.decode("utf-8")
    comments = [ln for ln in text.splitlines() if ln.startswith("#")]
    assert comments == (RDF_DIR / "people.expected.other").read_text(encoding="utf-8").splitlines()
    assert graph(out) == graph((RDF_DIR / "people.expected.nt").read_bytes())
    assert "2 facts are not a triple" in err


def test_literals_are_written_back_exactly_as_read():
    """Datatype, lexical form and language tag survive: "05"^^xsd:int is not 5, "+70" stays."""
    facts = read_rdf(RDF_DIR / "people.ttl", "turtle")
    ages = {f[1].value.rsplit("/", 1)[-1]: f[2] for f in facts if f[0] == "http://example.org/age"}
    assert ages["ann"] == RdfLiteral("05", XSD + "int") and ages["ann"].key == 5
    assert ages["bob"] == 42 and type(ages["bob"]) is int  # canonical xsd:integer
    assert ages["cy"] == RdfLiteral("+70", XSD + "integer") and ages["cy"].key == 70
    body, others = write_rdf(facts, "ntriples")
    assert not others
    assert graph(body) == graph((RDF_DIR / "people.nt").read_bytes())
    assert b'"+70"^^<http://www.w3.org/2001/XMLSchema#integer>' in body


def test_rdf_type_is_a_unary_fact_and_other_triples_binary():
    facts = set(read_rdf(RDF_DIR / "people.nt", "ntriples"))
    assert ("http://example.org/Student", ox_iri("http://example.org/ann")) in facts
    assert ("http://example.org/parent", ox_iri("http://example.org/ann"),
            ox_iri("http://example.org/bob")) in facts  # fmt: skip
    assert not any(f[0].endswith("#type") for f in facts)


def ox_iri(value: str):
    from fluxmat.engine.syntax import Iri

    return Iri(value)


def test_blank_nodes_are_skolemised_per_file(tmp_path):
    """The same label in two files is two nodes; the same file read twice gives the same IRIs."""
    a, b = tmp_path / "a.nt", tmp_path / "b.nt"
    for p in (a, b):
        p.write_text('_:x <http://example.org/p> "v" .\n', encoding="utf-8")
    (fa,), (fb,) = read_rdf(a, "ntriples"), read_rdf(b, "ntriples")
    assert fa[1] != fb[1] and fa[1].value.startswith("urn:fluxmat:bnode:")
    assert read_rdf(a, "ntriples") == [fa]
    body, _ = write_rdf([fa], "ntriples")
    assert body.startswith(b"_:")  # written back as a blank node


@pytest.mark.parametrize("fmt", ["turtle", "nquads"])
def test_output_formats_read_back_as_the_same_graph(fmt, capsysbinary):
    args = ["materialise", str(RDF_DIR / "people.dlog"), "--facts", str(RDF_DIR / "people.ttl")]
    _, nt, _ = run_cli(capsysbinary, *args, "--format", "ntriples")
    code, out, _ = run_cli(capsysbinary, *args, "--format", fmt)
    assert code == 0
    kind = ox.RdfFormat.TURTLE if fmt == "turtle" else ox.RdfFormat.N_QUADS
    assert graph(out, kind) == graph(nt)


def test_facts_format_overrides_the_extension(tmp_path, capsysbinary):
    data = tmp_path / "people.data"
    shutil.copy(RDF_DIR / "people.ttl", data)
    args = ["materialise", str(RDF_DIR / "people.dlog"), "--format", "ntriples", "--facts", str(data)]
    code, out, _ = run_cli(capsysbinary, *args, "--facts-format", "turtle")
    assert code == 0 and graph(out) == graph((RDF_DIR / "people.expected.nt").read_bytes())
    line = one_error(*args)  # without the flag the file is read as program syntax
    assert re.match(r"fluxmat: error: \S+people\.data:\d+:\d+: ", line), line


def test_replay_takes_ntriples_updates(tmp_path, capsysbinary):
    """Update files carry RDF like messages do; deleting and re-adding literals works exactly."""
    updates = tmp_path / "u.jsonl"
    lines = [
        {"id": "u1", "format": "ntriples",
         "del": '<http://example.org/cy> <http://example.org/age> "+70"^^<http://www.w3.org/2001/XMLSchema#integer> .\n',
         "add": '<http://example.org/cy> <http://example.org/age> "12"^^<http://www.w3.org/2001/XMLSchema#int> .\n'
                "<http://example.org/dee> <http://example.org/parent> <http://example.org/ann> .\n"},
        {"id": "u2", "add": [["<http://example.org/age>", "<http://example.org/dee>",
                              {"@value": "19", "@type": XSD + "short"}]]},
    ]  # fmt: skip
    updates.write_text("".join(json.dumps(u) + "\n" for u in lines), encoding="utf-8")
    code, out, err = run_cli(capsysbinary, "replay", str(RDF_DIR / "people.dlog"), "--facts",
                             str(RDF_DIR / "people.ttl"), "--updates", str(updates),
                             "--format", "ntriples")  # fmt: skip
    assert code == 0, err
    text = out.decode("utf-8")
    ex = "http://example.org/"
    assert f"<{ex}cy> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{ex}Child> ." in text
    assert f"<{ex}cy> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{ex}Adult> ." not in text
    assert f'<{ex}dee> <{ex}ancestor> <{ex}cy> .' in text
    assert f'<{ex}dee> <{ex}age> "19"^^<{XSD}short> .' in text
    assert f'<{ex}cy> <{ex}nextAge> "13"^^<{XSD}integer> .' in text


# ---------------------------------------------------------------- round trips

_TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Co", "Cn"),
                              blacklist_characters="\ufffe\uffff") | st.sampled_from('\n\t"\\'),
                max_size=8)  # fmt: skip
_IRIS = st.sampled_from([f"http://example.org/{x}" for x in ("a", "b", "c", "knows", "age", "C", "ü")])
_INTEGER_TYPES = [XSD + t for t in ("integer", "int", "short", "nonNegativeInteger", "long")]


@st.composite
def _literal(draw):
    kind = draw(st.sampled_from(["plain", "lang", "int", "typed"]))
    if kind == "plain":
        return ox.Literal(draw(_TEXT))
    if kind == "lang":
        return ox.Literal(draw(_TEXT), language=draw(st.sampled_from(["en", "fr", "en-gb", "zh-hant"])))
    if kind == "int":
        sign = draw(st.sampled_from(["", "+", "-"]))
        digits = draw(st.from_regex(r"[0-9]{1,5}", fullmatch=True))
        return ox.Literal(sign + digits, datatype=ox.NamedNode(draw(st.sampled_from(_INTEGER_TYPES))))
    dt = draw(st.sampled_from([XSD + "decimal", XSD + "date", XSD + "boolean", "http://example.org/dt"]))
    return ox.Literal(draw(_TEXT), datatype=ox.NamedNode(dt))


_NODE = _IRIS.map(ox.NamedNode) | st.sampled_from(["b1", "b2"]).map(ox.BlankNode)
_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


@st.composite
def _triple(draw):
    p = draw(st.sampled_from(["http://example.org/knows", "http://example.org/age", _TYPE]))
    obj = draw(_NODE | _literal())
    return ox.Triple(draw(_NODE), ox.NamedNode(p), obj)


_OX = {"ntriples": ox.RdfFormat.N_TRIPLES, "nquads": ox.RdfFormat.N_QUADS, "turtle": ox.RdfFormat.TURTLE,
       "trig": ox.RdfFormat.TRIG, "rdfxml": ox.RdfFormat.RDF_XML}  # fmt: skip
_EXT = {"ntriples": "nt", "nquads": "nq", "turtle": "ttl", "trig": "trig", "rdfxml": "rdf"}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(triples=st.lists(_triple(), max_size=12), fmt=st.sampled_from(sorted(_OX)))
def test_round_trip_rdf_facts_rdf_is_the_same_graph(tmp_path, triples, fmt):
    """RDF in -> facts -> RDF out is the same graph, literals and datatypes included."""
    if fmt in ("nquads", "trig"):
        data = ox.serialize([ox.Quad(t.subject, t.predicate, t.object) for t in triples], format=_OX[fmt])
    else:
        data = ox.serialize(triples, format=_OX[fmt])
    if fmt == "rdfxml":  # XML normalises line ends and cannot hold every character
        assume(all("\r" not in str(t) for t in triples))
    path = tmp_path / f"g.{_EXT[fmt]}"
    path.write_bytes(data)
    facts = read_rdf(path, fmt)
    body, others = write_rdf(facts, "ntriples")
    assert others == []
    original = ox.serialize(triples, format=ox.RdfFormat.N_TRIPLES)
    assert graph(body) == graph(original)
    # the same facts through program syntax and the JSON wire form
    printed = "".join(line + "\n" for line in FactPrinter().lines(facts))
    assert sorted(map(repr, _facts(parse_facts(printed)))) == sorted(map(repr, facts))
    wire = [json.loads(json.dumps([f[0], *map(json_value, f[1:])])) for f in facts]
    assert sorted(map(repr, (_fact(fact_from_json(w, {})) for w in wire))) == sorted(map(repr, facts))


def _fact(atom):
    return (atom.pred, *(a.value for a in atom.args))


def _facts(atoms):
    return [_fact(a) for a in atoms]


def test_program_syntax_reads_typed_and_tagged_literals():
    (atom,) = parse_facts('@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n'
                          'p("05"^^xsd:int, "chat"@fr, "7"^^xsd:integer, "s"^^xsd:string).')  # fmt: skip
    assert [a.value for a in atom.args] == [RdfLiteral("05", XSD + "int"),
                                            RdfLiteral("chat", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr"),
                                            7, "s"]  # fmt: skip


# ---------------------------------------------------------------- errors

_POSITION = re.compile(r"^fluxmat: error: (\S+):(\d+):(\d+): ")


@pytest.mark.parametrize("name, text, line, col", [
    ("bad.nt", '<http://a> <http://b> <http://c> .\n<http://a> <http://b> "x .\n', 2, 23),
    ("bad.nq", "<http://a> <http://b> <http://c> <http://g> .\n<http://a> <http://b> .\n", 2, 23),
    ("bad.ttl", "@prefix ex: <http://e/> .\nex:a ex:b ex:c ;\n  ex:d ,, .\n", 3, 8),
    ("bad.trig", "@prefix ex: <http://e/> .\nex:g {\n ex:a ex:b }\n", 3, 12),
    ("bad.rdf", '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\n'
                ' <rdf:Description rdf:about="http://a">\n  <x\n', 3, 3),
    ("bad2.rdf", '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"\n'
                 '  xmlns:e="http://e/">\n <rdf:Description rdf:about="http://a b">\n'
                 '  <e:p>x</e:p></rdf:Description></rdf:RDF>\n', 3, 30),
])  # fmt: skip
def test_every_format_error_is_one_line_with_file_line_column(tmp_path, name, text, line, col):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    program = tmp_path / "p.dl"
    program.write_text("q(X) :- p(X).\n", encoding="utf-8")
    msg = one_error("materialise", str(program), "--facts", str(path))
    m = _POSITION.match(msg)
    assert m and m.group(1) == str(path), msg
    assert (int(m.group(2)), int(m.group(3))) == (line, col), msg


def test_update_errors_name_line_and_column_inside_the_message(tmp_path):
    program = tmp_path / "p.dl"
    program.write_text("q(X) :- p(X).\n", encoding="utf-8")
    updates = tmp_path / "u.jsonl"
    good = {"format": "ntriples", "add": "<http://a> <http://p> <http://b> .\n"}
    bad = {"format": "ntriples", "add": "<http://a> <http://p> <http://b> .\n<http://a> <p> <http://b> .\n"}
    updates.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    msg = one_error("replay", str(program), "--updates", str(updates))
    assert msg.startswith(f"fluxmat: error: {updates}:2: add: line 2, column 12: "), msg
    with pytest.raises(Exception, match="unknown update format 'turtle'"):
        list(read_updates(_write(tmp_path / "v.jsonl", {"format": "turtle", "add": ""}), {}))


def _write(path: Path, item) -> Path:
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    return path


def test_a_gzip_file_that_is_not_gzip_is_one_error(tmp_path):
    path = tmp_path / "data.nt.gz"
    path.write_bytes(b"<http://a> <http://b> <http://c> .\n")
    program = tmp_path / "p.dl"
    program.write_text("q(X) :- p(X).\n", encoding="utf-8")
    assert f"{path}: cannot read" in one_error("materialise", str(program), "--facts", str(path))


def test_read_facts_dispatches_by_extension():
    body, _ = write_rdf(read_facts(RDF_DIR / "people.nt.gz", {}), "ntriples")
    assert graph(body) == graph((RDF_DIR / "people.nt").read_bytes())
