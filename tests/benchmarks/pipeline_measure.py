"""What the pipeline benchmark (pipeline.py) measures, and how it prints it.

* `DeltaReader`: a thread consuming the deltas topic, recording (receive time, message);
* `measure`: a scenario's latencies (produce -> first delta whose `through` reaches
  the update), throughput, micro-batches;
* `Phases`: the job's own metrics (`fluxmat_batch_phase_seconds{phase}`: decode,
  engine, export, commit, publish; `fluxmat_spark_phase_seconds{phase}`: Spark's
  `durationMs`; `fluxmat_batch_duration_seconds`), scraped from its `/metrics`
  before and after a scenario, so each scenario gets its own breakdown;
* `fold` / `expected`: the check that the deltas fold into `remat`'s result;
* the tables.
"""

from __future__ import annotations

import json
import math
import statistics
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.benchmarks.workloads import render_table

WAIT_CAP = 300.0  # seconds to wait for a scenario's last delta
OURS = ("collect", "rows", "decode", "engine", "poll", "deltas", "export", "commit", "publish")
SPARK = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
         "triggerExecution")  # fmt: skip


@dataclass
class ScenarioRow:
    scenario: str
    updates: int
    facts_per_update: int
    rate: str  # produce schedule
    core: str = ""  # the job's --core
    produce_seconds: float | None = None  # the producer's: first send -> all delivered
    seconds: float | None = None  # first send -> last update's delta
    drain_seconds: float | None = None  # last send -> last update's delta
    facts_per_second: float | None = None
    latency_median: float | None = None
    latency_p99: float | None = None
    latency_max: float | None = None
    batches: int | None = None
    updates_per_batch: float | None = None
    check: str = ""
    batch_sizes: list[int] = field(default_factory=list)  # updates a delta batch reflects first
    phases: dict[str, float] = field(default_factory=dict)  # seconds summed over the scenario's batches
    latencies: list[float] = field(default_factory=list)


def uid(i: int) -> str:
    return f"u{i:06d}"


def seq_of(through) -> int:
    """The sequence number of a delta's `through` (-1 for the initial batch / foreign ids)."""
    if isinstance(through, str) and through[:1] == "u" and through[1:].isdigit():
        return int(through[1:])
    return -1


class DeltaReader(threading.Thread):
    """Consumes the deltas topic from offset 0; records (receive time, message)."""

    def __init__(self, bootstrap: str, topic: str):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                      group_id=None, fetch_max_wait_ms=10)  # fmt: skip
        tp = TopicPartition(topic, 0)
        self.consumer.assign([tp])
        self.consumer.seek(tp, 0)
        self.messages: list[tuple[float, dict]] = []
        self.max_seq = -1
        self.cond = threading.Condition()
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                polled = self.consumer.poll(timeout_ms=50)
                now = time.monotonic()
                for recs in polled.values():
                    for rec in recs:
                        msg = json.loads(rec.value)
                        with self.cond:
                            self.messages.append((now, msg))
                            self.max_seq = max(self.max_seq, seq_of(msg.get("through")))
                            self.cond.notify_all()
        except BaseException as exc:  # reported by the main thread
            self.error = exc
        finally:
            self.consumer.close()

    def wait_for(self, seq: int, timeout: float, alive) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.max_seq < seq:
                left = deadline - time.monotonic()
                if left <= 0 or not alive() or self.error is not None:
                    return False
                self.cond.wait(min(left, 0.5))
        return True


def pct(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def measure(row: ScenarioRow, ids: list[int], produced: dict[int, float], reader: DeltaReader,
            reached: bool, flushed: float) -> None:  # fmt: skip
    """The row's figures; `flushed`: when the producer had delivered every update of the scenario."""
    with reader.cond:
        msgs = list(reader.messages)
    first_seen: dict[int, float] = {}  # seq -> receive time of the first delta reflecting it
    batches: set[int] = set()
    sizes: dict[int | None, int] = {}  # delta batch -> updates it reflects first
    lo, hi = ids[0], ids[-1]
    nxt = lo  # messages arrive in log order: the first with through >= i reflects i first
    for t, msg in msgs:
        s = seq_of(msg.get("through"))
        if s < lo:
            continue
        if msg.get("batch") is not None and msg.get("part", 0) == 0:
            batches.add(msg["batch"])
        for i in range(nxt, min(s, hi) + 1):
            first_seen[i] = t
        if min(s, hi) + 1 > nxt:
            sizes[msg.get("batch")] = sizes.get(msg.get("batch"), 0) + min(s, hi) + 1 - nxt
        nxt = max(nxt, min(s, hi) + 1)
    lat = [first_seen[i] - produced[i] for i in ids if i in first_seen]
    row.latencies = lat
    row.produce_seconds = flushed - produced[lo]
    row.latency_median = statistics.median(lat) if lat else None
    row.latency_p99 = pct(lat, 0.99)
    row.latency_max = max(lat) if lat else None
    row.batches = len(batches)
    row.batch_sizes = list(sizes.values())
    row.updates_per_batch = (len(first_seen) / len(batches)) if batches else None
    if reached and hi in first_seen:
        row.seconds = first_seen[hi] - produced[lo]
        row.drain_seconds = first_seen[hi] - produced[hi]
        row.facts_per_second = row.updates * row.facts_per_update / row.seconds
    else:
        got = max(first_seen, default=lo - 1)
        row.check = (f"NOT KEPT UP: last delta through {uid(got)} of {uid(hi)} "
                     f"after waiting {WAIT_CAP:g} s")  # fmt: skip


class Phases:
    """Sums of the job's phase histograms, read from its /metrics (differences per scenario)."""

    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/metrics"

    def read(self) -> dict[str, float]:
        from prometheus_client.parser import text_string_to_metric_families

        with urllib.request.urlopen(self.url, timeout=10) as resp:
            text = resp.read().decode("utf-8")
        out: dict[str, float] = {}
        names = {"fluxmat_batch_phase_seconds": "", "fluxmat_spark_phase_seconds": "spark.",
                 "fluxmat_batch_duration_seconds": "batch"}  # fmt: skip
        for family in text_string_to_metric_families(text):
            prefix = names.get(family.name)
            if prefix is None:
                continue
            for s in family.samples:
                if s.name.endswith("_sum"):
                    out[prefix + s.labels.get("phase", "")] = s.value
                elif s.name.endswith("_count") and prefix == "batch":
                    out["batches"] = s.value
                elif s.name.endswith("_count") and s.labels.get("phase") == "triggerExecution":
                    out["spark.batches"] = s.value
        return out

    def settled(self, before: dict[str, float], batches: int, timeout: float = 10.0) -> dict[str, float]:
        """Phases since `before`, once our metrics of `batches` batches and Spark's progress of
        each have been recorded (within `timeout`): both come a little after a batch's delta."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.since(self.read(), before)
            ours = got.get("batches", 0)
            if (ours >= batches and got.get("spark.batches", 0) >= ours) or time.monotonic() > deadline:
                return got
            time.sleep(0.2)

    @staticmethod
    def since(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
        return {k: v - before.get(k, 0.0) for k, v in after.items() if v - before.get(k, 0.0) > 0}


def source_read(bootstrap: str, topic: str, end: int) -> dict[str, float]:
    """The Kafka source's own read of offsets [0, end) of partition 0, outside Spark, in this process.

    What `collect` costs without Spark: the source's `read` (librdkafka's
    fetch and parse, the Arrow batches) and the Arrow columns as messages
    (stream.micro.messages), in microseconds per message; read twice, the
    second time with the consumer the first kept (as a Python worker keeps it
    between micro-batches), which is the figure given.
    """
    import pyarrow as pa

    from fluxmat.connectors.kafka_source import (
        KafkaInputPartition,
        KafkaStreamReader,
        close_readers,
    )
    from fluxmat.stream.micro import messages

    out = {"messages": end}
    for label in ("cold", "read"):
        reader = KafkaStreamReader({"bootstrap": bootstrap, "topic": topic})
        started = time.perf_counter()
        table = pa.Table.from_batches(list(reader.read(KafkaInputPartition(topic, 0, 0, end))))
        out[f"{label}_us"] = 1e6 * (time.perf_counter() - started) / max(end, 1)
    started = time.perf_counter()
    out["messages"] = len(messages(table).offset)
    out["rows_us"] = 1e6 * (time.perf_counter() - started) / max(end, 1)
    close_readers()
    return out


def fold(messages: list[tuple[float, dict]]) -> set[tuple]:
    current: set[tuple] = set()
    seen: set[tuple] = set()
    for _, msg in messages:
        key = (msg["batch"], msg.get("part", 0))
        if key in seen:
            continue
        seen.add(key)
        for f in msg["added"]:
            current.add(tuple(f))
        for f in msg["removed"]:
            current.discard(tuple(f))
    return current


def expected(program_path: Path, explicit: list[tuple]) -> set[tuple]:
    """`remat` over the explicit facts (JSON form), in the job's wire form."""
    from fluxmat.connectors.delta_codec import DeltaCodec
    from fluxmat.engine import Reasoner, atom_to_fact, fact_from_json

    ref = Reasoner.from_file(program_path, "remat")
    prefixes = dict(ref.prefixes)
    ref.load([atom_to_fact(fact_from_json(list(f), prefixes)) for f in explicit])
    codec = DeltaCodec(ref.program.prefixes)  # the job's (json) delta format
    return {tuple(codec.encode(f)) for f in ref.facts()}


# ---------------------------------------------------------------- output


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


HEADER = ("core", "scenario", "updates", "facts/update", "produced at", "produce s", "drain s", "total s",
          "fact ops/s", "latency p50", "latency p99", "latency max", "batches",
          "updates/batch", "check")  # fmt: skip


def _cells(r: ScenarioRow) -> tuple[str, ...]:
    return (
        r.core, r.scenario, f"{r.updates}", f"{r.facts_per_update}", r.rate,
        "-" if r.produce_seconds is None else f"{r.produce_seconds:.2f}",
        "-" if r.drain_seconds is None else f"{r.drain_seconds:.2f}",
        "-" if r.seconds is None else f"{r.seconds:.2f}",
        "-" if r.facts_per_second is None else f"{r.facts_per_second:,.0f}",
        _s(r.latency_median), _s(r.latency_p99), _s(r.latency_max),
        "-" if r.batches is None else f"{r.batches}",
        "-" if r.updates_per_batch is None else f"{r.updates_per_batch:.1f}", r.check,
    )  # fmt: skip


def pipeline_table(rows: list[ScenarioRow], markdown: bool = False) -> str:
    return render_table(HEADER, [_cells(r) for r in rows], set(range(2, 14)) - {4}, markdown)


def phases_table(rows: list[ScenarioRow], markdown: bool = False) -> str:
    """Seconds per micro-batch in each phase, per scenario: Spark's, then ours inside addBatch.

    `collect` is `df.toArrow()` in foreachBatch (the source read on the executor
    and the Arrow batches to the driver), `rows` the Arrow columns as `Message`s;
    then the processor's phases (stream.batch: decode and validate, engine =
    feed, poll = the delta and its causes, deltas = encoding them, export = the
    state changes, commit to Redis, publish to Kafka); `addBatch rest` is
    Spark's addBatch minus ours: Spark's own work around foreachBatch and the
    observer's bookkeeping.
    """
    header = ("core", "scenario", "batches", *(f"spark {p}" for p in SPARK[:-1]), "addBatch rest", *OURS,
              "trigger total")  # fmt: skip
    out = []
    for r in rows:
        ph, n, sn = r.phases, r.phases.get("batches", 0), r.phases.get("spark.batches", 0)
        if not n or not sn:
            continue
        ours = [ph.get(p, 0.0) / n for p in OURS]
        spark = [ph.get(f"spark.{p}", 0.0) / sn for p in SPARK]
        cells = [*spark[:-1], spark[4] - sum(ours), *ours, spark[-1]]  # addBatch - ours: Spark's own
        out.append((r.core, r.scenario, f"{n:.0f}", *(f"{1000 * c:,.0f} ms" for c in cells)))
    return ("per micro-batch, mean (Spark's durationMs phases; addBatch = addBatch rest + ours):\n"
            + render_table(header, out, set(range(2, len(header))), markdown))  # fmt: skip


def batch_sizes(rows: list[ScenarioRow]) -> str:
    """Each scenario's micro-batches: the updates each delta batch reflected first, in order."""

    def one(r: ScenarioRow) -> str:
        sizes = r.batch_sizes
        more = f", ... ({len(sizes)} batches)" if len(sizes) > 12 else ""
        shown = ", ".join(f"{n:,}" for n in sizes[:12]) + more
        return f"{r.core} {r.scenario}: {shown or '-'}"

    return "updates per micro-batch: " + "; ".join(one(r) for r in rows)


def summary(info: dict) -> str:
    mb = lambda kb: "-" if kb is None else f"{kb / 1024:,.0f} MiB"  # noqa: E731
    return (
        f"pipeline, core {info['core']}: {info['source']}; {info['initial_facts']:,} initial facts, "
        f"materialisation {info.get('initial_materialisation', 0):,} -> "
        f"{info.get('final_materialisation', 0):,} facts; {info['algorithm']}, trigger "
        f"{info['trigger_interval']}, {info['state']}, {info['broker']}\n"
        f"state: Redis HLEN E {info.get('redis_hlen_E', '-'):,}, I "
        f"{info.get('redis_hlen_I', '-'):,}, log {info.get('redis_hlen_log', '-'):,}, "
        f"T {info.get('redis_hlen_T', '-'):,}; "
        f"used_memory {info.get('redis_used_memory', 0) / 2**20:,.1f} MiB, AOF "
        f"{info.get('aof_bytes', 0) / 2**20:,.1f} MiB; peak RSS (VmHWM) driver "
        f"{mb(info.get('driver_vmhwm_kb'))}, Spark JVM {mb(info.get('jvm_vmhwm_kb'))}; "
        f"job start: initial materialisation committed after "
        f"{info.get('initial_seconds', '-')} s, warm after {info.get('startup_seconds', '-')} s; "
        f"{_source(info.get('source_read'))}load average (1 min) "
        f"{info['loadavg_start'][0]:.2f} -> {info.get('loadavg_end', (float('nan'),))[0]:.2f} "
        f"on {info['cpus']} CPUs"
    )


def _source(read: dict | None) -> str:
    if not read:
        return ""
    return (f"the source's read alone (outside Spark, a kept consumer): {read['read_us']:.0f} us per message "
            f"({read['cold_us']:.0f} with a new one) + {read['rows_us']:.1f} us to messages "
            f"({read['messages']:,} messages); ")  # fmt: skip


def to_json(info: dict, rows: list[ScenarioRow]) -> dict:
    return {"info": info, "rows": [asdict(r) for r in rows]}
