"""The streaming job's metrics: Prometheus collectors, fed together with the job's one status value.

`JobMetrics` is fed by the job (stream.job) from the driver: `on_start` after the
state is loaded, `on_batch` after every micro-batch, `on_pending` while a batch is
processed, `on_error` when a batch raises, `set_lag` from the lag sampler; it
reads the job's in-flight tracker (`watch`) when asked for its health. It
keeps its own registry (names and help in ops.metric_names), serves it with
`serve_metrics`, and keeps the job's status (`state`, an ops.status.JobStatus:
totals, the page's histories, the health) that `status()` and `health()`
read for the dashboard and `/healthz`, and `sample()` for the health gauge.
All methods are thread-safe: the batch thread writes, HTTP threads read.
"""

from __future__ import annotations

import math
import threading
import time

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    start_http_server,
)

from fluxmat.connectors.redact import redact
from fluxmat.engine import atom_to_fact
from fluxmat.engine.wire import fact_from_json
from fluxmat.ops.metric_names import METRICS
from fluxmat.ops.sizes import read_sizes
from fluxmat.ops.status import HEALTH_STATES, JobStatus, history_point
from fluxmat.stream.batch import DeadLetter, dead_letter_kind
from fluxmat.stream.inflight import PHASES, InFlight, Work
from fluxmat.stream.observe import JobObserver

disable_created_metrics()  # no `_created` series: they only clutter dashboards
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SHOWN_FACTS = 8  # facts of each delta kept for the dashboard


ENGINE_WORK = ("units", "rule_applications", "noop_adds", "noop_deletes")  # BatchOutcome.stats keys
SPARK_PHASES = ("triggerExecution", "addBatch", "latestOffset", "queryPlanning", "walCommit",
                "commitOffsets", "getBatch")  # lastProgress.durationMs keys kept (a bounded label)
RULES_SHOWN = 10  # the top rules of a batch the page lists (by rule applications)
RULE_SERIES = 50  # rules with a series of their own in fluxmat_rule_* (the first top rules); the rest: "other"


def delta_entry(batch: int, output: dict, t: float | None, show=None, outcome=None) -> dict:
    """A published delta as the dashboard lists it (sizes, and the first facts).

    `added` / `removed` are the facts as published; with `show` (`fact_text`),
    `added_text` / `removed_text` are the same facts as program text that reads
    back as the same fact -- what "why" takes (the page shows these). With the
    batch's `outcome` (a live job), `added_by` / `removed_by` name the update
    whose work changed each fact (stream.batch.BatchOutcome.causes; None: the
    work of several updates), and `updates` how many the batch applied.
    """
    added, removed = output["added"][:SHOWN_FACTS], output["removed"][:SHOWN_FACTS]
    entry = {
        "batch": batch, "through": output["through"], "t": t,
        "n_added": len(output["added"]), "n_removed": len(output["removed"]),
        "added": added, "removed": removed,
    }  # fmt: skip
    if outcome is not None and outcome.causes:
        entry["updates"] = outcome.updates
        entry["added_by"] = outcome.causes["added"][:SHOWN_FACTS]
        entry["removed_by"] = outcome.causes["removed"][:SHOWN_FACTS]
    if show is not None:
        entry["added_text"] = [show(f) for f in added]
        entry["removed_text"] = [show(f) for f in removed]
    return entry


def fact_text(reasoner):
    """A function from a published fact (JSON array, or an N-Triples line) to program text."""
    prefixes = reasoner.prefixes

    def show(item) -> str:
        if isinstance(item, str):  # --delta-format ntriples: a triple's N-Triples line
            return item
        return reasoner.show(atom_to_fact(fact_from_json(item, prefixes)))

    return show


def _collectors(registry: CollectorRegistry) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, (kind, text, labels) in METRICS.items():
        if kind == "counter":
            base = name[: -len("_total")] if name.endswith("_total") else name
            out[name] = Counter(base, text, labels, registry=registry)
        elif kind == "gauge":
            out[name] = Gauge(name, text, labels, registry=registry)
        elif kind == "histogram":
            out[name] = Histogram(name, text, labels, buckets=DURATION_BUCKETS, registry=registry)
        else:  # pragma: no cover - guarded by tests/ops/test_deployment.py
            raise ValueError(f"unknown metric type {kind!r} for {name}")
    return out


class JobMetrics(JobObserver):
    """Counters, gauges and recent history of one running job."""

    def __init__(self, program: str, algorithm: str, namespace: str, topic: str):
        self.registry = CollectorRegistry()  # the fluxmat_* table (ops.metric_names)
        self.process = CollectorRegistry()  # process_* of the driver (ops.metric_names.PROCESS)
        ProcessCollector(registry=self.process)
        self.c = _collectors(self.registry)
        self.c["fluxmat_info"].labels(program=program, algorithm=algorithm, namespace=namespace).set(1)
        self.c["fluxmat_verified_batch"].set(-1)
        self.state = JobStatus(program, algorithm, namespace, topic)  # what the page, /healthz and the gauges read
        for name, label, values in (("fluxmat_fact_operations_total", "op", ("add", "delete")),
                                    ("fluxmat_batches_total", "outcome", ("applied", "replayed")),
                                    ("fluxmat_delta_facts_total", "kind", ("added", "removed")),
                                    ("fluxmat_engine_cache_total", "result", ("hit", "miss", "new"))):  # fmt: skip
            for v in values:  # every series exists from the start (rate() needs a first sample)
                self.c[name].labels(**{label: v})
        self.topic = topic
        self._lock = threading.Lock()  # around every read and write of the state
        self.rule_series: dict[str, int] = {}  # rules with their own fluxmat_rule_* series -> log entries
        self.rule_texts: dict[str, str] = {}  # file:line -> the rules written there (from the reasoner)
        for phase in PHASES:
            self.c["fluxmat_batch_in_flight_phase"].labels(phase=phase).set(0)

    # ------------------------------------------------------------ feeding
    def watch(self, inflight: InFlight, stall_seconds: float) -> None:
        """Read the job's in-flight tracker: a batch in flight over `stall_seconds` makes the job degraded."""
        self.state.inflight, self.state.stall_seconds = inflight, stall_seconds

    def _in_flight(self) -> Work | None:
        """The batch in flight now, with the gauges set to it (under `_lock`)."""
        work = self.state.in_flight()
        self.c["fluxmat_batch_in_flight_seconds"].set(0.0 if work is None else work.seconds)
        for phase in PHASES:
            self.c["fluxmat_batch_in_flight_phase"].labels(phase=phase).set(
                1 if work is not None and work.phase == phase else 0)
        return work

    def _gauges(self, read: dict) -> None:
        """Set the size gauges from `read_sizes` (under `_lock`)."""
        if "facts" not in read:
            read.update(entries=self.state.now["state_entries"], **{k: self.state.now[k] for k in ("facts", "explicit", "log")})
        facts, explicit, log, entries = (read[k] for k in ("facts", "explicit", "log", "entries"))
        memory = {k: v for k, v in read.items() if k.startswith("fluxmat_")}
        c = self.c
        c["fluxmat_materialisation_facts"].set(facts)
        c["fluxmat_explicit_facts"].set(explicit)
        c["fluxmat_derivation_log_entries"].set(log)
        c["fluxmat_state_entries"].set(entries)
        for name, n in memory.items():
            if n is not None:
                c[name].set(n)
        for node, used in read["nodes"].items():
            c["fluxmat_state_node_memory_bytes"].labels(node=node).set(used)
        if "inconsistencies" in read:
            n, shown = read["inconsistencies"]
            c["fluxmat_owl_inconsistencies"].set(n)
            self.state.now.update(inconsistencies=n, inconsistent=shown)
        self.state.now.update(facts=facts, explicit=explicit, log=log, state_entries=entries,
                        state_bytes=memory["fluxmat_state_namespace_bytes"],
                        redis_bytes=memory["fluxmat_redis_used_memory_bytes"],
                        redis_max_bytes=memory["fluxmat_redis_maxmemory_bytes"])  # fmt: skip

    def _published(self, outcome) -> None:
        """Count what a batch sent to the deltas topic (BatchOutcome.published; replays re-send)."""
        sent = outcome.published
        self.c["fluxmat_delta_messages_total"].inc(sent["messages"])
        for kind in ("added", "removed"):
            self.c["fluxmat_delta_facts_total"].labels(kind=kind).inc(sent[kind])
        self.state.totals["deltas"] += sent["messages"]

    def on_start(self, processor, store) -> None:
        """After the state is restored or the initial materialisation committed (and published)."""
        read, batch = read_sizes(processor, store), store.last_batch()
        with self._lock:
            if processor.initial is not None:
                self._published(processor.initial)
            self._gauges(read)
            self.state.now.update(last_batch=batch, through=processor.reasoner.last_id, last_commit=time.time())
            self.c["fluxmat_last_consistency_point_batch"].set(batch if batch is not None else -1)
            self.c["fluxmat_last_consistency_point_timestamp_seconds"].set(time.time())

    def on_pending(self, pending: int) -> None:
        self.c["fluxmat_pending_operations"].set(pending)
        self.state.now["pending"] = pending

    def on_batch(self, outcome, processor, store) -> None:
        """Account for one finished micro-batch (a `stream.batch.BatchOutcome`)."""
        c, t = self.c, self.state.totals
        output = outcome.output
        now = time.time()
        read = None if outcome.replayed else read_sizes(processor, store)
        with self._lock:
            self._published(outcome)
            if outcome.replayed:
                c["fluxmat_batches_total"].labels(outcome="replayed").inc()
                t["replayed"] += 1
                return
            c["fluxmat_batches_total"].labels(outcome="applied").inc()
            self.state.failing = None  # a batch went through again
            c["fluxmat_updates_consumed_total"].inc(outcome.updates)
            c["fluxmat_fact_operations_total"].labels(op="add").inc(outcome.adds)
            c["fluxmat_fact_operations_total"].labels(op="delete").inc(outcome.deletes)
            c["fluxmat_dead_letters_total"].inc(outcome.dead)
            for letter in map(DeadLetter.read, (output or {}).get("dead", ())):
                kind = dead_letter_kind(letter.reason)
                c["fluxmat_dead_letters_by_reason_total"].labels(reason=kind).inc()
                self.state.dead_letters.append({"t": now, "batch": outcome.batch, "partition": letter.partition,
                                          "offset": letter.offset, "kind": kind, "reason": letter.reason[:500]})  # fmt: skip
            c["fluxmat_shared_fact_deletes_total"].inc(outcome.stats.get("shared_deletes", 0))
            for key in ENGINE_WORK:
                c["fluxmat_engine_work_total"].labels(kind=key).inc(outcome.stats.get(key, 0))
            c["fluxmat_batch_duration_seconds"].observe(outcome.seconds)
            for phase, seconds in outcome.phases.items():
                c["fluxmat_batch_phase_seconds"].labels(phase=phase).observe(seconds)
            latency = None
            if outcome.oldest_timestamp_ms is not None:
                latency = max(now - outcome.oldest_timestamp_ms / 1000.0, 0.0)
            for ts in outcome.timestamps_ms:  # one observation per update: produced -> published
                c["fluxmat_update_latency_seconds"].observe(max(now - ts / 1000.0, 0.0))
            for key, metric in (("cancelled", "fluxmat_operations_cancelled_total"),
                                ("recursion_stops", "fluxmat_recursion_stops_total"),
                                ("rederivations", "fluxmat_rederivations_total")):  # fmt: skip
                n = outcome.stats.get(key, 0)
                c[metric].inc(n)
                t[key] += n
            c["fluxmat_last_consistency_point_batch"].set(outcome.batch)
            c["fluxmat_last_consistency_point_timestamp_seconds"].set(now)
            for key, n in (("updates", outcome.updates), ("adds", outcome.adds),
                           ("deletes", outcome.deletes), ("batches", 1),
                           ("added", outcome.added), ("removed", outcome.removed),
                           ("dead_letters", outcome.dead)):  # fmt: skip
                t[key] += n
            self._gauges(read)
            self._rule_work(outcome, processor)
            self.state.now.update(last_batch=outcome.batch, through=outcome.through, last_commit=now)
            self.state.batches.append({
                "batch": outcome.batch, "t": now, "seconds": round(outcome.seconds, 4),
                "latency": None if latency is None else round(latency, 4),
                "updates": outcome.updates, "added": outcome.added, "removed": outcome.removed,
                "dead": outcome.dead, "peak_pending": outcome.peak_pending,
            })  # fmt: skip
            if processor is not None and output is not None and (output["added"] or output["removed"]):
                self.state.deltas.append(delta_entry(outcome.batch, output, now, fact_text(processor.reasoner), outcome))

    def _rule_work(self, outcome, processor) -> None:
        """Work per rule of a batch: the bounded fluxmat_rule_* series and the page's top rules."""
        rules, c = outcome.rules, self.c
        if processor is not None and not self.rule_texts:
            self.rule_texts = processor.reasoner.rule_texts()
        top = sorted(rules.items(), key=lambda kv: (-kv[1][0], -abs(kv[1][1]), kv[0]))[:RULES_SHOWN]
        for label, _ in top:
            if label not in self.rule_series and len(self.rule_series) < RULE_SERIES:
                self.rule_series[label] = 0
        other = 0
        for label, (applied, _grown, entries) in rules.items():
            if label in self.rule_series:
                c["fluxmat_rule_applications_total"].labels(rule=label).inc(applied)
                self.rule_series[label] = entries
            else:
                other += applied
        c["fluxmat_rule_applications_total"].labels(rule="other").inc(other)
        if processor is not None:  # with --partition-by, the log is per key: no total to split
            log = c["fluxmat_rule_log_entries"]
            for label, entries in self.rule_series.items():
                log.labels(rule=label).set(entries)
            log.labels(rule="other").set(self.state.now["log"] - sum(self.rule_series.values()))  # _gauges' size
        self.state.now["rules"] = {
            "batch": outcome.batch, "changed": len(rules),
            "top": [{"rule": label, "text": self.rule_texts.get(label, ""), "applications": a, "log": g}
                    for label, (a, g, _) in top],
        }  # fmt: skip

    def on_keys(self, keys: list[dict], store, tasks: list[float] = ()) -> None:
        """With `--partition-by`: the keys of a batch (stream.keyed summaries) and its tasks.

        (The Redis nodes' memory is read with the other sizes, after the batch: ops.sizes.read_sizes.)
        """
        c, table = self.c, self.state.keys
        with self._lock:
            table.add(keys)
            for k in keys:
                c["fluxmat_engine_cache_total"].labels(result=k["cache"]).inc()
                c["fluxmat_key_batch_seconds"].observe(k["seconds"])
                if k["rebuild"] is not None and k["cache"] == "miss":
                    c["fluxmat_engine_rebuild_seconds"].observe(k["rebuild"])
            for seconds in tasks:
                c["fluxmat_task_seconds"].observe(seconds)
            summary = table.summary(active=len(keys))
            c["fluxmat_keys_active"].set(summary["active"])
            c["fluxmat_keys_seen"].set(summary["seen"])
            c["fluxmat_engines_cached"].set(summary["engines"])
            self.state.now["facts"] = table.facts_total()
            self.state.now["keys"] = summary

    def on_spark_batch(self, phases: dict[str, float]) -> None:
        """Spark's phases of a micro-batch beside ours (batch duration): a bounded set of labels."""
        with self._lock:
            for phase, seconds in phases.items():
                if phase in SPARK_PHASES:
                    self.c["fluxmat_spark_phase_seconds"].labels(phase=phase).observe(seconds)

    def on_retry(self, target: str, why: str) -> None:
        """A call to Redis or the broker failed and is retried: counted, and shown as degraded.

        Degraded until a batch commits after the retry (at most `DEGRADED_WINDOW` seconds).
        """
        with self._lock:
            self.c["fluxmat_retries_total"].labels(target=target).inc()
            self.state.retries.append((time.time(), target, why[:200]))

    def on_error(self, exc: BaseException) -> None:
        """A batch failed: counted and shown before the job gives up (the health turns failing)."""
        with self._lock:
            self.state.failing = redact(f"a batch failed: {type(exc).__name__}: {exc}")[:300]
            self.c["fluxmat_batch_failures_total"].inc()
            self.state.totals["failures"] += 1
            self.state.errors.append({"t": time.time(), "message": redact(f"{type(exc).__name__}: {exc}")})

    def on_verified(self, result) -> None:
        """A `--verify-every` self-check (stream.verify.Verification): exact, different, or failed to run."""
        outcome = "error" if result.error is not None else "exact" if result.ok else "different"
        with self._lock:
            self.c["fluxmat_verifications_total"].labels(result=outcome).inc()
            if outcome == "exact":
                self.c["fluxmat_verified_batch"].set(result.batch)
                self.state.verify_failing = None
            else:
                if outcome == "different":
                    self.state.verify_failing = f"the self-check of batch {result.batch} found a different materialisation"
                self.state.errors.append({"t": time.time(), "message": _verification_text(result)})
            self.state.now["verified"] = {"batch": result.batch, "result": outcome, "missing": result.missing,
                                    "extra": result.extra, "sample": list(result.sample),
                                    "seconds": round(result.seconds, 3), "error": result.error}  # fmt: skip

    def set_lag(self, lag: dict[str, int], oldest_ms: int | None = None) -> None:
        """The consumer lag per partition, and the Kafka timestamp of the oldest waiting update."""
        gauge = self.c["fluxmat_consumer_lag_messages"]
        with self._lock:
            for partition, n in lag.items():
                gauge.labels(topic=self.topic, partition=str(partition)).set(n)
            self.state.now["lag"] = {str(p): int(n) for p, n in lag.items()}
            self.state.now["lag_unknown"] = False
            waiting = sum(lag.values()) > 0
            self.state.oldest_ms = oldest_ms if waiting else None
            self.state.time_lag_unknown = waiting and oldest_ms is None
            self._time_lag()

    def set_lag_unknown(self) -> None:
        """The lag lookup failed: the time lag reads unknown (NaN) until it answers again."""
        with self._lock:
            self.state.time_lag_unknown = True
            self.state.now["lag_unknown"] = True  # the page shows the last lag as unknown, not as now
            self._time_lag()

    def set_redis_problem(self, problem: str | None) -> None:
        """What weakens the Redis Cluster now (a node failing, a primary without its replica), or None."""
        with self._lock:
            self.state.redis_problem = problem

    def _time_lag(self) -> None:
        """fluxmat_time_lag_seconds: the oldest waiting update's age (0: nothing waits).

        Unknown -- NaN, `time_lag` None -- when updates wait but the lookup of the oldest one's
        timestamp did not answer: 0 would look healthy.
        """
        self.state.now["time_lag_unknown"] = self.state.time_lag_unknown
        if self.state.time_lag_unknown:
            self.c["fluxmat_time_lag_seconds"].set(math.nan)
            self.state.now["time_lag"] = None
            return
        seconds = 0.0 if self.state.oldest_ms is None else max(time.time() - self.state.oldest_ms / 1000.0, 0.0)
        self.c["fluxmat_time_lag_seconds"].set(seconds)
        self.state.now["time_lag"] = round(seconds, 3)

    def sample(self) -> None:
        """Append one point to the history and refresh health and freshness (once a second)."""
        with self._lock:
            self._time_lag()
            self._in_flight()
            self.state.history.append(history_point(self.state.totals, self.state.now))
            state, _reason = self.state.health()
            c, now = self.c, self.state.now
            c["fluxmat_health_state"].set(HEALTH_STATES.index(state))
            if now["last_commit"] is not None:
                c["fluxmat_consistency_point_age_seconds"].set(time.time() - now["last_commit"])
            c["fluxmat_idle"].set(1 if self.state.idle() else 0)

    # ------------------------------------------------------------ reading
    def health(self) -> tuple[str, str]:
        """(state, reason) of the job's status (ops.status.JobStatus.health)."""
        with self._lock:
            self._in_flight()
            return self.state.health()

    def status(self) -> dict:
        """The job's status as one JSON-ready dict (ops.status.JobStatus.as_dict)."""
        with self._lock:
            self._in_flight()
            return self.state.as_dict()


def _verification_text(result) -> str:
    if result.error is not None:
        return f"self-check of batch {result.batch} could not run: {result.error}"
    return (f"self-check of batch {result.batch}: the materialisation differs from a from-scratch "
            f"evaluation ({result.missing} missing, {result.extra} too many: {', '.join(result.sample)})")


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


def serve_metrics(metrics: JobMetrics, host: str, port: int):
    """Serve `/metrics` on host:port in a daemon thread; returns (server, thread)."""
    exported = Exported(metrics.registry, metrics.process, namespace=metrics.state.info["namespace"])
    return start_http_server(port, addr=host, registry=exported)
