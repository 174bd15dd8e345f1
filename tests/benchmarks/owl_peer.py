"""owlrl peer for the LUBM workload: full OWL 2 RL closure of an rdflib graph.

The corpus ships `lubm.dlog` (the OWL 2 RL lower bound of univ-bench, as
Datalog), not the ontology itself, so the TBox is rebuilt from the rules by
shape: `A(x) :- B(x)` subClassOf; `A(x) :- p(x, y)` / `A(y) :- p(x, y)`
domain / range; `A(x) :- B(x), p(x, y), C(y)` an intersection with
someValuesFrom; a rule whose body is a path from the head's first to its second
variable a subPropertyOf / SymmetricProperty / TransitiveProperty /
propertyChainAxiom, an inverse step through a named `inv:` property declared
`owl:inverseOf` it. Rules of other shapes are counted as untranslated.

`owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)` computes the *full*
OWL 2 RL closure (owl:Thing, sameAs reflexivity, datatype axioms, ...), more
than the Datalog program derives; its fact count is therefore reported over the
program's vocabulary only (the triples whose predicate, or rdf:type class, the
program or the data names), next to fluxmat's.
"""

from __future__ import annotations

import time

from fluxmat.engine.syntax import Atom, Var

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
INV = "urn:fluxmat:inverse:"


def _chain(head: Atom, body: list[Atom]) -> list[tuple[str, bool]] | None:
    """[(property, inverted)] along a path from head.args[0] to head.args[1], or None."""
    at, goal = head.args[0], head.args[1]
    left, steps = list(body), []
    while left:
        for a in left:
            if len(a.args) == 2 and a.args[0] == at:
                steps.append((a.pred, False))
                at = a.args[1]
                break
            if len(a.args) == 2 and a.args[1] == at:
                steps.append((a.pred, True))
                at = a.args[0]
                break
        else:
            return None
        left.remove(a)
    return steps if at == goal and all(isinstance(t, Var) for t in head.args) else None


def tbox(program):
    """(triples, untranslated rule texts) for an rdflib graph."""
    from rdflib import BNode, URIRef
    from rdflib.collection import Collection
    from rdflib.graph import Graph
    from rdflib.namespace import OWL, RDF, RDFS

    g = Graph()
    untranslated = []

    def prop(name: str, inverted: bool) -> URIRef:
        p = URIRef(name)
        if not inverted:
            return p
        inv = URIRef(INV + name)
        g.add((inv, OWL.inverseOf, p))
        return inv

    for rule in program.rules:
        head, body = rule.head, list(rule.body)
        if not all(isinstance(b, Atom) for b in body):
            untranslated.append(str(rule))
            continue
        h = URIRef(head.pred)
        if len(head.args) == 2:
            steps = _chain(head, body)
            if steps is None:
                untranslated.append(str(rule))
            elif len(steps) == 1 and steps[0] == (head.pred, True):
                g.add((h, RDF.type, OWL.SymmetricProperty))
            elif len(steps) == 1:
                g.add((prop(*steps[0]), RDFS.subPropertyOf, h))
            elif steps == [(head.pred, False)] * 2:
                g.add((h, RDF.type, OWL.TransitiveProperty))
            else:
                lst = BNode()
                Collection(g, lst, [prop(*s) for s in steps])
                g.add((h, OWL.propertyChainAxiom, lst))
            continue
        x = head.args[0]
        classes = [URIRef(b.pred) for b in body if len(b.args) == 1 and b.args[0] == x]
        binary = [b for b in body if len(b.args) == 2]
        if len(body) == 1 and binary:
            b = binary[0]
            g.add((URIRef(b.pred), RDFS.domain if b.args[0] == x else RDFS.range, h))
            continue
        if len(binary) > 1 or (binary and x not in binary[0].args):
            untranslated.append(str(rule))
            continue
        parts = list(classes)
        if binary:
            b = binary[0]
            y = b.args[1] if b.args[0] == x else b.args[0]
            fill = [URIRef(a.pred) for a in body if len(a.args) == 1 and a.args[0] == y]
            r = BNode()
            g.add((r, RDF.type, OWL.Restriction))
            g.add((r, OWL.onProperty, prop(b.pred, b.args[0] != x)))
            g.add((r, OWL.someValuesFrom, fill[0] if len(fill) == 1 else OWL.Thing))
            if len(fill) > 1:
                untranslated.append(str(rule))
                continue
            parts.append(r)
        if len(parts) == 1:
            g.add((parts[0], RDFS.subClassOf, h))
        else:
            c = BNode()
            lst = BNode()
            Collection(g, lst, parts)
            g.add((c, OWL.intersectionOf, lst))
            g.add((c, RDFS.subClassOf, h))
    return g, untranslated


def _node(v):
    from rdflib import Literal, URIRef
    from rdflib.namespace import XSD

    if isinstance(v, str) and v.startswith('"') and v.endswith('"^^xsd:string'):
        return Literal(v[1 : -len('"^^xsd:string')], datatype=XSD.string)
    if isinstance(v, int):
        return Literal(v)
    return URIRef(str(v))


def owlrl_closure(program, facts: list[tuple]) -> dict:
    """Build TBox + ABox (untimed), expand (timed), count over the program vocabulary."""
    import owlrl
    from rdflib import URIRef

    g, untranslated = tbox(program)
    vocab = {URIRef(r.head.pred) for r in program.rules}
    vocab |= {URIRef(b.pred) for r in program.rules for b in r.body if isinstance(b, Atom)}
    typ = URIRef(RDF_TYPE)
    for f in facts:
        p = URIRef(f[0])
        vocab.add(p)
        if len(f) == 2:
            g.add((_node(f[1]), typ, p))
        else:
            g.add((_node(f[1]), p, _node(f[2])))
    start = time.perf_counter()
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    secs = time.perf_counter() - start
    n = sum(1 for s, p, o in g if (o in vocab if p == typ else p in vocab))
    return {"seconds": secs, "facts": n, "triples": len(g),
            "untranslated": len(untranslated), "rules": len(program.rules)}  # fmt: skip
