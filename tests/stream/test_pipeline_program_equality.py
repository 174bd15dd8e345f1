"""A live program change with equality in the whole-stream job, with real parts only.

A real tansu broker, a real redis-server and a local Spark: a job started with
`fluxmat run --core arrays --equality rewrite` gets updates; `fluxmat program
apply --equality rewrite` adds a rule deriving owl:sameAs (a functional
property: the classes grow, maintained in place), more updates; the job is
stopped and restarted with the original `--program` file (the stored program,
classes and rewritten facts go on); more updates, then `program apply` removes
the rule (classes split: a rebuild), more updates. After each step the folded
deltas equal `remat` with equality from scratch over the explicit facts and
the program in force (tests/support/pipeline.py `rebuild`: every delta exact).
"""

from __future__ import annotations

import random

import pytest

from fluxmat.engine import SAME_AS, Reasoner
from tests.support.cli import fluxmat, ok
from tests.support.keyed_job import SLOW_START
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    SPARK_TIMEOUT,
    encode,
    final_explicit,
    make_setup,
    produce,
    rebuild,
    start_job,
    stored_meta,
    wait_for_through,
)

OWL = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
PROGRAM = OWL + "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z).\n"
FUNCTIONAL = "owl:sameAs(Y, Z) :- boss(X, Y), boss(X, Z).\n"  # one boss each: two bosses are one
CHANGED = PROGRAM + FUNCTIONAL
INITIAL = [
    ("edge", "a", "b"),
    ("edge", "b", "c"),
    ("edge", "d", "e"),
    ("boss", "x", "a"),
    ("boss", "y", "d"),
]
POOL = [("edge", u, v) for u in "abcdef" for v in "abcdef" if u != v] + [
    ("boss", "y", v) for v in "bcef"
]
ARGS = ("--core", "arrays", "--equality", "rewrite", "--max-updates-per-batch", "3")


def _updates(rnd: random.Random, n: int, last: str, *extra: dict) -> list[dict]:
    """`extra`, then n random updates of edges and of y's bosses (x's stay), the last with id `last`."""
    out = list(extra)
    for _ in range(n):
        add = rnd.sample(POOL, rnd.randint(1, 3))
        out.append({"add": [list(f) for f in add],
                    "del": [list(f) for f in rnd.sample(POOL, 2) if f not in add]})  # fmt: skip
    out[-1]["id"] = last
    return out


class _Job:
    """The job, started again (from its committed state) when Spark stopped it because a new Python
    worker took more than Spark's fixed 10 s to connect back (a loaded machine): three times at most."""

    def __init__(self, s, name: str):
        self.s, self.name, self.attempt = s, name, 0
        self.proc = start_job(s, f"{name}-0", None, *ARGS)

    def wait_for(self, target: str) -> None:
        while True:
            try:
                wait_for_through(self.s, self.proc, target, timeout=SPARK_TIMEOUT)
                return
            except pytest.fail.Exception:
                slow = self.proc.returncode is not None and SLOW_START in self.proc.stderr()
                if self.attempt == 3 or not slow:
                    raise
            self.proc.cleanup()
            self.attempt += 1
            self.proc = start_job(self.s, f"{self.name}-{self.attempt}", None, *ARGS)

    def stop(self) -> None:
        """Stop it cleanly (SIGTERM: exit code 0)."""
        assert self.proc.terminate() == 0, self.proc.tail()


def _expected(explicit: set[tuple], program: str) -> set[tuple]:
    """mat(P, E) with owl:sameAs as equality, from scratch (the objects core's remat)."""
    ref = Reasoner.from_text(program, "remat", equality="rewrite")
    ref.load(sorted(explicit))
    return {tuple(f) for f in ref.facts()}


def _folded(s) -> set[tuple]:
    """The deltas folded, owl:sameAs written out (the deltas compact it with the program's prefix)."""
    return {
        (SAME_AS, *f[1:]) if f[0] == "owl:sameAs" else f
        for f in rebuild(read_deltas(s.bootstrap, s.deltas))
    }


def _apply(s, new, old, uid: str) -> None:
    ok(fluxmat("program", "apply", new, "--program", old, "--equality", "rewrite",
               "--bootstrap-servers", s.bootstrap, "--updates-topic", s.updates, "--id", uid))  # fmt: skip


def _step(s, job: _Job, updates: list[dict], explicit: set, program: str) -> set:
    """Send `updates`, wait for the last one's id; the folded deltas equal the expected state."""
    produce(s.bootstrap, s.updates, [(0, encode(u)) for u in updates])
    job.wait_for(updates[-1]["id"])
    explicit = final_explicit(explicit, updates)
    assert _folded(s) == _expected(explicit, program), job.proc.tail()
    return explicit


def test_a_job_with_equality_adds_and_removes_a_same_as_rule_and_keeps_it_over_a_restart(
    broker, redis_srv, tmp_path
):
    s = make_setup(broker, redis_srv, tmp_path)
    s.program.write_text(PROGRAM, encoding="utf-8")
    s.facts.write_text("".join(f"{p}({x}, {y}).\n" for p, x, y in INITIAL), encoding="utf-8")
    changed = tmp_path / "changed.dl"
    changed.write_text(CHANGED, encoding="utf-8")
    rnd = random.Random(27)

    job = _Job(s, "first")
    try:
        first = _updates(rnd, 4, "a-end", {"add": [["boss", "x", "b"]]})
        explicit = _step(s, job, first, set(INITIAL), PROGRAM)
        _apply(s, changed, s.program, "v2")  # the classes grow: {a, b}, x's bosses (in place)
        job.wait_for("v2")
        folded = _folded(s)
        assert folded == _expected(explicit, CHANGED), job.proc.tail()
        assert (SAME_AS, "a", "b") in folded and ("boss", "x", "b") in folded
        explicit = _step(s, job, _updates(rnd, 4, "b-end"), explicit, CHANGED)
        job.stop()
    finally:
        job.proc.cleanup()
    assert stored_meta(s)["program_version"] == 2

    job = _Job(s, "restarted")  # the original --program file: the stored program goes on
    try:
        explicit = _step(s, job, _updates(rnd, 3, "c-end"), explicit, CHANGED)
        assert "restored state of batch" in job.proc.stderr(), job.proc.tail()
        _apply(s, s.program, changed, "v3")  # the rule removed: {a, b} splits, a rebuild
        job.wait_for("v3")
        folded = _folded(s)
        assert folded == _expected(explicit, PROGRAM), job.proc.tail()
        assert (SAME_AS, "a", "b") not in folded
        explicit = _step(s, job, _updates(rnd, 3, "d-end"), explicit, PROGRAM)
        job.stop()
    finally:
        job.proc.cleanup()
    meta = stored_meta(s)
    assert meta["program_version"] == 3, meta
    assert [h["version"] for h in meta["program_history"]] == [2, 3], meta
    assert not read_deltas(s.bootstrap, s.dead, timeout=5), "a dead letter"
