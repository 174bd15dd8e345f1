"""The whole chain: the Spark job on a random update stream, `fluxmat follow` into SQLite and PostgreSQL.

Real tansu, real redis-server, a local Spark job (`fluxmat run`), and two
followers (SQLite and a real PostgreSQL). The job dies right after publishing
a batch (`FLUXMAT_CRASH_AT=after-publish:N`, as SIGKILL would) and replays it
when restarted, so the batch is on the topic twice; the followers are
SIGKILLed mid-stream and started again. At the end, each database's tables
equal the materialisation of the final explicit facts (`fluxmat materialise`'s
result, computed by the engine), and no batch was applied twice.
"""

from __future__ import annotations

import random
import signal
import subprocess

from fluxmat.client import open_store
from tests.support.cli import follow
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    SPARK_TIMEOUT,
    encode,
    final_explicit,
    make_setup,
    produce,
    random_updates,
    remat,
    start_job,
    wait_for_batch,
    wait_for_through,
)

CRASH_BATCH = 3


def kill(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGKILL)
    return proc.communicate(timeout=30)[0]


def test_job_and_followers_killed_and_restarted_keep_exact_tables(broker, redis_srv, postgres, tmp_path, reap):
    s = make_setup(broker, redis_srv, tmp_path)
    urls = {"sqlite": f"sqlite:///{tmp_path / 'view.db'}", "postgresql": postgres.create_database("pipeline")}
    rnd = random.Random(28)
    first = random_updates(rnd, 24, "a")
    second = random_updates(rnd, 12, "b") + [{"add": [["edge", "f", "a"]], "id": "final"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])
    followers = {name: reap(follow(url, s.bootstrap, s.deltas)) for name, url in urls.items()}
    out = dict.fromkeys(urls, "")
    job = start_job(s, "crashing", {"FLUXMAT_CRASH_AT": f"after-publish:{CRASH_BATCH}"},
                    "--max-updates-per-batch", "3")  # fmt: skip
    try:
        assert job.wait(3 * SPARK_TIMEOUT) == 137, job.tail()  # generous: Spark on a loaded machine
    finally:
        job.cleanup()
    for name, proc in followers.items():  # mid-stream: the job is down half-way through the updates
        out[name] += kill(proc)
    followers = {name: reap(follow(url, s.bootstrap, s.deltas)) for name, url in urls.items()}
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job = start_job(s, "restarted", None, "--max-updates-per-batch", "3")
    try:
        wait_for_batch(s, job, CRASH_BATCH + 1, timeout=3 * SPARK_TIMEOUT)  # the replay is published
        for name, proc in followers.items():  # again, while the restarted job replays and goes on
            out[name] += kill(proc)
        wait_for_through(s, job, "final", timeout=3 * SPARK_TIMEOUT)
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert sum(1 for m in msgs if m["batch"] == CRASH_BATCH) == 2, "the crashed batch is on the topic twice"
    expected = remat(final_explicit(INITIAL, first + second))
    for name, url in urls.items():
        proc = reap(follow(url, s.bootstrap, s.deltas, "--until-caught-up"))
        rest, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        applied = [ln.split(":")[0] for ln in (out[name] + rest).splitlines()]
        assert len(applied) == len(set(applied)), f"{name}: a batch was applied twice: {applied}"
        store = open_store(url)
        progress = store.load(s.deltas)
        assert progress.through == {None: "final"} and progress.batches[None] == msgs[-1]["batch"]
        assert store.facts() == expected, name
        store.close()
