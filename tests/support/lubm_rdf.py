"""Generated LUBM data as RDF and owlrl's OWL 2 RL closure of it, computed once per process.

Shared by tests/connectors/test_owl2rl.py and tests/connectors/test_sparql.py: one department of
`tests.benchmarks.lubm_gen` (about 7,800 triples) written as N-Triples, and the
closure owlrl computes from `univ-bench.owl` plus that data (about 5 s), as
N-Triples: only its triples without blank nodes and without a literal subject
(owlrl also derives generalised triples such as `"x" rdf:type rdfs:Literal`).
"""

from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from pathlib import Path

import pyoxigraph as ox

from tests.support.shared import UNIV_BENCH

__all__ = ["UNIV_BENCH", "lubm1_slice", "lubm_department", "owlrl_closure_nt"]


def _ox(term):
    import rdflib

    if isinstance(term, rdflib.Literal):
        if term.language:
            return ox.Literal(str(term), language=term.language)
        return ox.Literal(str(term), datatype=ox.NamedNode(str(term.datatype)) if term.datatype else None)
    return ox.NamedNode(str(term))


_DEPARTMENT = re.compile(r"//www\.Department([0-9]+)\.University0\.edu")


def lubm1_slice(departments: int) -> list[tuple]:
    """LUBM-1's facts about its first `departments` departments (all of LUBM-1 when it has fewer).

    The facts of generate(1) (15-25 departments) that name no department of
    University0 numbered `departments` or more: whole departments with their
    people, courses and publications, and the university itself.
    """
    from tests.benchmarks.lubm_gen import generate

    def keep(fact: tuple) -> bool:
        return all(int(m.group(1)) < departments for a in fact[1:] for m in _DEPARTMENT.finditer(a))

    return [f for f in generate(1) if keep(f)]


@lru_cache(maxsize=1)
def lubm_department() -> tuple[Path, bytes]:
    """(path of the data as N-Triples, owlrl's closure of univ-bench + data as N-Triples)."""
    from tests.benchmarks.lubm_gen import generate, write_rdf

    path = Path(tempfile.mkdtemp(prefix="fluxmat-lubm-")) / "d1.nt"
    write_rdf(generate(1, 1), str(path), "ntriples")
    return path, owlrl_closure_nt(path)


def owlrl_closure_nt(path: Path) -> bytes:
    """owlrl's closure of univ-bench + the N-Triples file `path`, as N-Triples (see the module docstring)."""
    import owlrl  # test dependencies (pyproject.toml [test])
    import rdflib

    g = rdflib.Graph()
    g.parse(str(UNIV_BENCH), format="xml")
    g.parse(str(path), format="nt")
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    kept = [ox.Triple(*(_ox(t) for t in triple)) for triple in g
            if not any(isinstance(t, rdflib.BNode) for t in triple)
            and not isinstance(triple[0], rdflib.Literal)]  # fmt: skip
    return ox.serialize(kept, format=ox.RdfFormat.N_TRIPLES)
