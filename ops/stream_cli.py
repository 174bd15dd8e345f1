"""`fluxmat run` (the streaming job) and `fluxmat demo` (the whole pipeline, embedded).

The flags of `run` are made from the job's settings (stream.config): each falls
back to its environment variable `FLUXMAT_<NAME>`, then to its key in the
`--config` TOML file (stream.config_sources; both shown in `--help`), so the
Docker entrypoint, a file and a shell configure the same job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from fluxmat.stream.config import FILES, SETTINGS, SWITCH, JobConfig, Setting
from fluxmat.stream.config_sources import gather, load, render_toml

EXAMPLES = Path(__file__).resolve().parent / "examples"
DEMOS = {  # `fluxmat demo` and `fluxmat demo --rdf`: files in ops/examples
    False: {"program": "university.dl", "ontology": None, "facts": "university-facts.dl",
            "updates": "university-updates.jsonl", "delta_format": "json"},
    True: {"program": None, "ontology": "family.ttl", "facts": "family-data.ttl",
           "updates": "family-updates.jsonl", "delta_format": "ntriples"},
}  # fmt: skip


def add_parsers(sub) -> None:
    r = sub.add_parser("run", help="the streaming job: Kafka updates -> deltas, state in Redis")
    for s in SETTINGS.values():
        add_setting_flag(r, s)
    r.add_argument("--config", metavar="FILE.toml",
                   help="read settings from this TOML file: keys are the flags' names without the dashes, with "
                   "underscores (redis_timeout = 5); flags and FLUXMAT_* variables override it (env FLUXMAT_CONFIG)")  # fmt: skip
    r.add_argument("--print-config", action="store_true",
                   help="print the configuration these flags, variables and --config give, as a TOML file "
                   "--config reads, and exit (secrets are left out)")  # fmt: skip
    d = sub.add_parser("demo", help="run the whole pipeline on a bundled example, nothing to install")
    add_setting_flag(d, SETTINGS["budget"], default="2", env=False)
    d.add_argument("--delay", type=float, default=0.3, help="seconds between produced updates")
    d.add_argument("--rdf", action="store_true",
                   help="the RDF example instead: an OWL ontology (--ontology), Turtle facts, "
                   "N-Triples update messages in, N-Triples deltas out (--delta-format ntriples)")  # fmt: skip


def add_setting_flag(p: argparse.ArgumentParser, s: Setting, default=argparse.SUPPRESS, env: bool = True) -> None:
    """The flag of setting `s` (stream.config): given or not, it is read by stream.config_sources.

    Flags are left unset when not given (SUPPRESS), so the environment and the
    --config file can fill them in; `default` instead fixes the flag's value.
    """
    notes = ["required"] if s.required else []
    notes += [f"env {s.env}"] if env else []
    shown = s.default if default is argparse.SUPPRESS else default
    if isinstance(shown, bool):
        shown = "yes" if shown else "no"
    if shown not in (None, "", ()):
        notes.append(f"default: {shown}")
    text = f"{s.help} ({'; '.join(notes)})" if notes else s.help
    extra: dict = {"default": default, "help": text.replace("%", "%%")}
    if s.name == "program":
        p.add_argument("program", nargs="?", **extra)
    elif s.kind is FILES:
        p.add_argument(s.flag, action="append", metavar=s.kind.metavar, **extra)
    elif s.kind is SWITCH:
        p.add_argument(s.flag, action=argparse.BooleanOptionalAction, **extra)
    else:
        metavar = "{" + ",".join(s.choices) + "}" if s.choices else s.name.upper()
        p.add_argument(s.flag, metavar=metavar, **extra)


def job_config(ns: argparse.Namespace, environ=None) -> JobConfig:
    """The checked JobConfig of `fluxmat run`: its flags > FLUXMAT_* variables > --config file > defaults."""
    return load(*_sources(ns, os.environ if environ is None else environ))


def _sources(ns: argparse.Namespace, environ) -> tuple[dict, dict, str | None]:
    """The settings the command line gave (those not given are not in `ns`), the environment, the file."""
    given = {name: getattr(ns, name) for name in SETTINGS if hasattr(ns, name)}
    return given, environ, ns.config or environ.get("FLUXMAT_CONFIG") or None


def cmd_run(ns: argparse.Namespace) -> None:
    import logging

    from fluxmat.connectors.redact import redact
    from fluxmat.ops.wiring import Operations
    from fluxmat.stream.job import run_until_signalled

    if ns.print_config:
        sys.stdout.write(render_toml(gather(*_sources(ns, os.environ))))
        return
    cfg = job_config(ns)
    logging.basicConfig(level=logging.WARNING, format="fluxmat: %(levelname)s: %(message)s")
    for handler in logging.getLogger().handlers:  # no password of a URL in any log line
        handler.addFilter(_Redacting(redact))
    run_until_signalled(cfg, Operations())


class _Redacting:
    """A logging filter that masks URL passwords in the formatted message."""

    def __init__(self, redact):
        self.redact = redact

    def filter(self, record) -> bool:
        message = record.getMessage()
        shown = self.redact(message)
        if shown != message:
            record.msg, record.args = shown, ()
        return True


# ---------------------------------------------------------------- demo


def cmd_demo(ns: argparse.Namespace) -> None:
    """Embedded broker + in-process state + the same Spark job on the bundled example."""
    from fluxmat.connectors.broker import EmbeddedBroker
    from fluxmat.connectors.delta_codec import DeltaCodec
    from fluxmat.connectors.kafka_sink import read_deltas
    from fluxmat.ops.wiring import Operations
    from fluxmat.stream.job import Job

    example = DEMOS[bool(getattr(ns, "rdf", False))]
    program, facts = example["program"], EXAMPLES / example["facts"]
    ontology = (str(EXAMPLES / example["ontology"]),) if example["ontology"] else ()
    lines = (EXAMPLES / example["updates"]).read_text(encoding="utf-8").splitlines()
    say = lambda msg: print(msg, flush=True)  # noqa: E731
    what = f"program {program}" if program else f"ontology {example['ontology']}"
    say(f"fluxmat demo: {what}, {len(lines)} update messages")
    program = EXAMPLES / program if program else None
    started = time.monotonic()
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        say(f"  broker (tansu) on {broker.bootstrap}; state in process memory; Spark local[2]")
        cfg = load({"budget": ns.budget}, fixed=dict(
            program=str(program or ""), facts=(str(facts),), bootstrap_servers=broker.bootstrap,
            ontology=ontology, delta_format=example["delta_format"],
            updates_topic="updates", deltas_topic="deltas", dead_letter_topic="dead-letters",
            redis="memory://", checkpoint=str(Path(tmp) / "checkpoint"), trigger_interval="300ms",
        ))  # fmt: skip
        last_id = None
        for line in lines:
            try:
                last_id = json.loads(line).get("id", last_id)
            except ValueError:
                pass

        def on_batch(outcome) -> None:
            if outcome.replayed:
                return
            say(f"  batch {outcome.batch}: {outcome.updates} updates, +{outcome.added} "
                f"-{outcome.removed} facts, {outcome.dead} dead letters, through {outcome.through}")  # fmt: skip
            if outcome.through == last_id:
                job.stop()

        reading = threading.Event()

        def log(message: str) -> None:
            say(f"  {message}")
            if message.startswith("reading"):
                reading.set()  # the query runs: produce now, so updates overlap batches

        job = Job(cfg, on_batch=on_batch, log=log, operations=Operations())
        producer = threading.Thread(
            target=_produce, args=(broker.bootstrap, lines, ns.delay, reading), daemon=True
        )
        producer.start()
        job.run()
        deltas = read_deltas(broker.bootstrap, "deltas")
        dead = read_deltas(broker.bootstrap, "dead-letters")
    _dump_messages(deltas + dead)
    say("deltas published (as consumers see them):")
    current: set = set()
    for msg in deltas:
        added, removed_items = DeltaCodec.items(msg, "added"), DeltaCodec.items(msg, "removed")
        current.update(added)
        current.difference_update(removed_items)
        shown = ", ".join(_fact(f) for f in added[:4])
        more = "" if len(added) <= 4 else f" ... ({len(added)} facts)"
        removed = ", ".join(_fact(f) for f in removed_items[:4])
        say(f"  batch {msg['batch']:>2} through {msg['through']}: +[{shown}{more}] -[{removed}]")
    for msg in dead:
        say(f"  dead letter (partition {msg['source']['partition']}, offset "
            f"{msg['source']['offset']}): {msg['reason']}")  # fmt: skip
    from fluxmat.connectors.programs import build_reasoner
    from fluxmat.engine import EngineOptions

    # the reference core (objects) evaluates from scratch: a check independent of the job's arrays core
    reference = build_reasoner(str(program) if program else None, ontology,
                               EngineOptions(algorithm="remat", core="objects"))
    explicit = _replay_explicit(reference, facts, lines)
    reference.load(explicit)
    codec = DeltaCodec(reference.program.prefixes, example["delta_format"])  # as the job encodes them
    expected = {codec.item(f) for f in reference.facts()}
    ok = "equals" if current == expected else "DIFFERS FROM"
    say(f"summary: {len(deltas)} delta messages, {len(dead)} dead letters, "
        f"{len(current)} facts rebuilt from the deltas ({ok} a from-scratch evaluation), "
        f"{time.monotonic() - started:.1f} s")  # fmt: skip
    if current != expected:
        raise SystemExit(1)


def _dump_messages(messages: list[dict]) -> None:
    """With FLUXMAT_DEMO_MESSAGES=FILE, every message read, as JSON Lines (the tests check them)."""
    path = os.environ.get("FLUXMAT_DEMO_MESSAGES")
    if path:
        Path(path).write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages),
                              encoding="utf-8")


def _fact(f) -> str:
    return f if isinstance(f, str) else f"{f[0]}({', '.join(map(str, f[1:]))})"


def _produce(bootstrap: str, lines: list[str], delay: float, ready: threading.Event) -> None:
    from kafka import KafkaProducer

    ready.wait(timeout=60)
    time.sleep(1.0)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for line in lines:
        producer.send("updates", value=line.encode("utf-8"), partition=0)
        producer.flush()
        time.sleep(delay)
    producer.close()


def _replay_explicit(reasoner, facts_path: Path, lines: list[str]) -> list[tuple]:
    """The explicit facts after all valid updates (the reference for the demo's check)."""
    from fluxmat.connectors.files import parse_update, read_facts
    from fluxmat.engine import FluxmatError

    explicit = set(read_facts(facts_path, reasoner.prefixes))
    for line in lines:
        try:
            upd = parse_update(json.loads(line), reasoner.prefixes, "demo")
            reasoner.check_update(upd.add, upd.delete)
        except (ValueError, FluxmatError):
            continue
        explicit = (explicit - set(upd.delete)) | set(upd.add)
    return sorted(explicit, key=repr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use the fluxmat command")
