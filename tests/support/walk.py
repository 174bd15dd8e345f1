"""The walk of one update: every fluxmat function a whole-stream job's micro-batch enters, by layer.

`walk_one_update(redis_url)` runs a job's micro-batch as `foreachBatch` runs it
(`Job._one_batch` over the job's `WholeStream`, as `Job._micro_batches` opens it, its rows handed over as the
Arrow table Spark's `toArrow()` gives, a real Redis state store, the job's
`JobMetrics`), without Spark, and records with Python's profiling hook
(`sys.setprofile`) each call into fluxmat's packages, with its caller.
`Walk` counts them: the functions on the walk to the delta message (up to the
call that hands the delta to the publisher) and over the whole batch (the
engine's work counters and the observer after it), the engine's door
(engine/reasoner.py, engine/feed.py) counted and the engine below it apart,
and the calls that cross from one layer (engine, connectors, stream, ops) into
another. Comprehensions and lambdas are no hops and are not counted.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

import fluxmat
from fluxmat.connectors.message import Message
from fluxmat.connectors.state import RedisStateStore
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.job import Job, JobConfig
from fluxmat.stream.loading import load_reasoner

PROGRAM = "p(X, Y) :- e(X, Y).\np(X, Z) :- p(X, Y), e(Y, Z).\n"
UPDATE = {"add": [["e", "b", "c"]]}
LAYERS = ("engine", "connectors", "stream", "ops")
DOOR = ("reasoner.py", "feed.py")  # the engine's door: counted; the engine below it: apart


def _roots() -> dict[str, str]:
    return {name: str(Path(getattr(fluxmat, name).__file__).parent) + "/" for name in LAYERS}


@dataclass(frozen=True)
class Place:
    layer: str
    name: str  # layer/file.py:Qualified.name
    below_door: bool


class Recorder:
    """The profiling hook: (caller, callee) for each call into fluxmat."""

    def __init__(self):
        self.roots = _roots()
        self.calls: list[tuple[Place | None, Place]] = []
        self.published: int | None = None  # calls made before the delta reached the publisher

    def place(self, code) -> Place | None:
        if code.co_name.startswith("<"):  # <listcomp>, <genexpr>, <lambda>: no hop
            return None
        for layer, root in self.roots.items():
            if code.co_filename.startswith(root):
                rel = code.co_filename[len(root) :]
                below = layer == "engine" and not rel.startswith(DOOR)
                return Place(layer, f"{layer}/{rel}:{code.co_qualname}", below)
        return None

    def __call__(self, frame, event, arg) -> None:
        if event != "call":
            return
        here = self.place(frame.f_code)
        if here is None:
            return
        back = frame.f_back
        while back is not None and self.place(back.f_code) is None:
            back = back.f_back
        self.calls.append((self.place(back.f_code) if back is not None else None, here))


@dataclass
class Walk:
    """What one stretch of recorded calls crossed."""

    calls: list[tuple[Place | None, Place]]
    functions: list[str] = field(init=False)

    def __post_init__(self):
        self.functions = list(dict.fromkeys(c.name for _, c in self.calls if not c.below_door))

    def _crossings(self) -> set[tuple[Place, Place]]:
        return {(a, b) for a, b in self.calls if a is not None and a.layer != b.layer}

    def counts(self) -> dict[str, int]:
        crossings = self._crossings()
        return {
            "functions": len(self.functions),
            "engine's door": sum(f.startswith("engine/") for f in self.functions),
            "ops": sum(f.startswith("ops/") for f in self.functions),
            "engine below the door": len({c.name for _, c in self.calls if c.below_door}),
            "layer crossings": len({(a.name, b.name) for a, b in crossings}),
            "stream -> engine": len({(a.name, b.name) for a, b in crossings
                                     if a.layer == "stream" and b.layer == "engine"}),
            "engine -> stream": len({(a.name, b.name) for a, b in crossings
                                     if a.layer == "engine" and b.layer == "stream"}),
        }  # fmt: skip

    def text(self) -> str:
        return (
            json.dumps(self.counts(), indent=1) + "\n" + "\n".join(f"  {f}" for f in self.functions)
        )


class _Publisher:
    """Where the walk ends: the delta handed to the publisher (noted in the recorder)."""

    on_retry = None

    def __init__(self, recorder: Recorder):
        self.recorder, self.deltas = recorder, []

    def publish_delta(self, batch, through, added, removed, key=None, causes=None) -> int:
        self.deltas.append(added)
        if self.recorder.published is None:
            self.recorder.published = len(self.recorder.calls)
        return 1

    def publish_dead_letter(self, *args, **kw) -> None:
        pass


class _Rows:
    """A micro-batch as `foreachBatch` gets it, as far as the job reads it (`toArrow`)."""

    def __init__(self, offset: int, update: dict):
        value = json.dumps(update)
        self.row = Message(0, offset, None, value, 1_700_000_000_000 + offset, True, len(value))

    def toArrow(self) -> pa.Table:  # noqa: N802 - Spark's name
        return pa.table({name: [v] for name, v in zip(Message._fields, self.row, strict=True)})


def walk_one_update(redis_url: str) -> tuple[Walk, Walk]:
    """(to the delta message, the whole micro-batch) of `UPDATE`, after one batch that warms up."""
    tmp = Path(tempfile.mkdtemp(prefix="fluxmat-walk-"))
    (tmp / "p.dl").write_text(PROGRAM, encoding="utf-8")
    cfg = JobConfig(program=str(tmp / "p.dl"), redis=redis_url, namespace=f"walk-{tmp.name}",
                    bootstrap_servers="127.0.0.1:1", updates_topic="u", deltas_topic="d",
                    checkpoint=str(tmp / "checkpoint"), core="objects")  # fmt: skip  (the walk docs/walk.md draws)
    job = Job(cfg, log=lambda _msg: None)
    job.metrics = JobMetrics(cfg.program, cfg.algorithm, cfg.namespace, cfg.updates_topic)
    store = RedisStateStore(redis_url, cfg.namespace)
    recorder = Recorder()
    publisher = _Publisher(recorder)
    batches = job._micro_batches(
        load_reasoner(cfg, job.log), [("e", "a", "b")], store, publisher, False, {}
    )
    job._one_batch(batches, store, _Rows(0, {"add": [["e", "x", "y"]]}), 0)  # warm: first-use work
    recorder.published = None
    sys.setprofile(recorder)
    try:
        job._one_batch(batches, store, _Rows(1, UPDATE), 1)
    finally:
        sys.setprofile(None)
        store.close()
    assert publisher.deltas[-1], "the update's delta was not published"
    return Walk(recorder.calls[: recorder.published]), Walk(recorder.calls)
