"""The W3C OWL 2 RL datatype rules (OWL 2 Profiles, section 4.3, table 8) and the functions behind them.

`--owl-rules rdf` implements dt-type1, dt-type2, dt-eq, dt-diff (for literals
made owl:sameAs) and dt-not-type with the built-in functions `datatype`,
`dt_value` and `dt_member` (engine.datatypes). The oracle is owlrl where it
implements the rule (dt-type2 by a literal's own datatype and those above it;
an ill-typed literal is an error); where owlrl stops short of the rules
(value spaces, dt-eq, dt-diff, dt-not-type through a range) the test quotes the rule.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from fluxmat.connectors.owl2rl_rdf import inconsistencies
from fluxmat.connectors.programs import load_program
from fluxmat.connectors.rdf import parse_rdf_text, write_rdf
from fluxmat.engine import Reasoner
from fluxmat.engine.datatypes import dt_member, dt_value
from fluxmat.engine.errors import ParseError
from fluxmat.engine.feed import Fed
from fluxmat.engine.parser import parse_program
from fluxmat.engine.syntax import XSD, Iri, literal
from tests.support.owl import EX, OWL, ROOT

PREFIXES = f"""@prefix ex: <{EX}> . @prefix owl: <{OWL}> . @prefix xsd: <{XSD}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
"""
SAME_AS = OWL + "sameAs"


def lit(lexical: str, local: str):
    return literal(lexical, XSD + local)


# ---------------------------------------------------------------- the functions


def test_data_values_are_xml_schema_value_spaces():
    """dt-eq / dt-diff compare data values: "01"^^xsd:integer, "1"^^xsd:int and "1.0"^^xsd:decimal are 1."""
    one = dt_value(1)
    assert (
        dt_value(lit("01", "integer"))
        == dt_value(lit("1", "int"))
        == dt_value(lit("1.0", "decimal"))
        == one
    )
    assert (
        dt_value(lit("1.50", "decimal"))
        == dt_value(lit("1.5", "decimal"))
        != dt_value(lit("1.5", "double"))
    )
    assert (
        dt_value(lit("2", "int")) != one and dt_value(lit("1", "double")) != one
    )  # float/double: own spaces
    assert dt_value("a") == dt_value(lit("a", "token")) != dt_value(literal("a", lang="en"))
    assert dt_value(lit("1", "boolean")) == dt_value(lit("true", "boolean"))
    assert (
        dt_value(lit("x", "integer")) is None and dt_value(lit("300", "byte")) is None
    )  # ill-typed
    assert dt_value(Iri(EX + "a")) is None


def test_value_space_membership():
    """dt-type2 / dt-not-type ask whether a value is in a datatype's value space (xsd:int inside xsd:integer)."""
    byte, nonneg, token = (Iri(XSD + t) for t in ("byte", "nonNegativeInteger", "token"))
    assert dt_member(1, byte) == 1 and dt_member(lit("1", "int"), Iri(XSD + "integer")) == 1
    assert (
        dt_member(lit("300", "integer"), byte) == 0 and dt_member(lit("-5", "integer"), nonneg) == 0
    )
    assert dt_member(lit("x", "integer"), Iri(XSD + "integer")) == 0  # ill-typed: in no value space
    assert dt_member("a b", token) == 1 and dt_member(" a", token) == 0
    assert dt_member(Iri(EX + "a"), byte) is None and dt_member(1, Iri(EX + "MyType")) is None


def test_functions_parse_print_and_refuse_unknown_names_and_arities():
    program = parse_program(
        'd(X, T) :- p(X), T = datatype(X).\nv(X, V) :- p(X), V = dt_value(X).\np("a").'
    )
    assert parse_program("\n".join(map(str, program.rules))).rules == program.rules
    r = Reasoner(program, "remat")
    r.load()
    assert ("d", "a", Iri(XSD + "string")) in r.facts()
    with pytest.raises(
        ParseError, match=r"<input>:1:19: unknown function 'size' \(the built-in functions are"
    ):
        parse_program("d(X) :- p(X), T = size(X).")
    with pytest.raises(ParseError, match="1:19: datatype takes 1 argument, not 2"):
        parse_program("d(X) :- p(X), T = datatype(X, X).")


# ---------------------------------------------------------------- rdf mode


def materialise(tmp_path, ttl: str, algorithm: str = "remat") -> Reasoner:
    onto = tmp_path / "o.ttl"
    onto.write_text(PREFIXES + ttl, encoding="utf-8")
    r = Reasoner(load_program(None, [str(onto)], "rdf")[0], algorithm)
    r.load()
    return r


def normalised(triples) -> set[str]:
    """rdflib triples on the example vocabulary about ex:i/ individuals, literals in rdflib's normal
    form ("01"^^xsd:integer is "1"; "a"^^xsd:string is "a", as in RDF 1.1)."""
    import rdflib

    def term(t):
        return (
            rdflib.Literal(str(t))
            if isinstance(t, rdflib.Literal) and t.datatype == rdflib.XSD.string
            else t
        )

    return {" ".join(term(t).n3() for t in (s, p, o)) for s, p, o in triples
            if isinstance(s, rdflib.URIRef) and s.startswith(EX + "i/")
            and (p.startswith(EX) or (p == rdflib.RDF.type and o.startswith(EX)))}  # fmt: skip


def ours(r: Reasoner):
    import rdflib

    body, _ = write_rdf(r.facts(), "ntriples")
    return rdflib.Graph().parse(data=body.decode(), format="nt")


def owlrl_graph(ttl: str):
    import owlrl
    import rdflib

    g = rdflib.Graph()
    g.parse(data=PREFIXES + ttl, format="turtle")
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    return g


TYPED = """ex:Adult owl:equivalentClass [ a owl:Restriction ; owl:onProperty ex:age ; owl:someValuesFrom xsd:decimal ] .
ex:Named owl:equivalentClass [ a owl:Restriction ; owl:onProperty ex:name ; owl:someValuesFrom xsd:string ] .
ex:age a owl:FunctionalProperty .
<http://example.org/i/bob> ex:age "42"^^xsd:int ; ex:name "Bob"^^xsd:string .
<http://example.org/i/cy> ex:age "01"^^xsd:integer , "1"^^xsd:int .
<http://example.org/i/dee> ex:age "7"^^xsd:unsignedByte .
"""


def test_dt_type2_types_literals_by_their_datatype_and_those_above_it_as_owlrl(tmp_path):
    """dt-type2 + cls-svf1: "42"^^xsd:int is an xsd:decimal, so bob is an Adult; cy's two 1s are owl:sameAs."""
    import rdflib

    want = normalised(owlrl_graph(TYPED))
    assert normalised(ours(materialise(tmp_path, TYPED))) == want
    assert {f"<{EX}i/{x}> <{rdflib.RDF.type}> <{EX}Adult>" for x in ("bob", "cy", "dee")} <= want


def test_dt_type2_uses_value_spaces_as_the_w3c_rule_defines(tmp_path):
    """dt-type2: "lt rdf:type dt for each datatype dt whose value space holds lt's value" (owlrl: own type only)."""
    r = materialise(
        tmp_path,
        """ex:Small owl:equivalentClass [ a owl:Restriction ; owl:onProperty ex:age ;
        owl:someValuesFrom xsd:byte ] .
        <http://example.org/i/ann> ex:age 100 . <http://example.org/i/bo> ex:age "300"^^xsd:integer .""",
    )
    facts = set(r.facts())
    assert (EX + "Small", Iri(EX + "i/ann")) in facts and (
        EX + "Small",
        Iri(EX + "i/bo"),
    ) not in facts
    assert (XSD + "byte", 100) in facts and (XSD + "unsignedByte", 100) in facts
    assert not inconsistencies(facts)


EQ = """ex:age a owl:FunctionalProperty .
<http://example.org/i/cy> ex:age "01"^^xsd:integer , "1"^^xsd:int .
<http://example.org/i/x> ex:p "1.0"^^xsd:decimal .
"""


@pytest.mark.parametrize("algorithm", ["remat", "dredc", "fd-counting"])
def test_dt_eq_and_dt_diff(tmp_path, algorithm):
    """dt-eq: equal values are owl:sameAs (eq-rep-o then copies triples); dt-diff: made owl:sameAs, values differ: false."""
    r = materialise(tmp_path, EQ, algorithm)
    facts = set(r.facts())
    assert (SAME_AS, lit("01", "integer"), lit("1", "int")) in facts
    assert (EX + "p", Iri(EX + "i/x"), lit("1", "int")) in facts  # eq-rep-o over dt-eq
    assert not inconsistencies(facts)
    clash = parse_rdf_text(f'<{EX}i/cy> <{EX}age> "2"^^<{XSD}short> .\n', "ntriples", "u")
    apply(r, clash, [], 1)
    assert {f[2] for f in inconsistencies(r.facts())} == {"dt-diff"}
    apply(r, [], clash, 2)
    assert not inconsistencies(r.facts())


def apply(r: Reasoner, add: list, delete: list, i: int) -> None:
    if r.fully_dynamic:
        r.feed([Fed(i, add, delete, id=i)])
        assert r.poll() is not None
    else:
        r.update(add, delete)


@pytest.mark.parametrize("owl_rules", ["rdf", "axioms"])
def test_dt_not_type_is_reported_like_the_other_inconsistencies(tmp_path, owl_rules):
    """dt-not-type: an ill-typed literal (owlrl: an error), a value outside a data range (W3C rule)."""
    onto, data = tmp_path / "o.ttl", tmp_path / "d.ttl"
    onto.write_text(PREFIXES + "ex:age a owl:DatatypeProperty ; rdfs:range xsd:nonNegativeInteger .\n"
                    "ex:size a owl:DatatypeProperty .", encoding="utf-8")  # fmt: skip
    data.write_text(
        PREFIXES + 'ex:ann ex:size "x"^^xsd:integer . ex:bo ex:age -5 . ex:cy ex:age 5 .',
        encoding="utf-8",
    )
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", "--ontology", str(onto),
                        "--owl-rules", owl_rules, "--facts", str(data)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "inconsistent ontology and data" in ln]
    assert lines == [
        'fluxmat: warning: inconsistent ontology and data: "x"^^xsd:integer violates dt-not-type',
        "fluxmat: warning: inconsistent ontology and data: -5 violates dt-not-type",
    ], r.stderr
    errors = [
        o
        for o in owlrl_graph(onto.read_text() + data.read_text()).objects()
        if "does not match" in str(o)
    ]
    assert errors and "'x'" in str(errors[0])
