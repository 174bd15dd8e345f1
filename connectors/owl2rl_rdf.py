"""`--owl-rules rdf`: the W3C OWL 2 RL/RDF rules as one fixed program over triples.

The rules (connectors/owl2rl_rules.dl, one per rule of the W3C OWL 2 Profiles
recommendation, section 4.3, tables 4-9, named in comments) range over the
reserved relation `fluxmat:triple(s, p, o)`, so the engine keeps RDF facts as
triples (engine.triples) and converts them at its door. An ontology is data:
its triples become facts of the program, in their usual RDF shape (`C[s]`,
`p[s, o]`), and a schema triple may as well arrive in an update. Nothing is
skipped with a warning: what the rules cannot use simply derives nothing.

Compared with `--owl-rules axioms` (connectors.owl2rl, one rule per axiom):
the same answers wherever the axioms are inside OWL 2 RL's syntax, plus the
consequences the RDF rules draw from the others (as owlrl and GraphDB do),
at the price of joins over one large relation.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from fluxmat.connectors.owl import read_graph
from fluxmat.connectors.owl2rl import INCONSISTENT
from fluxmat.connectors.rdf import format_of, read_rdf
from fluxmat.engine.errors import FluxmatError, ParseError
from fluxmat.engine.parser import parse_program
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import Atom, Const, Program, Var

RULES = Path(__file__).with_name("owl2rl_rules.dl")
OWL_RULES = ("axioms", "rdf")  # the values of --owl-rules


@lru_cache(maxsize=1)
def rules() -> Program:
    """The fixed program (rules and axiomatic triples), parsed once."""
    return parse_program(RULES.read_text(encoding="utf-8"), str(RULES))


def ontology_facts(path: str) -> list[tuple]:
    """The triples of an ontology file as facts (their usual RDF shape)."""
    fmt = format_of(path)
    if fmt is None:
        raise ParseError(f"{path}: not an RDF file (by extension .owl .rdf .ttl .nt ...)")
    return read_rdf(path, fmt)


def rdf_program(paths: tuple[str, ...] | list[str]) -> Program:
    """The fixed rules plus the triples of every ontology in `paths` as facts."""
    base = rules()
    facts = [Atom(f[0], tuple(Const(v) for v in f[1:]), rdf=True) for p in paths for f in ontology_facts(p)]
    prefixes = dict(base.prefixes)
    for path in paths:  # the ontologies' own prefixes, for printing
        prefixes.update({k: v for k, v in read_graph(path).prefixes.items() if k not in prefixes})
    return Program(base.rules, base.facts + tuple(facts), tuple(prefixes.items()), ", ".join(paths) or base.source)


def program_text(paths: tuple[str, ...] | list[str], prefixes: dict[str, str] | None = None) -> str:
    """The fixed program as written, then the ontologies' triples as facts (`fluxmat owl2rl`)."""
    out = [RULES.read_text(encoding="utf-8").rstrip("\n")]
    pr = FactPrinter([*rules().prefixes, *(prefixes or {}).items()])
    for name, iri in (prefixes or {}).items():
        out.append(f"@prefix {name}: <{iri}> .")
    for path in paths:
        out.append(f"% the triples of {Path(path).name}")
        out += [pr.fact(f) for f in ontology_facts(path)]
    return "\n".join(out) + "\n"


def inconsistent_facts(reasoner, limit: int = 5) -> tuple[int, list[str]]:
    """How many `fluxmat:inconsistent` facts the materialisation holds, and the first `limit` as text.

    For the job's metric and status (through the engine's index on the
    predicate: no scan of the whole materialisation). 0 when the program has none.
    """
    pattern = Atom(INCONSISTENT, (Var("X"), Var("R")), rdf=True)
    try:
        found = list(reasoner.match(pattern))
    except FluxmatError:  # a program without the predicate: no ontology
        return 0, []
    found.sort(key=lambda f: (str(f[2]), str(f[1])))
    return len(found), [f"{reasoner.printer.value(f[1])} violates {f[2]}" for f in found[:limit]]


def inconsistencies(facts) -> list[tuple]:
    """The `fluxmat:inconsistent[x, "rule"]` facts among `facts`, sorted by rule then individual."""
    return sorted((f for f in facts if f[0] == INCONSISTENT and len(f) == 3), key=lambda f: (str(f[2]), str(f[1])))
