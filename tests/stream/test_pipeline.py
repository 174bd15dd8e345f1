"""End-to-end pipeline tests with real parts only (docs/streaming.md).

A real tansu broker, a real redis-server (AOF) and a local Spark, with the job
started as a user would: `python -m fluxmat.ops.cli run ...` in a subprocess. One broker
and one Redis per module; every test uses its own topics, Redis namespace and
checkpoint directory.

Ordering: the job orders updates within a Kafka partition only. The updates
topics have 2 partitions; updates whose order matters (random overlapping
adds/deletes of `edge` facts over nodes a..f) all go to partition 0, so the
expected explicit facts E are exact. Partition 1 only gets add-only updates over
a disjoint set of nodes (x, y, z) that nobody deletes, so their position relative
to partition 0 does not change E.

Completion: `through` of a delta is the id of the last update of its batch in
(partition, offset) order. A micro-batch does not necessarily reach the end of
every partition (the source plans it from possibly stale high watermarks), so
with two partitions a test finishes in two steps (`finish_two_partitions`): a
marker on partition 1, wait until it is `through`; then a marker on partition 0,
wait until it is `through` (partition 1 then has nothing new, so that batch's
last update is partition 0's, and partition 0 is read in order). With partition
0 only, waiting for the last update's id is enough.
"""

from __future__ import annotations

import random
import signal
import sys
import time

import pytest

from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    OTHER_PROGRAM,
    SIDE_POOL,
    SPARK_TIMEOUT,
    Proc,
    Setup,
    assert_refused,
    check_initial,
    demo_messages_valid,
    encode,
    explain_mismatch,
    final_explicit,
    finish_two_partitions,
    job_env,
    make_setup,
    produce,
    random_updates,
    rebuild,
    remat,
    start_job,
    wait_for_batch,
    wait_for_log,
    wait_for_through,
)
from tests.support.servers import free_port


@pytest.fixture
def setup(broker, redis_srv, tmp_path):
    return make_setup(broker, redis_srv, tmp_path)


# ------------------------------------------------------------------ 1. updates in, deltas out


def test_updates_in_deltas_out(setup):
    s = setup
    rnd = random.Random(1)
    main = random_updates(rnd, 40, "m")
    side = [{"add": [list(f) for f in rnd.sample(SIDE_POOL, 2)]} for _ in range(6)]
    mid = {"add": [list(SIDE_POOL[1])], "id": "mid"}

    def mixed(updates, sides):  # partition 1 records spread among partition 0's
        records = [(0, encode(u)) for u in updates]
        for i, u in enumerate(sides):
            records.insert(5 * i + 2, (1, encode(u)))
        return records

    job = start_job(s, "run")
    try:
        wait_for_log(job, "reading ")  # the query runs: updates now overlap micro-batches
        produce(s.bootstrap, s.updates, mixed(main[:20], side[:3]), delay=0.02)
        produce(s.bootstrap, s.updates, [(1, encode(mid))])  # after all others were acked
        wait_for_through(s, job, "mid")  # so the stream spans at least two micro-batches
        produce(s.bootstrap, s.updates, mixed(main[20:], side[3:]), delay=0.02)
        markers = finish_two_partitions(s, job)
        assert job.terminate() == 0, f"SIGTERM is a clean stop{job.tail()}"
        assert "stopped after" in job.stderr()
    finally:
        job.cleanup()
    msgs = read_deltas(s.bootstrap, s.deltas)
    check_initial(msgs)
    explicit = final_explicit(INITIAL, main + side + [mid, *markers])
    rebuilt = rebuild(msgs)
    assert rebuilt == remat(explicit), explain_mismatch(s, rebuilt, explicit, msgs) + job.tail()
    assert len({m["batch"] for m in msgs}) >= 3, "the updates span several micro-batches"
    assert msgs[-1]["through"] == "final-0", [(m["batch"], m["through"]) for m in msgs]
    dead = read_deltas(s.bootstrap, s.dead)
    assert dead == [], dead
    # the local checkpoint is written through the raw local file system: no `.crc` beside its logs
    logs = [p.name for p in (s.checkpoint / "commits").iterdir()]
    assert logs and not [p for p in s.checkpoint.rglob("*") if p.name.endswith(".crc")], logs


# ------------------------------------------------------------------ 2. crashes and restarts


def _crash_and_restart(s: Setup, crash, seed: int):
    """Run with a crash (FLUXMAT_CRASH_AT point, or SIGKILL), restart, finish.

    30 updates are in the topic before the first run (3 per micro-batch, so
    batches 0..9), 10 more are produced after the crash.
    """
    rnd = random.Random(seed)
    first = random_updates(rnd, 30, "a")
    second = random_updates(rnd, 9, "b") + [{"add": [["edge", "f", "a"]], "id": "final"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])
    env = {"FLUXMAT_CRASH_AT": f"{crash[0]}:{crash[1]}"} if isinstance(crash, tuple) else {}
    job = start_job(s, "crashing", env, "--max-updates-per-batch", "3")
    try:
        if isinstance(crash, tuple):
            code = job.wait(SPARK_TIMEOUT)
            assert code == 137, f"expected the injected crash (137), got {code}{job.tail()}"
        else:
            wait_for_batch(s, job, rnd.randint(2, 4))
            time.sleep(rnd.uniform(0, 0.5))
            job.proc.kill()
            assert job.wait(30) == -signal.SIGKILL
    finally:
        job.cleanup()
    before = read_deltas(s.bootstrap, s.deltas)
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job2 = start_job(s, "restarted", None, "--max-updates-per-batch", "3")
    try:
        msgs = wait_for_through(s, job2, "final")
        assert job2.terminate() == 0, job2.tail()
    finally:
        job2.cleanup()
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert msgs[: len(before)] == before
    check_initial(msgs)
    expected = remat(final_explicit(INITIAL, first + second))
    assert rebuild(msgs) == expected, job2.tail()
    assert sum(1 for m in msgs if m["batch"] == -1) == 1, "initial materialisation published again"
    return before, msgs, job2


CRASH_BATCH = 4
SCENARIOS = ["before-commit", "after-commit", "after-publish", "sigkill"]
# Scenarios run at once: each of their jobs needs ~35-50 CPU s to its first batch, mostly its
# JVM's start; four at once on 2 cores got none of them to a first batch in 400 s on a busy
# machine. Two at once use the cores as fully and get every job through.
CRASH_RUNS_AT_ONCE = 2


@pytest.fixture(scope="module")
def crash_runs(broker, redis_srv, tmp_path_factory):
    """The four crash scenarios, `CRASH_RUNS_AT_ONCE` at a time (each is two Spark runs).

    Each scenario has its own topics, namespace and checkpoint; the tests below
    check one scenario each. Maps scenario -> (before, msgs, restarted job) or
    the exception it raised.
    """
    from concurrent.futures import ThreadPoolExecutor

    sigkill_seed = random.randrange(1_000_000)
    print(f"sigkill scenario seed {sigkill_seed}")

    def scenario(name: str):
        s = make_setup(broker, redis_srv, tmp_path_factory.mktemp(f"crash-{name}"))
        crash = "sigkill" if name == "sigkill" else (name, CRASH_BATCH)
        try:
            return _crash_and_restart(s, crash, seed=sigkill_seed if name == "sigkill" else 10)
        except BaseException as exc:  # pytest.fail raises a BaseException
            return exc

    with ThreadPoolExecutor(CRASH_RUNS_AT_ONCE) as pool:
        return dict(zip(SCENARIOS, pool.map(scenario, SCENARIOS), strict=True))


def _result(crash_runs, name: str):
    result = crash_runs[name]
    if isinstance(result, BaseException):
        raise result
    return result


@pytest.mark.parametrize("point", ["before-commit", "after-commit", "after-publish"])
def test_crash_at_commit_protocol_points(crash_runs, point):
    before, msgs, job2 = _result(crash_runs, point)
    published_before = {m["batch"] for m in before}
    if point == "after-publish":
        assert CRASH_BATCH in published_before
        copies = [m for m in msgs if m["batch"] == CRASH_BATCH]
        assert len(copies) == 2 * copies[0]["parts"], "the replayed batch is re-published"
    else:
        assert max(published_before) == CRASH_BATCH - 1, f"published before crash: {published_before}"
    restored = CRASH_BATCH - 1 if point == "before-commit" else CRASH_BATCH
    assert f"restored state of batch {restored}" in job2.stderr(), job2.tail()


def test_sigkill_mid_stream(crash_runs):
    _, msgs, job2 = _result(crash_runs, "sigkill")
    assert "restored state of batch" in job2.stderr(), job2.tail()


# ------------------------------------------------------------------ 3. Redis restart


def test_state_survives_redis_restart_with_aof(setup, redis_srv):
    import redis

    s = setup
    rnd = random.Random(3)
    first = random_updates(rnd, 15, "p") + [{"add": [["edge", "d", "f"]], "id": "one"}]
    second = random_updates(rnd, 15, "q") + [{"del": [["edge", "a", "b"]], "id": "two"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])
    job = start_job(s, "before-redis-restart")
    try:
        wait_for_through(s, job, "one")
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    last = redis.Redis.from_url(s.redis_url).hget(f"fluxmat:{s.namespace}:meta", "batch")
    redis_srv.stop(kill=True)  # kill -9: only the AOF survives
    redis_srv.start()
    client = redis.Redis.from_url(s.redis_url)
    assert client.hget(f"fluxmat:{s.namespace}:meta", "batch") == last, "AOF did not restore"
    client.close()
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job2 = start_job(s, "after-redis-restart")
    try:
        wait_for_through(s, job2, "two")
        assert job2.terminate() == 0, job2.tail()
    finally:
        job2.cleanup()
    assert f"restored state of batch {int(last)}" in job2.stderr(), job2.tail()
    msgs = read_deltas(s.bootstrap, s.deltas)
    check_initial(msgs)
    assert sum(1 for m in msgs if m["batch"] == -1) == 1
    assert rebuild(msgs) == remat(final_explicit(INITIAL, first + second)), job2.tail()


# ------------------------------------------------------------------ 4. dead letters


def test_dead_letters_and_the_job_keeps_going(setup):
    s = setup
    good1 = {"add": [["edge", "d", "e"]], "id": "good1"}
    bad = [  # raw value, expected fragment of the reason (None: any reason)
        (b"{not json", "invalid JSON"),
        (b"[1, 2]", "expected an update object"),
        (encode({"add": [], "remove": [["edge", "a", "b"]]}), "unknown key 'remove'"),
        (encode({"add": [["edge", "a"]]}), "has 1 argument but predicate edge has 2"),
        (encode({"add": [["edge", "a", "f"]], "del": [["edge", "a", "f"]]}), "both added and deleted"),
        (b"\xff\xfe\x00{", "not valid UTF-8"),  # not UTF-8, not JSON
        (b'{"add": [["edge", "\xff\xfe", "a"]]}', "not valid UTF-8"),  # not UTF-8 inside a JSON string
        (b"", "invalid JSON"),  # empty value
        (None, "expected an update object"),  # tombstone (null value)
    ]
    job = start_job(s, "dead-letters")
    try:
        # good1 first on partition 0, the bad records spread over both partitions, then
        # valid markers on both partitions (all records before them are processed)
        records = [(i % 2, raw) for i, (raw, _) in enumerate(bad, start=1)]
        metas = produce(s.bootstrap, s.updates, [(0, encode(good1)), *records])
        markers = finish_two_partitions(s, job)
        deadline = time.monotonic() + 10  # published right after the batch's delta
        while len(dead := read_deltas(s.bootstrap, s.dead)) < len(bad):
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert job.returncode is None, f"the job stopped{job.tail()}"
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    by_source = {(d["source"]["partition"], d["source"]["offset"]): d for d in dead}
    for meta, (raw, reason) in zip(metas[1:], bad, strict=True):
        d = by_source.get((meta.partition, meta.offset))
        assert d is not None, (f"no dead letter for {raw!r} (partition {meta.partition}, offset "
                               f"{meta.offset}); dead letters: {dead}")  # fmt: skip
        assert reason is None or reason in d["reason"], (raw, d)
        assert d["reason"], (raw, d)
        expected_raw = None if raw is None else raw.decode("utf-8", errors="replace")
        assert d["raw"] == expected_raw, (raw, d)
        # the job does not pass the source topic to the publisher (see report)
        assert d["source"]["topic"] in (None, s.updates), d
    assert len(dead) == len(bad), dead
    msgs = read_deltas(s.bootstrap, s.deltas)
    check_initial(msgs)
    rebuilt = rebuild(msgs)
    assert rebuilt == remat(final_explicit(INITIAL, [good1, *markers]))
    assert ("edge", "f", "a") in rebuilt and ("edge", "a", "b") not in rebuilt


# ------------------------------------------------------------------ 5. unavailable services


def _assert_clear_failure(job: Proc, address: str) -> None:
    started = job.started
    code = job.wait(40)
    elapsed = time.monotonic() - started
    err = job.stderr()
    assert code != 0, job.tail()
    assert elapsed < 20, f"took {elapsed:.1f} s to fail{job.tail()}"
    assert "Traceback" not in err, job.tail()
    lines = [ln for ln in err.splitlines() if ln.startswith("fluxmat: error:")]
    assert len(lines) == 1, job.tail()
    assert address in lines[0], lines[0]


def test_dead_broker_port(setup):
    s = setup
    port = free_port()
    s.bootstrap = f"127.0.0.1:{port}"
    job = start_job(s, "dead-broker")
    try:
        _assert_clear_failure(job, f"127.0.0.1:{port}")
    finally:
        job.cleanup()


def test_dead_redis_port(setup):
    s = setup
    port = free_port()
    s.redis_url = f"redis://127.0.0.1:{port}/0"
    job = start_job(s, "dead-redis")
    try:
        _assert_clear_failure(job, f"127.0.0.1:{port}")
    finally:
        job.cleanup()


# ------------------------------------------------------------------ 6. demo


def test_demo(tmp_path):
    dump = tmp_path / "messages.jsonl"
    demo = Proc([sys.executable, "-m", "fluxmat.ops.cli", "demo"], tmp_path, "demo",
                job_env({"FLUXMAT_DEMO_MESSAGES": str(dump)}))  # fmt: skip
    try:
        code = demo.wait(240)
    finally:
        demo.cleanup()
    lines = demo.stdout().strip().splitlines()
    assert code == 0, demo.tail()
    assert demo_messages_valid(dump) > 1
    assert lines and lines[-1].startswith("summary:"), demo.tail()
    assert "(equals a from-scratch evaluation)" in lines[-1], demo.tail()


# ------------------------------------------------------------------ 7. state of another program


def test_state_built_for_another_program(setup):
    import redis

    s = setup
    job = start_job(s, "first-program")
    try:
        # the initial state is committed to Redis before Spark starts; no need to wait for Spark
        wait_for_log(job, "initial materialisation")
        job.proc.kill()
    finally:
        job.cleanup()
    client = redis.Redis.from_url(s.redis_url, decode_responses=True)
    meta = client.hgetall(f"fluxmat:{s.namespace}:meta")
    assert meta.get("batch") == "-1", meta
    other = s.logs / "other.dl"
    other.write_text(OTHER_PROGRAM, encoding="utf-8")
    assert_refused(start_job(s, "other-program", program=other), "another program")
    assert client.hgetall(f"fluxmat:{s.namespace}:meta") == meta, "the refused job changed the state"
    client.close()
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert [m["batch"] for m in msgs] == [-1], "the refused job published something"
