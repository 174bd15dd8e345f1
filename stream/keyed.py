"""The keyed reasoning operator (`--partition-by message-key|graph`): one materialisation per key.

Each key of the stream (the Kafka message key of an update, or the named graph
of an N-Quads update) has its own materialisation mat(P, F ∪ E_key) of the
program P over the shared `--facts` F and the key's own explicit facts. F is
reference data every key shares: a key cannot delete a fact of F (the deletion
is dropped before the engine sees it and counted, `shared_deletes`), so a key
that asserted a fact of F and deletes it later keeps it, and its consequences,
because F holds it. A key's stored explicit facts are F ∪ E_key (F as the key
was built with). Keys never join, so they are reasoned about independently, in
Spark executor tasks:

    driver (foreachBatch)                      executor task -> its engine host (a process)
    df.repartition(n, key).mapInArrow(run) ->  rows by key, relayed; per key: the cached
       .collect()  (one summary row a key)       engine (or rebuilt from Redis), one
    commit the batch's key-less dead letters     BatchProcessor.process: commit to Redis
    and its id (the namespace state)             under the key's hash tag, publish
                                                 the key's delta with its message key

The engines live in engine hosts (stream.engine_host), one process per task
partition on each executor host, so a key meets its engine again whichever
Python worker Spark gives its task; the task only relays rows and summaries.
Each host keeps a bounded cache of engines (stream.key_engines, least recently used
first out, bounded by facts). A cached engine is used only when it is at the
key's last committed batch in Redis (`last_batch`, one HGET); otherwise it is
rebuilt from Redis (a miss), so any task may land anywhere, and a key whose
batch failed half-way drops its engine. Replays are per key: a replayed batch
(Spark retries a task, or the whole batch after a crash) finds the key's
stored batch id and re-publishes the key's stored output identically
(stream.batch). A key's first batch commits the shared facts' materialisation
with the batch's changes, and its first delta carries all of it.

Updates without a key are dead letters: the executors hand them to the driver,
which commits them with the batch id in the namespace's own state (so a replay
re-publishes them identically) and publishes them.

Program changes (the arrays core; stream.live_program) apply to every key,
lazily. A program message is sent without a key (one with a key is a dead
letter); the driver validates it against the program in force and commits the
new program, with its version and history, in the namespace's own state with
the batch. From the next batch on, every task is handed that program, and a key
whose state is at an older version takes it (the difference, as one change)
before its rows, in the same commit: its delta shows what the change did to it.
A key that is not touched keeps its old program and version in its state until
it is. So the change takes effect for a key at the first batch after the one
that carries it in which the key has an update.

Fault injection for tests: `FLUXMAT_FAIL_TASK=<batch>:<marker file>` makes the
first task of that batch whose keys were processed fail once (the marker
records it), as an executor crash would; Spark retries the task.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from fluxmat.connectors.files import decode_json, parse_update
from fluxmat.connectors.message import Message
from fluxmat.engine import FluxmatError, StateChanges
from fluxmat.stream import live_program
from fluxmat.stream.batch import BatchOutcome, DeadLetter

PARTITION_BY = ("none", "message-key", "graph")
NO_KEY = {
    "message-key": "update without a key: with --partition-by message-key every update needs a Kafka message key",
    "graph": "update without a named graph: with --partition-by graph every update is N-Quads in one named graph",
}  # fmt: skip
DEFAULT_CACHE_FACTS = 2_000_000  # facts of the engines one engine host keeps between batches

SUMMARY = ("kind string, key string, replayed boolean, updates long, adds long, deletes long, dead long, "
           "quarantined long, added long, removed long, seconds double, rebuild double, cache string, "
           "facts long, engines long, pid long, partition int, offset long, raw string, size long, "
           "detail string")  # fmt: skip


def key_of(row, mode: str) -> str | None:
    """The key of an update row (a `Message`), None when it has none."""
    message = Message.of(row)
    if mode == "message-key":
        return message.key or None
    from fluxmat.connectors.rdf import graph_of

    try:
        return graph_of(decode_json(message.value)) if message.value is not None else None
    except Exception:  # an invalid message has no graph: it is a dead letter without a key
        return None


def with_keys(mode: str, batches):
    """The first `mapInArrow` pass (graph keys): adds each row's key as a last column `k` (for the repartition)."""
    import pyarrow as pa

    for rb in batches:
        columns = [rb.column(i).to_pylist() for i in range(rb.num_columns)]
        keys = [key_of(row, mode) for row in zip(*columns, strict=True)] if rb.num_rows else []
        yield rb.append_column("k", pa.array(keys, pa.string()))


def run_partition(cfg, batch: int, batches, program: dict | None = None):
    """The function `mapInArrow` runs per task: its rows by key (last column), to the engine host.

    The keys' work is done by this task partition's engine host (stream.engine_host), where
    their engines stay between batches (`program`: the namespace's program in force, which
    a key behind it takes first); rows without a key go back to the driver.
    """
    import pyarrow as pa
    from pyspark import TaskContext

    from fluxmat.stream import engine_host

    groups: dict[str | None, list] = {}
    for rb in batches:
        columns = [rb.column(i).to_pylist() for i in range(rb.num_columns)]
        for row in zip(*columns, strict=True):
            groups.setdefault(row[-1], []).append(row[:-1])
    nokey = groups.pop(None, ())
    out = []
    if groups:
        start = time.perf_counter()
        out = engine_host.call(cfg, TaskContext.get().partitionId(), batch, groups, program)
        _fail_once(batch)
        out.append({"kind": "task", "seconds": time.perf_counter() - start, "pid": os.getpid(),
                    "updates": sum(len(rows) for rows in groups.values())})  # fmt: skip
    for m in map(Message.of, nokey):
        out.append({"kind": "nokey", "partition": m.partition, "offset": m.offset, "raw": m.value,
                    "size": m.size, "pid": os.getpid()})  # fmt: skip
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=_schema())


def _schema():
    import pyarrow as pa

    types = {"string": pa.string(), "boolean": pa.bool_(), "long": pa.int64(), "double": pa.float64(),
             "int": pa.int32()}  # fmt: skip
    return pa.schema([(name, types[kind]) for name, kind in (c.split() for c in SUMMARY.split(", "))])


def _fail_once(batch: int) -> None:
    spec = os.environ.get("FLUXMAT_FAIL_TASK")
    if not spec:
        return
    at, _, marker = spec.partition(":")
    if int(at) == batch and marker and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        raise RuntimeError(f"injected task failure in batch {batch} (FLUXMAT_FAIL_TASK)")


# ------------------------------------------------------------------ driver side
@dataclass
class KeyedBatch:
    """What the driver learns of one keyed micro-batch."""

    outcome: BatchOutcome
    keys: list[dict] = field(default_factory=list)  # one summary a key (see SUMMARY)
    tasks: list[float] = field(default_factory=list)  # seconds of each task that had keys


class KeyedDriver:
    """Plans each micro-batch onto the executors and commits what belongs to no key.

    `store` is the namespace's own state (batch ids, key-less dead letters),
    `publisher` the driver's (for those dead letters); a batch is split into
    `partitions` tasks by key (None: Spark's default parallelism). `on_phase` is
    told each phase the driver enters (stream.inflight.PHASES: tasks, check,
    commit, publish).
    """

    def __init__(self, cfg, store, publisher, partitions: int | None = None, on_phase=None):
        self.on_phase = on_phase or (lambda phase: None)
        self.cfg = cfg
        self.store = store
        self.publisher = publisher
        self.partitions = partitions
        self.base = 0
        self.program: dict | None = None  # the namespace's program in force (stream.live_program)
        self._read = False  # whether `program` was read from the store

    def process(self, df, batch_id: int) -> KeyedBatch:
        from pyspark.sql import functions as F

        start = time.perf_counter()
        cfg, batch, mode = self.cfg, batch_id + self.base, self.cfg.partition_by
        if mode == "message-key":
            keyed = df.withColumn("k", F.expr("nullif(key, '')"))
        else:  # the graph is inside the message: read by a first, stateless pass
            from fluxmat.connectors.message import SCHEMA

            keyed = df.mapInArrow(lambda it: with_keys(mode, it), SCHEMA + ", k string")
        tasks = self.partitions or df.sparkSession.sparkContext.defaultParallelism
        program = self.namespace_program()
        self.on_phase("tasks")
        rows = (keyed.repartition(tasks, "k")
                .mapInArrow(lambda it: run_partition(cfg, batch, it, program), SUMMARY)
                .collect())  # fmt: skip
        keys = [r.asDict() for r in rows if r["kind"] == "key"]
        tasks = [r["seconds"] for r in rows if r["kind"] == "task"]
        nokey = sorted((r for r in rows if r["kind"] == "nokey"), key=lambda r: (r["partition"], r["offset"]))
        self.on_phase("check")
        last = self.store.last_batch()
        if last is not None and batch <= last:
            stored = self.store.output(batch) or {}
            self.on_phase("publish")
            self._publish_dead(stored.get("dead", ()))
            dead = stored.get("dead", [])
        else:
            dead, changed = self.keyless(nokey, mode)
            self.on_phase("commit")
            self.commit(batch, dead, changed)
            self.on_phase("publish")
            self._publish_dead(dead)
        return KeyedBatch(self._outcome(batch, keys, dead, time.perf_counter() - start), keys, tasks)

    def commit(self, batch: int, dead: list, changed: dict | None) -> None:
        """Commit the batch id, its key-less dead letters, the program in force and the keys' core.

        The core is recorded so that a restart without `--core` goes on with
        it (stream.loading.settle_core reads the namespace's state).
        """
        output = {"through": None, "added": [], "removed": [], "dead": dead}
        self.store.commit(batch, StateChanges(meta={**(changed or {}), "core": self.cfg.core}), output)
        self.program = changed or self.program

    def namespace_program(self) -> dict | None:
        """The program in force for every key (None: the configured one), read from the store once."""
        if not self._read:
            self.program, self._read = live_program.namespace_program(self.store.state_meta()), True
        return self.program

    def keyless(self, rows: list, mode: str) -> tuple[list, dict | None]:
        """The dead letters of the batch's rows without a key, and the namespace's program meta if they changed it.

        A program message is applied to the namespace's program (stream.live_program); one that
        fails validation is a dead letter; any other row is a dead letter for its missing key.
        """
        dead, changed = [], None
        for r in rows:
            where = f"partition {r['partition']} offset {r['offset']}"
            reason, item, update = NO_KEY[mode], None, None
            try:
                item = decode_json(r["raw"]) if r["raw"] is not None else None
                update = parse_update(item, {}, where)
            except FluxmatError as exc:  # a program message that does not parse says so
                if isinstance(item, dict) and "program" in item:
                    reason = f"{exc}; nothing was changed"
            except Exception:  # not an update: a dead letter for its missing key
                pass
            if update is not None and update.program is not None:
                try:
                    changed = self._changed(changed, update)
                    continue
                except FluxmatError as exc:
                    reason = f"{where}: {exc}; nothing was changed"
            dead.append(DeadLetter.of(reason, r["partition"], r["offset"], r["raw"], r["size"]).stored())
        return dead, changed

    def _changed(self, changed: dict | None, update) -> dict:
        """The namespace's program meta after one program message (FluxmatError: refused)."""
        from fluxmat.stream.loading import load_reasoner

        reasoner = load_reasoner(self.cfg, log=lambda msg: None)
        if not live_program.changeable(reasoner):
            raise FluxmatError("program changes need the arrays core (--core arrays)")
        start = live_program.origin(reasoner.program)
        return live_program.changed_namespace(reasoner, changed or self.namespace_program(), update, start)

    def _publish_dead(self, dead) -> None:
        for item in dead:
            DeadLetter.read(item).publish(self.publisher)

    @staticmethod
    def _outcome(batch: int, keys: list[dict], dead: list, seconds: float) -> BatchOutcome:
        """The batch as one outcome for the observer (sums over keys; phases are CPU seconds summed)."""
        out = BatchOutcome(batch, replayed=bool(keys) and all(k["replayed"] for k in keys), seconds=seconds)
        letters = [list(d[:3]) for d in dead]
        for k in keys:
            for name in ("updates", "adds", "deletes", "dead", "quarantined", "added", "removed"):
                setattr(out, name, getattr(out, name) + (k[name] or 0))
            detail = json.loads(k["detail"] or "{}")
            for phase, s in detail.get("phases", {}).items():
                out.phases[phase] = out.phases.get(phase, 0.0) + s
            for name, n in detail.get("stats", {}).items():
                out.stats[name] = out.stats.get(name, 0) + n
            for name, n in detail.get("published", {}).items():
                out.published[name] += n
            for label, (applied, grown, _entries) in detail.get("rules", {}).items():
                a, g, _ = out.rules.get(label, (0, 0, 0))
                out.rules[label] = (a + applied, g + grown, 0)  # entries: per key, not summed
            out.timestamps_ms.extend(detail.get("timestamps", ()))
            letters.extend(detail.get("dead", ()))
        out.dead += len(dead)
        if out.timestamps_ms:
            out.oldest_timestamp_ms = min(out.timestamps_ms)
        out.output = {"through": None, "added": [], "removed": [], "dead": [DeadLetter.read(d).stored() for d in letters]}
        return out
