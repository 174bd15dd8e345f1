"""OWL 2 RL ontologies and triples the OWL tests share: LUBM instances, the owlrl reference closure."""

from __future__ import annotations

from pathlib import Path

import pyoxigraph as ox

ROOT = Path(__file__).resolve().parent.parent.parent
UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"
EX = "http://example.org/"
OWL = "http://www.w3.org/2002/07/owl#"
TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
SUB = "http://www.w3.org/2000/01/rdf-schema#subClassOf"


def instance_triples(nt: bytes) -> set[str]:
    """Triples about individuals in the ontology's vocabulary (ub: properties, rdf:type ub:C)."""
    out = set()
    for q in ox.parse(nt, ox.RdfFormat.N_TRIPLES):
        p, o = q.predicate.value, q.object
        if str(q.subject).startswith(f"<{UB}"):
            continue
        if p.startswith(UB) or (
            p == TYPE and isinstance(o, ox.NamedNode) and o.value.startswith(UB)
        ):
            out.add(f"{q.subject} {q.predicate} {o}")
    return out


def ex_triples(nt: bytes) -> set[str]:
    """Triples about the example vocabulary (ex: predicates, rdf:type ex:C), blank nodes left out."""
    out = set()
    for q in ox.parse(nt, ox.RdfFormat.N_TRIPLES):
        if isinstance(q.subject, ox.BlankNode) or isinstance(q.object, ox.BlankNode):
            continue
        p, o = q.predicate.value, q.object
        if p.startswith(EX) or (
            p == TYPE and isinstance(o, ox.NamedNode) and o.value.startswith(EX)
        ):
            out.add(f"{q.subject} {q.predicate} {o}")
    return out


def owlrl_closure(nt: str) -> set[str]:
    """owlrl's OWL 2 RL closure of the N-Triples `nt`, on the example vocabulary."""
    import owlrl
    import rdflib

    g = rdflib.Graph()
    g.parse(data=nt, format="nt")
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    kept = [t for t in g if not isinstance(t[0], rdflib.Literal)]
    out = rdflib.Graph()
    for t in kept:
        out.add(t)
    return ex_triples(out.serialize(format="nt", encoding="utf-8"))


DATA = f"""<{EX}tom> <{TYPE}> <{EX}Kitten> .
<{EX}ann> <{EX}owns> <{EX}tom> .
<{EX}bob> <{EX}owns> <{EX}rex> .
"""


def turtle_to_nt(ttl: str) -> str:
    return "".join(str(t) + " .\n" for t in ox.parse(ttl.encode(), ox.RdfFormat.TURTLE))
