"""End-to-end pipeline benchmark: Kafka updates -> `fluxmat run` (Spark) -> Kafka deltas.

    python3 -m tests.benchmarks.run --workload pipeline [--markdown] [--json OUT.json]
    python3 -m tests.benchmarks.pipeline [--small-rate N] [--large-interval S] [--markdown]

Needs real servers, so it is not part of `--workload all`. Starts, on 127.0.0.1:

* an `EmbeddedBroker` (tansu, in-memory storage);
* a `RedisServer` (tests/servers.py: AOF on, `appendfsync always`);
* `fluxmat run` as a subprocess: `--algorithm fd-counting`, Redis state,
  `--trigger-interval 200ms`, the corpus program `lubm.dlog` and generated LUBM
  data (`lubm_gen.generate(1, 2)`, minus `HELD_OUT` held-out facts) as the
  initial facts, written to a temporary JSON Lines facts file.

Every update carries a sequential id `u000000`, `u000001`, ... on one
partition. Update `u000000` is a warm-up (1 add + 1 delete, not measured): the
scenarios start once its delta has arrived, so Spark's first (slow) batch is not
counted. Scenarios, run one after the other against the same job:

* small: `SMALL_UPDATES` updates of 1 add + 1 delete each, produced at a steady
  `--small-rate` updates per second;
* large: `LARGE_UPDATES` updates of `LARGE_SIZE` facts each (half adds, half
  deletes), one every `--large-interval` seconds.

Updates overlap: each added fact is, with probability 1/2, one deleted by the
previous update (else the oldest absent fact: held-out or deleted earlier), and
deletions are random explicit facts, so consecutive updates undo each other's
work while they are processed in the same micro-batch.

Measured (clock: `time.monotonic()` of this process, which both produces the
updates and consumes the deltas topic with a dedicated consumer thread):

* latency of an update: produce time (just before `send`) -> receive time of the
  first delta message whose `through` >= the update's id;
* sustained throughput: facts in the scenario's updates / (first produce ->
  receive of the delta whose `through` is the last update's id);
* micro-batches (distinct delta batch ids) and updates per batch in the window;
* after both scenarios: Redis `HLEN` of `fluxmat:<ns>:E`, `:I`, `:log`, Redis
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
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace

from connectors.broker import stop_process
from tests.benchmarks.workloads import SEED, corpus_dir, render_table

PROGRAM = Path("programs") / "lubm.dlog"
UNIVERSITIES = 1
DEPARTMENTS = 2
HELD_OUT = 300  # generated facts not in the initial data: the first facts to add
SMALL_UPDATES = 500
SMALL_RATE = 50.0  # updates per second
LARGE_UPDATES = 20
LARGE_SIZE = 500  # facts per update: LARGE_SIZE / 2 adds + LARGE_SIZE / 2 deletes
LARGE_INTERVAL = 0.5  # seconds between two large updates
TRIGGER = "200ms"
NAMESPACE = "bench"
WAIT_CAP = 300.0  # seconds to wait for a scenario's last delta
START_CAP = 300.0  # seconds for the job to start and answer the warm-up update
UPDATES, DELTAS = "updates", "deltas"


@dataclass
class ScenarioRow:
    scenario: str
    updates: int
    facts_per_update: int
    rate: str  # produce schedule
    produce_seconds: float | None = None  # first -> last produce
    seconds: float | None = None  # first produce -> last update's delta
    facts_per_second: float | None = None
    latency_median: float | None = None
    latency_p99: float | None = None
    latency_max: float | None = None
    batches: int | None = None
    updates_per_batch: float | None = None
    check: str = ""
    latencies: list[float] = field(default_factory=list)


# ---------------------------------------------------------------- data


def _uid(i: int) -> str:
    return f"u{i:06d}"


def _seq(through) -> int:
    """The sequence number of a delta's `through` (-1 for the initial batch / foreign ids)."""
    if isinstance(through, str) and through[:1] == "u" and through[1:].isdigit():
        return int(through[1:])
    return -1


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


def _vmhwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
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


def _descendants(pid: int) -> list[int]:
    todo, seen = _children(pid), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _stop_process(proc: subprocess.Popen, grace: float = 30.0) -> int | None:
    return stop_process(proc, grace)


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
                            self.max_seq = max(self.max_seq, _seq(msg.get("through")))
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


# ---------------------------------------------------------------- measurement


def _pct(xs: list[float], q: float) -> float | None:
    """Nearest-rank percentile."""
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def _measure(row: ScenarioRow, ids: list[int], produced: dict[int, float],
             reader: DeltaReader, reached: bool) -> None:  # fmt: skip
    with reader.cond:
        msgs = list(reader.messages)
    first_seen: dict[int, float] = {}  # seq -> receive time of the first delta reflecting it
    batches: set[int] = set()
    lo, hi = ids[0], ids[-1]
    for t, msg in msgs:
        s = _seq(msg.get("through"))
        if s < lo:
            continue
        if msg.get("batch") is not None and msg.get("part", 0) == 0:
            batches.add(msg["batch"])
        for i in range(lo, min(s, hi) + 1):
            first_seen.setdefault(i, t)
    lat = [first_seen[i] - produced[i] for i in ids if i in first_seen]
    row.latencies = lat
    row.produce_seconds = produced[hi] - produced[lo]
    row.latency_median = statistics.median(lat) if lat else None
    row.latency_p99 = _pct(lat, 0.99)
    row.latency_max = max(lat) if lat else None
    row.batches = len(batches)
    row.updates_per_batch = (len(first_seen) / len(batches)) if batches else None
    if reached and hi in first_seen:
        row.seconds = first_seen[hi] - produced[lo]
        row.facts_per_second = row.updates * row.facts_per_update / row.seconds
    else:
        got = max(first_seen, default=lo - 1)
        row.check = (f"NOT KEPT UP: last delta through {_uid(got)} of {_uid(hi)} "
                     f"after waiting {WAIT_CAP:g} s")  # fmt: skip


def _fold(messages: list[tuple[float, dict]]) -> set[tuple]:
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


def _expected(program_path: Path, explicit: list[tuple]) -> set[tuple]:
    """`remat` over the explicit facts (JSON form), in the job's wire form."""
    from engine import Reasoner, atom_to_fact, fact_from_json
    from engine.printer import FactPrinter
    from stream.batch import BatchProcessor

    ref = Reasoner.from_file(program_path, "remat")
    prefixes = dict(ref.prefixes)
    ref.load([atom_to_fact(fact_from_json(list(f), prefixes)) for f in explicit])
    wire = SimpleNamespace(printer=FactPrinter(ref.program.prefixes), triples=None)
    return {tuple(BatchProcessor._wire(wire, f)) for f in ref.facts()}


# ---------------------------------------------------------------- run


def run_pipeline(small_rate: float = SMALL_RATE, large_interval: float = LARGE_INTERVAL,
                 log=None) -> tuple[dict, list[ScenarioRow]]:  # fmt: skip
    """Run both scenarios against one `fluxmat run`; returns (info, rows)."""
    import redis
    from kafka import KafkaProducer

    from connectors.broker import EmbeddedBroker, ensure_topics
    from tests.benchmarks.lubm_gen import generate
    from tests.servers import RedisServer

    say = log or (lambda m: print(f"# pipeline: {m}", file=sys.stderr, flush=True))
    program = corpus_dir() / PROGRAM
    generated = generate(UNIVERSITIES, DEPARTMENTS)
    maker = UpdateMaker(generated, HELD_OUT)
    info: dict = {
        "source": f"{PROGRAM} over lubm_gen.generate({UNIVERSITIES}, {DEPARTMENTS}): "
        f"{len(generated):,} generated, {HELD_OUT} held out",
        "initial_facts": len(maker.initial),
        "algorithm": "fd-counting",
        "trigger_interval": TRIGGER,
        "state": "redis-server, AOF on (appendfsync always)",
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
        facts_file = root / "facts.jsonl"
        with facts_file.open("w", encoding="utf-8") as fh:
            for f in maker.initial:
                fh.write(json.dumps(list(f)) + "\n")
        broker = EmbeddedBroker(log_path=root / "broker.log").start()
        redis_srv = RedisServer(root / "redis").start()
        say(f"broker {broker.bootstrap} (pid {broker.pid}), redis {redis_srv.url} "
            f"(pid {redis_srv.proc.pid})")  # fmt: skip
        ensure_topics(broker.bootstrap, {UPDATES: 1, DELTAS: 1})
        exe = Path(sys.executable).parent / "fluxmat"
        cmd = [str(exe), "run", str(program), "--facts", str(facts_file),
               "--bootstrap-servers", broker.bootstrap, "--updates-topic", UPDATES,
               "--deltas-topic", DELTAS, "--redis", redis_srv.url, "--namespace", NAMESPACE,
               "--checkpoint", str(root / "checkpoint"), "--algorithm", "fd-counting",
               "--trigger-interval", TRIGGER]  # fmt: skip
        info["command"] = " ".join(cmd)
        started = time.monotonic()
        with job_log.open("wb") as out:
            job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=root)  # fmt: skip
        say(f"fluxmat run pid {job.pid}; log {job_log}")
        alive = lambda: job.poll() is None  # noqa: E731
        reader = DeltaReader(broker.bootstrap, DELTAS)
        reader.start()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        produced: dict[int, float] = {}
        seq = 0

        def send(add, dele) -> None:
            nonlocal seq
            value = json.dumps({"id": _uid(seq), "add": [list(f) for f in add],
                                "del": [list(f) for f in dele]}).encode()  # fmt: skip
            produced[seq] = time.monotonic()
            producer.send(UPDATES, value=value, partition=0)
            producer.flush()
            seq += 1

        # wait for the query, then a warm-up update through Spark's first batch
        while "reading " not in (text := job_log.read_text(errors="replace")):
            if "initial_seconds" not in info and "initial materialisation" in text:
                info["initial_seconds"] = round(time.monotonic() - started, 1)
            if not alive() or time.monotonic() - started > START_CAP:
                raise RuntimeError("fluxmat run did not start")
            time.sleep(0.1)
        send(*maker.make(1, 1))
        if not reader.wait_for(0, START_CAP, alive):
            raise RuntimeError("no delta for the warm-up update")
        info["startup_seconds"] = round(time.monotonic() - started, 1)
        say(f"job up and warm after {info['startup_seconds']} s")

        scenarios = [
            (ScenarioRow("small", SMALL_UPDATES, 2, f"{small_rate:g} updates/s"),
             SMALL_UPDATES, 1, 1, 1.0 / small_rate),
            (ScenarioRow("large", LARGE_UPDATES, LARGE_SIZE,
                         f"1 per {large_interval:g} s" if large_interval > 0 else "all at once"),
             LARGE_UPDATES, LARGE_SIZE // 2, LARGE_SIZE - LARGE_SIZE // 2, large_interval),
        ]  # fmt: skip
        for row, n, n_add, n_del, gap in scenarios:
            ups = [maker.make(n_add, n_del) for _ in range(n)]  # prepared before timing
            ids = list(range(seq, seq + n))
            say(f"{row.scenario}: {n} updates of {n_add}+{n_del} facts, {row.rate}")
            t0 = time.monotonic()
            for k, (add, dele) in enumerate(ups):
                delay = t0 + k * gap - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                send(add, dele)
            reached = reader.wait_for(ids[-1], WAIT_CAP, alive)
            _measure(row, ids, produced, reader, reached)
            rows.append(row)
            say(f"{row.scenario}: done, {row.check or 'ok'}")
            if not reached:
                break

        # state size and memory, before stopping the job
        client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
        for key in ("E", "I", "log"):
            info[f"redis_hlen_{key}"] = client.hlen(f"fluxmat:{NAMESPACE}:{key}")
        info["redis_used_memory"] = client.info("memory")["used_memory"]
        client.close()
        info["aof_bytes"] = sum(p.stat().st_size for p in (root / "redis").rglob("*")
                                if p.is_file())  # fmt: skip
        info["driver_vmhwm_kb"] = _vmhwm_kb(job.pid)
        jvms = [p for p in _descendants(job.pid) if "java" in _cmdline(p)]
        info["jvm_vmhwm_kb"] = sum(_vmhwm_kb(p) or 0 for p in jvms) if jvms else None
        info["loadavg_end"] = os.getloadavg()

        # correctness: deltas folded == remat over the final explicit facts
        final = set(maker.present)
        time.sleep(0.5)
        with reader.cond:
            msgs = list(reader.messages)
        got, expected = _fold(msgs), _expected(program, sorted(final))
        info["initial_materialisation"] = sum(len(m["added"]) for _, m in msgs
                                              if m.get("batch") == -1)  # fmt: skip
        info["final_explicit"] = len(final)
        info["final_materialisation"] = len(expected)
        info["delta_messages"] = len(msgs)
        check = ("ok" if got == expected else
                 f"MISMATCH: {len(expected - got)} missing, {len(got - expected)} extra")  # fmt: skip
        if rows and all(r.check == "" for r in rows) and len(rows) == len(scenarios):
            for r in rows:
                r.check = check
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
            producer.close(timeout=5)
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


# ---------------------------------------------------------------- output


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


HEADER = ("scenario", "updates", "facts/update", "produced at", "produce s", "total s",
          "fact ops/s", "latency p50", "latency p99", "latency max", "batches",
          "updates/batch", "check")  # fmt: skip


def _cells(r: ScenarioRow) -> tuple[str, ...]:
    return (
        r.scenario, f"{r.updates}", f"{r.facts_per_update}", r.rate,
        "-" if r.produce_seconds is None else f"{r.produce_seconds:.2f}",
        "-" if r.seconds is None else f"{r.seconds:.2f}",
        "-" if r.facts_per_second is None else f"{r.facts_per_second:,.0f}",
        _s(r.latency_median), _s(r.latency_p99), _s(r.latency_max),
        "-" if r.batches is None else f"{r.batches}",
        "-" if r.updates_per_batch is None else f"{r.updates_per_batch:.1f}", r.check,
    )  # fmt: skip


def pipeline_table(rows: list[ScenarioRow], markdown: bool = False) -> str:
    return render_table(HEADER, [_cells(r) for r in rows], set(range(1, 12)) - {3}, markdown)


def summary(info: dict) -> str:
    mb = lambda kb: "-" if kb is None else f"{kb / 1024:,.0f} MiB"  # noqa: E731
    return (
        f"pipeline: {info['source']}; {info['initial_facts']:,} initial facts, "
        f"materialisation {info.get('initial_materialisation', 0):,} -> "
        f"{info.get('final_materialisation', 0):,} facts; {info['algorithm']}, trigger "
        f"{info['trigger_interval']}, {info['state']}, {info['broker']}\n"
        f"state: Redis HLEN E {info.get('redis_hlen_E', '-'):,}, I "
        f"{info.get('redis_hlen_I', '-'):,}, log {info.get('redis_hlen_log', '-'):,}; "
        f"used_memory {info.get('redis_used_memory', 0) / 2**20:,.1f} MiB, AOF "
        f"{info.get('aof_bytes', 0) / 2**20:,.1f} MiB; peak RSS (VmHWM) driver "
        f"{mb(info.get('driver_vmhwm_kb'))}, Spark JVM {mb(info.get('jvm_vmhwm_kb'))}; "
        f"job start: initial materialisation committed after "
        f"{info.get('initial_seconds', '-')} s, warm after {info.get('startup_seconds', '-')} s; "
        f"load average "
        f"{info['loadavg_start'][0]:.2f} -> {info.get('loadavg_end', (float('nan'),))[0]:.2f} "
        f"on {info['cpus']} CPUs"
    )


def to_json(info: dict, rows: list[ScenarioRow]) -> dict:
    return {"info": info, "rows": [asdict(r) for r in rows]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.benchmarks.pipeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--small-rate", type=float, default=SMALL_RATE, metavar="N",
                    help=f"small updates produced per second (default {SMALL_RATE:g})")  # fmt: skip
    ap.add_argument("--large-interval", type=float, default=LARGE_INTERVAL, metavar="S",
                    help=f"seconds between large updates (default {LARGE_INTERVAL:g})")  # fmt: skip
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", metavar="OUT.json")
    args = ap.parse_args(argv)
    info, rows = run_pipeline(args.small_rate, args.large_interval)
    print(summary(info))
    print(pipeline_table(rows, args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(to_json(info, rows), fh, indent=2)
            fh.write("\n")
    return 1 if any(r.check.startswith("MISMATCH") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
