"""The streaming job's configuration: `JobConfig`, where every setting is declared once.

Each setting of `fluxmat run` is one field of `JobConfig`; its metadata (a
`Setting`) holds its help, its kind (text, a whole number, seconds, yes/no, a
list of files), whether the job needs it, and the check its value must pass.
Everything else is derived from these fields (`SETTINGS`):

* the flag `--<name>` (underscores as dashes) of `fluxmat run` (ops.stream_cli);
* the environment variable `FLUXMAT_<NAME>`;
* the key `<name>` of a `--config` TOML file, and the file `--print-config`
  writes (stream.config_sources, which also applies the precedence
  flags > environment > file > defaults).

Validation happens in one place, `check_values`, which `JobConfig.__post_init__`
runs: a `JobConfig` that exists has passed every check, whether the CLI, the
demo or a test built it. A refused value raises `SettingError` naming the
setting; the sources module says where the value came from (flag, variable, or
file and line).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fluxmat.client.kafka_config import KafkaConfigError
from fluxmat.client.kafka_config import load as load_kafka
from fluxmat.connectors.files import FACTS_FORMATS
from fluxmat.connectors.kafka_sink import COMPRESSIONS, DELTA_FORMATS
from fluxmat.connectors.owl2rl_rdf import OWL_RULES
from fluxmat.connectors.redact import redact
from fluxmat.connectors.state import FSYNC_POLICIES, RETRY_SECONDS, SOCKET_TIMEOUT
from fluxmat.engine import EQUALITY_MODES as EQUALITY
from fluxmat.engine import FULLY_DYNAMIC, EngineOptions, FluxmatError
from fluxmat.engine.limits import DEFAULT_MAX_FACTS, DEFAULT_MAX_UPDATE_WORK, Limits
from fluxmat.engine.options import CORES
from fluxmat.stream.batch import DEFAULT_MAX_MESSAGE_BYTES
from fluxmat.stream.keyed import DEFAULT_CACHE_FACTS, PARTITION_BY
from fluxmat.stream.snapshots import DEFAULT_EVERY_BATCHES, DEFAULT_EVERY_SECONDS

DEFAULT_STALL_SECONDS = 5.0  # --stall-seconds: a batch in flight this long shows as degraded

# The job's engine unless told otherwise: FD-Counting, overlapping updates, the default limits.
STREAM_ENGINE = EngineOptions(
    algorithm="fd-counting", schedule="interleaved", limits=Limits.of(DEFAULT_MAX_UPDATE_WORK, DEFAULT_MAX_FACTS)
)


class SettingError(FluxmatError):
    """A value a setting refuses: `key`, the `problem` ("must be at least 0, got -1").

    `{other}` in the problem names another setting `other` (listed in `refs`);
    `render(label)` fills in how the user gave each one (flag, variable, key).
    """

    def __init__(self, key: str, problem: str, refs: tuple[str, ...] = ()):
        self.key, self.problem, self.refs = key, problem, refs
        super().__init__(self.render(lambda name: SETTINGS[name].flag))

    def render(self, label: Callable[[str], str]) -> str:
        text = self.problem
        for ref in self.refs:
            text = text.replace("{" + ref + "}", label(ref))
        return f"{label(self.key)}{'' if text.startswith(':') else ' '}{text}"


# ---------------------------------------------------------------- kinds of values


def _yes(text: str) -> bool:
    """A switch as text: yes/true/1/on or no/false/0/off."""
    value = text.strip().lower()
    if value in ("yes", "true", "1", "on"):
        return True
    if value in ("no", "false", "0", "off"):
        return False
    raise ValueError(text)


@dataclass(frozen=True)
class Kind:
    """How a setting's values are read from text (flags, variables) and recognised (a file, code)."""

    what: str  # what a value must be, in errors: "a whole number"
    metavar: str
    read: Callable[[str], Any]  # a flag's or variable's text -> the value; ValueError when it is not one
    accepts: Callable[[Any], bool]  # a value given in a file or in code
    normal: Callable[[Any], Any] = lambda v: v  # an accepted value as JobConfig holds it


TEXT = Kind("text", "TEXT", str, lambda v: isinstance(v, str))
COUNT = Kind("a whole number", "N", int, lambda v: type(v) is int)
SECONDS = Kind("a number of seconds", "SECONDS", float, lambda v: type(v) in (int, float), float)
SWITCH = Kind("yes or no", "", _yes, lambda v: type(v) is bool)
FILES = Kind("a list of file names", "FILE", lambda t: tuple(p for p in t.split(os.pathsep) if p),
             lambda v: isinstance(v, list | tuple) and all(isinstance(p, str) for p in v), tuple)  # fmt: skip


# ---------------------------------------------------------------- checks of one value


def one_of(options) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"must be one of {', '.join(options)}, got {v!r}"


def at_least(n: int, note: str = "") -> Callable[[Any], str | None]:
    return lambda v: None if v >= n else f"must be at least {n}{note}, got {v}"


def _more_than_zero_seconds(v: float) -> str | None:
    return None if v > 0 else f"must be more than 0 seconds, got {v}"


def _port(v: int) -> str | None:
    return None if 0 <= v <= 65535 else f"must be a port number from 0 to 65535, got {v}"


_TOPIC = re.compile(r"[A-Za-z0-9._\-]{1,249}\Z")
_INTERVAL = re.compile(r"\d+\s*(ms|s|(millisecond|second|minute|hour)s?)\Z")
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")  # a Redis server (memory:// is in-process)


def _topic(v: str) -> str | None:
    if _TOPIC.match(v) and v not in (".", ".."):
        return None
    return f"must be a Kafka topic name (1-249 of a-z A-Z 0-9 . _ -), got {v!r}"


def _interval(v: str) -> str | None:
    if _INTERVAL.match(v.strip()):
        return None
    return f"expects a duration such as 500ms, 2s or '1 minute', got {v!r}"


def _redis_url(v: str) -> str | None:
    if v.startswith((*REDIS_SCHEMES, "memory:")):
        return None
    return f"expects redis://HOST:PORT/DB, rediss://... or memory://, got {redact(v)!r}"


def _fully_dynamic(v: str) -> str | None:
    names = sorted(FULLY_DYNAMIC)
    return None if v in names else f"must be a fully dynamic algorithm ({' or '.join(names)}), got {v!r}"


def _offsets(v: str) -> str | None:
    if v in ("earliest", "latest"):
        return None
    try:
        parsed = json.loads(v)
    except (ValueError, RecursionError):
        parsed = None
    if isinstance(parsed, dict) and all(k.isdigit() and type(n) is int and n >= 0 for k, n in parsed.items()):
        return None
    return f"expects earliest, latest or a JSON object {{\"<partition>\": <offset>}}, got {v[:60]!r}"


def _kafka_settings(path: str) -> str | None:
    try:
        load_kafka(path)
    except KafkaConfigError as exc:
        return f": {exc}"
    return None


# ---------------------------------------------------------------- the settings


@dataclass(frozen=True)
class Setting:
    """One setting of the job: how it is given, read and checked (see the module docstring)."""

    help: str
    kind: Kind = TEXT
    check: Callable[[Any], str | None] | None = None  # a problem ("must be ...") or None
    required: bool = False  # `fluxmat run` does not start without it
    choices: tuple[str, ...] | None = None
    secret: bool = False  # --print-config does not show it
    name: str = ""  # the field's name (filled in from JobConfig)
    default: Any = None

    @property
    def flag(self) -> str:
        return "PROGRAM" if self.name == "program" else "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "FLUXMAT_" + self.name.upper()

    @property
    def optional(self) -> bool:
        """None is a value (unset: the feature is off or chosen elsewhere)."""
        return self.default is None and not self.required


def setting(default, help: str, kind: Kind = TEXT, check=None, choices=None, **more):
    """A JobConfig field that is a setting (a `choices` setting is checked against them)."""
    check = check or (one_of(choices) if choices else None)
    return field(default=default, metadata={"setting": Setting(help, kind, check, choices=choices, **more)})


def _files(help: str):
    return setting((), help, FILES)


@dataclass(frozen=True)
class JobConfig:
    """Everything `fluxmat run` needs; each field a setting (flag, variable, file key)."""

    program: str = setting("", "Datalog program file (may be left out with --ontology)")
    facts: tuple[str, ...] = _files("initial explicit facts (used only when the state store is empty)")
    ontology: tuple[str, ...] = _files(
        "add this OWL ontology's OWL 2 RL rules and assertions (RDF/XML, Turtle, ...); PROGRAM may then be left out")
    owl_rules: str = setting(
        "axioms", "how --ontology becomes rules: axioms: one rule per OWL 2 RL axiom, axioms outside OWL 2 RL "
        "skipped with a warning (fast); rdf: the W3C OWL 2 RL/RDF rules over the triples, the ontology as data "
        "(owlrl's and GraphDB's answers; schema triples may arrive in updates)", choices=OWL_RULES)
    facts_format: str | None = setting(
        None, "format of every --facts file (default: by extension: .nt .nq .ttl .trig .rdf .owl .xml (also .gz) "
        "RDF, .jsonl JSON Lines, else facts)", choices=FACTS_FORMATS)
    delta_format: str = setting(
        "json", "deltas as JSON facts, as N-Triples text (facts that are not triples stay JSON, under "
        "not_triples), or as Debezium change events, one per fact on the topic <deltas-topic>.<predicate>",
        choices=DELTA_FORMATS)
    bootstrap_servers: str | None = setting(None, "Kafka bootstrap servers HOST:PORT", required=True)
    updates_topic: str | None = setting(None, "topic the producers write updates to", check=_topic, required=True)
    deltas_topic: str | None = setting(None, "topic the job publishes deltas to", check=_topic, required=True)
    dead_letter_topic: str | None = setting(None, "topic for bad messages (optional)", check=_topic)
    kafka_config: str | None = setting(
        None, "Kafka client settings file (security.protocol, ssl.ca.location, sasl.mechanism, sasl.username, "
        "sasl.password, ...; ${VAR} and <secret>.file indirection) for every Kafka client of the job",
        check=_kafka_settings)
    redis: str | None = setting(None, "state store: redis://HOST:PORT/DB (memory:// keeps it in-process)",
                                check=_redis_url, required=True)
    namespace: str = setting("default", "key namespace in Redis (one job per namespace)")
    redis_retry_seconds: float = setting(
        RETRY_SECONDS, "a Redis call that fails (connection lost, --redis-timeout) is retried with backoff this "
        "long (the health is degraded); then the batch fails and the job exits (nothing is lost)",
        SECONDS, at_least(0))
    redis_timeout: float = setting(
        SOCKET_TIMEOUT, "seconds one Redis command may take before it counts as failed and is retried (a "
        "stalled Redis is seen after this long)", SECONDS, _more_than_zero_seconds)
    stall_seconds: float = setting(
        DEFAULT_STALL_SECONDS, "a micro-batch in flight longer than this makes the health degraded, naming its "
        "phase (e.g. 'committing to Redis for 23 s'); fluxmat_batch_in_flight_seconds shows its age",
        SECONDS, _more_than_zero_seconds)
    redis_wait_replicas: int = setting(
        0, "after each batch commit, wait until this many Redis replicas hold it (WAIT) before the delta is "
        "published, so a failover to a replica loses no acknowledged batch; too few within a second: the "
        "commit is retried as for a lost connection (0: off)", COUNT, at_least(0, " (0: off)"))
    checkpoint: str | None = setting(None, "Spark checkpoint directory (offsets)", required=True)
    max_updates_per_batch: int | None = setting(None, "rate limit: messages per micro-batch", COUNT, at_least(1))
    trigger_interval: str = setting("500ms", "micro-batch interval", check=_interval)
    budget: int = setting(1000, "units of work between two submitted updates", COUNT, at_least(0))
    algorithm: str = setting("fd-counting", "fd-counting or fd-dred", check=_fully_dynamic)
    core: str = setting(
        "arrays", "how the engine keeps facts: arrays (int64 columns, ~40x less memory per fact; updates of a "
        "batch integrated set-at-a-time) or objects (Python sets, the reference core; a batch's updates "
        "overlap); when not given, a stored state goes on with the core that kept it", choices=CORES)
    equality: str = setting(
        "off", "rewrite: owl:sameAs is equality, facts rewritten to the representatives of their classes "
        "(needs the arrays core; program changes with it too)", choices=EQUALITY)
    master: str = setting("local[2]", "Spark master URL")
    metrics_port: int | None = setting(None, "serve Prometheus metrics on this port (off when unset)", COUNT, _port)
    metrics_host: str = setting("127.0.0.1", "address the metrics server binds to")
    dashboard_port: int | None = setting(None, "serve the live dashboard on this port (off when unset)", COUNT, _port)
    dashboard_host: str = setting("127.0.0.1", "address the dashboard binds to")
    auth_token: str | None = setting(None, "token the dashboard requires (needed beyond 127.0.0.1)", secret=True)
    starting_offsets: str | None = setting(
        None, "with a new checkpoint: earliest (default), latest, or JSON {\"<partition>\": offset}; also lets "
        "a stored state continue with a new checkpoint", check=_offsets)
    max_message_bytes: int = setting(
        DEFAULT_MAX_MESSAGE_BYTES, "larger update messages are dead letters, not parsed (0: no limit)",
        COUNT, at_least(0, " (0: no limit)"))
    max_update_work: int = setting(
        DEFAULT_MAX_UPDATE_WORK, "rule applications + module inferences one update may cause; more: the "
        "update is quarantined (dead letter) (0: no limit)", COUNT, at_least(0, " (0: no limit)"))
    verify_every: int = setting(
        0, "every N batches, recompute the materialisation from scratch in the background and compare (shown "
        "on the dashboard and as fluxmat_verifications_total) (0: off)", COUNT, at_least(0, " (0: off)"))
    max_facts: int = setting(
        DEFAULT_MAX_FACTS, "facts the materialisation may hold; an update growing it further is quarantined "
        "(0: no limit)", COUNT, at_least(0, " (0: no limit)"))
    partition_by: str = setting(
        "none", "none: one materialisation; message-key: one per Kafka message key, graph: one per named graph "
        "of N-Quads updates, each over the shared --facts, reasoned in Spark executor tasks",
        choices=PARTITION_BY)
    key_partitions: int | None = setting(
        None, "with --partition-by: tasks a micro-batch is split into by key (default: Spark's parallelism)",
        COUNT, at_least(1))
    driver_host: str = setting(
        "127.0.0.1", "address Spark executors reach the driver at (another host's executors: this host's name)")
    engine_cache_facts: int = setting(
        DEFAULT_CACHE_FACTS, "with --partition-by: facts of the key engines each engine host keeps between "
        "batches", COUNT, at_least(1))
    delta_compression: str = setting(
        "lz4", "how delta and dead-letter messages are compressed: lz4, gzip or none (consumers decompress; "
        "kafka-python consumers need the lz4 package for lz4)", choices=COMPRESSIONS)
    redis_fsync: str = setting(
        "everysec", "Redis's AOF fsync policy, set at start (CONFIG SET appendfsync): everysec (one fsync a "
        "second; an OS crash can lose the last second, which the next start detects and refuses), always (one "
        "fsync per batch commit), keep (the server's own)", choices=FSYNC_POLICIES)
    redis_cluster: bool = setting(False, "--redis is a seed node of a Redis Cluster", SWITCH)
    snapshot_dir: str | None = setting(
        None, "directory of the local snapshot of the engine's state, a cache that makes a restart skip the "
        "Redis read; used only when it holds the batch Redis committed (default: fluxmat-snapshot/ under a "
        "local --checkpoint; off: no snapshots)")
    snapshot_every: float = setting(
        DEFAULT_EVERY_SECONDS, "seconds between local snapshots, each written after a committed batch; one is "
        "also written at a clean stop (0: only then)", SECONDS, at_least(0))
    snapshot_every_batches: int = setting(
        DEFAULT_EVERY_BATCHES, "also write the local snapshot every N committed batches (0: by time only)",
        COUNT, at_least(0, " (0: by time only)"))
    updates_partitions: int = 1  # partitions of a topic the job creates (not a setting)
    # whether the core was chosen (a flag, a variable, a --config key, or code); False: a stored
    # state goes on with the core that kept it (stream.loading.settle_core; not a setting)
    core_given: bool = field(default=True, compare=False)

    def __post_init__(self):
        check_values(self.settings())
        for s in SETTINGS.values():  # e.g. 30 -> 30.0, a list -> a tuple
            value = getattr(self, s.name)
            if value is not None and s.kind.normal(value) is not value:
                object.__setattr__(self, s.name, s.kind.normal(value))

    def settings(self) -> dict[str, Any]:
        """The settings' values by name (what a --config file holds)."""
        return {name: getattr(self, name) for name in SETTINGS}

    @property
    def keyed(self) -> bool:
        return self.partition_by != "none"

    @property
    def engine(self) -> EngineOptions:
        """The engine's options: the algorithm, the core, the budget and the limits (0: none)."""
        return replace(STREAM_ENGINE, algorithm=self.algorithm, budget=self.budget, core=self.core,
                       equality=self.equality, limits=Limits.of(self.max_update_work, self.max_facts))  # fmt: skip


SETTINGS: dict[str, Setting] = {
    f.name: replace(f.metadata["setting"], name=f.name, default=f.default)
    for f in fields(JobConfig)
    if "setting" in f.metadata
}


def _keyed_needs_redis(v: Mapping[str, Any]) -> SettingError | None:
    if v["partition_by"] != "none" and not (v["redis"] or "").startswith(REDIS_SCHEMES):
        return SettingError("partition_by", f"{v['partition_by']} keeps each key's state in Redis, which "
                            "executors share: give {redis} redis://HOST:PORT/DB", ("redis",))  # fmt: skip
    return None


def _keyed_cannot_verify(v: Mapping[str, Any]) -> SettingError | None:
    if v["partition_by"] != "none" and v["verify_every"]:
        return SettingError("verify_every", "is not available with {partition_by} (no engine on the driver)",
                            ("partition_by",))  # fmt: skip
    return None


def _equality_needs_arrays(v: Mapping[str, Any]) -> SettingError | None:
    if v["equality"] == "off":
        return None
    if v["core"] != "arrays":
        return SettingError("equality", "rewrite needs {core} arrays (the job's fully dynamic algorithms keep "
                            "equivalence classes on the arrays core only)", ("core",))  # fmt: skip
    if v["partition_by"] != "none":
        return SettingError("equality", "rewrite is not available with {partition_by} yet", ("partition_by",))
    return None


COMBINED_CHECKS = (_keyed_needs_redis, _keyed_cannot_verify, _equality_needs_arrays)  # checks of settings together


def describe(value) -> str:
    """A value as an error names it: "a string '30'", "an integer 5", "a table"."""
    kinds = ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
             ((list, tuple), "an array"), (dict, "a table"))  # fmt: skip
    name = next((n for t, n in kinds if isinstance(value, t)), type(value).__name__)
    return name if isinstance(value, dict) else f"{name} {value!r}"


def check_one(s: Setting, value, require: bool = True) -> None:
    """Refuse a value of setting `s` (SettingError): a missing required one, a wrong type, a bad value."""
    if value is None:
        if s.required and require:
            raise SettingError(s.name, f"is required (or set {s.env}, or {s.name} in the --config file)")
        if s.optional or s.required:
            return
    if not s.kind.accepts(value):
        raise SettingError(s.name, f"expects {s.kind.what}, got {describe(value)}")
    problem = s.check(s.kind.normal(value)) if s.check else None
    if problem:
        raise SettingError(s.name, problem)


def check_values(values: Mapping[str, Any], require: bool = True) -> None:
    """Every check of the job's settings, in one place: each value, then the combinations.

    `require=False` lets required settings be missing (--print-config of a partial configuration).
    """
    for s in SETTINGS.values():
        check_one(s, values[s.name], require)
    for combined in COMBINED_CHECKS:
        if (error := combined(values)) is not None:
            raise error
