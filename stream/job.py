"""The Spark Structured Streaming job: Kafka updates -> fully dynamic reasoning -> deltas.

Wiring only; a micro-batch is processed by a `stream.micro.MicroBatches` (the
whole stream's `BatchProcessor`, stream.batch, or the keyed driver). The updates
topic is read by the Python data source `fluxmat-kafka` (connectors.kafka_source),
whose offsets live in Spark's checkpoint; each micro-batch is collected on the
driver and handed to the processor inside `foreachBatch`. The engine itself
lives in the driver process, its state in the state store (Redis).

Observability: the job feeds a `JobObserver` after every batch and runs the
servers of the `Operations` it is given (stream.observe; the CLI hands in
ops.wiring's: Prometheus metrics on `--metrics-port`, the live page on
`--dashboard-port`, whose questions read the engine under the same lock as the
batches); a sampler thread records one point per second and the consumer lag
(high watermarks against the offsets Spark has processed).

Stopping: SIGTERM / SIGINT set a flag; the query is stopped between batches (a
batch in progress either completes or, if the process is killed, is replayed on
restart), then Spark and the clients are closed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from fluxmat.client.kafka_config import load as load_kafka
from fluxmat.connectors.broker import check_broker, ensure_topics
from fluxmat.connectors.kafka_sink import KafkaPublisher
from fluxmat.connectors.redact import redact
from fluxmat.connectors.state import open_store
from fluxmat.engine import FluxmatError
from fluxmat.stream.batch import BatchOutcome
from fluxmat.stream.collect import DriverCollect
from fluxmat.stream.config import JobConfig
from fluxmat.stream.inflight import InFlight
from fluxmat.stream.loading import load_reasoner, settle_core, shared_facts
from fluxmat.stream.micro import MicroBatches, open_keyed, open_whole_stream
from fluxmat.stream.observe import Operations, sample_lag
from fluxmat.stream.snapshots import Snapshots, default_dir
from fluxmat.stream.verify import Verifier

# How a local checkpoint is written: the same files at the same moments (the offset log before a
# batch, the commit log after it, each written to a temporary file, then renamed unless the target
# exists), through Hadoop's FileSystem API and its raw local file system. Spark's defaults (the
# FileContext API over the checksummed local file system) also write and read a `.crc` file beside
# each log file; with them a batch's `walCommit` and `commitOffsets` took several times longer.
# Not for other file systems (HDFS's FileContext rename is atomic; the FileSystem one is not).
LOCAL_CHECKPOINT_SETTINGS = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
}  # fmt: skip


def local_checkpoint(checkpoint: str) -> bool:
    """Whether a checkpoint location is on the local file system (a path or a file: URI)."""
    return "://" not in checkpoint or checkpoint.startswith("file:")


def spark_session(master: str, app: str = "fluxmat", driver_host: str = "127.0.0.1",
                  checkpoint: str | None = None):  # fmt: skip
    """A SparkSession for the job (the driver on `driver_host`: loopback by default; quiet logs, no UI).

    A local `checkpoint` is written with `LOCAL_CHECKPOINT_SETTINGS`.
    """
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", driver_host)
    )
    if checkpoint and local_checkpoint(checkpoint):
        for key, value in LOCAL_CHECKPOINT_SETTINGS.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def with_task_retries(master: str, attempts: int = 4) -> str:
    """`local[N]` as `local[N,attempts]`: local Spark retries a failed task only when told so."""
    t = master.strip()
    if t.startswith("local[") and t.endswith("]") and "," not in t:
        return f"{t[:-1]},{attempts}]"
    return master


def _interval(text: str) -> str:
    """Accept `500ms`, `2s` as well as Spark's `500 milliseconds`."""
    t = text.strip()
    for suffix, unit in (("ms", "milliseconds"), ("s", "seconds")):
        if t.endswith(suffix) and t[: -len(suffix)].strip().isdigit():
            return f"{t[: -len(suffix)].strip()} {unit}"
    return t


def _batch_failed(exc: BaseException) -> FluxmatError:
    """The one error line of a job stopped by a failed batch (Spark's own report is in the log)."""
    return FluxmatError(f"a batch failed: {type(exc).__name__}: {redact(str(exc))}; it was not "
                        "acknowledged, so restarting the job retries it (see docs/operations/runbook.md)")


def _query_failed(exc: BaseException) -> FluxmatError:
    """The one error line of a job whose streaming query stopped without a failed batch (Spark's report: the log)."""
    first = next((ln.strip() for ln in redact(str(exc)).splitlines() if ln.strip()), type(exc).__name__)
    return FluxmatError(f"the streaming query stopped: {first[:500]}; no batch was lost, restarting the job "
                        "continues from its checkpoint (see docs/operations/busy-machines.md)")


KEEP_OUTCOMES = 100  # outcomes of the last batches a job keeps (Job.outcomes)
# Spark's error when a Python worker took more than its fixed 10 s to start and connect back.
WORKER_LATE = "Python worker failed to connect back"
WORKER_RESTARTS = 3  # query starts again after WORKER_LATE (Job._await_query)


class Job:
    """One running streaming job; `run()` blocks until `stop()` or a signal."""

    def __init__(self, cfg: JobConfig, on_batch: Callable[[BatchOutcome], None] | None = None,
                 log: Callable[[str], None] | None = None,
                 operations: Operations | None = None):  # fmt: skip
        self.cfg = cfg
        self.operations = operations or Operations()
        self.on_batch = on_batch
        self.log = log or (lambda msg: print(f"fluxmat: {msg}", file=sys.stderr, flush=True))
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.failed: BaseException | None = None  # what made a batch fail (the job then stops)
        self.outcomes: deque[BatchOutcome] = deque(maxlen=KEEP_OUTCOMES)  # the last batches' only
        self.batches_done = 0  # batches applied or replayed since the start
        self.lock = threading.Lock()  # held while a batch mutates the engine
        self.metrics = None
        self.metrics_address: tuple[str, int] | None = None
        self.dashboard_address: tuple[str, int] | None = None
        self._servers: list = []
        self._last_progress: int | None = None  # the batch id of the last Spark progress reported
        self.inflight = InFlight()  # the batch in flight and its phase (the health check reads it)
        self.snapshots: Snapshots | None = None  # local snapshots (whole-stream mode, stream.snapshots)

    def stop(self) -> None:
        self._stop.set()

    def _connect(self):
        cfg = self.cfg
        kafka = load_kafka(cfg.kafka_config)
        if cfg.kafka_config:
            self.log(f"kafka settings {kafka.describe()}")
        check_broker(cfg.bootstrap_servers, kafka=kafka)
        deltas = cfg.updates_partitions if cfg.keyed else 1  # keyed deltas go by key
        topics = {cfg.updates_topic: cfg.updates_partitions, cfg.deltas_topic: deltas}
        if cfg.dead_letter_topic:
            topics[cfg.dead_letter_topic] = 1
        ensure_topics(cfg.bootstrap_servers, topics, kafka=kafka)
        store = open_store(cfg.redis, cfg.namespace, cluster=cfg.redis_cluster,
                           retry_seconds=cfg.redis_retry_seconds, socket_timeout=cfg.redis_timeout,
                           wait_replicas=cfg.redis_wait_replicas)  # fmt: skip
        publisher = KafkaPublisher(
            cfg.bootstrap_servers, cfg.deltas_topic, cfg.dead_letter_topic,
            source_topic=cfg.updates_topic, delta_format=cfg.delta_format,
            compression=cfg.delta_compression, kafka=kafka,
        )  # fmt: skip
        return store, publisher

    def run(self) -> None:
        cfg = self.cfg
        self.operations.check(cfg)  # before anything is written (the settings were checked when cfg was made)
        reasoner = load_reasoner(cfg, self.log)
        facts = shared_facts(cfg, reasoner)
        store, publisher = self._connect()
        rebase = self._check_checkpoint(store)
        cfg = self.cfg = settle_core(cfg, store.state_meta(), self.log)
        if cfg.core != reasoner.core:  # the stored state's core (the program was checked above)
            reasoner = load_reasoner(cfg, log=lambda msg: None)
        fsync = store.set_fsync(cfg.redis_fsync)  # after the checks: a refused job changes nothing
        if fsync is not None:
            self.log(fsync)
        metrics = self.metrics = self.operations.observer(cfg)
        metrics.watch(self.inflight, cfg.stall_seconds)
        store.on_retry = lambda why: metrics.on_retry("redis", why)
        publisher.on_retry = lambda why: metrics.on_retry("broker", why)
        consumed: dict[str, int] = checkpoint_offsets(cfg.checkpoint)  # lag right after a restart
        batches = self._micro_batches(reasoner, facts, store, publisher, rebase, consumed)
        sampler = threading.Thread(target=self._sample, args=(metrics, consumed, store), daemon=True)
        try:
            self._serve(metrics, None if cfg.keyed else reasoner)
            spark = spark_session(with_task_retries(cfg.master) if cfg.keyed else cfg.master,
                                  driver_host=cfg.driver_host, checkpoint=cfg.checkpoint)  # fmt: skip
        except BaseException:
            self._close_servers()
            raise
        reader = _updates_reader(spark, cfg)

        def start_query():
            self.query = (
                reader.load()
                .writeStream.foreachBatch(lambda df, batch_id: self._one_batch(batches, store, df, batch_id))
                .option("checkpointLocation", cfg.checkpoint)
                .trigger(processingTime=_interval(cfg.trigger_interval))
                .start()
            )
            return self.query

        start_query()
        self.log(f"reading {cfg.updates_topic} at {cfg.bootstrap_servers}; deltas to {cfg.deltas_topic}")
        sampler.start()
        try:
            self._await_query(start_query)
        finally:
            self._stop.set()
            self._close_servers()
            self.query.stop()
            spark.stop()
            self._last_snapshot(reasoner)
            if cfg.keyed:  # the engine hosts on this machine (others exit when idle)
                from fluxmat.stream.engine_host import stop_hosts

                stop_hosts(cfg)
            publisher.close()
            store.close()
        if self.error is not None:
            raise self.error

    def _micro_batches(self, reasoner, facts, store, publisher, rebase: bool, consumed) -> MicroBatches:
        """What processes this job's micro-batches (stream.micro): keyed, or the whole stream."""
        cfg = self.cfg
        self.processor = self.snapshots = None
        if cfg.keyed:
            return open_keyed(cfg, store, publisher, rebase, self.inflight, self.log)
        snapshots = self.snapshots = self._snapshots()
        verifier = Verifier(cfg.verify_every, self._verified) if cfg.verify_every > 0 else None
        batches = open_whole_stream(cfg, reasoner, facts, store, publisher, rebase, self.metrics,
                                    lock=self.lock, inflight=self.inflight, verifier=verifier,
                                    snapshots=snapshots, consumed=consumed, log=self.log)  # fmt: skip
        self.processor = batches.processor
        # each batch's rows read here, with no Spark job (stream.collect)
        batches.collect = DriverCollect(source_options(cfg), self.log)
        return batches

    def _one_batch(self, batches: MicroBatches, store, df, batch_id: int) -> None:
        """`foreachBatch`: one micro-batch through `batches`, with the bookkeeping every batch shares."""
        inflight = self.inflight
        inflight.start(batch_id + batches.base, batches.first_phase)
        try:
            try:
                outcome = batches.apply(df, batch_id)
            except BaseException as exc:
                self.failed = exc
                self.metrics.on_error(exc)
                raise
            inflight.enter("sizes")
            batches.report(outcome, self.metrics, store)
            self.record(outcome)
            if self.on_batch:
                self.on_batch(outcome)
        finally:
            inflight.done()

    def _await_query(self, start_query: Callable) -> None:
        """Wait until the job is stopped or the query ends; an error ends up in `self.error`.

        Spark gives a Python worker it starts (the source's, for one) 10 s to
        connect back, a fixed limit; on a busy machine a worker can take longer
        to start, and the query fails without a batch having failed. Such a
        query is started again on the same checkpoint, `WORKER_RESTARTS` times
        at most (it goes on where the checkpoint says: nothing is read twice
        that the operator does not recognise as a replay).
        """
        from pyspark.errors import StreamingQueryException

        restarts = 0
        while True:
            query = self.query
            while not self._stop.is_set() and query.isActive:
                try:
                    query.awaitTermination(0.5)
                except StreamingQueryException:
                    break  # a batch raised: reported below
            exc = query.exception()
            if exc is None:
                return
            late = self.failed is None and WORKER_LATE in str(exc)
            if late and restarts < WORKER_RESTARTS and not self._stop.is_set():
                restarts += 1
                self.log(f"a Spark Python worker did not connect back in time (a busy machine?); "
                         f"starting the query again ({restarts} of {WORKER_RESTARTS})")  # fmt: skip
                query.stop()
                start_query()
                continue
            self.error = _batch_failed(self.failed) if self.failed else _query_failed(exc)
            return

    def _snapshots(self) -> Snapshots | None:
        """The local snapshots of this job (stream.snapshots), None when off or the store is in-process."""
        cfg = self.cfg
        if not cfg.redis or cfg.redis.startswith("memory:") or cfg.snapshot_dir == "off":
            return None
        directory = Path(cfg.snapshot_dir) if cfg.snapshot_dir else default_dir(cfg.checkpoint)
        if directory is None:
            self.log(f"no local snapshots: checkpoint {cfg.checkpoint} is not local (give --snapshot-dir)")
            return None
        return Snapshots(directory, cfg.namespace, cfg.snapshot_every_batches, cfg.snapshot_every, self.log)

    def _last_snapshot(self, reasoner) -> None:
        """At a clean stop: the engine's state as a local snapshot, so the next start needs no Redis read."""
        snapshots, processor = self.snapshots, self.processor
        if snapshots is None or processor is None or self.failed is not None or processor.committed is None:
            return
        with self.lock:
            if snapshots.after_batch(processor.committed, reasoner, stopping=True):
                self.log(f"local snapshot of batch {processor.committed} written to {snapshots.path} "
                         f"({snapshots.last['bytes'] / 2**20:,.1f} MiB in {snapshots.last['seconds']:.1f} s)")  # fmt: skip

    def _check_checkpoint(self, store) -> bool:
        """Refuse a state store and a checkpoint that do not belong together; True: rebase.

        Batch ids restart at 0 with a new checkpoint, and the processor treats a
        batch id <= the stored one as a replay: a stored state with a new
        checkpoint would silently skip updates. With `--starting-offsets` given,
        the operator asks for exactly that (continue the stored state from chosen
        offsets), so the new checkpoint's batches are numbered after the stored
        ones instead (a rebase). An empty store with a
        checkpoint that has read batches would lose those updates: refused. So is
        a state *behind* the batches Spark finished (`commits/`): with
        `--redis-fsync everysec` an OS crash can lose Redis's last second while
        the checkpoint already records later batches as done; Spark never runs
        a finished batch again, so their updates would be skipped silently. (A
        state one batch behind the last *planned* batch is fine: Spark re-runs
        a planned batch that did not finish.)
        """
        cfg = self.cfg
        if not local_checkpoint(cfg.checkpoint):
            self.log(f"checkpoint {cfg.checkpoint} is not local: its agreement with the state is not checked")
            return False
        planned = checkpoint_last_batch(cfg.checkpoint)
        last = store.last_batch()
        where = f"the state store (namespace {cfg.namespace!r})"
        if last is None and planned is not None:
            raise FluxmatError(
                f"{where} is empty, but checkpoint {cfg.checkpoint} has read batches up to {planned}: "
                "the updates already read would be lost. Restore the state (Redis AOF or backup), "
                "or rebuild it with a new checkpoint, which re-reads the topic (see docs/operations/runbook.md)"
            )
        if last is None:
            return False
        done = checkpoint_last_commit(cfg.checkpoint)
        if done is not None and last - (base := store.batch_base()) < done:
            raise FluxmatError(
                f"{where} is at batch {last}, behind checkpoint {cfg.checkpoint}, which records batch "
                f"{done + base} as done: the state of batches {last + 1}..{done + base} was lost (Redis "
                "restarted after an OS crash with --redis-fsync everysec, or restored from an older "
                "backup), and Spark will not run those batches again, so their updates would be skipped. "
                "Restore a Redis backup taken with this checkpoint, or rebuild the state from the updates "
                "topic with a new namespace and a new checkpoint (docs/operations/runbook.md, 'Recover from Redis loss')"
            )
        if last < 0:
            return False
        if planned is None:
            if cfg.starting_offsets is None:
                raise FluxmatError(
                    f"{where} is at batch {last}, but checkpoint {cfg.checkpoint} is new: batch ids "
                    "would restart and updates would be skipped as replays. Use the checkpoint the "
                    "state was built with, a new namespace, or --starting-offsets to continue this "
                    "state from chosen offsets (see docs/operations/runbook.md)"
                )
            return True
        elif last - (base := store.batch_base()) > planned:
            raise FluxmatError(
                f"{where} is at batch {last}, ahead of checkpoint {cfg.checkpoint} "
                f"(batch {planned + base}): "
                "they belong to different runs. Use the checkpoint the state was built with, or a "
                "new namespace (see docs/operations/runbook.md)"
            )
        return False

    def record(self, outcome: BatchOutcome) -> None:
        """Count a finished batch; keep its outcome among the last `KEEP_OUTCOMES`.

        An outcome holds the batch's whole output (its delta), so keeping every
        one would grow the driver's memory for as long as the job runs.
        """
        self.outcomes.append(outcome)
        self.batches_done += 1

    def _verified(self, result) -> None:
        """A self-check's result: to the observer, and a line in the log when it failed."""
        self.metrics.on_verified(result)
        if result.error is not None:
            self.log(f"self-check of batch {result.batch} could not run: {result.error}")
        elif not result.ok:
            self.log(f"self-check of batch {result.batch} FAILED: {result.missing} facts missing, "
                     f"{result.extra} facts too many (e.g. {', '.join(result.sample)})")  # fmt: skip

    def _close_servers(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def _serve(self, metrics, reasoner) -> None:
        """Start the servers operations run beside the job (metrics, dashboard)."""
        for name, server in self.operations.serve(self.cfg, metrics, reasoner, self.lock):
            self._servers.append(server)
            host, port = server.server_address[:2]
            setattr(self, f"{name}_address", (host, port))
            path = "/metrics" if name == "metrics" else "/"
            self.log(f"{name} on http://{host}:{port}{path}")

    def _sample(self, metrics, consumed: dict[str, int], store) -> None:
        """Once a second: a history point and the Redis Cluster's health; every few seconds: the lag.

        The lag: the consumer lag and the oldest waiting update; the cluster:
        `cluster_problem` (a node failing, a primary without its replica; one
        CLUSTER NODES, so each second: a failover lasts a few seconds).

        Everything from the consumed offsets on waits, the running batch's rows
        included (the offsets move when a batch is committed), so the first
        waiting record's Kafka timestamp is the oldest update not yet reflected.
        """
        from fluxmat.connectors.kafka_source import KafkaStreamReader

        reader = KafkaStreamReader({"bootstrap": self.cfg.bootstrap_servers, "topic": self.cfg.updates_topic,
                                    "kafkaConfig": self.cfg.kafka_config or ""})
        last_lag = 0.0
        try:
            while not self._stop.wait(1.0):
                if time.monotonic() - last_lag >= 3.0:
                    last_lag = time.monotonic()
                    try:
                        self._progress_offsets(consumed)
                        why = sample_lag(reader, consumed, metrics)
                    except Exception as exc:  # the lag is advisory; the job goes on
                        metrics.set_lag_unknown()
                        why = str(exc)
                    if why is not None:
                        self.log(f"cannot read the consumer lag (shown as unknown): {why}")
                metrics.set_redis_problem(store.cluster_problem())
                self._spark_progress(metrics)
                metrics.sample()
        finally:
            reader.stop()

    def _spark_progress(self, metrics) -> None:
        """Hand Spark's timings of each new micro-batch (`durationMs` of its progress) to the observer.

        Every batch finished since the last call (`recentProgress`), not only the last one.
        """
        query = getattr(self, "query", None)
        try:
            recent = query.recentProgress if query is not None else []
        except Exception:  # the query is stopping
            return
        for progress in recent or ():
            batch = progress.get("batchId")
            if not isinstance(batch, int) or (self._last_progress is not None and batch <= self._last_progress):
                continue
            self._last_progress = batch
            durations = progress.get("durationMs") or {}
            metrics.on_spark_batch({k: v / 1000.0 for k, v in durations.items() if isinstance(v, int | float)})

    def _progress_offsets(self, consumed: dict[str, int]) -> None:
        """Merge the end offsets of Spark's last progress (known before any row after a restart)."""
        query = getattr(self, "query", None)
        progress = query.lastProgress if query is not None else None
        if not progress:
            return
        try:
            end = progress["sources"][0]["endOffset"]
        except (KeyError, IndexError, TypeError):
            return
        if isinstance(end, str):
            end = json.loads(end)
        for p, offset in (end or {}).items():
            consumed[str(p)] = max(consumed.get(str(p), 0), int(offset))


def _checkpoint_ids(checkpoint: str, sub: str) -> set[int]:
    """The batch ids of a local checkpoint's `offsets/` (planned) or `commits/` (finished)."""
    path = Path(checkpoint.removeprefix("file://").removeprefix("file:")) / sub
    return {int(p.name) for p in path.glob("*") if p.name.isdigit()} if path.is_dir() else set()


def checkpoint_last_batch(checkpoint: str) -> int | None:
    """The last batch id Spark planned in a local checkpoint (`offsets/<id>`), None when new."""
    return max(_checkpoint_ids(checkpoint, "offsets"), default=None)


def checkpoint_last_commit(checkpoint: str) -> int | None:
    """The last batch id Spark finished in a local checkpoint (`commits/<id>`): it never runs it again."""
    return max(_checkpoint_ids(checkpoint, "commits"), default=None)


def checkpoint_offsets(checkpoint: str) -> dict[str, int]:
    """The end offsets of the last batch Spark committed in a local checkpoint ({} when none).

    The consumer lag is measured against them from the first sample after a
    restart (Spark's own progress is empty until the first new batch ends).
    """
    root = Path(checkpoint.removeprefix("file://").removeprefix("file:"))
    done = _checkpoint_ids(checkpoint, "offsets") & _checkpoint_ids(checkpoint, "commits")
    if not done:
        return {}
    try:
        last = (root / "offsets" / str(max(done))).read_text(encoding="utf-8").strip().splitlines()[-1]
        return {str(p): int(n) for p, n in json.loads(last).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return {}  # an unreadable file: Spark's progress takes over after the first batch


def source_options(cfg: JobConfig) -> dict[str, str]:
    """The `fluxmat-kafka` source's options for the updates topic (connectors.kafka_source)."""
    options = {"bootstrap": cfg.bootstrap_servers, "topic": cfg.updates_topic}
    if cfg.kafka_config:  # the path: executors read the file, no secret in the plan
        options["kafkaConfig"] = cfg.kafka_config
    if cfg.max_updates_per_batch:
        options["maxOffsetsPerTrigger"] = str(cfg.max_updates_per_batch)
    if cfg.starting_offsets:
        options["startingOffsets"] = cfg.starting_offsets
    if cfg.max_message_bytes:  # an oversized value is cut where it is read
        options["maxValueBytes"] = str(cfg.max_message_bytes)
    return options


def _updates_reader(spark, cfg: JobConfig):
    """The streaming reader of the updates topic (the `fluxmat-kafka` source, connectors.kafka_source)."""
    from fluxmat.connectors.kafka_source import register

    register(spark)
    return spark.readStream.format("fluxmat-kafka").options(**source_options(cfg))


def run_until_signalled(cfg: JobConfig, operations: Operations | None = None) -> None:
    """`fluxmat run`: run the job until SIGTERM or SIGINT, then stop cleanly."""
    job = Job(cfg, operations=operations)

    def handler(signum, frame):
        job.log(f"received signal {signum}, stopping after the current batch")
        job.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    started = time.monotonic()
    job.run()
    job.log(f"stopped after {job.batches_done} batches in {time.monotonic() - started:.1f} s")

