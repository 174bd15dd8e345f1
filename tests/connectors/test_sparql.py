"""SPARQL over the materialisation (connectors.sparql, `fluxmat sparql`, `/api/sparql`).

* Hand-checked answers over `tests/rdf/people.*` with `people.dlog`: derived
  classes and properties, literals with datatype and language, aggregates,
  ASK, CONSTRUCT, in SPARQL JSON and CSV (each read back with pyoxigraph's
  standard results parser).
* On LUBM: the answers of `fluxmat sparql --ontology univ-bench.owl` equal
  pyoxigraph's over the triples owlrl computes for the same data.
* Bounds: result limit (truncation reported), a timeout that kills the
  evaluation, SERVICE refused, updates refused, errors with file:line:column.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pyoxigraph as ox
import pytest

from fluxmat.connectors.sparql import Limits, SparqlError, TripleStore
from fluxmat.ops.dashboard import serve
from fluxmat.ops.inspect import from_files
from tests.support.lubm_rdf import UNIV_BENCH, lubm_department

ROOT = Path(__file__).resolve().parent.parent.parent
RDF_DIR = Path(__file__).parent.parent / "rdf"
PREFIX = "PREFIX ex: <http://example.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"


@pytest.fixture(scope="module")
def people():
    return from_files(str(RDF_DIR / "people.dlog"), [str(RDF_DIR / "people.ttl")])


def rows(answer) -> list[dict[str, str]]:
    """SELECT results (JSON) read back with pyoxigraph's parser, terms as N-Triples text."""
    parsed = ox.parse_query_results(answer.body, ox.QueryResultsFormat.JSON)
    names = [v.value for v in parsed.variables]
    return [{n: str(s[n]) for n in names if s[n] is not None} for s in parsed]


def ask(view, query: str) -> bool:
    answer, _ = view.sparql(PREFIX + query)
    return bool(ox.parse_query_results(answer.body, ox.QueryResultsFormat.JSON))


# ---------------------------------------------------------------- hand-checked answers


def test_select_over_derived_facts(people):
    answer, skipped = people.sparql(PREFIX + "SELECT ?x WHERE { ?x a ex:Adult } ORDER BY ?x")
    assert skipped == 2  # the two older/3 facts are not triples
    got = [r["x"] for r in rows(answer)]
    assert got[1:] == ["<http://example.org/bob>", "<http://example.org/cy>"]
    assert got[0].startswith("_:")  # the skolemised blank node of people.ttl, as a blank node


def test_literals_keep_datatype_and_language(people):
    answer, _ = people.sparql(PREFIX + "SELECT ?a ?n WHERE { ex:ann ex:age ?a ; ex:name ?n "
                              'FILTER(lang(?n) = "fr") }')  # fmt: skip
    assert rows(answer) == [{"a": '"05"^^<http://www.w3.org/2001/XMLSchema#int>', "n": '"Anne"@fr'}]
    answer, _ = people.sparql(PREFIX + "SELECT ?x ?n WHERE { ?x ex:nextAge ?n } ORDER BY ?n")
    assert [r["n"] for r in rows(answer)] == [f'"{n}"^^<http://www.w3.org/2001/XMLSchema#integer>'
                                              for n in (6, 19, 43, 71)]  # fmt: skip


def test_aggregate_ask_and_construct(people):
    answer, _ = people.sparql(PREFIX + "SELECT (COUNT(*) AS ?n) WHERE { ?x a ex:Person }")
    assert rows(answer) == [{"n": '"2"^^<http://www.w3.org/2001/XMLSchema#integer>'}]
    assert ask(people, "ASK { ex:ann ex:ancestor ex:cy }") is True
    assert ask(people, "ASK { ex:cy ex:ancestor ex:ann }") is False
    answer, _ = people.sparql(PREFIX + "CONSTRUCT { ?x ex:grandparent ?z } WHERE "
                              "{ ?x ex:parent ?y . ?y ex:parent ?z }")  # fmt: skip
    assert answer.body == b"<http://example.org/ann> <http://example.org/grandparent> <http://example.org/cy> .\n"
    assert answer.content_type == "application/n-triples"


def test_csv_is_the_standard_format(people):
    query = PREFIX + 'SELECT ?x ?n WHERE { ?x ex:name ?n FILTER(?n = "Bob \\"B\\" Smith") }'
    answer, _ = people.sparql(query, "csv")
    assert answer.body == b'x,n\r\nhttp://example.org/bob,"Bob ""B"" Smith"\r\n'
    reference = TripleStore(people.reasoner.facts()).store  # pyoxigraph's own CSV writer agrees
    assert answer.body == reference.query(query).serialize(format=ox.QueryResultsFormat.CSV)
    answer, _ = people.sparql(PREFIX + "ASK { ex:ann a ex:French }", "csv")
    assert answer.body == b"_askResult\r\ntrue\r\n"


# ---------------------------------------------------------------- against owlrl on LUBM

LUBM_QUERIES = {
    "graduate students taking a graduate course": "SELECT ?x ?c WHERE { ?x a ub:GraduateStudent ; ub:takesCourse ?c . ?c a ub:GraduateCourse }",
    "students (a defined class)": "SELECT ?x WHERE { ?x a ub:Student }",
    "members of a department, via worksFor and memberOf": "SELECT ?x ?d WHERE { ?x ub:memberOf ?d . ?d a ub:Department }",
    "advisors teaching their student's course": "SELECT ?s ?p ?c WHERE { ?s ub:advisor ?p . ?p ub:teacherOf ?c . ?s ub:takesCourse ?c }",
    "organisations by transitive subOrganizationOf": "SELECT ?o ?u WHERE { ?o ub:subOrganizationOf ?u . ?u a ub:University }",
    "alumni (subproperties, inverse)": "SELECT ?u ?x WHERE { ?u ub:hasAlumnus ?x }",
    "chairs": "SELECT ?x WHERE { ?x a ub:Chair }",
    "faculty per department": "SELECT ?d (COUNT(?x) AS ?n) WHERE { ?x a ub:Faculty ; ub:worksFor ?d } GROUP BY ?d",
}  # fmt: skip


def test_lubm_answers_equal_pyoxigraph_over_owlrl(tmp_path):
    """The same SPARQL over fluxmat's materialisation and over owlrl's closure (pyoxigraph)."""
    data, closure = lubm_department()
    store = ox.Store()
    store.bulk_extend(ox.Quad(q.subject, q.predicate, q.object) for q in ox.parse(closure, ox.RdfFormat.N_TRIPLES))
    view = from_files(None, [str(data)], ontologies=[str(UNIV_BENCH)])
    for name, query in LUBM_QUERIES.items():
        query = f"PREFIX ub: <{UB}>\n{query}"
        answer, _ = view.sparql(query, limits=Limits(results=10_000))
        assert not answer.truncated
        ours = sorted(str(tuple(r.items())) for r in rows(answer))
        result = store.query(query)
        names = [v.value for v in result.variables]
        theirs = sorted(str(tuple((n, str(s[n])) for n in names if s[n] is not None)) for s in result)
        assert ours == theirs and ours, name


# ---------------------------------------------------------------- bounds


def test_result_limit_truncates_and_says_so(people):
    answer, _ = people.sparql("SELECT * WHERE { ?s ?p ?o }", limits=Limits(results=3))
    assert answer.count == 3 and answer.truncated and len(rows(answer)) == 3
    answer, _ = people.sparql("SELECT * WHERE { ?s ?p ?o }", limits=Limits(results=1000))
    assert not answer.truncated and answer.count == 30  # the triples of people.expected.nt


def test_a_slow_query_is_killed_at_the_timeout():
    store = TripleStore([("http://example.org/p", _iri(f"http://example.org/n{i}"), i) for i in range(60)])
    query = ("SELECT (COUNT(*) AS ?n) WHERE { ?a ?p1 ?b . ?c ?p2 ?d . ?e ?p3 ?f . ?g ?p4 ?h . "
             "?i ?p5 ?j . ?k ?p6 ?l }")  # 60^6 combinations: hours  # fmt: skip
    start = time.monotonic()
    with pytest.raises(SparqlError, match="longer than the 1 s limit"):
        store.answer(query, limits=Limits(timeout=1))
    assert time.monotonic() - start < 5


def _iri(value: str):
    from fluxmat.engine.syntax import Iri

    return Iri(value)


def test_read_only_and_local(people):
    with pytest.raises(SparqlError, match="SERVICE"):
        people.sparql("SELECT * WHERE { SERVICE <http://127.0.0.1:1/sparql> { ?s ?p ?o } }")
    with pytest.raises(SparqlError, match=r"<query>:1:10: invalid SPARQL"):
        people.sparql("INSERT DATA { <http://a> <http://b> <http://c> }")
    # SERVICE inside a string or an IRI is not a SERVICE clause
    answer, _ = people.sparql('SELECT ?x WHERE { ?x <http://example.org/name> "SERVICE" }')
    assert answer.count == 0


def test_cli_sparql_file_query_and_errors(tmp_path):
    q = tmp_path / "adults.rq"
    q.write_text(PREFIX + "SELECT ?x WHERE { ?x a ex:Adult . FILTER(isIRI(?x)) } ORDER BY ?x\n", encoding="utf-8")
    args = [sys.executable, "-m", "fluxmat.ops.cli", "sparql", str(RDF_DIR / "people.dlog"), str(q),
            "--facts", str(RDF_DIR / "people.ttl")]  # fmt: skip
    r = subprocess.run([*args, "--format", "csv"], cwd=ROOT, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"x\r\nhttp://example.org/bob\r\nhttp://example.org/cy\r\n"
    assert b"fluxmat: 2 results" in r.stderr
    q.write_text(PREFIX + "SELECT ?x WHERE { ?x ex:age ?a ?b }\n", encoding="utf-8")
    r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert re.match(rf"fluxmat: error: {re.escape(str(q))}:3:\d+: invalid SPARQL: ", line), line


# ---------------------------------------------------------------- the dashboard


class _Files:
    """A dashboard source over files (as `fluxmat dashboard` over Redis, without the job)."""

    def __init__(self, view):
        self._view = view

    def view(self):
        return self._view

    def status(self):
        return {}


def test_dashboard_api_sparql(people):
    server = serve(_Files(people), "127.0.0.1", 0)
    host, port = server.server_address[:2]
    base = f"http://{host}:{port}/api/sparql?"
    try:
        query = PREFIX + "SELECT ?x WHERE { ?x ex:ancestor ex:cy } ORDER BY ?x"
        with urllib.request.urlopen(base + urllib.parse.urlencode({"query": query}), timeout=30) as resp:
            assert resp.headers["Content-Type"] == "application/sparql-results+json"
            body = json.loads(resp.read())
        assert [b["x"]["value"] for b in body["results"]["bindings"]] == [
            "http://example.org/ann", "http://example.org/bob"]  # fmt: skip
        req = urllib.request.Request(base + urllib.parse.urlencode({"query": query, "limit": "1"}),
                                     headers={"Accept": "text/csv"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=30) as resp:
            assert resp.read() == b"x\r\nhttp://example.org/ann\r\n"
            assert resp.headers["X-Fluxmat-Truncated"] == "true"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + urllib.parse.urlencode({"query": "SELECT ?x {"}), timeout=30)
        assert err.value.code == 400 and "invalid SPARQL" in json.loads(err.value.read())["error"]
    finally:
        server.shutdown()
