"""`fluxmat owl2rl` and `fluxmat sparql`, and the RDF flags the other commands share.

* `--facts-format` overrides how `--facts` files are read (default: by extension);
* `--ontology FILE` (repeatable) adds an ontology's OWL 2 RL rules and
  assertions to the program (connectors.owl2rl); the PROGRAM argument may then
  be left out; the translation's warnings go to stderr;
* `--format` writes a materialisation as facts (default) or RDF; facts that are
  not triples are written as `# not a triple: ...` comments and counted on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fluxmat.connectors.files import FACTS_FORMATS
from fluxmat.connectors.owl2rl import translate
from fluxmat.connectors.owl2rl_rdf import OWL_RULES, inconsistencies, program_text
from fluxmat.connectors.programs import build_reasoner
from fluxmat.connectors.rdf import OUTPUT_FORMATS, write_rdf
from fluxmat.connectors.sparql import (
    DEFAULT_LIMIT,
    DEFAULT_TIMEOUT,
    GRAPH_FORMATS,
    TABLE_FORMATS,
    Limits,
)
from fluxmat.engine import EngineOptions, FluxmatError, Reasoner
from fluxmat.engine.printer import FactPrinter


def add_input_flags(p: argparse.ArgumentParser) -> None:
    """`--ontology FILE` (repeatable) and `--facts-format`."""
    p.add_argument("--ontology", action="append", default=[], metavar="FILE",
                   help="add this OWL ontology's OWL 2 RL rules and assertions (RDF/XML, Turtle, ...; "
                   "repeatable); PROGRAM may then be left out")  # fmt: skip
    add_owl_rules_flag(p)
    p.add_argument("--facts-format", default=os.environ.get("FLUXMAT_FACTS_FORMAT") or None,
                   choices=FACTS_FORMATS,
                   help="format of every --facts file (env FLUXMAT_FACTS_FORMAT; default: by extension: "
                   ".nt .nq .ttl .trig .rdf .owl .xml (also .gz) RDF, .jsonl JSON Lines, else facts)")  # fmt: skip


def add_owl_rules_flag(p: argparse.ArgumentParser) -> None:
    """`--owl-rules {axioms,rdf}`: how --ontology becomes rules (connectors.programs)."""
    p.add_argument("--owl-rules", default=os.environ.get("FLUXMAT_OWL_RULES", "axioms"), choices=OWL_RULES,
                   help="axioms: one rule per OWL 2 RL axiom, axioms outside OWL 2 RL skipped with a warning "
                   "(fast); rdf: the W3C OWL 2 RL/RDF rules over the triples, the ontology as data (owlrl's "
                   "and GraphDB's answers; schema triples may arrive in updates) "
                   "(env FLUXMAT_OWL_RULES; default: %(default)s)")  # fmt: skip


def add_output_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default=os.environ.get("FLUXMAT_FORMAT", "facts"), choices=OUTPUT_FORMATS,
                   help="output: facts in program syntax, or RDF (facts that are not triples become "
                   "comments) (env FLUXMAT_FORMAT; default: %(default)s)")  # fmt: skip


def warn(message: str) -> None:
    print(f"fluxmat: warning: {message}", file=sys.stderr)


def reasoner(program: str | None, ontologies, options: EngineOptions, owl_rules: str = "axioms") -> Reasoner:
    """A Reasoner over the program plus the ontologies' rules (warnings to stderr)."""
    return build_reasoner(program, ontologies, options, owl_rules, warn=warn)


SHOWN_INCONSISTENCIES = 20  # warning lines at most; the rest is counted


def warn_inconsistent(reasoner: Reasoner) -> int:
    """One warning line per inconsistency the rules derived (at most SHOWN_INCONSISTENCIES); their number."""
    found = inconsistencies(reasoner.facts())
    for fact in found[:SHOWN_INCONSISTENCIES]:
        warn(f"inconsistent ontology and data: {reasoner.printer.value(fact[1])} violates {fact[2]}")
    if len(found) > SHOWN_INCONSISTENCIES:
        warn(f"... and {len(found) - SHOWN_INCONSISTENCIES} more inconsistencies "
             "(the fluxmat:inconsistent facts of the output)")  # fmt: skip
    return len(found)


def render(facts, fmt: str, prefixes: dict[str, str]) -> bytes:
    """The materialisation as `fmt` (see OUTPUT_FORMATS); non-triples as comments, counted."""
    printer = FactPrinter(prefixes.items())
    if fmt == "facts":
        return "".join(line + "\n" for line in printer.lines(facts)).encode("utf-8")
    body, others = write_rdf(facts, fmt, prefixes)
    if others:
        warn(f"{len(others)} fact{'s are' if len(others) != 1 else ' is'} not a triple (RDF needs "
             "arity 1 or 2, an IRI predicate and an IRI subject): written as comments")  # fmt: skip
        body += "".join(f"# not a triple: {line}\n" for line in printer.lines(others)).encode("utf-8")
    return body


def write(data: bytes, output: str | None) -> None:
    if output:
        Path(output).write_bytes(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()


# ---------------------------------------------------------------- commands


def add_parsers(sub) -> None:
    o = sub.add_parser("owl2rl", help="print the OWL 2 RL rules of an ontology as a fluxmat program")
    o.add_argument("ontology", help="the ontology (RDF/XML .owl .rdf, Turtle .ttl, N-Triples .nt, ...)")
    o.add_argument("--output", metavar="FILE", help="write the program here instead of stdout")
    add_owl_rules_flag(o)
    s = sub.add_parser("sparql", help="answer a SPARQL query over the materialisation's triples")
    s.add_argument("args", nargs="+", metavar="[PROGRAM] QUERY",
                   help="the program (may be left out with --ontology) and the query: a file "
                   "(e.g. q.rq) or the query text")  # fmt: skip
    s.add_argument("--facts", action="append", default=[], metavar="FILE",
                   help="compute mat(P, E) from these explicit facts (repeatable)")
    s.add_argument("--redis", default=os.environ.get("FLUXMAT_REDIS"),
                   help="instead of --facts: the job's state store (env FLUXMAT_REDIS)")
    s.add_argument("--namespace", default=os.environ.get("FLUXMAT_NAMESPACE", "default"),
                   help="the job's namespace (env FLUXMAT_NAMESPACE; default: %(default)s)")
    add_input_flags(s)
    s.add_argument("--format", choices=[*TABLE_FORMATS, *GRAPH_FORMATS], default=None,
                   help="json or csv (SELECT, ASK; default json), ntriples or turtle (CONSTRUCT, "
                   "DESCRIBE; default ntriples)")  # fmt: skip
    s.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                   help="at most this many results (1 to 10,000; default: %(default)s)")
    s.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help="seconds the query may run (default: %(default)s)")
    s.add_argument("--output", metavar="FILE", help="write the results here instead of stdout")


def cmd_owl2rl(ns: argparse.Namespace) -> None:
    if ns.owl_rules == "rdf":
        text = program_text([ns.ontology], translate(ns.ontology).graph.prefixes)
        write(text.encode("utf-8"), ns.output)
        print(f"fluxmat: the fixed OWL 2 RL/RDF program, {text.count(':-')} rules, and the ontology's "
              "triples as facts", file=sys.stderr)  # fmt: skip
        return
    t = translate(ns.ontology)
    for w in t.warnings:
        warn(str(w))
    write(t.text().encode("utf-8"), ns.output)
    print(f"fluxmat: {len(t.rules)} rules, {len(t.facts)} facts, {len(t.warnings)} warnings",
          file=sys.stderr)  # fmt: skip


def _query_text(arg: str) -> tuple[str, str]:
    path = Path(arg)
    if "\n" not in arg and len(arg) < 4096 and path.is_file():
        try:
            return path.read_text(encoding="utf-8"), str(path)
        except UnicodeDecodeError as exc:
            raise FluxmatError(f"{arg}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    return arg, "<query>"


def cmd_sparql(ns: argparse.Namespace) -> None:
    from fluxmat.ops.inspect import from_files, from_store

    if len(ns.args) > 2:
        raise FluxmatError(f"expected [PROGRAM] QUERY, got {len(ns.args)} arguments")
    program, query = (ns.args[0], ns.args[1]) if len(ns.args) == 2 else (None, ns.args[0])
    if ns.redis and ns.facts:
        raise FluxmatError("give either --redis (the job's state) or --facts (files), not both")
    text, source = _query_text(query)
    limits = Limits(results=ns.limit, timeout=ns.timeout)
    if ns.redis:
        view = from_store(program, ns.redis, ns.namespace, ontologies=ns.ontology, owl_rules=ns.owl_rules)
    else:
        view = from_files(program, ns.facts, ontologies=ns.ontology, facts_format=ns.facts_format,
                          owl_rules=ns.owl_rules)
    answer, skipped = view.sparql(text, ns.format, limits, source)
    write(answer.body, ns.output)
    more = f" (limit {limits.results:,} reached: more exist)" if answer.truncated else ""
    kind = "result" if answer.content_type in TABLE_FORMATS.values() else "triple"
    note = f"; {skipped:,} facts are not triples and not queried" if skipped else ""
    print(f"fluxmat: {answer.count:,} {kind}{'s' * (answer.count != 1)}{more}{note}", file=sys.stderr)


COMMANDS = {"owl2rl": cmd_owl2rl, "sparql": cmd_sparql}
