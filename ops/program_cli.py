"""`fluxmat program check|apply NEW.dl`: check a program change, or send it to a running job.

`check` compares NEW.dl with the program in force (`--program OLD.dl`) and
prints the difference: the rules removed (`-`) and added (`+`), with where
they are written, the program's facts removed and added, and the strata of
the new program whose rules changed. With `--facts` it also applies the
change to the materialisation of OLD.dl over those facts on the arrays core
and prints the facts the change adds and removes.

With `--equality rewrite` (the job's `--equality`) the change is validated
and applied as a job with equality does (engine.compact.eq_program): what
rewrite mode refuses (negation, built-ins, a predicate with two arities) is
refused here, before anything is sent.

`apply` validates NEW.dl -- parse, safety, stratification, and, with
`--program` (and `--facts`), the change against that program and state, as
`check` does -- then sends one control message `{"program": {"whole": TEXT}}`
to the updates topic with the client's UpdateProducer (client.producer). The
job applies it in order with the updates around it.

Ontologies: with `--ontology NEW.ttl` the new program is NEW.dl (or, without
it, `--program`'s) plus the OWL 2 RL rules of NEW.ttl, and the program in force
is `--program` plus the rules of `--old-ontology` (the job's `--ontology`); the
engine applies the difference, so the rules of the axioms added to or removed
from the ontology are added and removed (connectors.programs.load_program).
"""

from __future__ import annotations

import argparse
import os
import time

from fluxmat.connectors.files import read_facts
from fluxmat.connectors.programs import build_reasoner, load_program
from fluxmat.engine import EQUALITY_MODES as EQUALITY
from fluxmat.engine import EngineOptions, FluxmatError, Reasoner
from fluxmat.engine.lexer import read_source


def add_parsers(sub) -> None:
    p = sub.add_parser("program", help="check a program change, or send it to a running job")
    p.add_argument(
        "action",
        choices=["check", "apply"],
        help="check: print the difference from --program; apply: validate, then send it",
    )
    p.add_argument("new", metavar="NEW.dl", nargs="?",
                   help="the whole new program (optional with --ontology: then --program's rules)")  # fmt: skip
    p.add_argument(
        "--program",
        metavar="OLD.dl",
        help="the program in force (required by check; apply validates the change against it)",
    )
    p.add_argument("--ontology", action="append", default=[], metavar="NEW.ttl",
                   help="the new ontology: its OWL 2 RL rules replace those of --old-ontology")  # fmt: skip
    p.add_argument("--old-ontology", action="append", default=[], metavar="OLD.ttl",
                   help="the ontology in force: the job's --ontology")  # fmt: skip
    p.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="FILE",
        help="explicit facts of the state (program syntax, JSON Lines, RDF; repeatable): "
        "the change is applied to their materialisation to check it",
    )
    p.add_argument(
        "--equality",
        default=os.environ.get("FLUXMAT_EQUALITY", "off"),
        choices=list(EQUALITY),
        help="the job's --equality: with rewrite, the change is validated as rewrite mode requires "
        "(positive rules without built-ins, one arity per predicate) and applied with equality "
        "(env FLUXMAT_EQUALITY; default: %(default)s)",
    )
    p.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("FLUXMAT_BOOTSTRAP_SERVERS"),
        help="apply: Kafka bootstrap servers HOST:PORT (env FLUXMAT_BOOTSTRAP_SERVERS)",
    )
    p.add_argument(
        "--updates-topic",
        default=os.environ.get("FLUXMAT_UPDATES_TOPIC"),
        help="apply: the job's updates topic (env FLUXMAT_UPDATES_TOPIC)",
    )
    p.add_argument(
        "--kafka-config",
        default=os.environ.get("FLUXMAT_KAFKA_CONFIG"),
        metavar="FILE",
        help="apply: Kafka client settings (TLS, SASL) as for fluxmat run (env FLUXMAT_KAFKA_CONFIG)",
    )
    p.add_argument("--id", default=None, help="apply: the id the control message carries")  # fmt: skip


def new_program(ns: argparse.Namespace) -> tuple[str, str]:
    """The whole new program's text and its name: NEW.dl (or --program's rules) plus --ontology's rules."""
    if not ns.ontology:
        if ns.new is None:
            raise FluxmatError("give NEW.dl (the new program) or --ontology NEW.ttl (the new ontology)")
        return read_source(ns.new), ns.new
    return str(load_program(ns.new or ns.program, ns.ontology)[0]), ns.new or ns.ontology[0]


def _checked(ns: argparse.Namespace, text: str, source: str) -> list[str]:
    """The new program validated (and against --program and --facts when given); the lines describing the change."""
    options = EngineOptions(algorithm="dredc", core="arrays", equality=ns.equality)  # the job's validation
    if ns.program is None and not ns.old_ontology:
        if ns.facts:
            raise FluxmatError("--facts needs --program (the program whose state they are)")
        Reasoner.from_text(text, source=source, options=options)  # parse, safety, stratification, rewrite mode
        return []
    old = build_reasoner(ns.program, ns.old_ontology, options)
    new = Reasoner.from_text(text, source=source)
    lines = old.describe_change(new.program)
    old.load([f for path in ns.facts for f in read_facts(path, old.prefixes)])
    start = time.perf_counter()
    report = old.change_program(whole=text, source=source)  # arities against the state, arrays support
    seconds = time.perf_counter() - start
    if ns.facts:
        lines.append(f"facts added: {report.added}, removed: {report.removed} ({seconds:.3f} s)")
    return lines


def cmd_program(ns: argparse.Namespace) -> None:
    text, source = new_program(ns)
    if ns.action == "check":
        if ns.program is None and not ns.old_ontology:
            raise FluxmatError("program check needs --program OLD.dl (the program in force) or --old-ontology")
        print("\n".join(_checked(ns, text, source)))
        return
    missing = [f for f, v in (("--bootstrap-servers", ns.bootstrap_servers),
                              ("--updates-topic", ns.updates_topic)) if not v]  # fmt: skip
    if missing:
        raise FluxmatError(f"program apply needs {' and '.join(missing)}")
    lines = _checked(ns, text, source)
    from fluxmat.client import UpdateProducer

    with UpdateProducer(
        ns.bootstrap_servers, ns.updates_topic, kafka_config=ns.kafka_config
    ) as producer:
        producer.send_program(whole=text, id=ns.id)
    print("\n".join([*lines, f"sent the program change to {ns.updates_topic}"]))


COMMANDS = {"program": cmd_program}
