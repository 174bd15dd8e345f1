"""The per-micro-batch logic of the streaming job: plain Python, testable without Spark.

For each micro-batch (rows `(partition, offset, key, value, timestamp, utf8)` from
the updates topic; `utf8` is False for values that are not valid UTF-8):

1. A batch whose id is <= the last committed one is a replay (Spark re-runs a
   batch after a crash): nothing is applied; its stored output is re-published
   identically, so consumers that deduplicate by `batch` see each change once.
2. Each message is parsed and validated; a bad one (invalid JSON, not an update,
   unknown key, wrong arity, a fact both added and deleted) becomes a dead letter
   with the reason and its source offset. The others are submitted to the fully
   dynamic engine in (partition, offset) order, with `budget` units of work
   between submissions, so their processing overlaps.
3. At the end of the batch the engine runs to quiescence (a barrier), so every
   committed state is a consistency point equal to mat(P, E) of the last update.
4. The state changes, the batch id and the batch's output are committed to the
   state store in one transaction; only then is the output published. A crash
   before the commit loses nothing (the batch is replayed on a state without it);
   a crash after it re-publishes the same output on replay.

The first output (batch -1) is the initial materialisation of `--facts`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from connectors.files import parse_update
from connectors.rdf import Triples
from connectors.state import INITIAL
from engine import FluxmatError, Reasoner
from engine.fd import FullyDynamic
from engine.fd.snapshot import StateMismatch, check_fingerprint, export_changes, restore
from engine.printer import FactPrinter
from engine.syntax import json_value

INITIAL_BATCH = INITIAL  # the initial materialisation's batch id
__all__ = ["INITIAL_BATCH", "BatchOutcome", "BatchProcessor", "StateMismatch"]


def _crash_point(point: str, batch: int) -> None:
    """Fault injection for crash tests.

    `FLUXMAT_CRASH_AT=<point>:<batch>` kills the process (as SIGKILL would: no
    cleanup) when batch `<batch>` reaches `<point>` (`before-commit`,
    `after-commit`, `after-publish`). Unset in production.
    """
    spec = os.environ.get("FLUXMAT_CRASH_AT")
    if spec and spec == f"{point}:{batch}":
        os._exit(137)


@dataclass
class BatchOutcome:
    batch: int
    replayed: bool = False
    updates: int = 0
    adds: int = 0  # fact operations in the applied updates
    deletes: int = 0
    peak_pending: int = 0  # largest backlog of engine operations during the batch
    dead: int = 0
    added: int = 0
    removed: int = 0
    through: object = None
    seconds: float = 0.0
    oldest_timestamp_ms: int | None = None
    stats: dict[str, int] = field(default_factory=dict)
    output: dict | None = field(default=None, repr=False)  # what was published


class BatchProcessor:
    """Applies micro-batches of update messages to a fully dynamic engine.

    Args:
        reasoner: a `Reasoner` whose maintainer is `fd-dred` or `fd-counting`.
        store: a state store (connectors.state).
        publisher: has `publish_delta(batch, through, added, removed)` and
            `publish_dead_letter(reason, partition, offset, raw)`.
        budget: units of work between two submitted updates.
        progress: optional callable receiving the engine's pending operations
            after each submitted update (the job's metrics sample it).
        delta_format: `json` (facts as JSON arrays) or `ntriples` (a fact that is a
            triple as its N-Triples line, connectors.rdf; any other as a JSON array).
    """

    def __init__(self, reasoner: Reasoner, store, publisher, budget: int = 1000, progress=None,
                 delta_format: str = "json"):  # fmt: skip
        if not isinstance(reasoner.maintainer, FullyDynamic):
            raise FluxmatError(
                f"the streaming job needs a fully dynamic algorithm (fd-dred or fd-counting), "
                f"not {reasoner.maintainer.name}"
            )
        self.reasoner = reasoner
        self.engine: FullyDynamic = reasoner.maintainer
        self.engine.configure(interleaved=True)
        self.store = store
        self.publisher = publisher
        self.budget = budget
        self.progress = progress
        self.base = 0  # added to Spark's batch ids (see connectors.state: rebase)
        self.printer = FactPrinter(reasoner.program.prefixes)
        self.triples = Triples() if delta_format == "ntriples" else None

    # ------------------------------------------------------------ start
    def start(self, initial_facts: list[tuple]) -> str:
        """Rebuild the engine from the store, or load the initial facts; returns what happened."""
        snap = self.store.load()
        if snap is not None:
            check_fingerprint(self.engine, snap)
            restore(self.engine, snap)
            self.base = int(snap.meta.get("base", 0) or 0)
            batch = self.store.last_batch()
            return f"restored state of batch {batch}: {sum(len(r) for r in self.engine.I.values())} facts"
        self.reasoner.load(initial_facts)
        added = [self._wire(f) for f in self.engine.facts()]
        output = {"through": None, "added": added, "removed": [], "dead": []}
        self.store.commit(INITIAL_BATCH, export_changes(self.engine), output)
        self._publish(INITIAL_BATCH, output)
        return f"initial materialisation: {len(added)} facts"

    # ------------------------------------------------------------ batches
    def process(self, batch_id: int, rows: list) -> BatchOutcome:
        """Apply one micro-batch (Spark's `batch_id`) and publish its delta."""
        start = time.perf_counter()
        batch = batch_id + self.base
        last = self.store.last_batch()
        if last is not None and batch <= last:
            stored = self.store.output(batch)
            if stored is not None:
                self._publish(batch, stored)
            return BatchOutcome(batch, replayed=True, seconds=time.perf_counter() - start)
        before = self.engine.stats.as_dict()
        outcome = BatchOutcome(batch)
        dead: list[list] = []
        for row in sorted(rows, key=lambda r: (r[0], r[1])):
            partition, offset, value, ts = row[0], row[1], row[3], row[4]
            where = f"partition {partition} offset {offset}"
            if len(row) > 5 and row[5] is False:
                dead.append(["value is not valid UTF-8", partition, offset, value])
                continue
            try:
                item = json.loads(value) if value is not None else None
            except ValueError as exc:
                dead.append([f"invalid JSON: {exc}", partition, offset, value])
                continue
            try:
                upd = parse_update(item, self.reasoner.prefixes, where)
                uid = upd.id if upd.id is not None else f"{partition}:{offset}"
                self.engine.submit(upd.add, upd.delete, id=uid)
            except FluxmatError as exc:
                dead.append([str(exc), partition, offset, value])
                continue
            outcome.updates += 1
            outcome.adds += len(upd.add)
            outcome.deletes += len(upd.delete)
            if ts is not None:
                oldest = outcome.oldest_timestamp_ms
                outcome.oldest_timestamp_ms = ts if oldest is None else min(oldest, ts)
            outcome.peak_pending = max(outcome.peak_pending, self.engine.pending)
            self.engine.step(self.budget)
            if self.progress is not None:
                self.progress(self.engine.pending)
        self.engine.run()
        if self.progress is not None:
            self.progress(0)
        point = self.engine.poll()
        output = {
            "through": self.engine.last_id,
            "added": [self._wire(f) for f in point.added],
            "removed": [self._wire(f) for f in point.removed],
            "dead": dead,
        }
        _crash_point("before-commit", batch)
        self.store.commit(batch, export_changes(self.engine), output)
        _crash_point("after-commit", batch)
        self._publish(batch, output)
        _crash_point("after-publish", batch)
        now = self.engine.stats.as_dict()
        outcome.stats = {k: now[k] - before[k] for k in now}
        outcome.dead = len(dead)
        outcome.added, outcome.removed = len(point.added), len(point.removed)
        outcome.through = output["through"]
        outcome.output = output
        outcome.seconds = time.perf_counter() - start
        return outcome

    # ------------------------------------------------------------ output
    def _wire(self, fact: tuple) -> list | str:
        """A fact as on the wire: `[pred, arg, ...]`, IRIs as "<...>", prefixes compacted.

        With `delta_format="ntriples"`, a fact that is a triple is its N-Triples line.
        """
        if self.triples is not None:
            triple = self.triples.triple(fact)
            if triple is not None:
                return f"{triple} ."
        pred = self.printer.pred(fact[0])
        if pred.startswith("<") and pred.endswith(">"):
            pred = pred[1:-1]
        return [pred, *map(json_value, fact[1:])]

    def _publish(self, batch: int, output: dict) -> None:
        self.publisher.publish_delta(batch, output["through"], output["added"], output["removed"])
        for reason, partition, offset, raw in output.get("dead", ()):
            self.publisher.publish_dead_letter(reason, partition, offset, raw)

    def facts(self) -> set[tuple]:
        return set(self.engine.facts())
