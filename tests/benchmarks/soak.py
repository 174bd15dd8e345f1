"""Soak: a steady mixed load against one `fluxmat run` for N minutes; memory and lag sampled.

    python -m tests.benchmarks.soak --minutes N [--rate OPS] [--sample-seconds S]
                                     [--stall-seconds S] [--out DIR]

Starts what the pipeline benchmark starts (tests/benchmarks/pipeline.py: a
tansu broker, a redis-server with AOF, `fluxmat run` over LUBM-1 with two
departments, fd-counting, trigger 200ms) plus a dead-letter topic, and then:

* offers a steady `--rate` fact operations per second (default 400) as updates
  of 1-4 additions and 1-4 deletions (`UpdateMaker`: overlapping, each add
  often a fact the previous update deleted);
* sends a few poison messages spread over the run, in turn: bad JSON, a fact of
  the wrong arity, an oversized message (the job runs with
  `--max-message-bytes 100000`); each must become exactly one dead letter;
* stalls Redis once, at 40% of the run (before the second half, whose trend is
  judged), with `CLIENT PAUSE <--stall-seconds> ALL`;
* samples every `--sample-seconds` (default 10): RSS of the job's Python
  driver, of the Spark JVM and of the Python workers, Redis `used_memory`, the
  consumer lag and time lag (the job's /metrics), and the throughput (fact
  operations whose delta arrived since the last sample).

At the end it waits for the last update's delta (at most 5 minutes), stops the
job, and checks against `remat`: the folded delta messages, and the state in
Redis (`fluxmat export --all`), each over the explicit facts of the update it
is through (the last one when the job caught up). It writes `soak.csv` and
`soak.png` into `--out`, and prints a verdict per series: the slope of a linear
fit over the second half of the run (MiB/hour, messages/hour): memory is "flat"
when the fitted growth over that half stays under 5% of its mean (at least 8
MiB), the lag when it grows by less than the updates offered in 10 s. Exit code
0 when the check is ok, every poison message became a dead letter and every
series is flat.

`--heap DIR` runs the job's driver under tracemalloc from the end of the
warm-up on (tests/benchmarks/heap_job.py), with a heap snapshot and a count of
live objects by type every minute; it slows the job down.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from fluxmat.connectors.broker import stop_process
from tests.benchmarks.pipeline import (
    DELTAS,
    HELD_OUT,
    NAMESPACE,
    PROGRAM,
    START_CAP,
    UPDATES,
    UpdateMaker,
    cmdline,
    descendants,
    job_command,
    status_kb,
    write_facts,
)
from tests.benchmarks.pipeline_measure import WAIT_CAP, DeltaReader, expected, fold, seq_of, uid
from tests.benchmarks.workloads import SEED, corpus_dir
from tests.support.shared import series

RATE = 400.0  # offered fact operations per second
SAMPLE = 10.0  # seconds between samples
STALL = 20.0  # seconds of CLIENT PAUSE
POISON_EVERY = 0.15  # a poison message every this fraction of the run
MAX_MESSAGE_BYTES = 100_000
DEAD = "dead"
HEAP_EVERY = 60.0  # seconds between the driver's heap snapshots with --heap
FIELDS = ("t", "driver_mib", "workers_mib", "jvm_mib", "redis_mib", "lag_messages", "time_lag_s",
          "ops_per_s", "health", "load1")  # fmt: skip
FLAT = {"driver_mib": 8.0, "workers_mib": 8.0, "jvm_mib": 8.0, "redis_mib": 8.0}  # MiB a series may grow
LAG_SECONDS = 10.0  # the lag may grow by the updates offered in this long over the second half


def poison(kind: int, predicate: str, arity: int) -> bytes:
    """Poison message number `kind` (mod 3): bad JSON, wrong arity, oversized."""
    n = kind % 3
    if n == 0:
        return b'{"add": [["' + predicate.encode() + b'", "x"'  # cut off
    if n == 1:
        wrong = [predicate, *(f"x{i}" for i in range(arity + 1))]
        return json.dumps({"id": f"poison{kind}", "add": [wrong]}).encode()
    return json.dumps({"id": f"poison{kind}", "add": [], "pad": "x" * (2 * MAX_MESSAGE_BYTES)}).encode()


# ---------------------------------------------------------------- sampling


def rss_mib(pids: list[int]) -> float:
    return sum(status_kb(p, "VmRSS") or 0 for p in pids) / 1024


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return series(resp.read().decode("utf-8"))


def redis_mib(url: str) -> float | None:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=2)
        try:
            return client.info("memory")["used_memory"] / 2**20
        finally:
            client.close()
    except redis.RedisError:
        return None  # stalled (CLIENT PAUSE): no sample


class Sampler(threading.Thread):
    """Every `every` seconds, one row of `FIELDS` into `rows`."""

    def __init__(self, job_pid: int, metrics_port: int, redis_url: str, done_ops, every: float):
        super().__init__(daemon=True)
        self.job_pid, self.port, self.redis_url = job_pid, metrics_port, redis_url
        self.done_ops, self.every = done_ops, every  # done_ops(): fact ops whose delta arrived
        self.rows: list[dict] = []
        self.halt = threading.Event()
        self.t0 = time.monotonic()

    def sample(self, last: tuple[float, int]) -> tuple[float, int]:
        now, ops = time.monotonic(), self.done_ops()
        kids = descendants(self.job_pid)
        jvm = [p for p in kids if "java" in cmdline(p)]
        workers = [p for p in kids if "pyspark" in cmdline(p) and p not in jvm]
        try:
            m = scrape(self.port)
        except OSError:
            m = {}
        lag = sum(v for k, v in m.items() if k.startswith("fluxmat_consumer_lag_messages"))
        self.rows.append({
            "t": round(now - self.t0, 1), "driver_mib": round(rss_mib([self.job_pid]), 1),
            "workers_mib": round(rss_mib(workers), 1), "jvm_mib": round(rss_mib(jvm), 1),
            "redis_mib": redis_mib(self.redis_url), "lag_messages": lag if m else None,
            "time_lag_s": m.get("fluxmat_time_lag_seconds"),
            "ops_per_s": round((ops - last[1]) / max(now - last[0], 1e-9), 1),
            "health": m.get("fluxmat_health_state"), "load1": round(os.getloadavg()[0], 2),
        })  # fmt: skip
        return now, ops

    def run(self) -> None:
        last = (time.monotonic(), self.done_ops())
        while not self.halt.wait(self.every):
            last = self.sample(last)


# ---------------------------------------------------------------- verdict and outputs


def slope_per_hour(rows: list[dict], name: str) -> tuple[float, float] | None:
    """(slope per hour, mean) of a least-squares line through the second half's samples."""
    pts = [(r["t"], r[name]) for r in rows[len(rows) // 2 :] if r[name] is not None]
    if len(pts) < 3:
        return None
    n = len(pts)
    mt, mv = sum(t for t, _ in pts) / n, sum(v for _, v in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    slope = sum((t - mt) * (v - mv) for t, v in pts) / var if var else 0.0
    return slope * 3600, mv


def verdicts(rows: list[dict], updates_per_second: float) -> dict[str, dict]:
    """Per series: slope over the second half, the growth it implies there, and flat or growing.

    Memory is flat when the fitted growth over the second half is under 5% of
    its mean (at least `FLAT` MiB); the lag when it is under the updates
    offered in `LAG_SECONDS` (the job falls no further behind than that).
    """
    out = {}
    half = (rows[-1]["t"] - rows[len(rows) // 2]["t"]) / 3600 if rows else 0.0
    floors = {**FLAT, "lag_messages": LAG_SECONDS * updates_per_second}
    for name, floor in floors.items():
        fit = slope_per_hour(rows, name)
        if fit is None:
            continue
        slope, mean = fit
        growth = slope * half
        out[name] = {"slope_per_hour": round(slope, 2), "mean": round(mean, 1), "growth": round(growth, 2),
                     "verdict": "flat" if growth < (floor if name == "lag_messages" else max(0.05 * mean, floor))
                     else "growing"}  # fmt: skip
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def plot(path: Path, rows: list[dict], events: dict[str, list[float]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t"] / 60 for r in rows]
    panels = [("memory (MiB)", ("driver_mib", "workers_mib", "jvm_mib", "redis_mib")),
              ("lag (messages)", ("lag_messages",)), ("throughput (fact ops/s)", ("ops_per_s",))]  # fmt: skip
    values = lambda name: [r[name] if r[name] is not None else float("nan") for r in rows]  # noqa: E731
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 8), sharex=True)
    seconds = axes[1].twinx()
    seconds.plot(t, values("time_lag_s"), color="tab:orange", alpha=0.7, label="time_lag_s")
    seconds.set_ylabel("time lag (s)")
    seconds.legend(loc="upper right", fontsize=8)
    for ax, (label, names) in zip(axes, panels, strict=True):
        for name in names:
            ax.plot(t, values(name), label=name)
        for x in events.get("poison", []):
            ax.axvline(x / 60, color="red", alpha=0.3, linewidth=1)
        for a, b in events.get("stall", []):
            ax.axvspan(a / 60, b / 60, color="orange", alpha=0.2)
        ax.set_ylabel(label)
        ax.legend(loc="upper left", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_title(title, fontsize=9)
    axes[-1].set_xlabel("minutes (red lines: poison messages; orange: Redis paused)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------- run


class Load:
    """The offered load: updates of 1-4 adds + 1-4 deletes, paced to `rate`, and what was sent."""

    def __init__(self, producer, maker: UpdateMaker, rate: float):
        self.producer, self.maker, self.rate = producer, maker, rate
        self.rnd = random.Random(SEED + 11)
        self.cum_ops: list[int] = []  # fact ops in updates u000000 .. u<i>
        self.sent: list[tuple[list, list]] = []  # (added, deleted) of update u<i>
        self.poisons = 0

    def send_update(self) -> int:
        """One update (sizes kept so the pool of absent facts neither runs dry nor floods); its ops."""
        n_add, n_del = self.rnd.randint(1, 4), self.rnd.randint(1, 4)
        if len(self.maker.absent) < HELD_OUT // 2:
            n_del = n_add + 1
        elif len(self.maker.absent) > 2 * HELD_OUT:
            n_add = n_del + 1
        add, dele = self.maker.make(n_add, n_del)
        self.sent.append((add, dele))
        value = json.dumps({"id": uid(len(self.cum_ops)), "add": [list(f) for f in add],
                            "del": [list(f) for f in dele]}).encode()  # fmt: skip
        self.producer.send(UPDATES, value=value, partition=0)
        self.cum_ops.append((self.cum_ops[-1] if self.cum_ops else 0) + n_add + n_del)
        return n_add + n_del

    def send_poison(self) -> None:
        pred = self.maker.initial[0]
        self.producer.send(UPDATES, value=poison(self.poisons, pred[0], len(pred) - 1), partition=0)
        self.poisons += 1

    def explicit_through(self, seq: int) -> list[tuple]:
        """The explicit facts once updates u000000 .. u<seq> are applied (the initial ones for -1)."""
        facts = set(self.maker.initial)
        for add, dele in self.sent[: seq + 1]:
            facts.difference_update(dele)
            facts.update(add)
        return sorted(facts)

    def done_ops(self, reader: DeltaReader) -> int:
        seq = reader.max_seq
        return self.cum_ops[seq] if 0 <= seq < len(self.cum_ops) else 0


def offer(load: Load, seconds: float, stall: float, redis_url: str, t0: float) -> dict[str, list]:
    """Offer the load for `seconds`, with poison messages and one Redis pause; the events' times."""
    import redis

    events: dict[str, list] = {"poison": [], "stall": []}
    next_poison, stall_at = POISON_EVERY, 0.4
    due = t0
    while (now := time.monotonic()) < t0 + seconds:
        frac = (now - t0) / seconds
        if frac >= next_poison:
            load.send_poison()
            events["poison"].append(now - t0)
            next_poison += POISON_EVERY
        if frac >= stall_at and not events["stall"]:
            client = redis.Redis.from_url(redis_url)
            client.execute_command("CLIENT", "PAUSE", int(stall * 1000), "ALL")
            client.close()
            events["stall"].append((now - t0, now - t0 + stall))
        due += load.send_update() / load.rate
        delay = due - time.monotonic()
        if delay > 0.002:
            load.producer.flush()
            time.sleep(delay)
    load.producer.flush()
    return events


def compare(got: set[tuple], want: set[tuple]) -> str:
    return "ok" if got == want else f"MISMATCH: {len(want - got)} missing, {len(got - want)} extra"


def stored_state(program: Path, redis_url: str) -> tuple[int, set[tuple]]:
    """The update the job's state in Redis is through, and its whole materialisation (`fluxmat export --all`)."""
    from fluxmat.connectors.state import open_store
    from fluxmat.ops.inspect import export_facts

    _, lines = export_facts(str(program), redis_url, NAMESPACE, everything=True)
    store = open_store(redis_url, NAMESPACE)
    try:
        through = store.meta().get("through")
    finally:
        store.close()
    return seq_of(through), {tuple(json.loads(line)) for line in lines}


def check_end(info: dict, program: Path, load: Load, reader: DeltaReader, bootstrap: str, redis_url: str) -> None:
    """Deltas folded == remat, and the state in Redis == remat, each over the explicit facts of the update it
    is through (the last one when the job caught up: else the check still holds for what it did); dead letters."""
    from fluxmat.connectors.kafka_sink import read_deltas

    with reader.cond:
        msgs = list(reader.messages)
    seq = max((seq_of(m.get("through")) for _, m in msgs), default=-1)
    want = expected(program, load.explicit_through(seq))
    info["final_explicit"], info["final_materialisation"] = len(load.maker.present), len(want)
    info["delta_messages"] = len(msgs)
    info["checked_through"] = {"deltas": uid(seq), "last_update": uid(len(load.sent) - 1)}
    info["check_deltas"] = compare(fold(msgs), want)
    try:
        at, state = stored_state(program, redis_url)
        info["checked_through"]["state"] = uid(at)
        info["check_state"] = compare(state, want if at == seq else expected(program, load.explicit_through(at)))
    except Exception as exc:  # noqa: BLE001 - reported, the other results still count
        info["check_state"] = f"not read: {exc}"
    ok = info["check_deltas"] == info["check_state"] == "ok"
    info["check"] = "ok" if ok else f"deltas: {info['check_deltas']}; Redis state: {info['check_state']}"
    info["dead_letters"] = len(read_deltas(bootstrap, DEAD, timeout=60))


def run_soak(minutes: float, rate: float, every: float, stall: float, out: Path, say,
             heap: Path | None = None) -> dict:  # fmt: skip
    """Run the soak; returns info (check, verdicts, ...) and writes soak.csv / soak.png into `out`."""
    import redis
    from kafka import KafkaProducer

    from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
    from tests.benchmarks.lubm_gen import generate
    from tests.support.servers import RedisServer, free_port

    program = corpus_dir() / PROGRAM
    maker = UpdateMaker(generate(1, 2), HELD_OUT)
    info: dict = {"minutes": minutes, "rate": rate, "stall_seconds": stall, "initial_facts": len(maker.initial),
                  "cpus": os.cpu_count(), "loadavg_start": os.getloadavg()}  # fmt: skip
    tmp = tempfile.TemporaryDirectory(prefix="fluxmat-soak-")
    root = Path(tmp.name)
    broker = redis_srv = job = reader = producer = sampler = None
    job_log = root / "job.log"
    try:
        facts_file = write_facts(root / "facts.jsonl", maker.initial)
        broker = EmbeddedBroker(log_path=root / "broker.log").start()
        redis_srv = RedisServer(root / "redis").start()
        ensure_topics(broker.bootstrap, {UPDATES: 1, DELTAS: 1, DEAD: 1})
        metrics_port = free_port()
        cmd = job_command(program, facts_file, broker.bootstrap, redis_srv.url, root, "everysec", metrics_port,
                          "--dead-letter-topic", DEAD, "--max-message-bytes", str(MAX_MESSAGE_BYTES))  # fmt: skip
        if heap is not None:  # the driver under tracemalloc, a snapshot a minute (tests/benchmarks/heap_job.py)
            cmd = [sys.executable, str(Path(__file__).with_name("heap_job.py")), "run", str(heap.resolve()),
                   str(HEAP_EVERY), *cmd[1:]]  # fmt: skip
        info["command"] = " ".join(cmd)
        with job_log.open("wb") as fh:
            job = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root)
        alive = lambda: job.poll() is None  # noqa: E731
        say(f"fluxmat run pid {job.pid}; log {job_log}")
        reader = DeltaReader(broker.bootstrap, DELTAS)
        reader.start()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2,
                                 max_request_size=4 * MAX_MESSAGE_BYTES)  # fmt: skip
        load = Load(producer, maker, rate)
        load.send_update()  # warm-up: through Spark's first batch before the clock starts
        producer.flush()
        if not reader.wait_for(0, START_CAP, alive):
            raise RuntimeError("no delta for the warm-up update")
        say(f"job warm; offering {rate:,.0f} fact ops/s for {minutes:g} min")
        if heap is not None:
            os.kill(job.pid, signal.SIGUSR1)  # heap_job.py: trace from now on
        sampler = Sampler(job.pid, metrics_port, redis_srv.url, lambda: load.done_ops(reader), every)
        sampler.start()
        events = offer(load, minutes * 60, stall, redis_srv.url, sampler.t0)
        info["updates"], info["fact_ops"], info["poison_sent"] = len(load.cum_ops), load.cum_ops[-1], load.poisons
        info["caught_up"] = reader.wait_for(len(load.cum_ops) - 1, WAIT_CAP, alive)
        time.sleep(every)  # one more sample, caught up
        sampler.halt.set()
        sampler.join(timeout=30)
        info["loadavg_end"] = os.getloadavg()
        client = redis.Redis.from_url(redis_srv.url)
        info["redis_used_memory_mib"] = round(client.info("memory")["used_memory"] / 2**20, 1)
        client.close()
        info["job_exit"], job = stop_process(job, 30.0), None  # a state that no batch changes while read
        time.sleep(2)  # the reader takes the last deltas
        check_end(info, program, load, reader, broker.bootstrap, redis_srv.url)
        say(f"check against remat: {info['check']} (through {info['checked_through']}); dead letters {info['dead_letters']} of {info['poison_sent']}")
    except BaseException:
        if sampler is not None and sampler.rows:  # a long run's samples are kept even when it fails
            out.mkdir(parents=True, exist_ok=True)
            write_csv(out / "soak-partial.csv", sampler.rows)
            say(f"{len(sampler.rows)} samples so far kept in {out / 'soak-partial.csv'}")
        if job_log.exists():
            kept = Path(tempfile.gettempdir()) / f"fluxmat-soak-job-{os.getpid()}.log"
            kept.write_bytes(job_log.read_bytes())
            say(f"fluxmat run log (end; whole log kept in {kept}):\n{job_log.read_text(errors='replace')[-3000:]}")
        raise
    finally:
        if sampler is not None:
            sampler.halt.set()
        if producer is not None:
            producer.close(timeout=5)
        if job is not None:
            info["job_exit"] = stop_process(job, 30.0)
        if reader is not None:
            reader.halt.set()
            reader.join(timeout=5)
        for server in (redis_srv, broker):
            if server is not None:
                server.stop()
        tmp.cleanup()
    rows = sampler.rows
    info["verdicts"] = verdicts(rows, info["updates"] / (minutes * 60))
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "soak.csv", rows)
    title = (f"soak: {minutes:g} min at {rate:,.0f} fact ops/s offered, LUBM-1 (2 departments), fd-counting; "
             f"load average {info['loadavg_start'][0]:.1f} -> {info['loadavg_end'][0]:.1f} on {info['cpus']} CPUs")
    try:
        plot(out / "soak.png", rows, events, title)
    except ImportError as exc:  # no matplotlib: the CSV and the verdicts are still reported
        info["plot"] = f"not drawn: {exc}"
    return info


def report(info: dict) -> str:
    lines = [f"soak: {info['minutes']:g} min, {info['updates']:,} updates, {info['fact_ops']:,} fact ops "
             f"offered at {info['rate']:,.0f}/s; caught up: {info['caught_up']}; check against remat: "
             f"{info['check']} (folded deltas {info['check_deltas']}, state in Redis {info['check_state']}; through "
             f"{info['checked_through']}; "
             f"{info['final_materialisation']:,} facts); dead letters {info['dead_letters']} of "
             f"{info['poison_sent']} poison messages; Redis used_memory at the end "
             f"{info['redis_used_memory_mib']} MiB; load average (1 min) {info['loadavg_start'][0]:.2f} -> "
             f"{info['loadavg_end'][0]:.2f} on {info['cpus']} CPUs; job exit {info.get('job_exit')}"]  # fmt: skip
    for name, v in info["verdicts"].items():
        unit = "messages" if name.startswith("lag") else "MiB"
        lines.append(f"  {name:13} mean {v['mean']:>9,.1f} {unit:8}  slope over the second half "
                     f"{v['slope_per_hour']:>+9,.2f} {unit}/hour ({v['growth']:+,.2f} over that half): {v['verdict']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks.soak", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--minutes", type=float, default=30.0, help="length of the offered load (default 30)")
    ap.add_argument("--rate", type=float, default=RATE, metavar="OPS",
                    help=f"offered fact operations per second (default {RATE:,.0f})")
    ap.add_argument("--sample-seconds", type=float, default=SAMPLE, metavar="S",
                    help=f"seconds between samples (default {SAMPLE:g})")
    ap.add_argument("--stall-seconds", type=float, default=STALL, metavar="S",
                    help=f"length of the Redis pause (default {STALL:g})")
    ap.add_argument("--out", type=Path, default=Path("soak-out"), help="directory for soak.csv and soak.png")
    ap.add_argument("--heap", type=Path, default=None, metavar="DIR",
                    help="run the job's driver under tracemalloc and write a heap snapshot a minute into DIR "
                         "(compare two with `python tests/benchmarks/heap_job.py diff A B`); costs memory and CPU")
    args = ap.parse_args(argv)
    say = lambda m: print(f"# soak: {m}", file=sys.stderr, flush=True)  # noqa: E731
    info = run_soak(args.minutes, args.rate, args.sample_seconds, args.stall_seconds, args.out, say, args.heap)
    print(report(info))
    with (args.out / "soak.json").open("w", encoding="utf-8") as fh:
        json.dump(info, fh, indent=2, default=str)
    ok = (info["check"] == "ok" and info["caught_up"] and info["dead_letters"] == info["poison_sent"]
          and all(v["verdict"] == "flat" for v in info["verdicts"].values()))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
