"""A program change in a keyed job (`--partition-by message-key`, arrays core), with real parts only.

A real Redis Cluster, a real tansu broker and a local Spark. Six keys get updates
that make a cycle (edge(a, b) is shared, edge(b, a) each key's own); then a
program message without a key adds `loop(X) :- path(X, X).`; then three of the
keys get one more update each. The keys touched after the change are exact under
the new program (their deltas fold to remat with the loop rule, its loop facts
included) and their states are at program version 2; the others keep the old
program and report version 1 (their stored meta, and `fluxmat export`) until
they are touched. The namespace's own state holds the program in force.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.state import open_store
from tests.support.keyed_job import NAMESPACE, SLOW_START, args, explicit_after, fold, produce
from tests.support.messages import read_deltas
from tests.support.pipeline import PROGRAM, SPARK_TIMEOUT, Proc, job_env, remat
from tests.support.servers import RedisCluster

N = 7  # this module's topics and namespace (tests.support.keyed_job.args)
LOOP = "loop(X) :- path(X, X)."
KEYS = [f"pkey{i}" for i in range(6)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = RedisCluster(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield c
    finally:
        c.stop()


def _meta(cluster, key: str | None) -> dict:
    store = open_store(cluster.url, f"{NAMESPACE}{N}", key=key, cluster=True)
    try:
        return store.state_meta()
    finally:
        store.close()


class _Job:
    """The keyed job; started again (three times at most) when Spark stopped it because a new
    Python worker took more than Spark's fixed 10 s to connect back (a heavily loaded machine):
    it goes on from its checkpoint and committed state, as any restart."""

    def __init__(self, start):
        self.start, self.attempt = start, 0
        self.proc: Proc = start(0)

    def alive(self) -> bool:
        if self.proc.returncode is None:
            return True
        if SLOW_START not in self.proc.stderr() or self.attempt == 3:
            return False
        self.proc.cleanup()
        self.attempt += 1
        self.proc = self.start(self.attempt)
        return True


def _wait(job: _Job, done, what: str):
    """Poll `done()` until it returns something; the wait's limit is CPU time of the job (Proc.budget)."""
    budget = job.proc.budget(SPARK_TIMEOUT * 2)
    while not (result := done()):
        assert job.alive(), f"the job exited before {what}{job.proc.tail()}"
        if spent := budget.spent():
            pytest.fail(f"not {what} within {spent}{job.proc.tail()}")
        time.sleep(1.0)
    return result


def _through(broker, job: _Job, last: dict[str, str]) -> list[dict]:
    """The deltas once every key of `last` has one through its id."""

    def done():
        msgs = read_deltas(broker.bootstrap, f"kdeltas{N}", timeout=30)
        reached = {(m["key"], m["through"]) for m in msgs}
        return msgs if all((k, i) in reached for k, i in last.items()) else None

    return _wait(job, done, f"every key through {sorted(last.values())}")


def _exported_version(tmp_path, cluster, key: str) -> str:
    cmd = [sys.executable, "-m", "fluxmat.ops.cli", "export", str(tmp_path / "path.dl"), "--redis", cluster.url,
           "--redis-cluster", "--namespace", f"{NAMESPACE}{N}", "--key", key]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=job_env())
    assert done.returncode == 0, done.stderr
    return done.stderr.strip().rsplit(", ", 1)[-1]


def test_a_program_change_reaches_each_key_when_it_is_next_touched(broker, cluster, tmp_path):
    ensure_topics(broker.bootstrap, {f"kupdates{N}": 4, f"kdeltas{N}": 4, f"kdead{N}": 1})
    plan = {k: [{"add": [["edge", "b", "a"]], "del": [], "id": f"{k}-0"}] for k in KEYS}
    produce(broker.bootstrap, f"kupdates{N}", [(k, u[0]) for k, u in plan.items()])
    cmd = args(broker, cluster, tmp_path, N, "--core", "arrays", "--master", "local[2]")
    job = _Job(lambda attempt: Proc(cmd, tmp_path, f"keyed{attempt}", job_env()))
    try:
        _through(broker, job, {k: f"{k}-0" for k in KEYS})
        produce(broker.bootstrap, f"kupdates{N}", [(None, {"program": {"add": LOOP}, "id": "v2"})])
        _wait(job, lambda: _meta(cluster, None).get("program_version") == 2, "the namespace at version 2")
        touched = KEYS[:3]
        later = {k: {"add": [["edge", "c", "a"]], "del": [], "id": f"{k}-1"} for k in touched}
        produce(broker.bootstrap, f"kupdates{N}", list(later.items()))
        for k, u in later.items():
            plan[k].append(u)
        msgs = _through(broker, job, {k: f"{k}-1" for k in touched})
        assert job.proc.terminate() == 0, job.proc.tail()
    finally:
        job.proc.cleanup()
    folded = fold(msgs)
    new = PROGRAM + LOOP + "\n"
    for k in KEYS:
        explicit = explicit_after(plan[k])
        if k in touched:
            assert folded[k] == remat(explicit, new) and ("loop", "a") in folded[k], k
            assert _meta(cluster, k)["program_version"] == 2
        else:
            assert folded[k] == remat(explicit), k  # not touched since: the old program, no loop facts
            assert int(_meta(cluster, k).get("program_version") or 1) == 1
    assert _exported_version(tmp_path, cluster, touched[0]) == "program version 2"
    assert _exported_version(tmp_path, cluster, KEYS[-1]) == "program version 1"
    namespace = _meta(cluster, None)
    assert [h["version"] for h in namespace["program_history"]] == [2]
