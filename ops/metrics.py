"""The streaming job's observer: each event it reports goes to the Prometheus collectors and the status value.

`JobMetrics` is fed by the job (stream.job) from the driver: `on_start` after the
state is loaded, `on_batch` after every micro-batch, `on_pending` while a batch is
processed, `on_error` when a batch raises, `set_lag` from the lag sampler; it
reads the job's in-flight tracker (`watch`) when asked for its health. Each
event moves the collectors (`collectors`, ops.collectors: `registry` and
`process`, served by `serve_metrics`) and the job's one status value
(`state`, an ops.status.JobStatus: totals, current values, the rows of the
page's series from ops.series, the conditions that ops.health judges), which
`status()` and `health()` read for the dashboard and `/healthz`, and
`sample()` for the health gauge. All methods are thread-safe: the batch
thread writes, HTTP threads read, under one lock.

Not here: the collectors (ops.collectors), the series' rows (ops.series), the
health checks (ops.health), the sizes read after a batch (ops.sizes).
"""

from __future__ import annotations

import threading
import time

from fluxmat.connectors.redact import redact
from fluxmat.ops import series
from fluxmat.ops.collectors import RULE_SERIES, Collectors, Exported, serve_metrics
from fluxmat.ops.series import delta_entry, fact_text, history_point
from fluxmat.ops.sizes import read_sizes
from fluxmat.ops.status import JobStatus, program_in_force
from fluxmat.stream.inflight import InFlight, Work
from fluxmat.stream.observe import JobObserver

# read here by the job's wiring and tests, defined in the rooms named above
__all__ = ["RULE_SERIES", "Exported", "JobMetrics", "delta_entry", "fact_text", "history_point", "serve_metrics"]
BATCH_TOTALS = ("updates", "adds", "deletes", "added", "removed")  # BatchOutcome fields counted in totals
ENGINE_TOTALS = ("cancelled", "recursion_stops", "rederivations")  # BatchOutcome.stats keys counted in totals


class JobMetrics(JobObserver):
    """Counters, gauges and recent history of one running job."""

    def __init__(self, program: str, algorithm: str, namespace: str, topic: str):
        self.collectors = Collectors(program, algorithm, namespace, topic)
        self.registry, self.process = self.collectors.registry, self.collectors.process
        self.state = JobStatus(program, algorithm, namespace, topic)  # what the page, /healthz and the gauges read
        self.topic = topic
        self._lock = threading.Lock()  # around every read and write of the state
        self.rule_texts: dict[str, str] = {}  # file:line -> the rules written there (from the reasoner)

    # ------------------------------------------------------------ feeding
    def watch(self, inflight: InFlight, stall_seconds: float) -> None:
        """Read the job's in-flight tracker: a batch in flight over `stall_seconds` makes the job degraded."""
        self.state.inflight, self.state.stall_seconds = inflight, stall_seconds

    def _in_flight(self) -> Work | None:
        """The batch in flight now, with the gauges set to it (under `_lock`)."""
        work = self.state.in_flight()
        self.collectors.in_flight(work)
        return work

    def _sizes(self, read: dict) -> None:
        """The sizes from `read_sizes` to the gauges and `now` (under `_lock`)."""
        now = self.state.now
        if "facts" not in read:  # --partition-by: the keys' sizes, as their summaries told them
            read.update(entries=now["state_entries"], **{k: now[k] for k in ("facts", "explicit", "log")})
        self.collectors.sizes(read)
        if "inconsistencies" in read:
            n, shown = read["inconsistencies"]
            now.update(inconsistencies=n, inconsistent=shown)
        now.update(facts=read["facts"], explicit=read["explicit"], log=read["log"], state_entries=read["entries"],
                   state_bytes=read["fluxmat_state_namespace_bytes"],
                   redis_bytes=read["fluxmat_redis_used_memory_bytes"],
                   redis_max_bytes=read["fluxmat_redis_maxmemory_bytes"])  # fmt: skip

    def _published(self, outcome) -> None:
        """Count what a batch sent to the deltas topic (BatchOutcome.published; replays re-send)."""
        self.collectors.published(outcome.published)
        self.state.totals["deltas"] += outcome.published["messages"]

    def _consistency_point(self, batch: int | None, through, t: float, processor) -> None:
        """A batch committed (or the state restored): where the job stands, and the program in force."""
        self.collectors.consistency_point(batch, t)
        self.state.now.update(last_batch=batch, through=through, last_commit=t)
        if processor is None:  # with --partition-by, each key's state holds its own program
            return
        reasoner, shown = processor.reasoner, self.state.now["program"]
        if shown is None or shown["version"] != reasoner.program_version:  # a program message changed it
            self.state.now["program"] = program_in_force(reasoner.program_version, reasoner.program_history)

    def on_start(self, processor, store) -> None:
        """After the state is restored or the initial materialisation committed (and published)."""
        read, batch = read_sizes(processor, store), store.last_batch()
        with self._lock:
            if processor.initial is not None:
                self._published(processor.initial)
            self._sizes(read)
            self._consistency_point(batch, processor.reasoner.last_id, time.time(), processor)

    def on_pending(self, pending: int) -> None:
        self.collectors.c["fluxmat_pending_operations"].set(pending)
        self.state.now["pending"] = pending

    def on_batch(self, outcome, processor, store) -> None:
        """Account for one finished micro-batch (a `stream.batch.BatchOutcome`)."""
        now = time.time()
        read = None if outcome.replayed else read_sizes(processor, store)
        with self._lock:
            self._published(outcome)
            if outcome.replayed:
                self.collectors.replayed()
                self.state.totals["replayed"] += 1
                return
            self.state.failing = None  # a batch went through again
            self._applied(outcome, now)
            self._sizes(read)
            self._rule_work(outcome, processor)
            self._consistency_point(outcome.batch, outcome.through, now, processor)
            self.state.batches.append(series.batch_row(outcome, now))
            output = outcome.output
            if processor is not None and output is not None and (output["added"] or output["removed"]):
                show = fact_text(processor.reasoner)
                self.state.deltas.append(delta_entry(outcome.batch, output, now, show, outcome))

    def _applied(self, outcome, now: float) -> None:
        """An applied batch's counts: to the collectors and the totals, its dead letters to the page."""
        letters = series.dead_letter_rows(outcome, now)
        self.collectors.applied(outcome, now, [row["kind"] for row in letters])
        self.state.dead_letters.extend(letters)
        t = self.state.totals
        for key in BATCH_TOTALS:
            t[key] += getattr(outcome, key)
        for key in ENGINE_TOTALS:
            t[key] += outcome.stats.get(key, 0)
        t["batches"] += 1
        t["dead_letters"] += outcome.dead

    def _rule_work(self, outcome, processor) -> None:
        """Work per rule of a batch: the bounded fluxmat_rule_* series and the page's top rules."""
        if processor is not None and not self.rule_texts:
            self.rule_texts = processor.reasoner.rule_texts()
        top = series.top_rules(outcome.rules)
        log_total = self.state.now["log"] if processor is not None else None  # _sizes' size
        self.collectors.rule_work(outcome.rules, top, log_total)
        self.state.now["rules"] = series.rules_panel(outcome.batch, outcome.rules, top, self.rule_texts)

    def on_keys(self, keys: list[dict], store, tasks: list[float] = ()) -> None:
        """With `--partition-by`: the keys of a batch (stream.keyed summaries) and its tasks.

        (The Redis nodes' memory is read with the other sizes, after the batch: ops.sizes.read_sizes.)
        """
        table = self.state.keys
        with self._lock:
            table.add(keys)
            summary = table.summary(active=len(keys))
            self.collectors.keys(keys, tasks, summary)
            self.state.now["facts"] = table.facts_total()
            self.state.now["keys"] = summary

    def on_spark_batch(self, phases: dict[str, float]) -> None:
        """Spark's phases of a micro-batch beside ours (batch duration): a bounded set of labels."""
        with self._lock:
            self.collectors.spark(phases)

    def on_retry(self, target: str, why: str) -> None:
        """A call to Redis or the broker failed and is retried: counted, and shown as degraded.

        Degraded until a batch commits after the retry (at most ops.health.DEGRADED_WINDOW seconds).
        """
        with self._lock:
            self.collectors.retry(target)
            self.state.retries.append((time.time(), target, why[:200]))

    def on_error(self, exc: BaseException) -> None:
        """A batch failed: counted and shown before the job gives up (the health turns failing)."""
        with self._lock:
            self.state.failing = redact(f"a batch failed: {type(exc).__name__}: {exc}")[:300]
            self.collectors.failure()
            self.state.totals["failures"] += 1
            self.state.errors.append(series.error_row(redact(f"{type(exc).__name__}: {exc}")))

    def on_verified(self, result) -> None:
        """A `--verify-every` self-check (stream.verify.Verification): exact, different, or failed to run."""
        outcome = "error" if result.error is not None else "exact" if result.ok else "different"
        with self._lock:
            self.collectors.verified(outcome, result.batch)
            if outcome == "exact":
                self.state.verify_failing = None
            else:
                if outcome == "different":
                    self.state.verify_failing = (f"the self-check of batch {result.batch} found a different "
                                                 "materialisation")  # fmt: skip
                self.state.errors.append(series.error_row(series.verification_text(result)))
            self.state.now["verified"] = series.verified_row(result, outcome)

    def set_lag(self, lag: dict[str, int], oldest_ms: int | None = None) -> None:
        """The consumer lag per partition, and the Kafka timestamp of the oldest waiting update."""
        with self._lock:
            self.collectors.lag(lag)
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
        state = self.state
        state.now["time_lag_unknown"] = state.time_lag_unknown
        seconds = None
        if not state.time_lag_unknown:
            seconds = 0.0 if state.oldest_ms is None else max(time.time() - state.oldest_ms / 1000.0, 0.0)
        self.collectors.time_lag(seconds)
        state.now["time_lag"] = None if seconds is None else round(seconds, 3)

    def sample(self) -> None:
        """Append one point to the history and refresh health and freshness (once a second)."""
        with self._lock:
            self._time_lag()
            self._in_flight()
            state, now = self.state, self.state.now
            state.history.append(history_point(state.totals, now))
            age = None if now["last_commit"] is None else time.time() - now["last_commit"]
            self.collectors.sample(state.health()[0], age, state.idle())

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
