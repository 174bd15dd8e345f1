"""Run the OWL 2 RL cases of the W3C OWL 2 test suite (tests/data/owl2-rl-tests) with `--owl-rules rdf`.

A case's verdicts, each checked on the materialisation of its premise:
* PositiveEntailmentTest: the conclusion graph matches the materialisation
  (its blank nodes are existential: the graph is asked as a SPARQL ASK);
* NegativeEntailmentTest: the non-conclusion graph does not match;
* InconsistencyTest: a `fluxmat:inconsistent` fact is derived;
* ConsistencyTest: none is.
Skipped: cases without an RDF/XML premise (fluxmat reads no functional syntax)
and cases for the Direct Semantics only (the RL/RDF rules implement the
RDF-Based Semantics).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyoxigraph as ox

from fluxmat.connectors.owl2rl_rdf import inconsistencies
from fluxmat.connectors.programs import load_program
from fluxmat.connectors.rdf import write_rdf
from fluxmat.engine import Reasoner

ONTOLOGY = ox.NamedNode("http://www.w3.org/2002/07/owl#Ontology")
SUITE = Path(__file__).resolve().parent.parent / "data" / "owl2-rl-tests"


def cases() -> list[dict]:
    return json.loads((SUITE / "manifest.json").read_text(encoding="utf-8"))


def skip_reason(case: dict) -> str | None:
    if "missing" in case:
        return "functional-syntax premise only (fluxmat reads RDF)"
    if "RDF-BASED" not in case["semantics"]:
        return "Direct Semantics only (the OWL 2 RL/RDF rules implement the RDF-Based Semantics)"
    return None


def _ask(graph_file: Path, base: str) -> str:
    """The graph in `graph_file` as a SPARQL ASK query (blank nodes as variables)."""
    quads = list(ox.parse(path=str(graph_file), format=ox.RdfFormat.RDF_XML, base_iri=base))
    headers = {q.subject for q in quads if q.object == ONTOLOGY}  # the graph's own ontology header
    lines = []
    for q in quads:
        if q.subject in headers:
            continue
        terms = [f"?b{t.value}" if isinstance(t, ox.BlankNode) else str(t) for t in (q.subject, q.predicate, q.object)]
        lines.append(" ".join(terms) + " .")
    return "ASK { " + "\n".join(lines) + " }"


def verdicts(case: dict) -> dict[str, bool]:
    """Each of the case's kinds -> whether fluxmat's answer is the expected one."""
    folder = SUITE / case["id"]
    premise = folder / "premise.rdf"
    reasoner = Reasoner(load_program(None, [str(premise)], "rdf")[0], "remat")
    reasoner.load()
    facts = reasoner.facts()
    inconsistent = bool(inconsistencies(facts))
    store = ox.Store()
    body, _ = write_rdf(facts, "ntriples")
    store.load(body, ox.RdfFormat.N_TRIPLES)
    base = premise.resolve().as_uri()
    out = {}
    for kind in case["kinds"]:
        if kind == "PositiveEntailmentTest":
            out[kind] = bool(store.query(_ask(folder / "conclusion.rdf", base)))
        elif kind == "NegativeEntailmentTest":
            out[kind] = not store.query(_ask(folder / "nonconclusion.rdf", base))
        elif kind == "InconsistencyTest":
            out[kind] = inconsistent
        else:
            out[kind] = not inconsistent
    return out
