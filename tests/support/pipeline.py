"""The streaming job as the end-to-end tests run it: setups, the job as a subprocess, waits, oracles.

A `Setup` is one test's files, topics, Redis namespace and checkpoint; `Proc` runs
`python -m fluxmat.ops.cli run ...` in its own session with logs in files; the waits
count the CPU time of the job's session (tests/support/job_budget.py), not wall time;
`remat`, `final_explicit` and `rebuild` give the expected and the published state.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest
from kafka import KafkaProducer

from fluxmat.client.kafka_config import NONE
from fluxmat.connectors.broker import ensure_topics
from fluxmat.engine import Reasoner
from tests.support.job_budget import Budget
from tests.support.messages import read_deltas

ROOT = Path(__file__).resolve().parent.parent.parent

PROGRAM = (
    "path(X, Y) :- edge(X, Y).\n"
    "path(X, Z) :- path(X, Y), edge(Y, Z).\n"
    "src(X) :- edge(X, _), not edge(_, X).\n"
)
OTHER_PROGRAM = PROGRAM + "loop(X) :- path(X, X).\n"
NODES = "abcdef"
POOL = [("edge", x, y) for x in NODES for y in NODES if x != y]
SIDE_POOL = [("edge", x, y) for x in "xyz" for y in "xyz" if x != y]  # partition 1, add-only
INITIAL = [("edge", "a", "b"), ("edge", "b", "c"), ("edge", "c", "d"), ("edge", "e", "a")]

# What a wait for a job allows: CPU seconds of the job's session (tests/support/job_budget.py), generous:
# a job uses ~35-50 CPU s from its start to its first micro-batch.
SPARK_TIMEOUT = 120.0
# The job's JVM compiles with C1 only and collects with one thread: a third less CPU for a
# job's start and first batches (the JIT's C2 threads were a third of a starting JVM's CPU).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_names = count()


@dataclass
class Setup:
    """Files, topics, namespace and checkpoint of one test's pipeline."""

    bootstrap: str
    redis_url: str
    program: Path
    facts: Path
    updates: str
    deltas: str
    dead: str
    namespace: str
    checkpoint: Path
    logs: Path
    with_dead_letter_topic: bool = True  # False: the job logs dead letters instead

    def args(self, *extra: str, program: Path | None = None) -> list[str]:
        dead = ["--dead-letter-topic", self.dead] if self.with_dead_letter_topic else []
        return [
            sys.executable, "-m", "fluxmat.ops.cli", "run", str(program or self.program),
            "--facts", str(self.facts),
            "--bootstrap-servers", self.bootstrap,
            "--updates-topic", self.updates, "--deltas-topic", self.deltas, *dead,
            "--redis", self.redis_url, "--namespace", self.namespace,
            "--checkpoint", str(self.checkpoint), "--trigger-interval", "200ms", *extra,
        ]  # fmt: skip


def stored_meta(s: Setup) -> dict:
    """The metadata of the state the job of `s` keeps in Redis (program version, batch, core, ...)."""
    from fluxmat.connectors.state import RedisStateStore

    store = RedisStateStore(s.redis_url, s.namespace)
    try:
        return store.state_meta()
    finally:
        store.close()


def make_setup(broker, redis_srv, directory: Path, kafka=NONE) -> Setup:
    n = next(_names)
    directory.mkdir(parents=True, exist_ok=True)
    program = directory / "path.dl"
    program.write_text(PROGRAM, encoding="utf-8")
    facts = directory / "facts.dl"
    facts.write_text("".join(f"edge({x}, {y}).\n" for _, x, y in INITIAL), encoding="utf-8")
    s = Setup(bootstrap=broker.bootstrap, redis_url=redis_srv.url, program=program, facts=facts,
              updates=f"updates{n}", deltas=f"deltas{n}", dead=f"dead{n}",
              namespace=f"pipeline{n}", checkpoint=directory / "checkpoint",
              logs=directory)  # fmt: skip
    ensure_topics(s.bootstrap, {s.updates: 2, s.deltas: 1, s.dead: 1}, kafka=kafka)
    return s


# ------------------------------------------------------------------ subprocesses


def job_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUXMAT_")}
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable, PYTHONUNBUFFERED="1")  # fmt: skip
    env.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)
    env.update(extra or {})
    return env


def _group_alive(pgid: int) -> bool:
    """Whether a non-zombie process of process group `pgid` still exists."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


class Proc:
    """A subprocess in its own session (the job and its Spark JVM), logs in files."""

    def __init__(self, args: list[str], logs: Path, name: str, env: dict | None = None):
        self.name = name
        self.out_path = logs / f"{name}.stdout"
        self.err_path = logs / f"{name}.stderr"
        self._out = open(self.out_path, "wb")  # noqa: SIM115
        self._err = open(self.err_path, "wb")  # noqa: SIM115
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env or job_env(), stdin=subprocess.DEVNULL,
                                     stdout=self._out, stderr=self._err, start_new_session=True)  # fmt: skip

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def stderr(self) -> str:
        if not self._err.closed:
            self._err.flush()
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def stdout(self) -> str:
        if not self._out.closed:
            self._out.flush()
        return self.out_path.read_text(encoding="utf-8", errors="replace")

    def tail(self, n: int = 4000) -> str:
        return (f"\n--- {self.name} stdout (end) ---\n{self.stdout()[-n:]}"
                f"\n--- {self.name} stderr (end) ---\n{self.stderr()[-n:]}")  # fmt: skip

    def budget(self, seconds: float) -> Budget:
        """A wait's limit: `seconds` of this job's CPU time (tests/support/job_budget.py)."""
        return Budget(self.proc.pid, seconds)  # its own session: the session id is its pid

    def wait(self, timeout: float) -> int:
        budget = self.budget(timeout)
        while True:
            try:
                return self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                if spent := budget.spent():
                    pytest.fail(f"{self.name} still running after {spent}{self.tail()}")

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM (the job's clean stop) and wait for the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def cleanup(self) -> None:
        """For `finally`: SIGTERM, then SIGKILL; then whatever is left of its group (the JVM)."""
        pgid = self.proc.pid
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            deadline = time.monotonic() + 5
            while _group_alive(pgid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _group_alive(pgid):
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                deadline = time.monotonic() + 5
                while _group_alive(pgid) and time.monotonic() < deadline:
                    time.sleep(0.1)
        finally:
            self._out.close()
            self._err.close()


def start_job(s: Setup, name: str, env: dict | None = None, *extra: str,
              program: Path | None = None) -> Proc:  # fmt: skip
    return Proc(s.args(*extra, program=program), s.logs, name, job_env(env))


# ------------------------------------------------------------------ Kafka helpers


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None]],
            delay: float = 0.0) -> list:  # fmt: skip
    """Send (partition, raw value) records in order; returns their RecordMetadata."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all",
                             max_in_flight_requests_per_connection=1)  # fmt: skip
    try:
        metas = []
        for partition, value in records:
            key = b"tombstone" if value is None else None  # kafka-python needs a key or a value
            metas.append(
                producer.send(topic, key=key, value=value, partition=partition).get(timeout=30)
            )
            if delay:
                time.sleep(delay)
        producer.flush()
        return metas
    finally:
        producer.close()


def encode(update: dict) -> bytes:
    return json.dumps(update).encode("utf-8")


def assert_refused(job: Proc, fragment: str, timeout: float = 90) -> str:
    """The job exits 1 with exactly one `fluxmat: error:` line containing `fragment`."""
    try:
        code = job.wait(timeout)
    finally:
        job.cleanup()
    err = job.stderr()
    assert code == 1, job.tail()
    assert "Traceback" not in err, job.tail()
    lines = [ln for ln in err.splitlines() if ln.startswith("fluxmat: error:")]
    assert len(lines) == 1 and fragment in lines[0], job.tail()
    return lines[0]


def run_until_through(s: Setup, name: str, target, *extra: str) -> Proc:
    """Start a job, wait for the delta `through` = target, stop it cleanly."""
    job = start_job(s, name, None, *extra)
    try:
        wait_for_through(s, job, target)
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    return job


def wait_for_log(job: Proc, text: str, timeout: float = SPARK_TIMEOUT) -> None:
    budget = job.budget(timeout)
    while text not in job.stderr():
        if job.returncode is not None:
            pytest.fail(
                f"{job.name} exited with {job.returncode} before logging {text!r}{job.tail()}"
            )
        if spent := budget.spent():
            pytest.fail(f"{job.name} did not log {text!r} within {spent}{job.tail()}")
        time.sleep(0.2)


def wait_for_through(s: Setup, job: Proc, target, timeout: float = SPARK_TIMEOUT) -> list[dict]:
    """Poll the deltas topic until a delta's `through` is `target`; returns all deltas."""
    budget = job.budget(timeout)
    while True:
        msgs = read_deltas(s.bootstrap, s.deltas, timeout=20)
        if any(m["through"] == target for m in msgs):
            return msgs
        if job.returncode is not None:
            pytest.fail(f"{job.name} exited with {job.returncode} before delta through={target!r}; "
                        f"last through {msgs[-1]['through'] if msgs else None}{job.tail()}")  # fmt: skip
        if spent := budget.spent():
            pytest.fail(f"no delta through={target!r} within {spent}{job.tail()}")
        time.sleep(0.4)


def finish_two_partitions(s: Setup, job: Proc) -> list[dict]:
    """Markers on partition 1 then 0, each awaited as `through` (see the module docstring)."""
    markers = [
        {"add": [list(SIDE_POOL[0])], "id": "final-1"},
        {"add": [["edge", "f", "a"]], "del": [["edge", "a", "b"]], "id": "final-0"},
    ]
    produce(s.bootstrap, s.updates, [(1, encode(markers[0]))])
    wait_for_through(s, job, "final-1")
    produce(s.bootstrap, s.updates, [(0, encode(markers[1]))])
    wait_for_through(s, job, "final-0")
    return markers


def wait_for_batch(s: Setup, job: Proc, batch: int, timeout: float = SPARK_TIMEOUT) -> None:
    budget = job.budget(timeout)
    while True:
        msgs = read_deltas(s.bootstrap, s.deltas, timeout=20)
        if any(m["batch"] >= batch for m in msgs):
            return
        if job.returncode is not None:
            pytest.fail(f"{job.name} exited with {job.returncode} before batch {batch}{job.tail()}")
        if spent := budget.spent():
            pytest.fail(f"no delta of batch {batch} within {spent}{job.tail()}")
        time.sleep(0.2)


# ------------------------------------------------------------------ reference and consumer


def random_updates(rnd: random.Random, n: int, prefix: str) -> list[dict]:
    """Overlapping adds/deletes over nodes a..f (for partition 0); about a third with ids."""
    out = []
    for i in range(n):
        add = rnd.sample(POOL, rnd.randint(0, 3))
        dele = [f for f in rnd.sample(POOL, rnd.randint(0, 3)) if f not in add]
        if not add and not dele:
            add = [rnd.choice(POOL)]
        upd: dict = {}
        if add:
            upd["add"] = [list(f) for f in add]
        if dele:
            upd["del"] = [list(f) for f in dele]
        if rnd.random() < 0.35:
            upd["id"] = f"{prefix}-{i}"
        out.append(upd)
    return out


def final_explicit(initial, updates: list[dict]) -> set[tuple]:
    """E after applying the updates in order (delete, then add)."""
    explicit = {tuple(f) for f in initial}
    for u in updates:
        explicit -= {tuple(f) for f in u.get("del", [])}
        explicit |= {tuple(f) for f in u.get("add", [])}
    return explicit


def remat(explicit, program: str = PROGRAM) -> set[tuple]:
    ref = Reasoner.from_text(program, "remat")
    ref.load(sorted(explicit))
    return {tuple(f) for f in ref.facts()}


def rebuild(msgs: list[dict]) -> set[tuple]:
    """A consumer: apply deltas in log order, each (batch, part) once.

    Also checks what a consumer relies on: a re-sent (batch, part) is identical
    to the first copy; a batch never shows up after a later batch was applied;
    every delta is exact (it adds only absent facts and removes only present
    ones); no batch id and no part is missing.
    """
    first: dict[tuple[int, int], dict] = {}
    current: set[tuple] = set()
    newest = None
    for m in msgs:
        key = (m["batch"], m["part"])
        if key in first:
            assert m == first[key], f"re-sent delta of batch {key} differs:\n{first[key]}\n{m}"
            continue
        assert newest is None or m["batch"] >= newest, (
            f"batch {m['batch']} arrives after batch {newest} was applied"
        )
        newest = m["batch"]
        first[key] = m
        added = {tuple(f) for f in m["added"]}
        removed = {tuple(f) for f in m["removed"]}
        assert not added & current, f"batch {key} adds present facts {added & current}"
        assert removed <= current, f"batch {key} removes absent facts {removed - current}"
        current = (current - removed) | added
    batches = sorted({b for b, _ in first})
    assert batches == list(range(-1, batches[-1] + 1)), f"batch ids are not contiguous: {batches}"
    for b in batches:
        parts = {first[(b, p)]["parts"] for bb, p in first if bb == b}
        assert len(parts) == 1, f"batch {b} has inconsistent part counts {parts}"
        (n,) = parts
        assert {p for bb, p in first if bb == b} == set(range(n)), f"batch {b} misses parts"
    return current


def stored_explicit(s: Setup) -> set[tuple]:
    """The explicit facts the job committed to Redis (as `fluxmat export` takes them out: JSON values)."""
    from fluxmat.ops.inspect import export_facts

    _batch, lines = export_facts(str(s.program), s.redis_url, s.namespace)
    return {tuple(json.loads(line)) for line in lines}


def explain_mismatch(s: Setup, rebuilt: set, explicit: set, msgs: list[dict]) -> str:
    """Where a wrong result comes from: E in Redis vs the expected E, and the deltas."""
    stored = stored_explicit(s)
    return (f"\nE in Redis minus expected E: {sorted(stored - explicit)}"
            f"\nexpected E minus E in Redis: {sorted(explicit - stored)}"
            f"\nrebuilt == remat(E in Redis): {rebuilt == remat(stored)}"
            f"\nrebuilt - expected: {sorted(rebuilt - remat(explicit))}"
            f"\nexpected - rebuilt: {sorted(remat(explicit) - rebuilt)}"
            f"\nbatches (batch, through): {[(m['batch'], m['through']) for m in msgs]}")  # fmt: skip


def check_initial(msgs: list[dict]) -> None:
    assert msgs, "no deltas"
    head = msgs[0]
    assert head["batch"] == -1 and head["part"] == 0, f"first delta is not batch -1: {head}"
    assert head["through"] is None and head["removed"] == [], head
    initial = [m for m in msgs if m["batch"] == -1]
    got = {tuple(f) for m in initial for f in m["added"]}
    assert got == remat(INITIAL), f"initial materialisation {sorted(got)}"


def demo_messages_valid(path: Path) -> int:
    """Every delta and dead letter the demo read (FLUXMAT_DEMO_MESSAGES) validates against its schema."""
    from tests.support.messages import check_message

    messages = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for message in messages:
        check_message(message)
    return len(messages)
