"""The keyed job as its end-to-end tests run it: arguments, per-key updates, waits, the per-key check.

Shared by the keyed pipeline, failover and broker-restart tests (tests/stream)."""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from fluxmat.connectors.broker import ensure_topics
from fluxmat.stream import engine_host
from fluxmat.stream.job import JobConfig
from tests.support.messages import read_deltas
from tests.support.pipeline import INITIAL, POOL, PROGRAM, SPARK_TIMEOUT, Proc, job_env, remat

KEYS = [f"tenant{i:02d}" for i in range(50)]


def args(broker, cluster, d: Path, n: int, *extra: str) -> list[str]:
    program, facts = d / "path.dl", d / "facts.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    facts.write_text("".join(f"edge({x}, {y}).\n" for _, x, y in INITIAL), encoding="utf-8")
    return [sys.executable, "-m", "fluxmat.ops.cli", "run", str(program), "--facts", str(facts),
            "--bootstrap-servers", broker.bootstrap, "--updates-topic", f"kupdates{n}",
            "--deltas-topic", f"kdeltas{n}", "--dead-letter-topic", f"kdead{n}",
            "--redis", cluster.url, "--redis-cluster", "--namespace", f"{NAMESPACE}{n}",
            "--partition-by", "message-key", "--checkpoint", str(d / "checkpoint"),
            "--trigger-interval", "300ms", *extra]  # fmt: skip


def updates_for(rnd: random.Random, key: str, n: int) -> list[dict]:
    """Overlapping adds and deletes over nodes a..f, every one with an id `<key>-<i>`."""
    out = []
    for i in range(n):
        add = rnd.sample(POOL, rnd.randint(0, 2))
        dele = [f for f in rnd.sample(POOL, rnd.randint(0, 2)) if f not in add] or (
            [] if add else [POOL[0]]
        )
        out.append(
            {"add": [list(f) for f in add], "del": [list(f) for f in dele], "id": f"{key}-{i}"}
        )
    return out


def produce(bootstrap: str, topic: str, records: list[tuple[str | None, dict]]) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_in_flight_requests_per_connection=1
    )
    try:
        for key, update in records:
            producer.send(
                topic, key=None if key is None else key.encode(), value=json.dumps(update).encode()
            )
        producer.flush()
    finally:
        producer.close()


def interleave(rnd: random.Random, plan: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """Every key's updates in its own order, the keys interleaved at random."""
    queues = {k: list(v) for k, v in plan.items()}
    out = []
    while queues:
        key = rnd.choice(sorted(queues))
        out.append((key, queues[key].pop(0)))
        if not queues[key]:
            del queues[key]
    return out


def wait_done(bootstrap: str, topic: str, job: Proc, last: dict[str, str]) -> list[dict]:
    """Poll the deltas until every key has a delta through its last update's id."""
    deadline = time.monotonic() + SPARK_TIMEOUT * 2
    while True:
        msgs = read_deltas(bootstrap, topic, timeout=30)
        reached = {(m["key"], m["through"]) for m in msgs}
        missing = [k for k, ident in last.items() if (k, ident) not in reached]
        if not missing:
            return msgs
        if job.returncode is not None:
            pytest.fail(
                f"the job exited with {job.returncode}; keys not done: {missing[:5]}{job.tail()}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"keys not done: {len(missing)}, e.g. {missing[:5]}{job.tail()}")
        time.sleep(1.0)


def check(msgs: list[dict], plan: dict[str, list[dict]]) -> None:
    folded = fold(msgs)
    assert set(folded) == set(plan)
    for key, updates in plan.items():
        assert folded[key] == remat(explicit_after(updates)), f"key {key}"


NAMESPACE = "keyed"


def explicit_after(updates: list[dict]) -> set[tuple]:
    """F ∪ E_key: the shared `--facts` and the key's own explicit facts after its updates.

    A key cannot delete a shared fact: its deletion removes only the key's own
    assertion (the random updates delete facts of F often: edge(a, b) is POOL[0]).
    """
    own: set[tuple] = set()
    for u in updates:
        own -= {tuple(f) for f in u["del"]}
        own |= {tuple(f) for f in u["add"]}
    return {tuple(f) for f in INITIAL} | own


def fold(msgs: list[dict]) -> dict[str, set[tuple]]:
    """A consumer per key: apply each key's deltas in log order, each (batch, part) once.

    Checks on the way: a re-sent (key, batch, part) is identical to its first
    copy; a key's batches only grow; every delta is exact (adds absent facts,
    removes present ones); each batch has all its parts.
    """
    first: dict[tuple, dict] = {}
    state: dict[str, set[tuple]] = {}
    newest: dict[str, int] = {}
    for m in msgs:
        assert "key" in m, f"a keyed delta without its key: {m}"
        ident = (m["key"], m["batch"], m["part"])
        if ident in first:
            assert m == first[ident], f"re-sent delta {ident} differs:\n{first[ident]}\n{m}"
            continue
        key = m["key"]
        assert m["batch"] >= newest.get(key, m["batch"]), (
            f"{key}: batch {m['batch']} after {newest[key]}"
        )
        newest[key] = m["batch"]
        first[ident] = m
        current = state.setdefault(key, set())
        added, removed = {tuple(f) for f in m["added"]}, {tuple(f) for f in m["removed"]}
        assert not added & current, f"{ident} adds present facts {added & current}"
        assert removed <= current, f"{ident} removes absent facts {removed - current}"
        state[key] = (current - removed) | added
    for key, batch, part in first:
        assert part < first[(key, batch, part)]["parts"]
    return state


def first_half(
    bootstrap: str, n: int, seed: int
) -> tuple[dict[str, list[dict]], list[tuple[str, dict]]]:
    """Topics of run `n`, 20 keys' plans of 10 updates, and the first half of their records produced."""
    ensure_topics(bootstrap, {f"kupdates{n}": 4, f"kdeltas{n}": 4, f"kdead{n}": 1})
    rnd = random.Random(seed)
    plan = {k: updates_for(rnd, k, 10) for k in KEYS[:20]}
    records = interleave(rnd, plan)
    produce(bootstrap, f"kupdates{n}", records[: len(records) // 2])
    return plan, records[len(records) // 2 :]


def starter(cmd: list[str], logs, jobs: list[Proc], name: str):
    """A `start(attempt)` for `mid_stream`: each job it starts is kept in `jobs` (to clean up)."""

    def start(attempt: int) -> Proc:
        jobs.append(Proc(cmd, logs, f"{name}{attempt}", job_env()))
        return jobs[-1]

    return start


SLOW_START = "Python worker failed to connect back"  # Spark's 10 s for a new Python worker, on a loaded machine


def mid_stream(bootstrap: str, n: int, start) -> Proc:
    """Start the job (`start(attempt)`) and wait until it has published a delta of batch 1 or later.

    A job that Spark stopped at its start because a Python worker took more
    than Spark's fixed 10 s to connect back (a heavily loaded machine; nothing
    was read or written yet) is started again, twice at most.
    """
    deadline = time.monotonic() + 3 * SPARK_TIMEOUT  # Spark's start on a loaded machine
    job, attempt = start(0), 0
    while not any(m["batch"] >= 1 for m in read_deltas(bootstrap, f"kdeltas{n}", timeout=30)):
        if job.returncode is not None and SLOW_START in job.stderr() and attempt < 2:
            job.cleanup()
            job, attempt = start(attempt + 1), attempt + 1
            deadline = time.monotonic() + 3 * SPARK_TIMEOUT
        assert job.returncode is None and time.monotonic() < deadline, job.tail()
        time.sleep(0.3)
    return job


# the engine-host tests' job: a program on disk, fresh topics, a message-key partitioning
@pytest.fixture
def cfg(broker, redis_server, tmp_path):
    program = tmp_path / "path.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    n = time.time_ns()
    ensure_topics(broker.bootstrap, {f"hu{n}": 1, f"hd{n}": 1})
    c = JobConfig(program=str(program), bootstrap_servers=broker.bootstrap, updates_topic=f"hu{n}",
                  deltas_topic=f"hd{n}", checkpoint=str(tmp_path / "ckpt"), redis=redis_server.url,
                  namespace=f"hosts{n}", partition_by="message-key")  # fmt: skip
    yield c
    engine_host.stop_hosts(c)


def rows(offset: int, key: str, *updates: dict) -> list[tuple]:
    return [(0, offset + i, key, json.dumps(u), None, True, None) for i, u in enumerate(updates)]
