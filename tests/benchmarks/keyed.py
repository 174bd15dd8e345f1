"""Scale-out benchmark of the keyed operator (`fluxmat run --partition-by message-key`).

    python3 -m tests.benchmarks.keyed [--keys 100] [--backlog 10000] [--runs local1,local2,standalone1,standalone2]

Starts on 127.0.0.1 an embedded broker (tansu), a 3-node Redis Cluster (AOF,
`appendfsync always`) and, for the `standalone*` runs, a Spark master with one
or two one-core workers (tests/support/servers.py). Each run gets fresh topics (updates
with 4 partitions) and a fresh namespace, and starts `fluxmat run` as a user
would, with the corpus program `lubm.dlog`.

Tenants: `--keys` keys, each a LUBM department of its own (`lubm_gen.generate(1,
1, seed + k)`, its first `FACTS_PER_KEY` facts as the key's first update,
`HELD` more held out to be added later); no shared `--facts`. The job first
loads every key (not measured), then a backlog of `--backlog` updates of 1 add
+ 1 delete (overlapping as in the pipeline benchmark), round robin over the
keys, is produced at once: throughput = fact operations / (first produce ->
the delta of every key's last update). Every run checks each key's folded
deltas against `remat`; the job's metrics give the engine cache hits and
misses and the rebuild time per 10k facts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tests.benchmarks import lubm_gen
from tests.benchmarks.pipeline import PROGRAM, UpdateMaker
from tests.benchmarks.pipeline_measure import expected as _expected
from tests.benchmarks.workloads import SEED, corpus_dir
from tests.support.shared import series

FACTS_PER_KEY = 1000
HELD = 100
PARTITIONS = 4
START_CAP = 600.0
WAIT_CAP = 600.0


class Deltas(threading.Thread):
    """Reads every partition of the deltas topic; per key: messages and the last `through` seen."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        from kafka import KafkaConsumer, TopicPartition

        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                                      fetch_max_wait_ms=10)  # fmt: skip
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.consumer.assign(tps)
        for tp in tps:
            self.consumer.seek(tp, 0)
        self.messages: dict[str, list[dict]] = {}
        self.through: dict[str, set] = {}
        self.lock = threading.Lock()
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                for recs in self.consumer.poll(timeout_ms=50).values():
                    with self.lock:
                        for rec in recs:
                            m = json.loads(rec.value)
                            self.messages.setdefault(m["key"], []).append(m)
                            self.through.setdefault(m["key"], set()).add(m["through"])
        finally:
            self.consumer.close()

    def wait(self, last: dict[str, str], timeout: float, alive) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive():
            with self.lock:
                if all(ident in self.through.get(k, ()) for k, ident in last.items()):
                    return True
            time.sleep(0.05)
        return False


def _metrics(port: int) -> dict[str, float]:
    out: dict[str, float] = {}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            out = {k: v for k, v in series(r.read().decode()).items() if k.startswith("fluxmat_")}
    except OSError:
        pass
    return out


def _settled(port: int, name: str, at_least: float, timeout: float = 60.0) -> dict[str, float]:
    """The job's metrics once `name` reached `at_least` (the driver counts a batch after its
    executors published, and Spark's phases come with the next second's sample)."""
    deadline = time.monotonic() + timeout
    values = _metrics(port)
    while values.get(name, 0.0) < at_least and time.monotonic() < deadline:
        time.sleep(0.2)
        values = _metrics(port)
    time.sleep(2.5)
    return _metrics(port)


def run_once(label: str, master: str, keys: int, backlog: int, broker, cluster, work: Path, log) -> dict:
    from kafka import KafkaProducer

    from fluxmat.connectors.broker import ensure_topics, stop_process
    from tests.support.servers import free_port

    tag = f"{label}-{int(time.time())}"
    updates, deltas = f"kupd-{tag}", f"kdel-{tag}"
    ensure_topics(broker.bootstrap, {updates: PARTITIONS, deltas: PARTITIONS})
    names = [f"dept{k:03d}" for k in range(keys)]
    makers = {}
    for k, name in enumerate(names):
        generated = lubm_gen.generate(1, 1, seed=SEED + k)[: FACTS_PER_KEY + HELD]
        makers[name] = UpdateMaker(generated, HELD, seed=SEED + k)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5)

    def send(key: str, update: dict) -> None:
        producer.send(updates, key=key.encode(), value=json.dumps(update).encode())

    for name in names:
        send(name, {"add": [list(f) for f in makers[name].initial], "id": f"{name}-init"})
    producer.flush()
    port = free_port()
    program = corpus_dir() / PROGRAM
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}  # fmt: skip
    env = {k: v for k, v in env.items() if not k.startswith("FLUXMAT_")}
    job = subprocess.Popen(
        [sys.executable, "-m", "fluxmat.ops.cli", "run", str(program), "--bootstrap-servers", broker.bootstrap,
         "--updates-topic", updates, "--deltas-topic", deltas, "--redis", cluster.url, "--redis-cluster",
         "--namespace", tag, "--partition-by", "message-key", "--checkpoint", str(work / f"ckpt-{tag}"),
         "--trigger-interval", "200ms", "--master", master, "--metrics-port", str(port),
         "--max-update-work", "0", "--max-facts", "0"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(work / f"{tag}.log", "wb"), start_new_session=True,
    )  # fmt: skip
    reader = Deltas(broker.bootstrap, deltas, PARTITIONS)
    reader.start()
    row: dict = {"run": label, "master": master, "keys": keys, "backlog_updates": backlog}
    try:
        alive = lambda: job.poll() is None  # noqa: E731
        t = time.monotonic()
        if not reader.wait({n: f"{n}-init" for n in names}, START_CAP, alive):
            row["check"] = f"keys not loaded in {START_CAP:g} s (see {work / (tag + '.log')})"
            return row
        row["load_seconds"] = round(time.monotonic() - t, 1)
        before = _settled(port, "fluxmat_updates_consumed_total", keys)
        last: dict[str, str] = {}
        t0 = time.monotonic()
        for i in range(backlog):
            name = names[i % keys]
            add, dele = makers[name].make(1, 1)
            last[name] = f"{name}-{i}"
            send(name, {"add": [list(f) for f in add], "del": [list(f) for f in dele], "id": last[name]})
        producer.flush()
        produced = time.monotonic() - t0
        reached = reader.wait(last, WAIT_CAP, alive)
        seconds = time.monotonic() - t0
        after = _settled(port, "fluxmat_updates_consumed_total", keys + backlog)
        row.update(produce_seconds=round(produced, 2), seconds=round(seconds, 2),
                   fact_ops_per_second=round(2 * backlog / seconds) if reached else None)  # fmt: skip

        def grew(name: str) -> float:
            return after.get(name, 0.0) - before.get(name, 0.0)

        for result in ("hit", "miss", "new"):
            row[f"cache_{result}"] = int(grew(f'fluxmat_engine_cache_total{{result="{result}"}}'))
        misses = grew("fluxmat_engine_rebuild_seconds_count")
        facts = after.get("fluxmat_materialisation_facts", 0.0) / max(keys, 1)
        if misses:
            per_miss = grew("fluxmat_engine_rebuild_seconds_sum") / misses
            row["rebuild_seconds_per_10k_facts"] = round(per_miss / max(facts, 1) * 10_000, 3)
        row["batches"] = int(grew('fluxmat_batches_total{outcome="applied"}'))
        # where the executors' time went, summed over keys (CPU seconds of the tasks, not wall time)
        row["key_phases_seconds"] = {
            phase: round(grew(f'fluxmat_batch_phase_seconds_sum{{phase="{phase}"}}'), 2)
            for phase in ("decode", "engine", "export", "commit", "publish")
        }
        row["key_batch_seconds_sum"] = round(grew("fluxmat_key_batch_seconds_sum"), 2)
        row["driver_batch_seconds_sum"] = round(grew("fluxmat_batch_duration_seconds_sum"), 2)
        row["spark_phases_seconds"] = {
            phase: round(grew(f'fluxmat_spark_phase_seconds_sum{{phase="{phase}"}}'), 2)
            for phase in ("triggerExecution", "latestOffset", "addBatch", "walCommit", "commitOffsets")
        }
        row["facts_per_key"] = round(facts)
        with reader.lock:
            bad = [n for n in names if _folded(reader.messages.get(n, [])) != _expected(program, makers[n].present)]
        row.update(rebuild_cost(cluster.url, tag, names[:5], program))
        row["check"] = "ok: every key's deltas fold to remat" if reached and not bad else (
            f"NOT REACHED in {WAIT_CAP:g} s" if not reached else f"WRONG for {len(bad)} keys, e.g. {bad[:3]}")
        log(f"{label}: {row}")
        return row
    finally:
        reader.halt.set()
        producer.close()
        stop_process(job, 60)


def rebuild_cost(url: str, namespace: str, keys: list[str], program: Path) -> dict:
    """A cache miss measured directly: read a key's state from the Redis Cluster and restore an engine."""
    from fluxmat.connectors.state import RedisStateStore, redis_client
    from fluxmat.engine import Reasoner
    from fluxmat.stream.config import STREAM_ENGINE

    client = redis_client(url, cluster=True)
    read = restore = facts = 0.0
    for key in keys:
        store = RedisStateStore(url, namespace, key=key, cluster=True, client=client)
        t = time.perf_counter()
        snap = store.load()
        t1 = time.perf_counter()
        reasoner = Reasoner.from_file(program, options=STREAM_ENGINE)
        reasoner.restore(snap)
        restore += time.perf_counter() - t1
        read += t1 - t
        facts += reasoner.sizes()["facts"]
    client.close()
    per = 10_000 / max(facts, 1)
    return {"miss_read_seconds_per_10k_facts": round(read * per, 3),
            "miss_restore_seconds_per_10k_facts": round(restore * per, 3)}


def _folded(msgs: list[dict]) -> set[tuple]:
    current: set[tuple] = set()
    seen: set = set()
    for m in msgs:
        ident = (m["batch"], m["part"])
        if ident in seen:
            continue
        seen.add(ident)
        current -= {tuple(f) for f in m["removed"]}
        current |= {tuple(f) for f in m["added"]}
    return current


def main(argv: list[str] | None = None) -> int:
    from fluxmat.connectors.broker import EmbeddedBroker
    from tests.support.servers import RedisCluster, SparkStandalone

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=100)
    p.add_argument("--backlog", type=int, default=10_000)
    p.add_argument("--runs", default="local1,local2,standalone1,standalone2")
    p.add_argument("--json", default=None, help="write the rows here")
    ns = p.parse_args(argv)

    def log(msg: str) -> None:
        print(f"[keyed] {msg}", file=sys.stderr, flush=True)

    rows = []
    with tempfile.TemporaryDirectory(prefix="fluxmat-keyed-") as tmp:
        work = Path(tmp)
        cluster = RedisCluster(work / "redis").start()
        try:
            with EmbeddedBroker(log_path=work / "tansu.log") as broker:
                for run in ns.runs.split(","):
                    if run.startswith("local"):
                        rows.append(run_once(run, f"local[{run[5:]}]", ns.keys, ns.backlog, broker, cluster,
                                             work, log))  # fmt: skip
                        continue
                    spark = SparkStandalone(work / run, workers=int(run[len("standalone"):])).start()
                    try:
                        rows.append(run_once(run, spark.url, ns.keys, ns.backlog, broker, cluster, work, log))
                    finally:
                        spark.stop()
        finally:
            cluster.stop()
    print(json.dumps(rows, indent=1))
    base = {r["run"][:-1]: r.get("fact_ops_per_second") for r in rows if r["run"].endswith("1")}
    for r in rows:
        one = base.get(r["run"][:-1])
        if r["run"].endswith("2") and one and r.get("fact_ops_per_second"):
            print(f"{r['run']} / {r['run'][:-1]}1: {r['fact_ops_per_second'] / one:.2f}x")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
