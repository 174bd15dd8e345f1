"""End-to-end pipeline benchmark: Kafka updates -> `fluxmat run` (Spark) -> Kafka deltas.

    python3 -m tests.benchmarks.pipeline [--core objects|arrays|objects,arrays] [--backlog N]
                                         [--rate OPS] [--steady-seconds S]
                                         [--redis-fsync everysec|always] [--universities N]
                                         [--markdown] [--json OUT]
    python3 -m tests.benchmarks.run --workload pipeline [--markdown] [--json OUT.json]

Needs real servers, so it is not part of `--workload all`. Starts, on 127.0.0.1:

* an `EmbeddedBroker` (tansu, in-memory storage);
* a `RedisServer` (tests/support/servers.py: AOF on; the job sets `--redis-fsync`,
  everysec unless told otherwise);
* `fluxmat run` as a subprocess: `--core CORE` (`--core objects,arrays` runs the
  whole benchmark once per core, one after the other, each with servers of its
  own, and prints them in one table; the default is the job's default core),
  `--algorithm fd-counting`, Redis state,
  `--trigger-interval 200ms`, no `--max-updates-per-batch` (a batch takes all
  that has arrived), metrics on a free port, the corpus program `lubm.dlog` and
  generated LUBM data (`lubm_gen.generate(1, 2)`, or with `--universities N`
  LUBM-N, `generate(N)`; minus `HELD_OUT` held-out facts) as the initial
  facts, written to a temporary JSON Lines facts file.

Every update carries a sequential id `u000000`, `u000001`, ... on one
partition. Update `u000000` is a warm-up (1 add + 1 delete, not measured): the
scenarios start once its delta has arrived, so Spark's first (slow) batch is not
counted. Scenarios, run one after the other against the same job:

* capacity: a backlog of `--backlog` (default 2,000) updates of 1 add + 1
  delete, produced at once (sent, then one flush);
* large: `LARGE_UPDATES` updates of `LARGE_SIZE` facts each (half adds, half
  deletes), produced at once;
* steady: updates of 1 add + 1 delete at an offered `--rate` fact operations per
  second (default 5,000) for `--steady-seconds` (default 10).

Updates overlap: each added fact is, with probability 1/2, one deleted by the
previous update (else the oldest absent fact: held-out or deleted earlier), and
deletions are random explicit facts, so consecutive updates undo each other's
work while they are processed in the same micro-batch.

Producing: a scenario's updates are made and encoded to JSON bytes before its
clock starts; `send` only queues the bytes in a librdkafka producer
(confluent-kafka, `Producer`), which batches and sends them from its own
thread, so the producer is a small part of the measured time.

Measured (tests/benchmarks/pipeline_measure.py; clock: `time.monotonic()` of
this process, which both produces the updates and consumes the deltas topic
with a dedicated consumer thread):

* latency of an update: its `send` -> receive time of the first delta message
  whose `through` >= the update's id; p50 and p99;
* sustained throughput: fact operations in the scenario's updates / (first
  send -> receive of the delta whose `through` is the last update's id);
* the producer's time (`produce s`: first send -> every update acknowledged by
  the broker) and the drain (`drain s`: last send -> the last update's delta);
* micro-batches (distinct delta batch ids), updates per batch, and the updates
  each delta batch reflected first (`updates per micro-batch`);
* where a micro-batch's time goes: the job's own metrics, scraped before and
  after each scenario: Spark's `durationMs` phases (latestOffset, getBatch,
  queryPlanning, walCommit, addBatch, commitOffsets) and, inside addBatch, ours
  (`BatchOutcome.phases`: decode, engine, export, commit, publish) and the rest
  (collecting the rows to the driver);
* after all scenarios: Redis `HLEN` of `fluxmat:<ns>:E`, `:I`, `:log`, Redis
  `used_memory`, the AOF size on disk, and the peak RSS (`VmHWM`) of the
  `fluxmat run` Python driver and of its Spark JVM child, read before stopping;
* check: the materialisation folded from every delta message (initial batch
  included, deduplicated by `(batch, part)`) equals `remat` over the final
  explicit facts.

If the job falls behind, a scenario's wait for its last delta is bounded by
`WAIT_CAP` seconds; the row then says how far it got.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import fields
from pathlib import Path

from fluxmat.connectors.broker import stop_process
from fluxmat.engine.options import CORES
from fluxmat.stream.config import JobConfig
from tests.benchmarks.pipeline_measure import (
    WAIT_CAP,
    DeltaReader,
    Phases,
    ScenarioRow,
    batch_sizes,
    expected,
    fold,
    measure,
    phases_table,
    pipeline_table,
    source_read,
    summary,
    to_json,
    uid,
)
from tests.benchmarks.workloads import SEED, corpus_dir

__all__ = ["DEFAULT_CORE", "HELD_OUT", "PROGRAM", "UpdateMaker", "cmdline", "descendants", "job_command", "phases_table",
           "pipeline_table", "run_pipeline", "status_kb", "summary", "to_json", "write_facts"]  # fmt: skip

PROGRAM = Path("programs") / "lubm.dlog"
UNIVERSITIES = 1
DEPARTMENTS = 2
HELD_OUT = 300  # generated facts not in the initial data: the first facts to add
BACKLOG = 2_000  # capacity: updates of 1 + 1 produced at once
LARGE_UPDATES = 20
LARGE_SIZE = 500  # facts per update: LARGE_SIZE / 2 adds + LARGE_SIZE / 2 deletes
RATE = 5_000.0  # steady: offered fact operations per second (updates of 1 + 1)
STEADY_SECONDS = 10.0
TRIGGER = "200ms"
NAMESPACE = "bench"
START_CAP = 600.0  # seconds for the job to start and answer the warm-up update
UPDATES, DELTAS = "updates", "deltas"
DEFAULT_CORE = next(f.default for f in fields(JobConfig) if f.name == "core")  # the job's default


# ---------------------------------------------------------------- data


class UpdateMaker:
    """Overlapping add/delete updates over generated facts (JSON form, fixed seed)."""

    def __init__(self, generated: list[tuple], held_out: int, seed: int = SEED):
        self.rng = random.Random(seed + 7)
        held = set(self.rng.sample(range(len(generated)), held_out))
        self.initial = [f for i, f in enumerate(generated) if i not in held]
        self.present = list(self.initial)  # explicit facts (list + index for O(1) removal)
        self.index = {f: i for i, f in enumerate(self.present)}
        self.absent = deque(generated[i] for i in sorted(held))  # FIFO of non-explicit facts
        self.prev_deleted: list[tuple] = []

    def _remove_present(self, f: tuple) -> None:
        i = self.index.pop(f)
        last = self.present.pop()
        if i < len(self.present):
            self.present[i] = last
            self.index[last] = i

    def make(self, n_add: int, n_del: int) -> tuple[list[tuple], list[tuple]]:
        dele = self.rng.sample(self.present, n_del)  # explicit now, so disjoint from the adds
        add: list[tuple] = []
        redo = [f for f in self.prev_deleted if f not in self.index]
        self.rng.shuffle(redo)
        while len(add) < n_add:
            if redo and self.rng.random() < 0.5:
                f = redo.pop()
                self.absent.remove(f)
            else:
                f = self.absent.popleft()
                if f in redo:
                    redo.remove(f)
            add.append(f)
        for f in dele:
            self._remove_present(f)
            self.absent.append(f)
        for f in add:
            self.index[f] = len(self.present)
            self.present.append(f)
        self.prev_deleted = dele
        return add, dele


# ---------------------------------------------------------------- processes


def status_kb(pid: int, field: str = "VmHWM") -> int | None:
    """A process's `/proc/PID/status` memory field in KiB (VmHWM: peak RSS, VmRSS: RSS now)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    todo, seen = _children(pid), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _stop_process(proc: subprocess.Popen, grace: float = 30.0) -> int | None:
    return stop_process(proc, grace)


# ---------------------------------------------------------------- produce


def encode(seq: int, add: list[tuple], dele: list[tuple]) -> bytes:
    """Update `seq` in the job's JSON form (done before a scenario's timed sends)."""
    update = {"id": uid(seq), "add": [list(f) for f in add], "del": [list(f) for f in dele]}
    return json.dumps(update).encode()


class Producer:
    """The updates' producer: confluent-kafka (librdkafka), every value to partition 0 of UPDATES.

    librdkafka batches and sends in its own thread, so a `send` is a queue
    append (about 1 us of this process's CPU a message against ~70 us with
    kafka-python's producer, which encoded and batched in Python). A failed
    delivery is an error at the next `flush`.
    """

    def __init__(self, bootstrap: str):
        from confluent_kafka import Producer as Librdkafka

        self.failed: list[str] = []
        self.client = Librdkafka({
            "bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
            "delivery.report.only.error": True, "on_delivery": self._report,
        })  # fmt: skip

    def _report(self, err, _msg) -> None:
        if err is not None:
            self.failed.append(str(err))

    def send(self, value: bytes) -> None:
        while True:
            try:
                self.client.produce(UPDATES, value, partition=0)
                return
            except BufferError:  # librdkafka's queue is full: let it send
                self.client.poll(0.01)

    def close(self) -> None:
        """Deliver what is left (5 s at most) and disconnect, before the broker stops."""
        self.client.flush(5)
        self.client.close()

    def flush(self, timeout: float = 60.0) -> None:
        left = self.client.flush(timeout)
        if left or self.failed:
            raise RuntimeError(f"producer: {left} not delivered, failures: {self.failed[:3]}")


# ---------------------------------------------------------------- run


def write_facts(path: Path, facts: list[tuple]) -> Path:
    """The initial explicit facts as a JSON Lines facts file (`--facts`)."""
    with path.open("w", encoding="utf-8") as fh:
        for f in facts:
            fh.write(json.dumps(list(f)) + "\n")
    return path


def job_command(program: Path, facts_file: Path, bootstrap: str, redis_url: str, root: Path,
                redis_fsync: str, metrics_port: int, *extra: str) -> list[str]:  # fmt: skip
    """The benchmarks' `fluxmat run`: fd-counting, Redis state, TRIGGER, metrics on `metrics_port`."""
    exe = Path(sys.executable).parent / "fluxmat"
    return [str(exe), "run", str(program), "--facts", str(facts_file),
            "--bootstrap-servers", bootstrap, "--updates-topic", UPDATES,
            "--deltas-topic", DELTAS, "--redis", redis_url, "--namespace", NAMESPACE,
            "--checkpoint", str(root / "checkpoint"), "--algorithm", "fd-counting",
            "--trigger-interval", TRIGGER, "--redis-fsync", redis_fsync,
            "--metrics-port", str(metrics_port), *extra]  # fmt: skip


def _scenarios(backlog: int, rate: float, steady_seconds: float, core: str) -> list[tuple[ScenarioRow, int, int, int, float]]:
    """(row, updates, adds, deletes, seconds between two sends) per scenario."""
    steady = max(1, round(rate / 2 * steady_seconds))
    return [
        (ScenarioRow("capacity", backlog, 2, "all at once", core), backlog, 1, 1, 0.0),
        (ScenarioRow("large", LARGE_UPDATES, LARGE_SIZE, "all at once", core),
         LARGE_UPDATES, LARGE_SIZE // 2, LARGE_SIZE - LARGE_SIZE // 2, 0.0),
        (ScenarioRow("steady", steady, 2, f"{rate:,.0f} fact ops/s", core), steady, 1, 1, 2.0 / rate),
    ]  # fmt: skip


def run_pipeline(backlog: int = BACKLOG, rate: float = RATE, steady_seconds: float = STEADY_SECONDS,
                 redis_fsync: str = "everysec", log=None, universities: int | None = None,
                 core: str = DEFAULT_CORE) -> tuple[dict, list[ScenarioRow]]:  # fmt: skip
    """Run the scenarios against one `fluxmat run --core core`; returns (info, rows).

    `universities`: LUBM-N data (`generate(N)`, 15-25 departments each) instead
    of LUBM-1 with two departments.
    """
    import redis

    from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
    from tests.benchmarks.lubm_gen import generate
    from tests.support.servers import RedisServer, free_port

    say = log or (lambda m: print(f"# pipeline: {m}", file=sys.stderr, flush=True))
    program = corpus_dir() / PROGRAM
    if universities:
        generated, label = generate(universities), f"generate({universities})"
    else:
        generated, label = generate(UNIVERSITIES, DEPARTMENTS), f"generate({UNIVERSITIES}, {DEPARTMENTS})"
    maker = UpdateMaker(generated, HELD_OUT)
    info: dict = {
        "source": f"{PROGRAM} over lubm_gen.{label}: "
        f"{len(generated):,} generated, {HELD_OUT} held out",
        "initial_facts": len(maker.initial),
        "algorithm": "fd-counting",
        "core": core,
        "trigger_interval": TRIGGER,
        "state": f"redis-server, AOF on (appendfsync {redis_fsync})",
        "broker": "EmbeddedBroker (tansu, in-memory)",
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
    }
    rows: list[ScenarioRow] = []
    tmp = tempfile.TemporaryDirectory(prefix="fluxmat-pipeline-")
    root = Path(tmp.name)
    broker = redis_srv = job = reader = producer = None
    job_log = root / "job.log"
    try:
        facts_file = write_facts(root / "facts.jsonl", maker.initial)
        broker = EmbeddedBroker(log_path=root / "broker.log").start()
        redis_srv = RedisServer(root / "redis").start()
        say(f"broker {broker.bootstrap} (pid {broker.pid}), redis {redis_srv.url} "
            f"(pid {redis_srv.proc.pid})")  # fmt: skip
        ensure_topics(broker.bootstrap, {UPDATES: 1, DELTAS: 1})
        metrics_port = free_port()
        cmd = job_command(program, facts_file, broker.bootstrap, redis_srv.url, root, redis_fsync, metrics_port,
                          "--core", core)  # fmt: skip
        info["command"] = " ".join(cmd)
        started = time.monotonic()
        with job_log.open("wb") as out:
            job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=root)  # fmt: skip
        say(f"fluxmat run pid {job.pid}; log {job_log}")
        alive = lambda: job.poll() is None  # noqa: E731
        reader = DeltaReader(broker.bootstrap, DELTAS)
        reader.start()
        producer = Producer(broker.bootstrap)
        phases = Phases(metrics_port)
        produced: dict[int, float] = {}
        seq = 0

        def send(value: bytes) -> None:
            nonlocal seq
            produced[seq] = time.monotonic()
            producer.send(value)
            seq += 1

        # wait for the query, then a warm-up update through Spark's first batch
        while "reading " not in (text := job_log.read_text(errors="replace")):
            if "initial_seconds" not in info and "initial materialisation" in text:
                info["initial_seconds"] = round(time.monotonic() - started, 1)
            if not alive() or time.monotonic() - started > START_CAP:
                raise RuntimeError("fluxmat run did not start")
            time.sleep(0.1)
        send(encode(seq, *maker.make(1, 1)))
        producer.flush()
        if not reader.wait_for(0, START_CAP, alive):
            raise RuntimeError("no delta for the warm-up update")
        info["startup_seconds"] = round(time.monotonic() - started, 1)
        say(f"job up and warm after {info['startup_seconds']} s")
        phases.settled({}, 1)  # the warm-up batch's metrics, Spark's included, before any scenario

        for row, n, n_add, n_del, gap in _scenarios(backlog, rate, steady_seconds, core):
            ids = list(range(seq, seq + n))
            values = [encode(i, *maker.make(n_add, n_del)) for i in ids]  # encoded before timing
            say(f"{row.scenario}: {n} updates of {n_add}+{n_del} facts, {row.rate}")
            time.sleep(1.0)  # the previous scenario's last batch is over
            before = phases.read()
            t0 = time.monotonic()
            for k, value in enumerate(values):
                delay = t0 + k * gap - time.monotonic()
                if delay > 0.002:
                    producer.flush()  # nothing waits in the producer while we sleep
                    time.sleep(delay)
                send(value)
            producer.flush()
            flushed = time.monotonic()
            reached = reader.wait_for(ids[-1], WAIT_CAP, alive)
            measure(row, ids, produced, reader, reached, flushed)
            row.phases = phases.settled(before, row.batches or 0)
            rows.append(row)
            say(f"{row.scenario}: done, {row.check or 'ok'}")
            if not reached:
                break

        # state size and memory, before stopping the job
        client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
        for key in ("E", "I", "log", "T"):
            info[f"redis_hlen_{key}"] = client.hlen(f"fluxmat:{NAMESPACE}:{key}")
        info["redis_used_memory"] = client.info("memory")["used_memory"]
        client.close()
        info["aof_bytes"] = sum(p.stat().st_size for p in (root / "redis").rglob("*")
                                if p.is_file())  # fmt: skip
        info["driver_vmhwm_kb"] = status_kb(job.pid)
        jvms = [p for p in descendants(job.pid) if "java" in cmdline(p)]
        info["jvm_vmhwm_kb"] = sum(status_kb(p) or 0 for p in jvms) if jvms else None
        info["loadavg_end"] = os.getloadavg()
        info["source_read"] = source_read(broker.bootstrap, UPDATES, seq)  # collect without Spark

        # correctness: deltas folded == remat over the final explicit facts
        final = set(maker.present)
        time.sleep(0.5)
        with reader.cond:
            msgs = list(reader.messages)
        got, want = fold(msgs), expected(program, sorted(final))
        info["initial_materialisation"] = sum(len(m["added"]) for _, m in msgs
                                              if m.get("batch") == -1)  # fmt: skip
        info["final_explicit"] = len(final)
        info["final_materialisation"] = len(want)
        info["delta_messages"] = len(msgs)
        check = ("ok" if got == want else
                 f"MISMATCH: {len(want - got)} missing, {len(got - want)} extra")  # fmt: skip
        for r in rows:
            r.check = r.check or check
        info["check"] = check
    except BaseException:
        if job_log.exists():
            kept = Path(tempfile.gettempdir()) / f"fluxmat-pipeline-job-{os.getpid()}.log"
            kept.write_bytes(job_log.read_bytes())
            tail = job_log.read_text(errors="replace")[-3000:]
            say(f"fluxmat run log (end; whole log kept in {kept}):\n{tail}")
        raise
    finally:
        if producer is not None:
            producer.close()
        if job is not None:
            info["job_exit"] = _stop_process(job)
            info["job_log_tail"] = job_log.read_text(errors="replace")[-600:]
        if reader is not None:
            reader.halt.set()
            reader.join(timeout=5)
        if redis_srv is not None:
            redis_srv.stop()
        if broker is not None:
            broker.stop()
        tmp.cleanup()
    return info, rows


def cores(text: str) -> list[str]:
    """`--core`: one core, or several separated by commas (each runs the whole benchmark)."""
    out = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in out if c not in CORES]
    if not out or bad:
        raise argparse.ArgumentTypeError(f"expected {' or '.join(CORES)} (or both, comma-separated), got {text!r}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.benchmarks.pipeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--core", type=cores, default=[DEFAULT_CORE], metavar="CORES",
                    help=f"the job's --core: {' or '.join(CORES)}, or both comma-separated to compare them "
                         f"in one run (default {DEFAULT_CORE}, the job's)")  # fmt: skip
    ap.add_argument("--backlog", type=int, default=BACKLOG, metavar="N",
                    help=f"capacity: updates of 1 + 1 produced at once (default {BACKLOG:,}; the issue asks 20,000)")
    ap.add_argument("--rate", type=float, default=RATE, metavar="OPS",
                    help=f"steady: offered fact operations per second (default {RATE:,.0f})")  # fmt: skip
    ap.add_argument("--steady-seconds", type=float, default=STEADY_SECONDS, metavar="S",
                    help=f"steady: seconds of offered load (default {STEADY_SECONDS:g})")  # fmt: skip
    ap.add_argument("--redis-fsync", default="everysec", choices=["everysec", "always"],
                    help="the job's --redis-fsync (the issue's baseline ran with always)")
    ap.add_argument("--universities", type=int, default=None, metavar="N",
                    help="LUBM-N data (e.g. 5: ~750k explicit facts) instead of LUBM-1 with two departments")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    runs, failed = [], []
    for core in args.core:  # a core whose run fails does not lose the others'
        try:
            runs.append(run_pipeline(args.backlog, args.rate, args.steady_seconds, args.redis_fsync,
                                     universities=args.universities, core=core))  # fmt: skip
        except Exception as exc:
            failed.append(f"core {core}: FAILED: {type(exc).__name__}: {exc}")
    rows = [r for _, core_rows in runs for r in core_rows]
    for info, _ in runs:
        print(summary(info))
    print(*failed, sep="\n")
    print(pipeline_table(rows, args.markdown))
    print(phases_table(rows, args.markdown))
    print(batch_sizes(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([to_json(info, core_rows) for info, core_rows in runs], fh, indent=2)
            fh.write("\n")
    return 1 if failed or any(r.check.startswith("MISMATCH") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
