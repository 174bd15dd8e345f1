"""Failover, not only restart: a Redis Cluster of three primaries with one replica each.

* The store: with `wait_replicas` a commit is acknowledged only once a replica
  holds it, so the replica that takes over after the primary dies has every
  acknowledged batch. Without WAIT (replication is asynchronous) an
  acknowledged commit can be missing on the promoted replica: here the replica
  is cut off from its primary (stopped, link killed) before the commit, as a
  slow network would, and the primary is killed after it.
* The keyed job end to end: a primary that serves keys is SIGKILLed while the
  job runs; its replica is promoted, the old node comes back as a replica; the
  job rides through (health degraded, then healthy), and per key the folded
  deltas equal `remat`, batch ids only grow and a re-sent delta is identical.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
import redis

from fluxmat.connectors.kafka_sink import read_deltas
from fluxmat.connectors.state import RedisStateStore, key_prefix
from fluxmat.engine import StateChanges
from tests.support.keyed_job import (
    KEYS,
    args,
    check,
    first_half,
    mid_stream,
    produce,
    starter,
    wait_done,
)
from tests.support.pipeline import Proc
from tests.support.servers import RedisCluster, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def replicated(tmp_path_factory):
    """Three primaries and three replicas; a failed node is noticed after one second."""
    c = RedisCluster(tmp_path_factory.mktemp("replicated"), replicas=1, node_timeout_ms=1000).start()
    try:
        yield c
    finally:
        c.stop()


def changes(batch: int) -> StateChanges:
    return StateChanges(meta={"through": f"u{batch}"}, explicit={f'["e", {batch}]': True})


def commit(store: RedisStateStore, batch: int) -> bool:
    """True when the commit of `batch` was acknowledged (returned), False when it failed."""
    try:
        store.commit(batch, changes(batch), {"through": f"u{batch}", "added": [], "removed": [], "dead": []})
        return True
    except redis.TimeoutError:
        return False


def test_the_wait_replicas_flag_reaches_the_store_and_a_lone_server_cannot_acknowledge(redis_server, tmp_path,
                                                                                      monkeypatch):  # fmt: skip
    """`--redis-wait-replicas` (env FLUXMAT_REDIS_WAIT_REPLICAS): a server without replicas never acknowledges."""
    from fluxmat.connectors.state import open_store
    from fluxmat.engine import FluxmatError
    from fluxmat.ops.cli import build_parser
    from fluxmat.ops.stream_cli import job_config

    base = ["run", "p.dl", "--bootstrap-servers", "x:1", "--updates-topic", "u", "--deltas-topic", "d",
            "--redis", "memory://", "--checkpoint", str(tmp_path)]  # fmt: skip
    assert job_config(build_parser().parse_args(base)).redis_wait_replicas == 0
    assert job_config(build_parser().parse_args([*base, "--redis-wait-replicas", "2"])).redis_wait_replicas == 2
    monkeypatch.setenv("FLUXMAT_REDIS_WAIT_REPLICAS", "1")
    cfg = job_config(build_parser().parse_args(base))
    assert cfg.redis_wait_replicas == 1
    with pytest.raises(FluxmatError, match="--redis-wait-replicas must be at least 0"):
        job_config(build_parser().parse_args([*base, "--redis-wait-replicas", "-1"]))
    store = open_store(redis_server.url, "lone", retry_seconds=1.5, wait_replicas=cfg.redis_wait_replicas)
    with pytest.raises(redis.TimeoutError, match="WAIT: 0 of 1 Redis replicas acknowledged batch 0"):
        store.commit(0, changes(0), {"through": "u0", "added": [], "removed": [], "dead": []})
    assert open_store(redis_server.url, "lone").last_batch() == 0  # written, but not acknowledged


def test_an_acknowledged_commit_survives_the_failover_with_wait_replicas(replicated):
    """Cut the replica off, commit, kill the primary, promote the replica: nothing acknowledged is lost."""
    c = replicated
    store = RedisStateStore(c.url, "wait", retry_seconds=2, key="k", cluster=True, wait_replicas=1)
    assert commit(store, 0)
    primary = c.primary_of(key_prefix("wait", "k") + "meta")
    (replica,) = c.replicas_of(primary)
    os.kill(c.nodes[replica].proc.pid, signal.SIGSTOP)  # the replica hears nothing more ...
    try:
        redis.Redis(port=c.nodes[primary].port).client_kill_filter(_type="replica")  # ... from now on
        acknowledged = commit(store, 1)
        c.nodes[primary].stop(kill=True)
    finally:
        os.kill(c.nodes[replica].proc.pid, signal.SIGCONT)
    c.wait_promoted([replica])
    fresh = RedisStateStore(c.url, "wait", key="k", cluster=True)
    assert not acknowledged or fresh.last_batch() == 1, "an acknowledged commit was lost in the failover"
    assert not acknowledged, "a commit no replica holds was acknowledged"
    c.revive(primary)  # back as the new primary's replica: commits are acknowledged again
    assert commit(store, 1), "the store did not ride through the failover"
    assert fresh.last_batch() == 1
    assert store.cluster_problem() is None


def test_cluster_problem_names_the_failed_primary_until_it_is_back_as_a_replica(replicated):
    c = replicated
    store = RedisStateStore(c.url, "health", cluster=True)
    assert store.cluster_problem() is None
    primary = c.primary_of(key_prefix("health", "k") + "meta")
    c.wait_promoted(c.kill(primary))
    port = c.nodes[primary].port
    problem = store.cluster_problem()
    assert problem is not None and f":{port}" in problem and "failing" in problem, problem
    c.revive(primary)
    deadline = time.monotonic() + 30
    while (problem := store.cluster_problem()) is not None:  # gossip takes a moment
        assert time.monotonic() < deadline, problem
        time.sleep(0.2)


class HealthLog(threading.Thread):
    """Polls the job's /healthz; records each change of state or reason."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/healthz"
        self.seen: list[str] = []
        self.halt = threading.Event()

    def state(self) -> str | None:
        try:
            with urllib.request.urlopen(self.url, timeout=5) as resp:
                return resp.read().decode().strip()
        except urllib.error.HTTPError as exc:
            return exc.read().decode().strip()
        except OSError:
            return None

    def run(self) -> None:
        while not self.halt.wait(0.2):
            line = self.state()
            if line is not None and (not self.seen or self.seen[-1] != line):
                self.seen.append(line)


def test_keyed_job_rides_through_a_primary_failover(broker, replicated, tmp_path):
    """SIGKILL a primary that serves keys mid-stream; its replica takes over; exact per key, nothing twice."""
    c, n = replicated, 5
    plan, rest = first_half(broker.bootstrap, n, 41)
    port = free_port()
    cmd = args(broker, c, tmp_path, n, "--max-updates-per-batch", "15", "--dashboard-port", str(port),
               "--redis-wait-replicas", "1", "--redis-retry-seconds", "60", "--redis-fsync", "always")  # fmt: skip
    jobs: list[Proc] = []
    health = HealthLog(port)
    try:
        job = mid_stream(broker.bootstrap, n, starter(cmd, tmp_path, jobs, "failover"))
        health.start()
        victim = c.primary_of(key_prefix(f"keyed{n}", KEYS[0]) + "meta")
        replicas = c.kill(victim)  # mid-stream, the primary serving tenant00's state
        produce(broker.bootstrap, f"kupdates{n}", rest)
        c.wait_promoted(replicas)
        c.revive(victim)  # back as a replica
        msgs = wait_done(broker.bootstrap, f"kdeltas{n}", job, {k: u[-1]["id"] for k, u in plan.items()})
        deadline = time.monotonic() + 60
        while not health.seen or not health.seen[-1].startswith("healthy"):
            assert time.monotonic() < deadline and job.returncode is None, f"{health.seen}{job.tail()}"
            time.sleep(0.5)
        health.halt.set()
        assert job.terminate() == 0, job.tail()
    finally:
        health.halt.set()
        for job in jobs:
            job.cleanup()
    check(msgs, plan)
    states = [line.split(":")[0] for line in health.seen]
    assert "degraded" in states and states[-1] == "healthy", health.seen
    assert any(f":{c.nodes[victim].port}" in line for line in health.seen if line.startswith("degraded")), health.seen
    assert not [d for d in read_deltas(broker.bootstrap, f"kdead{n}", timeout=30) if "id" in json.loads(d["raw"])]
