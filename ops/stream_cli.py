"""`fluxmat run` (the streaming job) and `fluxmat demo` (the whole pipeline, embedded).

Every `run` flag falls back to an environment variable `FLUXMAT_<FLAG>` (shown in
`--help`), so the Docker entrypoint and a shell use the same CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from fluxmat.engine.limits import DEFAULT_MAX_FACTS, DEFAULT_MAX_UPDATE_WORK
from fluxmat.ops.limit_flags import limit
from fluxmat.stream.batch import DEFAULT_MAX_MESSAGE_BYTES
from fluxmat.stream.keyed import DEFAULT_CACHE_FACTS

EXAMPLES = Path(__file__).resolve().parent / "examples"
DEMOS = {  # `fluxmat demo` and `fluxmat demo --rdf`: files in ops/examples
    False: {"program": "university.dl", "ontology": None, "facts": "university-facts.dl",
            "updates": "university-updates.jsonl", "delta_format": "json"},
    True: {"program": None, "ontology": "family.ttl", "facts": "family-data.ttl",
           "updates": "family-updates.jsonl", "delta_format": "ntriples"},
}  # fmt: skip

RUN_FLAGS = [
    # flag, env name, default, help
    ("--bootstrap-servers", "BOOTSTRAP_SERVERS", None, "Kafka bootstrap servers HOST:PORT"),
    ("--updates-topic", "UPDATES_TOPIC", None, "topic the producers write updates to"),
    ("--deltas-topic", "DELTAS_TOPIC", None, "topic the job publishes deltas to"),
    ("--dead-letter-topic", "DEAD_LETTER_TOPIC", None, "topic for bad messages (optional)"),
    ("--kafka-config", "KAFKA_CONFIG", None,
     "Kafka client settings file (security.protocol, ssl.ca.location, sasl.mechanism, sasl.username, "
     "sasl.password, ...; ${VAR} and <secret>.file indirection) for every Kafka client of the job"),
    ("--redis", "REDIS", None, "state store: redis://HOST:PORT/DB (memory:// keeps it in-process)"),
    ("--namespace", "NAMESPACE", "default", "key namespace in Redis (one job per namespace)"),
    ("--redis-retry-seconds", "REDIS_RETRY_SECONDS", "30",
     "a Redis call that fails (connection lost, --redis-timeout) is retried with backoff this long "
     "(the health is degraded); then the batch fails and the job exits (nothing is lost)"),
    ("--redis-timeout", "REDIS_TIMEOUT", "120",
     "seconds one Redis command may take before it counts as failed and is retried (a stalled "
     "Redis is seen after this long)"),
    ("--stall-seconds", "STALL_SECONDS", "5",
     "a micro-batch in flight longer than this makes the health degraded, naming its phase "
     "(e.g. 'committing to Redis for 23 s'); fluxmat_batch_in_flight_seconds shows its age"),
    ("--redis-wait-replicas", "REDIS_WAIT_REPLICAS", "0",
     "after each batch commit, wait until this many Redis replicas hold it (WAIT) before the delta "
     "is published, so a failover to a replica loses no acknowledged batch; too few within a "
     "second: the commit is retried as for a lost connection (0: off)"),
    ("--checkpoint", "CHECKPOINT", None, "Spark checkpoint directory (offsets)"),
    ("--max-updates-per-batch", "MAX_UPDATES_PER_BATCH", None, "rate limit: messages per micro-batch"),
    ("--trigger-interval", "TRIGGER_INTERVAL", "500ms", "micro-batch interval"),
    ("--budget", "BUDGET", "1000", "units of work between two submitted updates"),
    ("--algorithm", "ALGORITHM", "fd-counting", "fd-counting or fd-dred"),
    ("--master", "MASTER", "local[2]", "Spark master URL"),
    ("--metrics-port", "METRICS_PORT", None, "serve Prometheus metrics on this port (off when unset)"),
    ("--metrics-host", "METRICS_HOST", "127.0.0.1", "address the metrics server binds to"),
    ("--dashboard-port", "DASHBOARD_PORT", None, "serve the live dashboard on this port (off when unset)"),
    ("--dashboard-host", "DASHBOARD_HOST", "127.0.0.1", "address the dashboard binds to"),
    ("--auth-token", "AUTH_TOKEN", None, "token the dashboard requires (needed beyond 127.0.0.1)"),
    ("--starting-offsets", "STARTING_OFFSETS", None,
     "with a new checkpoint: earliest (default), latest, or JSON {\"<partition>\": offset}; "
     "also lets a stored state continue with a new checkpoint"),
    ("--max-message-bytes", "MAX_MESSAGE_BYTES", str(DEFAULT_MAX_MESSAGE_BYTES),
     "larger update messages are dead letters, not parsed (0: no limit)"),
    ("--max-update-work", "MAX_UPDATE_WORK", str(DEFAULT_MAX_UPDATE_WORK),
     "rule applications + module inferences one update may cause; more: the update is "
     "quarantined (dead letter) (0: no limit)"),
    ("--verify-every", "VERIFY_EVERY", "0",
     "every N batches, recompute the materialisation from scratch in the background and compare "
     "(shown on the dashboard and as fluxmat_verifications_total) (0: off)"),
    ("--max-facts", "MAX_FACTS", str(DEFAULT_MAX_FACTS),
     "facts the materialisation may hold; an update growing it further is quarantined "
     "(0: no limit)"),
    ("--partition-by", "PARTITION_BY", "none",
     "none: one materialisation; message-key: one per Kafka message key, graph: one per named graph "
     "of N-Quads updates, each over the shared --facts, reasoned in Spark executor tasks"),
    ("--key-partitions", "KEY_PARTITIONS", None,
     "with --partition-by: tasks a micro-batch is split into by key (default: Spark's parallelism)"),
    ("--driver-host", "DRIVER_HOST", "127.0.0.1",
     "address Spark executors reach the driver at (another host's executors: this host's name)"),
    ("--engine-cache-facts", "ENGINE_CACHE_FACTS", str(DEFAULT_CACHE_FACTS),
     "with --partition-by: facts of the key engines each engine host keeps between batches"),
    ("--delta-compression", "DELTA_COMPRESSION", "lz4",
     "how delta and dead-letter messages are compressed: lz4, gzip or none (consumers decompress; "
     "kafka-python consumers need the lz4 package for lz4)"),
    ("--snapshot-dir", "SNAPSHOT_DIR", None,
     "directory of the local snapshot of the engine's state, a cache that makes a restart skip the "
     "Redis read; used only when it holds the batch Redis committed (default: fluxmat-snapshot/ "
     "under a local --checkpoint; off: no snapshots)"),
    ("--snapshot-every", "SNAPSHOT_EVERY", "300",
     "seconds between local snapshots, each written after a committed batch; one is also written "
     "at a clean stop (0: only then)"),
    ("--snapshot-every-batches", "SNAPSHOT_EVERY_BATCHES", "0",
     "also write the local snapshot every N committed batches (0: by time only)"),
    ("--redis-fsync", "REDIS_FSYNC", "everysec",
     "Redis's AOF fsync policy, set at start (CONFIG SET appendfsync): everysec (one fsync a second; "
     "an OS crash can lose the last second, which the next start detects and refuses), always (one "
     "fsync per batch commit), keep (the server's own)"),
]
LIMITS = {"--max-message-bytes", "--max-update-work", "--max-facts"}  # 0: no limit
REQUIRED = {"--bootstrap-servers", "--updates-topic", "--deltas-topic", "--redis", "--checkpoint"}


def add_parsers(sub) -> None:
    r = sub.add_parser("run", help="the streaming job: Kafka updates -> deltas, state in Redis")
    r.add_argument("program", nargs="?", help="Datalog program file (may be left out with --ontology)")
    r.add_argument("--facts", action="append", default=[], metavar="FILE",
                   help="initial explicit facts (used only when the state store is empty)")
    from fluxmat.ops.rdf_cli import add_input_flags

    add_input_flags(r)
    r.add_argument("--delta-format", default=os.environ.get("FLUXMAT_DELTA_FORMAT", "json"),
                   choices=["json", "ntriples", "debezium"],
                   help="deltas as JSON facts, as N-Triples text (facts that are not triples "
                   "stay JSON, under not_triples), or as Debezium change events, one per fact on "
                   "the topic <deltas-topic>.<predicate> (env FLUXMAT_DELTA_FORMAT; default: %(default)s)")  # fmt: skip
    for flag, env, default, text in RUN_FLAGS:
        value = os.environ.get(f"FLUXMAT_{env}", default)
        needed = flag in REQUIRED and value is None
        r.add_argument(flag, default=value, required=needed, type=limit if flag in LIMITS else None,
                       help=f"{text} (env FLUXMAT_{env}" + (f"; default: {default})" if default else ")"))
    r.add_argument("--redis-cluster", action="store_true", default=os.environ.get("FLUXMAT_REDIS_CLUSTER"),
                   help="--redis is a seed node of a Redis Cluster (env FLUXMAT_REDIS_CLUSTER=yes)")
    d = sub.add_parser("demo", help="run the whole pipeline on a bundled example, nothing to install")
    d.add_argument("--budget", type=int, default=2, help="units of work between updates (default 2)")
    d.add_argument("--delay", type=float, default=0.3, help="seconds between produced updates")
    d.add_argument("--rdf", action="store_true",
                   help="the RDF example instead: an OWL ontology (--ontology), Turtle facts, "
                   "N-Triples update messages in, N-Triples deltas out (--delta-format ntriples)")  # fmt: skip


def _int(value, flag: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        from fluxmat.engine import FluxmatError

        raise FluxmatError(f"{flag} expects a whole number, got {value!r}") from None


def _seconds(value, flag: str) -> float:
    try:
        return float(value)
    except ValueError:
        from fluxmat.engine import FluxmatError

        raise FluxmatError(f"{flag} expects a number of seconds, got {value!r}") from None


def job_config(ns: argparse.Namespace):
    from fluxmat.connectors.kafka_sink import COMPRESSIONS
    from fluxmat.connectors.state import FSYNC_POLICIES
    from fluxmat.engine import EngineOptions, FluxmatError, Limits
    from fluxmat.stream.job import STREAM_ENGINE, JobConfig

    if ns.delta_compression not in COMPRESSIONS:
        raise FluxmatError(f"--delta-compression must be one of {', '.join(COMPRESSIONS)}, "
                           f"got {ns.delta_compression!r}")  # fmt: skip
    if ns.redis_fsync not in FSYNC_POLICIES:  # a RUN_FLAGS value: argparse does not check it
        raise FluxmatError(f"--redis-fsync must be one of {', '.join(FSYNC_POLICIES)}, got {ns.redis_fsync!r}")
    budget = _int(ns.budget, "--budget") or 0
    if budget < 0:
        raise FluxmatError(f"--budget must be at least 0, got {budget}")
    engine = EngineOptions(
        algorithm=ns.algorithm, schedule=STREAM_ENGINE.schedule, budget=budget,
        limits=Limits.of(ns.max_update_work or None, ns.max_facts or None),
    )  # fmt: skip
    return JobConfig(
        program=ns.program or "", facts=tuple(ns.facts), bootstrap_servers=ns.bootstrap_servers,
        updates_topic=ns.updates_topic, deltas_topic=ns.deltas_topic,
        dead_letter_topic=ns.dead_letter_topic or None, redis=ns.redis, namespace=ns.namespace,
        checkpoint=ns.checkpoint, engine=engine,
        max_updates_per_batch=_int(ns.max_updates_per_batch, "--max-updates-per-batch"),
        trigger_interval=ns.trigger_interval,
        master=ns.master, metrics_port=_int(ns.metrics_port, "--metrics-port"),
        metrics_host=ns.metrics_host, dashboard_port=_int(ns.dashboard_port, "--dashboard-port"),
        dashboard_host=ns.dashboard_host, auth_token=ns.auth_token or None,
        starting_offsets=ns.starting_offsets or None, ontology=tuple(ns.ontology), owl_rules=ns.owl_rules,
        facts_format=ns.facts_format, delta_format=ns.delta_format,
        max_message_bytes=ns.max_message_bytes or None,
        verify_every=_int(ns.verify_every, "--verify-every") or 0,
        partition_by=ns.partition_by, redis_cluster=_yes(ns.redis_cluster, "FLUXMAT_REDIS_CLUSTER"),
        redis_retry_seconds=_seconds(ns.redis_retry_seconds, "--redis-retry-seconds"),
        redis_timeout=_seconds(ns.redis_timeout, "--redis-timeout"),
        stall_seconds=_seconds(ns.stall_seconds, "--stall-seconds"),
        redis_wait_replicas=_int(ns.redis_wait_replicas, "--redis-wait-replicas") or 0,
        key_partitions=_int(ns.key_partitions, "--key-partitions"), driver_host=ns.driver_host,
        redis_fsync=ns.redis_fsync, delta_compression=ns.delta_compression,
        engine_cache_facts=_int(ns.engine_cache_facts, "--engine-cache-facts") or DEFAULT_CACHE_FACTS,
        kafka_config=ns.kafka_config or None, snapshot_dir=ns.snapshot_dir or None,
        snapshot_every=_seconds(ns.snapshot_every, "--snapshot-every"),
        snapshot_every_batches=_int(ns.snapshot_every_batches, "--snapshot-every-batches") or 0,
    )  # fmt: skip


def _yes(value, flag: str) -> bool:
    """A switch given as a flag value or an environment variable: yes/true/1, no/false/0."""
    if value in (None, "", False, True):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("yes", "true", "1", "on"):
        return True
    if text in ("no", "false", "0", "off"):
        return False
    from fluxmat.engine import FluxmatError

    raise FluxmatError(f"{flag} expects yes or no, got {value!r}")


_TOPIC = re.compile(r"[A-Za-z0-9._\-]{1,249}\Z")
_INTERVAL = re.compile(r"\d+\s*(ms|s|(millisecond|second|minute|hour)s?)\Z")


def check_run_flags(cfg) -> None:
    """Refuse values `fluxmat run` cannot use before anything is contacted or started."""
    from fluxmat.connectors.redact import redact
    from fluxmat.engine import FULLY_DYNAMIC, FluxmatError

    def fail(message: str):
        raise FluxmatError(message)

    from fluxmat.client.kafka_config import KafkaConfigError, load

    try:
        if cfg.kafka_config:
            load(cfg.kafka_config)
    except KafkaConfigError as exc:
        fail(f"--kafka-config: {exc}")
    fully_dynamic = sorted(FULLY_DYNAMIC)
    if cfg.engine.algorithm not in fully_dynamic:
        fail(f"--algorithm must be a fully dynamic algorithm ({' or '.join(fully_dynamic)}), "
             f"got {cfg.engine.algorithm!r}")  # fmt: skip

    for flag, topic in (("--updates-topic", cfg.updates_topic), ("--deltas-topic", cfg.deltas_topic),
                        ("--dead-letter-topic", cfg.dead_letter_topic)):  # fmt: skip
        if topic is not None and (not _TOPIC.match(topic) or topic in (".", "..")):
            fail(f"{flag} must be a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -), got {topic!r}")
    for flag, port in (("--metrics-port", cfg.metrics_port), ("--dashboard-port", cfg.dashboard_port)):
        if port is not None and not 0 <= port <= 65535:
            fail(f"{flag} must be a port number from 0 to 65535, got {port}")
    if not _INTERVAL.match(cfg.trigger_interval.strip()):
        fail(f"--trigger-interval expects a duration such as 500ms, 2s or '1 minute', "
             f"got {cfg.trigger_interval!r}")  # fmt: skip
    if not cfg.redis_retry_seconds >= 0:
        fail(f"--redis-retry-seconds must be at least 0, got {cfg.redis_retry_seconds}")
    if not cfg.redis_timeout > 0:
        fail(f"--redis-timeout must be more than 0 seconds, got {cfg.redis_timeout}")
    if not cfg.stall_seconds > 0:
        fail(f"--stall-seconds must be more than 0 seconds, got {cfg.stall_seconds}")
    if cfg.redis_wait_replicas < 0:
        fail(f"--redis-wait-replicas must be at least 0 (0: off), got {cfg.redis_wait_replicas}")
    if not cfg.snapshot_every >= 0:
        fail(f"--snapshot-every must be at least 0 seconds (0: only at a clean stop), got {cfg.snapshot_every}")
    if cfg.snapshot_every_batches < 0:
        fail(f"--snapshot-every-batches must be at least 0 (0: by time only), got {cfg.snapshot_every_batches}")
    if cfg.verify_every < 0:
        fail(f"--verify-every must be at least 0 (0: off), got {cfg.verify_every}")
    from fluxmat.stream.keyed import PARTITION_BY

    if cfg.partition_by not in PARTITION_BY:
        fail(f"--partition-by must be one of {', '.join(PARTITION_BY)}, got {cfg.partition_by!r}")
    if cfg.key_partitions is not None and cfg.key_partitions < 1:
        fail(f"--key-partitions must be at least 1, got {cfg.key_partitions}")
    if cfg.engine_cache_facts < 1:
        fail(f"--engine-cache-facts must be at least 1, got {cfg.engine_cache_facts}")
    if cfg.max_updates_per_batch is not None and cfg.max_updates_per_batch < 1:
        fail(f"--max-updates-per-batch must be at least 1, got {cfg.max_updates_per_batch}")
    if cfg.redis and not cfg.redis.startswith(("redis://", "rediss://", "unix://", "memory:")):
        fail(f"--redis expects redis://HOST:PORT/DB, rediss://... or memory://, got {redact(cfg.redis)!r}")
    offsets = cfg.starting_offsets
    if offsets and offsets not in ("earliest", "latest"):
        try:
            parsed = json.loads(offsets)
        except (ValueError, RecursionError):
            parsed = None
        if not (isinstance(parsed, dict) and all(
                k.isdigit() and type(v) is int and v >= 0 for k, v in parsed.items())):  # fmt: skip
            fail("--starting-offsets expects earliest, latest or a JSON object "
                 f"{{\"<partition>\": <offset>}}, got {offsets[:60]!r}")  # fmt: skip


def cmd_run(ns: argparse.Namespace) -> None:
    import logging

    from fluxmat.connectors.redact import redact
    from fluxmat.ops.wiring import Operations
    from fluxmat.stream.job import run_until_signalled

    cfg = job_config(ns)
    check_run_flags(cfg)
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
    from fluxmat.connectors.kafka_sink import read_deltas
    from fluxmat.ops.wiring import Operations
    from fluxmat.stream.job import STREAM_ENGINE, Job, JobConfig

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
        cfg = JobConfig(
            program=str(program or ""), facts=(str(facts),), bootstrap_servers=broker.bootstrap,
            ontology=ontology, delta_format=example["delta_format"],
            updates_topic="updates", deltas_topic="deltas", dead_letter_topic="dead-letters",
            redis="memory://", checkpoint=str(Path(tmp) / "checkpoint"),
            engine=replace(STREAM_ENGINE, budget=ns.budget),
            trigger_interval="300ms",
        )  # fmt: skip
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
        added, removed_items = _items(msg, "added"), _items(msg, "removed")
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

    reference = build_reasoner(str(program) if program else None, ontology, EngineOptions(algorithm="remat"))
    explicit = _replay_explicit(reference, facts, lines)
    reference.load(explicit)
    expected = {f if isinstance(f, str) else tuple(f) for f in map(job.processor._wire, reference.facts())}
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


def _items(msg: dict, key: str) -> list:
    """A delta message's added or removed facts: tuples, and N-Triples lines (--delta-format ntriples)."""
    if isinstance(msg[key], str):
        return msg[key].splitlines() + [tuple(f) for f in msg.get("not_triples", {}).get(key, [])]
    return [tuple(f) for f in msg[key]]


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
