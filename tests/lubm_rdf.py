"""Generated LUBM data as RDF and owlrl's OWL 2 RL closure of it, computed once per process.

Shared by tests/test_owl2rl.py and tests/test_sparql.py: one department of
`tests.benchmarks.lubm_gen` (about 7,800 triples) written as N-Triples, and the
closure owlrl computes from `univ-bench.owl` plus that data (about 5 s), as
N-Triples: only its triples without blank nodes and without a literal subject
(owlrl also derives generalised triples such as `"x" rdf:type rdfs:Literal`).
"""

from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox

from tests.shared import UNIV_BENCH

__all__ = ["UNIV_BENCH", "lubm_department"]


def _ox(term):
    import rdflib

    if isinstance(term, rdflib.Literal):
        if term.language:
            return ox.Literal(str(term), language=term.language)
        return ox.Literal(str(term), datatype=ox.NamedNode(str(term.datatype)) if term.datatype else None)
    return ox.NamedNode(str(term))


@lru_cache(maxsize=1)
def lubm_department() -> tuple[Path, bytes]:
    """(path of the data as N-Triples, owlrl's closure of univ-bench + data as N-Triples)."""
    import owlrl  # test dependencies (pyproject.toml [test])
    import rdflib

    from tests.benchmarks.lubm_gen import generate, write_rdf

    path = Path(tempfile.mkdtemp(prefix="fluxmat-lubm-")) / "d1.nt"
    write_rdf(generate(1, 1), str(path), "ntriples")
    g = rdflib.Graph()
    g.parse(str(UNIV_BENCH), format="xml")
    g.parse(str(path), format="nt")
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    kept = [ox.Triple(*(_ox(t) for t in triple)) for triple in g
            if not any(isinstance(t, rdflib.BNode) for t in triple)
            and not isinstance(triple[0], rdflib.Literal)]  # fmt: skip
    return path, ox.serialize(kept, format=ox.RdfFormat.N_TRIPLES)
