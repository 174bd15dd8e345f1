"""The keyed operator end to end (`--partition-by`): executors, a real Redis Cluster, real broker, Spark.

50 keys (tenants) share the program and the `--facts`; each key gets random
overlapping adds and deletes, keyed by the Kafka message key over a
4-partition updates topic (so each key's updates are in one partition, in
order). Per key, the folded deltas must equal `remat` over the shared facts
plus that key's explicit facts; every re-sent delta must be identical; the
state must be spread over all three cluster nodes. The fault test kills the
job with SIGKILL mid-stream, restarts a cluster node from its AOF, and makes
an executor task fail once (Spark retries it), then checks the same.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from fluxmat.connectors.broker import ensure_topics
from tests.support.keyed_job import (
    KEYS,
    NAMESPACE,
    args,
    check,
    explicit_after,
    fold,
    interleave,
    produce,
    updates_for,
    wait_done,
)
from tests.support.messages import read_deltas
from tests.support.pipeline import SPARK_TIMEOUT, Proc, job_env, remat
from tests.support.servers import RedisCluster, free_port
from tests.support.shared import series


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield c
    finally:
        c.stop()


def node_sizes(cluster: RedisCluster) -> list[int]:
    import redis

    return [redis.Redis(port=n.port).dbsize() for n in cluster.nodes]


def paths(updates: list[dict]) -> set[str]:
    """The `path` facts of a key's expected materialisation, as program text."""
    return {f"path({f[1]}, {f[2]})" for f in remat(explicit_after(updates)) if f[0] == "path"}


def api(port: int, path: str) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def resent(msgs: list[dict]) -> int:
    """Delta messages that repeat an earlier (key, batch, part)."""
    return len(msgs) - len({(m["key"], m["batch"], m["part"]) for m in msgs})


def test_fifty_keys_on_a_redis_cluster(broker, cluster, tmp_path):
    n = 1
    ensure_topics(broker.bootstrap, {f"kupdates{n}": 4, f"kdeltas{n}": 4, f"kdead{n}": 1})
    rnd = random.Random(17)
    plan = {k: updates_for(rnd, k, rnd.randint(3, 8)) for k in KEYS}
    records = interleave(rnd, plan)
    records.insert(40, (None, {"add": [["edge", "a", "b"]], "id": "no-key"}))
    produce(broker.bootstrap, f"kupdates{n}", records)
    port = free_port()
    job = Proc(args(broker, cluster, tmp_path, n, "--master", "local[2]", "--max-updates-per-batch", "50",
                    "--dashboard-port", str(port)), tmp_path, "keyed", job_env())  # fmt: skip
    try:
        msgs = wait_done(broker.bootstrap, f"kdeltas{n}", job, {k: u[-1]["id"] for k, u in plan.items()})
        status = api(port, "/api/status")
        answer = api(port, "/api/query?pattern=" + quote("path(?X, ?Y)") + "&key=tenant07")
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    check(msgs, plan)
    assert status["now"]["keys"]["seen"] == len(plan)
    assert {k for k, _ in status["now"]["keys"]["busiest"]} <= set(plan)
    assert set(answer["facts"]) == paths(plan["tenant07"])
    cli = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "query", str(tmp_path / "path.dl"), "path(?X, ?Y)",
                          "--redis", cluster.url, "--redis-cluster", "--namespace", f"{NAMESPACE}{n}",
                          "--key", "tenant11"], capture_output=True, text=True, timeout=120, env=job_env())  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert set(cli.stdout.split(".\n")[:-1]) == paths(plan["tenant11"])
    assert all(size > 0 for size in node_sizes(cluster)), node_sizes(cluster)
    dead = read_deltas(broker.bootstrap, f"kdead{n}", timeout=30)
    assert [json.loads(d["raw"])["id"] for d in dead] == ["no-key"]
    assert "without a key" in dead[0]["reason"]
    followed(broker.bootstrap, f"kdeltas{n}", tmp_path, plan)


def followed(bootstrap: str, deltas: str, d: Path, plan: dict[str, list[dict]]) -> None:
    """`fluxmat follow` of the keyed job's deltas: all keys in one database, one key alone in another."""
    from fluxmat.client import open_store

    one = "tenant07"
    urls = {None: f"sqlite:///{d / 'all-keys.db'}", one: f"sqlite:///{d / 'one-key.db'}"}
    for key, url in urls.items():
        cmd = [sys.executable, "-m", "fluxmat.ops.cli", "follow", "--deltas-topic", deltas,
               "--bootstrap-servers", bootstrap, "--to", url, "--until-caught-up", "--quiet"]  # fmt: skip
        done = subprocess.run(cmd + ([] if key is None else ["--key", key]), capture_output=True, text=True,
                              timeout=300, env=job_env())  # fmt: skip
        assert done.returncode == 0, done.stderr
    every, alone = open_store(urls[None]), open_store(urls[one])
    try:
        for key, updates in plan.items():
            assert every.facts(key) == remat(explicit_after(updates)), key
        assert alone.facts(one) == remat(explicit_after(plan[one]))
        assert not alone.facts("tenant08"), "the one-key follower stored another key's facts"
    finally:
        every.close()
        alone.close()


def test_kill_restart_node_and_task_failure(broker, cluster, tmp_path):
    """SIGKILL mid-stream, a cluster node restarted from its AOF, a failed task retried: exact."""
    n = 2
    ensure_topics(broker.bootstrap, {f"kupdates{n}": 4, f"kdeltas{n}": 4, f"kdead{n}": 1})
    rnd = random.Random(23)
    keys = KEYS[:20]
    plan = {k: updates_for(rnd, k, 10) for k in keys}
    records = interleave(rnd, plan)
    half = len(records) // 2
    produce(broker.bootstrap, f"kupdates{n}", records[:half])
    marker = tmp_path / "failed-once"
    env = job_env({"FLUXMAT_FAIL_TASK": f"0:{marker}"})
    first = Proc(args(broker, cluster, tmp_path, n, "--max-updates-per-batch", "40"), tmp_path, "first", env)
    try:
        deadline = time.monotonic() + SPARK_TIMEOUT
        while not any(m["batch"] >= 1 for m in read_deltas(broker.bootstrap, f"kdeltas{n}", timeout=30)):
            assert first.returncode is None and time.monotonic() < deadline, first.tail()
            time.sleep(0.3)
        os.killpg(first.proc.pid, signal.SIGKILL)  # mid-stream: no clean stop
        first.proc.wait(timeout=30)
    finally:
        first.cleanup()
    assert marker.exists(), "the injected task failure did not happen"
    cluster.restart(1)  # SIGKILL a node, start it again from its AOF
    produce(broker.bootstrap, f"kupdates{n}", records[half:])
    second = Proc(args(broker, cluster, tmp_path, n), tmp_path, "second", job_env())
    try:
        msgs = wait_done(broker.bootstrap, f"kdeltas{n}", second, {k: u[-1]["id"] for k, u in plan.items()})
        assert second.terminate() == 0, second.tail()
    finally:
        second.cleanup()
    check(msgs, plan)
    assert resent(msgs) > 0, "the retried task and the replayed batch re-published nothing"


def scrape(port: int) -> str:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric(text: str, name: str) -> float:
    scraped = series(text)  # without the namespace label every series carries
    assert name in scraped, f"{name} not scraped"
    return scraped[name]


def test_standalone_cluster_caches_engines_in_workers(broker, cluster, tmp_path):
    """A master and two one-core workers (local processes): exact per key, engines reused in workers."""
    from tests.support.servers import SparkStandalone

    n = 3
    ensure_topics(broker.bootstrap, {f"kupdates{n}": 4, f"kdeltas{n}": 4, f"kdead{n}": 1})
    rnd = random.Random(31)
    plan = {k: updates_for(rnd, k, 12) for k in KEYS[:12]}
    records = interleave(rnd, plan)
    spark = SparkStandalone(tmp_path / "spark").start()
    port = free_port()
    try:
        job = Proc(args(broker, cluster, tmp_path, n, "--master", spark.url, "--metrics-port", str(port)),
                   tmp_path, "standalone", job_env())  # fmt: skip
        try:
            for i in range(0, len(records), 24):  # several batches: engines are reused between them
                chunk = records[i : i + 24]
                produce(broker.bootstrap, f"kupdates{n}", chunk)
                wait_done(broker.bootstrap, f"kdeltas{n}", job, {k: u["id"] for k, u in chunk})
            msgs = wait_done(broker.bootstrap, f"kdeltas{n}", job, {k: u[-1]["id"] for k, u in plan.items()})
            text = scrape(port)
            assert job.terminate() == 0, job.tail()
        finally:
            job.cleanup()
    finally:
        spark.stop()
    check(msgs, plan)
    assert metric(text, 'fluxmat_engine_cache_total{result="new"}') == len(plan)
    assert metric(text, 'fluxmat_engine_cache_total{result="hit"}') > 0, "no engine was reused in a worker"
    assert metric(text, "fluxmat_keys_seen") == len(plan)
    assert metric(text, "fluxmat_task_seconds_count") >= metric(text, 'fluxmat_batches_total{outcome="applied"}') > 0
    assert metric(text, "fluxmat_engines_cached") == len(plan)  # every key's engine kept (two hosts)
    nodes = {k: v for k, v in series(text).items() if k.startswith("fluxmat_state_node_memory_bytes{")}
    assert sorted(nodes) == sorted(f'fluxmat_state_node_memory_bytes{{node="127.0.0.1:{n.port}"}}'
                                   for n in cluster.nodes) and all(v > 0 for v in nodes.values())


def test_partition_by_named_graph(broker, cluster, tmp_path):
    """N-Quads updates, one materialisation per named graph; an update in the default graph is a dead letter."""
    n = 4
    ensure_topics(broker.bootstrap, {f"kupdates{n}": 2, f"kdeltas{n}": 2, f"kdead{n}": 1})
    ex = "http://ex.org/"
    program = tmp_path / "rdf.dl"
    program.write_text(f"@prefix ex: <{ex}> .\nex:path(X, Y) :- ex:edge(X, Y).\n"
                       "ex:path(X, Z) :- ex:path(X, Y), ex:edge(Y, Z).\n", encoding="utf-8")  # fmt: skip
    rnd = random.Random(5)
    graphs = {f"{ex}g{i}": [] for i in range(3)}
    records = []
    for i in range(30):
        graph = rnd.choice(sorted(graphs))
        x, y = rnd.sample("abcd", 2)
        op = "del" if graphs[graph] and rnd.random() < 0.3 else "add"
        if op == "del":
            x, y = rnd.choice(graphs[graph])
        graphs[graph].append((x, y))
        text = f"<{ex}{x}> <{ex}edge> <{ex}{y}> <{graph}> .\n"
        # the message key routes a graph's updates to one partition (their order); the job keys by graph
        records.append((graph[-2:], {"format": "nquads", op: text, "id": f"{graph}-{i}"}))
    records.append((None, {"format": "nquads", "add": f"<{ex}a> <{ex}edge> <{ex}b> .\n", "id": "default"}))
    produce(broker.bootstrap, f"kupdates{n}", records)
    cmd = args(broker, cluster, tmp_path, n)
    cmd[4] = str(program)
    cmd[cmd.index("message-key")] = "graph"
    cmd[cmd.index("--facts"): cmd.index("--facts") + 2] = []
    last = {}
    for _, u in records[:-1]:
        last[u["id"].rsplit("-", 1)[0]] = u["id"]
    job = Proc(cmd, tmp_path, "graphs", job_env())
    try:
        msgs = wait_done(broker.bootstrap, f"kdeltas{n}", job, last)
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    folded = fold(msgs)
    for graph in last:
        edges: set[tuple] = set()
        for _, u in records[:-1]:
            if u["id"].rsplit("-", 1)[0] == graph:
                (op, text), = ((k, v) for k, v in u.items() if k in ("add", "del"))
                s, _, o = text.split()[:3]
                edge = (s.strip("<>").removeprefix(ex), o.strip("<>").removeprefix(ex))
                edges = edges - {edge} if op == "del" else edges | {edge}
        want = {f for f in remat({("edge", x, y) for x, y in edges}) if f[0] == "path"}
        got = {(f[0].rsplit(":", 1)[-1].rsplit("/", 1)[-1].strip(">"), f[1].strip("<>").removeprefix(ex),
                f[2].strip("<>").removeprefix(ex)) for f in folded[graph] if "path" in f[0]}  # fmt: skip
        assert got == want, graph
    dead = read_deltas(broker.bootstrap, f"kdead{n}", timeout=30)
    assert [json.loads(d["raw"])["id"] for d in dead] == ["default"] and "named graph" in dead[0]["reason"]
