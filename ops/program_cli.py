"""`fluxmat program check|apply NEW.dl`: check a program change, or send it to a running job.

`check` compares NEW.dl with the program in force (`--program OLD.dl`) and
prints the difference: the rules removed (`-`) and added (`+`), with where
they are written, the program's facts removed and added, and the strata of
the new program whose rules changed. With `--facts` it also applies the
change to the materialisation of OLD.dl over those facts on the arrays core
and prints the facts the change adds and removes.

`apply` validates NEW.dl -- parse, safety, stratification, and, with
`--program` (and `--facts`), the change against that program and state, as
`check` does -- then sends one control message `{"program": {"whole": TEXT}}`
to the updates topic with the client's UpdateProducer (client.producer). The
job applies it in order with the updates around it.
"""

from __future__ import annotations

import argparse
import os
import time

from fluxmat.connectors.files import read_facts
from fluxmat.engine import EngineOptions, FluxmatError, Reasoner
from fluxmat.engine.lexer import read_source


def add_parsers(sub) -> None:
    p = sub.add_parser("program", help="check a program change, or send it to a running job")
    p.add_argument(
        "action",
        choices=["check", "apply"],
        help="check: print the difference from --program; apply: validate, then send it",
    )
    p.add_argument("new", metavar="NEW.dl", help="the whole new program")
    p.add_argument(
        "--program",
        metavar="OLD.dl",
        help="the program in force (required by check; apply validates the change against it)",
    )
    p.add_argument(
        "--facts",
        action="append",
        default=[],
        metavar="FILE",
        help="explicit facts of the state (program syntax, JSON Lines, RDF; repeatable): "
        "the change is applied to their materialisation to check it",
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


def _checked(ns: argparse.Namespace) -> list[str]:
    """NEW.dl validated (and against --program and --facts when given); the lines describing the change."""
    text = read_source(ns.new)
    if ns.program is None:
        if ns.facts:
            raise FluxmatError("--facts needs --program (the program whose state they are)")
        Reasoner.from_text(text, source=ns.new)  # parse, safety, stratification
        return []
    old = Reasoner.from_file(ns.program, options=EngineOptions(algorithm="dredc", core="arrays"))
    new = Reasoner.from_text(text, source=ns.new)
    lines = old.describe_change(new.program)
    old.load([f for path in ns.facts for f in read_facts(path, old.prefixes)])
    start = time.perf_counter()
    report = old.change_program(
        whole=text, source=ns.new
    )  # arities against the state, arrays support
    seconds = time.perf_counter() - start
    if ns.facts:
        lines.append(f"facts added: {report.added}, removed: {report.removed} ({seconds:.3f} s)")
    return lines


def cmd_program(ns: argparse.Namespace) -> None:
    if ns.action == "check":
        if ns.program is None:
            raise FluxmatError("program check needs --program OLD.dl (the program in force)")
        print("\n".join(_checked(ns)))
        return
    missing = [f for f, v in (("--bootstrap-servers", ns.bootstrap_servers),
                              ("--updates-topic", ns.updates_topic)) if not v]  # fmt: skip
    if missing:
        raise FluxmatError(f"program apply needs {' and '.join(missing)}")
    lines = _checked(ns)
    from fluxmat.client import UpdateProducer

    with UpdateProducer(
        ns.bootstrap_servers, ns.updates_topic, kafka_config=ns.kafka_config
    ) as producer:
        producer.send_program(whole=read_source(ns.new), id=ns.id)
    print("\n".join([*lines, f"sent the program change to {ns.updates_topic}"]))


COMMANDS = {"program": cmd_program}
