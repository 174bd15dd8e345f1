"""Program changes in the whole-stream job on the arrays core, with real parts only.

A real tansu broker, a real redis-server and a local Spark: a program message
in the updates topic; the job SIGKILLed right after it applied the change to its
engine, before the batch's commit (`FLUXMAT_CRASH_AT=program-change:*`,
stream/batch.py), and restarted with the original `--program` file. The program
in force after the restart is the changed one, the state equals remat of the
new program over the final explicit facts, and the deltas fold to it exactly
once (tests/support/pipeline.py `rebuild`: nothing added twice, nothing removed
that is absent). A program message that is the topic's last message is the
batch's `through`; a later restart derives with the changed program; a job
redeployed with a third program is refused with one line naming the stored
version.
"""

from __future__ import annotations

import random
import signal

import pytest

from tests.support.keyed_job import SLOW_START
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    PROGRAM,
    SPARK_TIMEOUT,
    assert_refused,
    check_initial,
    encode,
    final_explicit,
    make_setup,
    produce,
    random_updates,
    rebuild,
    remat,
    start_job,
    stored_meta,
    wait_for_through,
)

LOOP = "loop(X) :- path(X, X)."
TWO_HOPS = "twohop(X, Z) :- edge(X, Y), edge(Y, Z)."
ARGS = ("--core", "arrays", "--max-updates-per-batch", "3")


def _started(s, name: str, body, env=None):
    """Start the job and run `body(job)`; its result.

    A job that Spark stopped because a new Python worker took more than Spark's fixed
    10 s to connect back (a heavily loaded machine) is started again, three times at most:
    it goes on from its committed state, as any restart.
    """
    for attempt in range(4):
        job = start_job(s, f"{name}-{attempt}", env, *ARGS)
        try:
            return body(job)
        except (AssertionError, pytest.fail.Exception):
            if attempt == 3 or job.returncode is None or SLOW_START not in job.stderr():
                raise
        finally:
            job.cleanup()


def _run(s, name: str, target):
    def body(job):
        wait_for_through(s, job, target, timeout=SPARK_TIMEOUT)
        assert job.terminate() == 0, job.tail()
        return job

    return _started(s, name, body)


def test_sigkill_during_a_program_change_then_restarts_use_the_new_program(broker, redis_srv, tmp_path):  # noqa: F811
    s = make_setup(broker, redis_srv, tmp_path)
    rnd = random.Random(30)
    first = random_updates(rnd, 7, "a") + [{"program": {"add": LOOP}, "id": "v2"}] + random_updates(rnd, 4, "b")
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in first])

    def killed(job):
        assert job.wait(SPARK_TIMEOUT) == -signal.SIGKILL, job.tail()

    _started(s, "killed", killed, {"FLUXMAT_CRASH_AT": "program-change:*"})
    before = read_deltas(s.bootstrap, s.deltas)
    assert stored_meta(s)["program_version"] == 1  # the change was not committed, nor published
    assert not any(f[0] == "loop" for m in before for f in m["added"]), before

    # restarted with the original file; the topic ends with a program message
    second = random_updates(rnd, 5, "c") + [{"program": {"add": TWO_HOPS}, "id": "final"}]
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in second])
    job2 = _run(s, "restarted", "final")
    assert "restored state of batch" in job2.stderr(), job2.tail()
    meta = stored_meta(s)
    assert meta["program_version"] == 3 and meta["through"] == "final", meta
    assert [h["version"] for h in meta["program_history"]] == [2, 3]
    new_program = PROGRAM + LOOP + "\n" + TWO_HOPS + "\n"
    updates = [u for u in first + second if "program" not in u]
    explicit = final_explicit(INITIAL, updates)
    msgs = read_deltas(s.bootstrap, s.deltas)
    assert msgs[: len(before)] == before
    check_initial(msgs)
    assert rebuild(msgs) == remat(explicit, new_program), job2.tail()

    # a later restart (the original file again) derives with the changed program
    cycle = {"add": [["edge", "d", "a"], ["edge", "a", "d"]], "id": "after"}
    produce(s.bootstrap, s.updates, [(0, encode(cycle))])
    _run(s, "after-change", "after")
    explicit = final_explicit(explicit, [cycle])
    folded = rebuild(read_deltas(s.bootstrap, s.deltas))
    assert folded == remat(explicit, new_program) and ("loop", "a") in folded
    assert stored_meta(s)["program_version"] == 3

    # redeployed with a program that is neither the stored one nor its origin: refused, nothing changed
    other = tmp_path / "other.dl"
    other.write_text(PROGRAM + "far(X) :- path(a, X).\n", encoding="utf-8")
    line = assert_refused(start_job(s, "other", None, *ARGS, program=other), "program version 3")
    assert str(other) in line, line
    assert stored_meta(s)["program_version"] == 3
