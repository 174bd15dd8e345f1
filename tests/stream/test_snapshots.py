"""Local snapshots (stream.snapshots, connectors.snapshot_file): a restart uses one only when it holds the
state Redis committed; every other case is one log line and a restore from Redis, as without it."""

import json
import random

import pytest

from fluxmat.connectors import snapshot_file
from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.snapshots import Snapshots, default_dir

PROGRAM = "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z). src(X) :- edge(X, _), not edge(_, X)."
OTHER = "path(X, Y) :- edge(X, Y)."
POOL = [["edge", x, y] for x in "abcdef" for y in "abcdef"]


class Publisher:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append(
            (batch, through, sorted(map(json.dumps, added)), sorted(map(json.dumps, removed)))
        )

    def publish_dead_letter(self, *args, **kw):
        raise AssertionError(f"unexpected dead letter {args[:1]}")


def batches(seed=1, n=8, pool=POOL, offset=0):
    rnd, out = random.Random(seed), []
    for _ in range(n):
        rows = []
        for _ in range(rnd.randint(1, 4)):
            add = rnd.sample(pool, 2)
            msg = json.dumps({"add": add, "del": [f for f in rnd.sample(pool, 2) if f not in add]})
            rows.append((0, offset, None, msg, None))
            offset += 1
        out.append(rows)
    return out


@pytest.fixture
def store(redis_server, request):
    s = RedisStateStore(redis_server.url, namespace=request.node.name[:40])
    s.clear()
    yield s
    s.clear()
    s.close()


def run(store, todo, program=PROGRAM, snapshots=None, first=0):
    """A job's processor: started (from Redis or the snapshot), then the batches `todo` from `first`."""
    pub, lines = Publisher(), []
    proc = BatchProcessor(Reasoner.from_text(program, "fd-counting"), store, pub, budget=2)
    if snapshots is not None:
        snapshots.log = lines.append
    started = proc.start([("edge", "a", "b"), ("edge", "b", "c")], snapshots=snapshots)
    for i, rows in enumerate(todo, first):
        proc.process(i, rows)
    return proc, pub, started, lines


def test_a_restart_uses_the_snapshot_and_gives_the_same_deltas(redis_server, tmp_path):
    """Two namespaces with one history; one restarts from Redis, the other from its snapshot: the same deltas."""
    todo = batches()[:4] + batches(
        2, 4, POOL + [["edge", x, y] for x in "ghij" for y in "fghij"], 100
    )
    plain = RedisStateStore(redis_server.url, "same-plain")
    snap = RedisStateStore(redis_server.url, "same-snap")
    for s in (plain, snap):
        s.clear()
    run(plain, todo[:4])
    proc, _, _, _ = run(snap, todo[:4])
    snapshots = Snapshots(tmp_path, "same-snap")
    assert snapshots.write(proc.committed, proc.reasoner)
    _, from_redis, said_redis, _ = run(plain, todo[4:], first=4)
    restarted, from_snap, said_snap, lines = run(
        snap, todo[4:], snapshots=Snapshots(tmp_path, "same-snap"), first=4
    )
    assert "from the local snapshot" in said_snap and "from the local snapshot" not in said_redis
    assert lines == []
    assert from_snap.deltas == from_redis.deltas and len(from_snap.deltas) == 4
    fresh = Reasoner.from_text(PROGRAM, "fd-counting")
    fresh.restore(snap.load())  # what the restarted job committed, read back from Redis's texts
    assert fresh.facts() == restarted.reasoner.facts()


def _snapshotted(store, tmp_path, upto=3):
    """A job that ran `upto` batches and wrote its snapshot after the last."""
    todo = batches()
    proc, _, _, _ = run(store, todo[:upto])
    snapshots = Snapshots(tmp_path, store.prefix.split(":")[1])
    assert snapshots.write(proc.committed, proc.reasoner)
    return proc, snapshots, todo


def _restarted_from_redis(store, snapshots, proc):
    """Restart: exactly one line says why the snapshot was not used, and the state comes from Redis."""
    again, _, said, lines = run(
        store, [], snapshots=Snapshots(snapshots.path.parent, snapshots.namespace)
    )
    assert len(lines) == 1 and lines[0].startswith("local snapshot not used:"), lines
    assert "from the local snapshot" not in said and said.startswith("restored state of batch")
    assert again.reasoner.facts() == proc.reasoner.facts()
    return lines[0]


def test_a_snapshot_behind_redis_is_not_used(store, tmp_path):
    proc, snapshots, todo = _snapshotted(store, tmp_path)
    proc.process(3, todo[3])  # committed to Redis, no snapshot written
    line = _restarted_from_redis(store, snapshots, proc)
    assert "holds batch 2, the state store batch 3" in line


def test_a_snapshot_of_another_history_at_the_same_batch_is_not_used(store, tmp_path):
    """Redis reset and rebuilt from other updates up to the same batch id: the file is not that state."""
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    store.clear()
    again, _, _, _ = run(store, batches(seed=9)[:3])
    assert "not the state store's state of that batch" in _restarted_from_redis(
        store, snapshots, again
    )


def test_a_truncated_snapshot_is_not_used(store, tmp_path):
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    data = snapshots.path.read_bytes()
    snapshots.path.write_bytes(data[: len(data) - 100])
    assert " is truncated" in _restarted_from_redis(store, snapshots, proc)


def test_a_corrupted_snapshot_is_not_used(store, tmp_path):
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    data = bytearray(snapshots.path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snapshots.path.write_bytes(bytes(data))
    assert "CRC-32C mismatch" in _restarted_from_redis(store, snapshots, proc)


def test_a_snapshot_of_another_program_is_not_used(store, tmp_path):
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    other = Reasoner.from_text(OTHER, "fd-counting")
    other.load([("edge", "x", "y")])
    other.export_changes()
    snapshot_file.write(snapshots.path, other.state_columns(), proc.committed, snapshots.namespace)
    assert "written for another program or algorithm" in _restarted_from_redis(
        store, snapshots, proc
    )


def test_a_snapshot_of_another_version_is_not_used(store, tmp_path, monkeypatch):
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    monkeypatch.setattr(snapshot_file, "VERSION", snapshot_file.VERSION + 1)
    snapshots.write(proc.committed, proc.reasoner)
    monkeypatch.undo()
    assert f"layout version {snapshot_file.VERSION + 1}" in _restarted_from_redis(
        store, snapshots, proc
    )


def test_a_missing_snapshot_is_said_once(store, tmp_path):
    proc, snapshots, _ = _snapshotted(store, tmp_path)
    snapshots.path.unlink()
    assert "there is none at" in _restarted_from_redis(store, snapshots, proc)


def test_snapshots_come_every_n_batches_and_at_a_stop(store, tmp_path):
    todo = batches()
    proc, _, _, _ = run(store, [])
    snapshots = Snapshots(tmp_path, "n", every_batches=3, every_seconds=0)
    written = []
    for i, rows in enumerate(todo[:7]):
        proc.process(i, rows)
        if snapshots.after_batch(proc.committed, proc.reasoner):
            written.append(i)
    assert written == [2, 5]
    assert snapshots.after_batch(proc.committed, proc.reasoner, stopping=True)
    assert snapshot_file.read_header(snapshots.path)["batch"] == 6
    assert not snapshots.after_batch(
        proc.committed, proc.reasoner, stopping=True
    )  # already holds batch 6


def test_the_default_directory_is_under_a_local_checkpoint(tmp_path):
    assert default_dir(str(tmp_path)) == tmp_path / "fluxmat-snapshot"
    assert default_dir(f"file://{tmp_path}") == tmp_path / "fluxmat-snapshot"
    assert default_dir("s3a://bucket/ckpt") is None


def test_the_job_keeps_snapshots_with_redis_and_a_local_directory(tmp_path):
    from dataclasses import replace

    from fluxmat.stream.job import Job, JobConfig

    lines = []
    cfg = JobConfig(program="p.dl", bootstrap_servers="127.0.0.1:9", updates_topic="u", deltas_topic="d",
                    checkpoint=str(tmp_path / "ckpt"), redis="redis://127.0.0.1:9/0", namespace="ns")  # fmt: skip
    job = lambda **kw: Job(replace(cfg, **kw), log=lines.append)._snapshots()  # noqa: E731
    assert job().path == tmp_path / "ckpt" / "fluxmat-snapshot" / "ns.fluxmat-snapshot"
    assert job(snapshot_dir=str(tmp_path / "s")).path.parent == tmp_path / "s"
    assert job(snapshot_dir="off") is None and job(redis="memory://") is None and lines == []
    assert job(checkpoint="s3a://bucket/ckpt") is None and "give --snapshot-dir" in lines[0]
    assert job(checkpoint="s3a://bucket/ckpt", snapshot_dir=str(tmp_path)).path.parent == tmp_path
