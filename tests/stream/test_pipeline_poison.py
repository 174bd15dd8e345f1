"""The real job survives poison input: tansu, redis-server, local Spark, `fluxmat run`.

Without a dead-letter topic, the job is fed -- between valid updates -- a
malformed message, 100,000 nested arrays, a message over `--max-message-bytes`
and a runaway update (a `b` fact closing a cycle of the SSPE path-length rules:
without a limit it derives forever). It must stay up, log one line per dead
letter, publish the valid updates' deltas (which rebuild `remat`'s result) and,
restarted on the same checkpoint, neither fail nor re-apply the quarantined
update. The helpers are tests/support/pipeline.py's.
"""

from __future__ import annotations

import re

import pytest

from tests.support.pipeline import (
    INITIAL,
    PROGRAM,
    check_initial,
    encode,
    final_explicit,
    make_setup,
    produce,
    read_deltas,
    rebuild,
    remat,
    start_job,
    stored_explicit,
    wait_for_log,
    wait_for_through,
)

SSPE = PROGRAM + "d(Y, Z) :- b(a, Y, Z).\nd(Y, Z) :- d(X, Z1), b(X, Y, Z2), Z = Z1 + Z2.\n"
LIMITS = ("--max-message-bytes", "200000", "--max-facts", "3000", "--max-update-work", "30000")
VALID = [
    {"add": [["edge", "d", "e"], ["b", "a", "b1", 1], ["b", "b1", "c1", 2]], "id": "v1"},
    {"del": [["edge", "a", "b"]], "add": [["b", "c1", "x", 1]], "id": "v2"},
    {"add": [["edge", "f", "a"]], "id": "m1"},
]
RUNAWAY = {"add": [["b", "c1", "a", 1]]}  # a -> b1 -> c1 -> a: a new path length every lap
BAD = [  # raw value, what its dead letter's log line says
    (b"{not json", "invalid JSON"),
    (b"[" * 100_000, "nested deeper than 64 levels"),
    (encode({"add": [["edge", "a", "b"]], "id": "x" * 250_000}), "message too large: 250,"),
    (encode(RUNAWAY), " limit exceeded: "),
]
DEAD_LINE = re.compile(r"^fluxmat: WARNING: dead letter: partition (\d+) offset (\d+): (.*)$", re.M)


@pytest.fixture
def setup(broker, redis_srv, tmp_path):  # noqa: F811 - redis_srv is the imported fixture
    s = make_setup(broker, redis_srv, tmp_path)
    s.program.write_text(SSPE, encoding="utf-8")
    s.with_dead_letter_topic = False
    return s


def test_poison_input_neither_stops_the_job_nor_survives_a_restart(setup):
    s = setup
    job = start_job(s, "poisoned", None, *LIMITS)
    try:
        wait_for_log(job, "reading ")
        records = [VALID[0], *(raw for raw, _ in BAD), VALID[1], VALID[2]]
        metas = produce(s.bootstrap, s.updates,
                        [(0, r if isinstance(r, bytes) else encode(r)) for r in records])  # fmt: skip
        wait_for_through(s, job, "m1")
        assert job.returncode is None, f"the job stopped{job.tail()}"
        wait_for_log(job, "dead letter: partition 0 offset " + str(metas[len(BAD)].offset))
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    first_lines = DEAD_LINE.findall(job.stderr())
    assert "Traceback" not in job.stderr(), job.tail()
    assert [(int(p), int(o)) for p, o, _ in first_lines] == [
        (m.partition, m.offset) for m in metas[1 : 1 + len(BAD)]], job.tail()
    for (_, _, reason), (_, fragment) in zip(first_lines, BAD, strict=True):
        assert fragment in reason, (fragment, reason)
    msgs = read_deltas(s.bootstrap, s.deltas)
    check_initial(msgs)
    explicit = final_explicit(INITIAL, VALID)
    assert rebuild(msgs) == remat(explicit, SSPE), job.tail()
    assert stored_explicit(s) == explicit, "the committed state holds exactly the valid updates"
    assert read_deltas(s.bootstrap, s.dead) == [], "no dead-letter topic was given"

    more = [{"add": [["b", "x", "y", 2]]}, {"add": [["edge", "e", "f"]], "id": "m2"}]
    job2 = start_job(s, "restarted", None, *LIMITS)
    try:
        wait_for_log(job2, "restored state of batch")
        produce(s.bootstrap, s.updates, [(0, encode(u)) for u in more])
        wait_for_through(s, job2, "m2")
        assert job2.terminate() == 0, job2.tail()
    finally:
        job2.cleanup()
    again = DEAD_LINE.findall(job2.stderr())
    assert set(again) <= set(first_lines), "a restart only re-publishes a replayed batch's dead letters"
    explicit = final_explicit(INITIAL, VALID + more)
    assert rebuild(read_deltas(s.bootstrap, s.deltas)) == remat(explicit, SSPE), job2.tail()
    assert stored_explicit(s) == explicit and tuple(RUNAWAY["add"][0]) not in explicit


def test_an_initial_materialisation_over_max_facts_stops_the_job_with_exit_4(setup):
    job = start_job(setup, "too-many-facts", None, "--max-facts", "5")
    try:
        code = job.wait(90)
    finally:
        job.cleanup()
    err = job.stderr()
    lines = [ln for ln in err.splitlines() if ln.startswith("fluxmat: error:")]
    assert code == 4 and "Traceback" not in err, job.tail()
    assert len(lines) == 1 and "fact limit exceeded" in lines[0] and "--max-facts" in lines[0], err
