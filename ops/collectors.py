"""The job's Prometheus collectors: the `fluxmat_*` table (ops.metric_names) and how each event moves them.

`Collectors` keeps its own registry (`registry`, the `fluxmat_*` series) and
the driver's process metrics (`process`), and has one method an event kind:
sizes after a batch, what a batch published, an applied or replayed batch,
the work per rule, keys, Spark's phases, retries, failures, self-checks, the
lag and the time lag, the batch in flight, and the once-a-second sample (the
health state, the consistency point's age, idle). `Exported` and
`serve_metrics` serve both registries at `/metrics`, every series labelled
with the job's namespace.

Thread-safety: none of its own; its owner (ops.metrics.JobMetrics) calls it
under its lock.

Not here: the status value the page reads (ops.status), its series
(ops.series), the health checks (ops.health).
"""

from __future__ import annotations

import math
import threading

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from fluxmat.ops.health import HEALTH_STATES
from fluxmat.ops.metric_names import METRICS
from fluxmat.stream.inflight import PHASES

disable_created_metrics()  # no `_created` series: they only clutter dashboards
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
ENGINE_WORK = ("units", "rule_applications", "noop_adds", "noop_deletes")  # BatchOutcome.stats keys
ENGINE_EVENTS = (("cancelled", "fluxmat_operations_cancelled_total"),
                 ("recursion_stops", "fluxmat_recursion_stops_total"),
                 ("rederivations", "fluxmat_rederivations_total"))  # BatchOutcome.stats keys  # fmt: skip
SPARK_PHASES = ("triggerExecution", "addBatch", "latestOffset", "queryPlanning", "walCommit",
                "commitOffsets", "getBatch")  # lastProgress.durationMs keys kept (a bounded label)  # fmt: skip
RULE_SERIES = 50  # rules with a series of their own in fluxmat_rule_* (the first top rules); the rest: "other"
LABELLED_FROM_THE_START = (("fluxmat_fact_operations_total", "op", ("add", "delete")),
                           ("fluxmat_batches_total", "outcome", ("applied", "replayed")),
                           ("fluxmat_delta_facts_total", "kind", ("added", "removed")),
                           ("fluxmat_engine_cache_total", "result", ("hit", "miss", "new")))  # fmt: skip
SIZE_GAUGES = (("facts", "fluxmat_materialisation_facts"), ("explicit", "fluxmat_explicit_facts"),
               ("log", "fluxmat_derivation_log_entries"), ("entries", "fluxmat_state_entries"))  # fmt: skip


MANY_AT_ONCE = {"fluxmat_update_latency_seconds"}  # histograms observed a batch of values at once (BulkHistogram)


class BulkHistogram:
    """A label-less histogram observed many values at a time, as `Histogram` shows them.

    `prometheus_client.Histogram.observe` costs ~3 us a value, with its lock:
    one observation per update of a 10,000-update batch was ~30 ms of the
    driver's time. Here a batch's values are counted into the buckets with
    numpy (a value goes to the first bucket whose bound is >= it, as there).
    """

    def __init__(self, name: str, documentation: str, buckets: tuple, registry: CollectorRegistry):
        self.name, self.documentation = name, documentation
        self.bounds = np.array([*buckets, math.inf], np.float64)
        self.counts = np.zeros(len(self.bounds), np.int64)  # per bucket, not cumulative
        self.sum = 0.0
        self.lock = threading.Lock()  # a scrape sees the counts and the sum of the same batches
        registry.register(self)

    def observe(self, value: float) -> None:
        self.observe_many([value])

    def observe_many(self, values) -> None:
        values = np.asarray(values, np.float64)
        counts = np.bincount(np.searchsorted(self.bounds, values, side="left"), minlength=len(self.bounds))
        with self.lock:
            self.counts += counts
            self.sum += float(values.sum())

    def collect(self):
        with self.lock:
            cumulative, total = np.cumsum(self.counts).tolist(), self.sum
        buckets = [(floatToGoString(b), n) for b, n in zip(self.bounds.tolist(), cumulative, strict=True)]
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)


def collectors(registry: CollectorRegistry) -> dict[str, object]:
    """One collector per row of ops.metric_names.METRICS, in `registry`."""
    out: dict[str, object] = {}
    for name, (kind, text, labels) in METRICS.items():
        if kind == "counter":
            base = name[: -len("_total")] if name.endswith("_total") else name
            out[name] = Counter(base, text, labels, registry=registry)
        elif kind == "gauge":
            out[name] = Gauge(name, text, labels, registry=registry)
        elif kind == "histogram" and name in MANY_AT_ONCE:
            out[name] = BulkHistogram(name, text, DURATION_BUCKETS, registry)
        elif kind == "histogram":
            out[name] = Histogram(name, text, labels, buckets=DURATION_BUCKETS, registry=registry)
        else:  # pragma: no cover - guarded by tests/ops/test_deployment.py
            raise ValueError(f"unknown metric type {kind!r} for {name}")
    return out


class Collectors:
    """The `fluxmat_*` collectors of one job and the driver's `process_*` (module docstring)."""

    def __init__(self, program: str, algorithm: str, namespace: str, topic: str):
        self.registry = CollectorRegistry()  # the fluxmat_* table (ops.metric_names)
        self.process = CollectorRegistry()  # process_* of the driver (ops.metric_names.PROCESS)
        ProcessCollector(registry=self.process)
        self.c = c = collectors(self.registry)
        self.topic = topic
        self.rule_series: dict[str, int] = {}  # rules with their own fluxmat_rule_* series -> log entries
        c["fluxmat_info"].labels(program=program, algorithm=algorithm, namespace=namespace).set(1)
        c["fluxmat_verified_batch"].set(-1)
        for name, label, values in LABELLED_FROM_THE_START:
            for v in values:  # every series exists from the start (rate() needs a first sample)
                c[name].labels(**{label: v})
        for phase in PHASES:
            c["fluxmat_batch_in_flight_phase"].labels(phase=phase).set(0)

    def sizes(self, read: dict) -> None:
        """The size gauges from `ops.sizes.read_sizes` (completed with the sizes known before)."""
        c = self.c
        for key, name in SIZE_GAUGES:
            c[name].set(read[key])
        for name, n in read.items():
            if name.startswith("fluxmat_") and n is not None:
                c[name].set(n)
        for node, used in read["nodes"].items():
            c["fluxmat_state_node_memory_bytes"].labels(node=node).set(used)
        if "inconsistencies" in read:
            c["fluxmat_owl_inconsistencies"].set(read["inconsistencies"][0])

    def published(self, sent: dict) -> None:
        """What a batch sent to the deltas topic (BatchOutcome.published; replays re-send)."""
        self.c["fluxmat_delta_messages_total"].inc(sent["messages"])
        for kind in ("added", "removed"):
            self.c["fluxmat_delta_facts_total"].labels(kind=kind).inc(sent[kind])

    def consistency_point(self, batch: int | None, t: float) -> None:
        self.c["fluxmat_last_consistency_point_batch"].set(batch if batch is not None else -1)
        self.c["fluxmat_last_consistency_point_timestamp_seconds"].set(t)

    def replayed(self) -> None:
        self.c["fluxmat_batches_total"].labels(outcome="replayed").inc()

    def applied(self, outcome, t: float, dead_kinds: list[str]) -> None:
        """An applied batch: what it consumed, its dead letters by kind, its engine work and its times."""
        c, stats = self.c, outcome.stats
        c["fluxmat_batches_total"].labels(outcome="applied").inc()
        c["fluxmat_updates_consumed_total"].inc(outcome.updates)
        c["fluxmat_fact_operations_total"].labels(op="add").inc(outcome.adds)
        c["fluxmat_fact_operations_total"].labels(op="delete").inc(outcome.deletes)
        c["fluxmat_dead_letters_total"].inc(outcome.dead)
        for kind in dead_kinds:
            c["fluxmat_dead_letters_by_reason_total"].labels(reason=kind).inc()
        c["fluxmat_shared_fact_deletes_total"].inc(stats.get("shared_deletes", 0))
        for key in ENGINE_WORK:
            c["fluxmat_engine_work_total"].labels(kind=key).inc(stats.get(key, 0))
        for key, metric in ENGINE_EVENTS:
            c[metric].inc(stats.get(key, 0))
        c["fluxmat_batch_duration_seconds"].observe(outcome.seconds)
        for phase, seconds in outcome.phases.items():
            c["fluxmat_batch_phase_seconds"].labels(phase=phase).observe(seconds)
        if outcome.timestamps_ms:  # one observation per update: produced -> published
            latencies = np.maximum(t - np.asarray(outcome.timestamps_ms, np.float64) / 1000.0, 0.0)
            c["fluxmat_update_latency_seconds"].observe_many(latencies)

    def rule_work(self, rules: dict, top: list[tuple], log_total: int | None) -> None:
        """The bounded fluxmat_rule_* series: the first `RULE_SERIES` top rules by name, the rest "other".

        `log_total` is the derivation log's size (None with `--partition-by`: the log is per key).
        """
        for label, _ in top:
            if label not in self.rule_series and len(self.rule_series) < RULE_SERIES:
                self.rule_series[label] = 0
        applications, other = self.c["fluxmat_rule_applications_total"], 0
        for label, (applied, _grown, entries) in rules.items():
            if label in self.rule_series:
                applications.labels(rule=label).inc(applied)
                self.rule_series[label] = entries
            else:
                other += applied
        applications.labels(rule="other").inc(other)
        if log_total is not None:
            log = self.c["fluxmat_rule_log_entries"]
            for label, entries in self.rule_series.items():
                log.labels(rule=label).set(entries)
            log.labels(rule="other").set(log_total - sum(self.rule_series.values()))

    def keys(self, keys: list[dict], tasks, summary: dict) -> None:
        """With `--partition-by`: a batch's keys (stream.keyed summaries), its tasks, the keys panel's counts."""
        c = self.c
        for k in keys:
            c["fluxmat_engine_cache_total"].labels(result=k["cache"]).inc()
            c["fluxmat_key_batch_seconds"].observe(k["seconds"])
            if k["rebuild"] is not None and k["cache"] == "miss":
                c["fluxmat_engine_rebuild_seconds"].observe(k["rebuild"])
        for seconds in tasks:
            c["fluxmat_task_seconds"].observe(seconds)
        c["fluxmat_keys_active"].set(summary["active"])
        c["fluxmat_keys_seen"].set(summary["seen"])
        c["fluxmat_engines_cached"].set(summary["engines"])

    def spark(self, phases: dict[str, float]) -> None:
        """Spark's phases of a micro-batch beside ours: a bounded set of labels (`SPARK_PHASES`)."""
        for phase, seconds in phases.items():
            if phase in SPARK_PHASES:
                self.c["fluxmat_spark_phase_seconds"].labels(phase=phase).observe(seconds)

    def retry(self, target: str) -> None:
        self.c["fluxmat_retries_total"].labels(target=target).inc()

    def failure(self) -> None:
        self.c["fluxmat_batch_failures_total"].inc()

    def verified(self, outcome: str, batch: int) -> None:
        self.c["fluxmat_verifications_total"].labels(result=outcome).inc()
        if outcome == "exact":
            self.c["fluxmat_verified_batch"].set(batch)

    def lag(self, lag: dict) -> None:
        gauge = self.c["fluxmat_consumer_lag_messages"]
        for partition, n in lag.items():
            gauge.labels(topic=self.topic, partition=str(partition)).set(n)

    def time_lag(self, seconds: float | None) -> None:
        """The oldest waiting update's age; None: unknown (NaN: 0 would look healthy)."""
        self.c["fluxmat_time_lag_seconds"].set(math.nan if seconds is None else seconds)

    def in_flight(self, work) -> None:
        """The batch in flight now (a stream.inflight.Work, or None): its age and its phase."""
        self.c["fluxmat_batch_in_flight_seconds"].set(0.0 if work is None else work.seconds)
        for phase in PHASES:
            self.c["fluxmat_batch_in_flight_phase"].labels(phase=phase).set(
                1 if work is not None and work.phase == phase else 0)  # fmt: skip

    def sample(self, state: str, commit_age: float | None, idle: bool) -> None:
        """Once a second: the health state, the last consistency point's age, idle."""
        self.c["fluxmat_health_state"].set(HEALTH_STATES.index(state))
        if commit_age is not None:
            self.c["fluxmat_consistency_point_age_seconds"].set(commit_age)
        self.c["fluxmat_idle"].set(1 if idle else 0)


class Exported:
    """What `/metrics` serves: the job's `fluxmat_*` metrics and the driver's `process_*`.

    Every series carries the job's `namespace` label (`fluxmat_info` has it
    already), so one Prometheus can tell the jobs it scrapes apart by the state
    they keep: the Grafana dashboard's `$namespace` variable filters by it.
    """

    def __init__(self, *registries: CollectorRegistry, namespace: str | None = None):
        self.registries = registries
        self.namespace = namespace

    def collect(self):
        for registry in self.registries:
            for family in registry.collect():
                if self.namespace is not None:
                    family.samples = [s._replace(labels={"namespace": self.namespace, **s.labels})
                                      for s in family.samples]  # fmt: skip
                yield family


def serve_metrics(metrics, host: str, port: int):
    """Serve a job's `/metrics` (its `registry` and `process`) on host:port in a daemon thread."""
    exported = Exported(metrics.registry, metrics.process, namespace=metrics.state.info["namespace"])
    return start_http_server(port, addr=host, registry=exported)
