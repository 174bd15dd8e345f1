"""The streaming job on the arrays core (`fluxmat run --core arrays`), with real parts only.

A real tansu broker, a real redis-server and a local Spark (tests.test_pipeline's
fixtures and helpers): updates in, deltas out, the job SIGKILLed mid-stream
and restarted from its state in Redis; the deltas must fold to remat of the
final explicit facts, and the stored state must be the arrays core's.
"""

from __future__ import annotations

import random
import signal
import time

from fluxmat.connectors.state import RedisStateStore
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    SPARK_TIMEOUT,
    check_initial,
    encode,
    explain_mismatch,
    final_explicit,
    make_setup,
    produce,
    random_updates,
    rebuild,
    remat,
    start_job,
    wait_for_batch,
    wait_for_through,
)


def test_arrays_core_job_survives_sigkill_and_its_deltas_fold_to_remat(broker, redis_srv, tmp_path):  # noqa: F811
    s = make_setup(broker, redis_srv, tmp_path)
    rnd = random.Random(7)
    first = random_updates(rnd, 24, "a")
    second = random_updates(rnd, 8, "b") + [{"add": [["edge", "f", "a"]], "id": "final"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])
    args = ("--core", "arrays", "--max-updates-per-batch", "4")
    job = start_job(s, "arrays", None, *args)
    try:
        wait_for_batch(s, job, 2)
        time.sleep(rnd.uniform(0, 0.3))
        job.proc.kill()
        assert job.wait(30) == -signal.SIGKILL
    finally:
        job.cleanup()
    before = read_deltas(s.bootstrap, s.deltas)
    store = RedisStateStore(s.redis_url, s.namespace)
    try:
        meta = store.meta()
    finally:
        store.close()
    assert meta["core"] == "arrays" and meta["log"] == 0, meta
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job2 = start_job(s, "arrays-restarted", None, *args)
    try:
        wait_for_through(s, job2, "final", timeout=SPARK_TIMEOUT)
        assert job2.terminate() == 0, job2.tail()
    finally:
        job2.cleanup()
    assert "restored state of batch" in job2.stderr(), job2.tail()
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert msgs[: len(before)] == before
    check_initial(msgs)
    explicit = final_explicit(INITIAL, first + second)
    rebuilt = rebuild(msgs)
    assert rebuilt == remat(explicit), (
        explain_mismatch(s, rebuilt, explicit, msgs) + job.tail() + job2.tail()
    )
