"""How operations plug into a streaming job without the job knowing them.

The job (stream.job) reports what happens to a `JobObserver` and asks an
`Operations` object what to check before it starts, which observer to feed and
which servers to run beside it. Both bases do nothing: a job without operations
runs as well, only unobserved. `ops.wiring.Operations` is the real one (the
Prometheus metrics of ops.metrics, the dashboard of ops.dashboard); it is
handed in by the CLI, so dependencies point one way: ops -> stream.

Not here: metrics, pages or HTTP servers (ops).
"""

from __future__ import annotations

import threading


class JobObserver:
    """What the job reports as it runs (every method does nothing here)."""

    def watch(self, inflight, stall_seconds: float) -> None:
        """The job's in-flight tracker (stream.inflight.InFlight): a batch in it longer than `stall_seconds` stalls."""

    def on_start(self, processor, store) -> None:
        """The state was restored, or the initial materialisation committed."""

    def on_pending(self, pending: int) -> None:
        """The engine's pending operations after a submitted update."""

    def on_batch(self, outcome, processor, store) -> None:
        """A micro-batch was committed and published (stream.batch.BatchOutcome).

        `processor` is None with `--partition-by` (the keys' engines live in executors).
        """

    def on_keys(self, keys: list[dict], store, tasks: list[float] = ()) -> None:
        """With `--partition-by`: one summary per key of the batch (stream.keyed.SUMMARY), task seconds."""

    def on_retry(self, target: str, why: str) -> None:
        """A call to `target` ("redis" or "broker") failed and is being retried."""

    def on_spark_batch(self, phases: dict[str, float]) -> None:
        """Spark's own timings of a micro-batch, in seconds by phase (`lastProgress.durationMs`)."""

    def on_error(self, exc: BaseException) -> None:
        """A micro-batch failed; the job is about to give up."""

    def on_verified(self, result) -> None:
        """A `--verify-every` self-check finished (stream.verify.Verification)."""

    def set_lag(self, lag: dict[str, int], oldest_ms: int | None = None) -> None:
        """Messages not yet processed, per partition; the Kafka timestamp (ms) of the oldest of them.

        `oldest_ms` is None when nothing waits, or when updates wait but the oldest one's
        timestamp could not be read: the time lag is then unknown, never 0.
        """

    def set_lag_unknown(self) -> None:
        """The lag lookup failed: the lag and the time lag are unknown until it answers again."""

    def set_redis_problem(self, problem: str | None) -> None:
        """Every few seconds: what weakens the Redis Cluster, or None.

        A node failing, a primary without its replica; None when nothing does
        (or outside a cluster).
        """

    def sample(self) -> None:
        """Once a second, from the job's sampler thread."""


class Operations:
    """What the job asks of operations (the base: nothing to check, no observer, no servers)."""

    def check(self, cfg) -> None:
        """Refuse a configuration before anything is contacted or written."""

    def observer(self, cfg) -> JobObserver:
        """The observer the job feeds."""
        return JobObserver()

    def serve(self, cfg, observer: JobObserver, reasoner, lock: threading.Lock) -> list[tuple[str, object]]:
        """Start the servers the configuration asks for: `(name, server)` pairs.

        Servers have `server_address`, `shutdown()` and `server_close()`;
        questions they answer about `reasoner` hold `lock` (the batch lock).
        """
        return []


def sample_lag(reader, consumed: dict[str, int], observer: JobObserver) -> str | None:
    """Read the consumer lag and the oldest waiting update's timestamp into `observer`.

    `reader` is the source's `KafkaStreamReader` (`backlog`), `consumed` the committed
    offsets by partition. Returns why the lookup failed -- the lag is then unknown
    (`set_lag_unknown`), never reported as 0, which would look healthy -- or None.
    """
    try:
        high, heads = reader.backlog(dict(consumed))
    except Exception as exc:  # the lag is advisory: the job goes on without it
        observer.set_lag_unknown()
        return str(exc) or type(exc).__name__
    lag = {p: max(h - consumed.get(p, 0), 0) for p, h in high.items()}
    observer.set_lag(lag, min(heads.values(), default=None))
    return None
