"""The job refuses a state store and a Spark checkpoint that do not belong together.

Batch ids restart at 0 with a new checkpoint and the processor takes a batch id
<= the stored one for a replay, so a stored state with a new checkpoint would
skip updates silently, and an emptied store with an old checkpoint would lose
the updates already read, and a state behind a batch the checkpoint records as
done would skip that batch's updates. All are refused with one clear line; with
`--starting-offsets` a stored state continues from chosen offsets (the runbook's
"replay from an offset"). Real tansu, redis-server and Spark, as in test_pipeline.
"""

from __future__ import annotations

import redis

from fluxmat.connectors.state import STATE_KEYS
from fluxmat.stream.job import checkpoint_last_commit
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    assert_refused,
    encode,
    final_explicit,
    make_setup,
    produce,
    rebuild,
    remat,
    run_until_through,
    start_job,
)


def test_new_checkpoint_old_state_empty_state_old_checkpoint_and_resuming(broker, redis_server, tmp_path):
    s = make_setup(broker, redis_server, tmp_path / "a")
    first = [{"add": [["edge", "d", "e"]], "id": "one"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])
    job = run_until_through(s, "first", "one")
    assert "fluxmat: Redis AOF: appendonly yes, appendfsync everysec" in job.stderr(), job.tail()  # the default
    client = redis.Redis.from_url(s.redis_url, decode_responses=True)
    assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
    meta = client.hgetall(f"fluxmat:{s.namespace}:meta")
    assert int(meta["batch"]) >= 0

    # 0. the state behind a batch the checkpoint records as done (an OS crash took Redis's last
    #    second with --redis-fsync everysec): Spark would not run that batch again, so refused
    done = checkpoint_last_commit(str(s.checkpoint))
    assert done == int(meta["batch"])
    client.hset(f"fluxmat:{s.namespace}:meta", "batch", str(done - 1))
    line = assert_refused(start_job(s, "behind"), "behind checkpoint")
    assert f"is at batch {done - 1}" in line and f"records batch {done} as done" in line
    client.hset(f"fluxmat:{s.namespace}:meta", "batch", meta["batch"])

    # 1. the same namespace with a new checkpoint: refused, nothing changed
    old_checkpoint = s.checkpoint
    s.checkpoint = tmp_path / "new-checkpoint"
    assert_refused(start_job(s, "new-checkpoint"), "checkpoint")
    assert client.hgetall(f"fluxmat:{s.namespace}:meta") == meta
    assert not (s.checkpoint / "offsets").exists()

    # 2. --starting-offsets continues the stored state from the offsets given: the
    #    update already applied is not re-read, the new one is applied
    before = read_deltas(s.bootstrap, s.deltas)
    second = [{"del": [["edge", "a", "b"]], "id": "two"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job = run_until_through(s, "resume", "two", "--starting-offsets", '{"0": 1, "1": 0}')
    assert "continuing the stored state" in job.stderr(), job.tail()
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert rebuild(msgs) == remat(final_explicit(INITIAL, first + second)), job.tail()
    newer = msgs[len(before):]
    assert newer and min(m["batch"] for m in newer) > max(m["batch"] for m in before)

    # 2b. a restart on the new checkpoint goes on numbering after the stored batches
    third = [{"add": [["edge", "a", "f"]], "id": "three"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in third])
    job = run_until_through(s, "after-resume", "three")
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert rebuild(msgs) == remat(final_explicit(INITIAL, first + second + third)), job.tail()
    batches = [m["batch"] for m in msgs]
    assert batches == sorted(batches), batches

    # 3. the state emptied (Redis lost) while the checkpoint has read batches: refused
    client.delete(*(f"fluxmat:{s.namespace}:{k}" for k in STATE_KEYS))
    s.checkpoint = old_checkpoint
    assert_refused(start_job(s, "empty-state"), "is empty")
    assert client.hgetall(f"fluxmat:{s.namespace}:meta") == {}, "the refused job wrote a state"
    client.close()
