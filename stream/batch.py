"""The per-micro-batch logic of the streaming job: plain Python, testable without Spark.

For each micro-batch (rows `(partition, offset, key, value, timestamp, utf8,
size)` from the updates topic; `utf8` is False for values that are not valid
UTF-8, `size` is the value's length in bytes, the value cut short when the
source was told a maximum):

1. A batch whose id is <= the last committed one is a replay (Spark re-runs a
   batch after a crash): nothing is applied; its stored output is re-published
   identically, so consumers that deduplicate by `batch` see each change once.
2. Each message is decoded and validated; a bad one becomes a dead letter with
   the reason and its source offset. Bad means: larger than `max_message_bytes`
   (not parsed at all), not UTF-8, invalid or refused JSON
   (connectors.files.decode_json: too deep, huge integers, duplicate keys), not
   an update, an unknown key, a wrong arity, a fact both added and deleted --
   and any exception raised while decoding or validating that one message,
   whatever its type (RecursionError, MemoryError, ...). The raw value a dead
   letter carries is cut to `DEAD_RAW_CHARS` characters (`truncated`), its
   reason to `REASON_CHARS`, so that it fits in a Kafka message.
3. The valid updates are submitted to the fully dynamic engine in (partition,
   offset) order, with `budget` units of work between submissions, so their
   processing overlaps; at the end the engine runs to quiescence (a barrier), so
   every committed state is a consistency point equal to mat(P, E) of the last
   update.
4. The state changes, the batch id and the batch's output (delta and dead
   letters) are committed to the state store in one transaction; only then is
   the output published. A crash before the commit loses nothing (the batch is
   replayed on a state without it); a crash after it re-publishes the same
   output on replay. Dead letters are part of the committed output, so they are
   published (or, without a dead-letter topic, logged) again on replay, never
   lost and never re-decided.

Quarantine (engine.limits). The engine charges every unit of work to the update
it belongs to; when an update's work passes `limits.work`, or the
materialisation passes `limits.facts`, the engine raises. The batch is then
re-run on the last committed state: the engine is rebuilt from the store
(`restore`), and the batch's updates are applied again *one at a time*, each to
quiescence, so the work and facts charged to an update are exactly its own (with
overlapping updates a unit may find facts of another update, so the first blame
is a suspicion only). An update that breaches a limit in this sequential re-run
is quarantined -- a dead letter with the limit's reason -- and the re-run starts
again without it, until one completes (at most one re-run per quarantined
update, plus two). So the committed state is exactly mat(P, E) for E = the
committed E changed by the batch's valid, non-quarantined updates in order: the
same as `remat` over those updates, as if the quarantined ones had never
arrived. A breach costs rebuilding from the store and losing the batch's
overlap; batches without one run as before.

Program messages (`{"program": ...}`, the arrays core only; stream.live_program):
applied at their place in the batch, after the updates before them are
integrated; the batch's delta includes what they changed. One that fails
validation is a dead letter; one that runs out of a limit is quarantined. The
program in force is committed in the state's metadata, and a restart (or a
re-run) rebuilds the engine with the committed program before the facts.

The first output (batch -1) is the initial materialisation of `--facts`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fluxmat.client.fold import cause_runs
from fluxmat.connectors.delta_codec import DeltaCodec, grouped
from fluxmat.connectors.files import Update
from fluxmat.connectors.message import Messages
from fluxmat.connectors.state import INITIAL
from fluxmat.engine import Fed, FluxmatError, PointRows, Reasoner, StateMismatch
from fluxmat.engine.limits import LimitExceeded, Limits
from fluxmat.stream import live_program
from fluxmat.stream.batch_decode import (
    DEAD_LETTER_KINDS,
    DEAD_RAW_CHARS,
    DEFAULT_MAX_MESSAGE_BYTES,
    OTHER_KIND,
    REASON_CHARS,
    DeadLetter,
    Decoded,
    Decoder,
    dead_letter_kind,
)
from fluxmat.stream.batch_outcome import BatchOutcome, Clock, crash_point

INITIAL_BATCH = INITIAL  # the initial materialisation's batch id
__all__ = ["DEAD_LETTER_KINDS", "DEAD_RAW_CHARS", "DEFAULT_MAX_MESSAGE_BYTES", "INITIAL_BATCH", "OTHER_KIND",
           "REASON_CHARS", "BatchOutcome", "BatchProcessor", "DeadLetter", "StateMismatch",
           "dead_letter_kind"]  # fmt: skip


_CATCH_UP = -1  # a _Breach's index when a key's catch-up to its namespace's program failed


class _Breach(Exception):
    """An update of the batch (row `index`) ran out of a limit (`reason`)."""

    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason


class BatchProcessor:
    """Applies micro-batches of update messages to a fully dynamic engine.

    Args:
        reasoner: a `Reasoner` running `fd-dred` or `fd-counting`; its options
            (engine.options) give the budget (units of work between two
            submitted updates) and the limits: an update that exceeds them is
            quarantined (see the module docstring); the fact limit also applies
            to the initial load, and a restored state must be within it.
        store: a state store (connectors.state).
        publisher: has `publish_delta(batch, through, added, removed)` (with
            `key=` for a key's stream, `causes=` when facts have single causes:
            connectors.kafka_sink), which returns the number of messages it
            sent (None counts as one), and
            `publish_dead_letter(reason, partition, offset, raw, truncated=False)`.
        budget, limits: when given, replace the reasoner's options of that name.
        progress: optional callable receiving the engine's pending operations
            after each submitted update (the job's metrics sample it).
        max_message_bytes: larger messages are dead letters, not parsed.
        delta_format: `json` (facts as JSON arrays) or `ntriples` (a fact that is a
            triple as its N-Triples line, connectors.rdf; any other as a JSON array).
        key: the key of the stream this processor keeps (`--partition-by`,
            stream.keyed): its deltas carry it; None for the whole stream.
        on_phase: optional callable told the phase a batch enters (a key of
            stream.inflight.PHASES: check, decode, engine, restore, export,
            commit, publish) as it enters it (the job's in-flight tracker).
        shared: with `key`, the shared `--facts` F: the key keeps mat(P, F ∪ E_key),
            so a deletion of a fact of F is dropped from the update before the
            engine sees it (counted as `shared_deletes` in `BatchOutcome.stats`).
        bulk: feed a batch's updates as columns (stream.batch_decode) where it
            can: no program change, no key's shared facts, no quarantine re-run.
        rows_out: make a batch's delta from the engine's rows of term ids where it
            gives them (`Reasoner.poll_rows`, `fact_rows`; a JSON delta format);
            False: from its Python facts (the reference the rows path is tested against).
    """

    def __init__(self, reasoner: Reasoner, store, publisher, budget: int | None = None, progress=None,
                 limits: Limits | None = None,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 delta_format: str = "json", key: str | None = None, on_phase=None,
                 shared: frozenset = frozenset(), bulk: bool = True, rows_out: bool = True):  # fmt: skip
        if not reasoner.fully_dynamic:
            raise FluxmatError(
                f"the streaming job needs a fully dynamic algorithm (fd-dred or fd-counting), "
                f"not {reasoner.name}"
            )
        given = {"budget": budget, "limits": limits}
        reasoner.reconfigure(schedule="interleaved", **{k: v for k, v in given.items() if v is not None})
        self.reasoner = reasoner
        self.store = store
        self.publisher = publisher
        self.progress = progress
        self.bulk = bulk  # False: every update fed one by one (the reference the bulk path is tested against)
        self.rows_out = rows_out  # False: deltas from Python facts (the reference the rows path is tested against)
        self.decoder = Decoder(max_message_bytes, key)  # messages to dead letters and update columns
        self.base = 0  # added to Spark's batch ids (see connectors.state: rebase)
        self.codec = DeltaCodec(reasoner.program.prefixes, delta_format)  # facts as the deltas carry them
        self.key = key
        self.on_phase = on_phase or (lambda phase: None)
        self.shared = shared
        self.fresh: list[tuple] | None = None  # begin()'s initial facts, until the first commit
        self._fed: dict[int, object] = {}  # the last feed's engine seq -> row index (BatchOutcome.causes)
        self.initial: BatchOutcome | None = None  # start()'s initial materialisation (batch -1), when published
        self.committed: int | None = None  # the committed batch the engine holds (after start and each commit)
        # the configured program's digest and metadata (stream.live_program)
        self.origin = live_program.origin(reasoner.program)
        self._configured = live_program.program_meta(reasoner, self.origin)

    # ------------------------------------------------------------ start
    def start(self, initial_facts: list[tuple], say: Callable[[str], None] | None = None,
              snapshots=None) -> str:  # fmt: skip
        """Rebuild the engine from the store, or load the initial facts; returns what happened.

        A restore can take a while (LUBM-5: ~40 s): `say` is told what is
        restored, with the seconds the read took, before the engine is rebuilt;
        the line returned gives the seconds of both. With `snapshots`
        (stream.snapshots.Snapshots) the local snapshot is used instead when it
        holds the store's state (else its `log` says why, in one line).

        Raises:
            StateMismatch: the stored state was built for another program.
            FactLimitExceeded: the initial materialisation, or the stored
                state, is larger than the fact limit.
        """
        started = time.perf_counter()
        self._adopt(self.store.state_meta())
        stored = None if snapshots is None else snapshots.restore(self.store, self.reasoner)
        if stored is not None:
            self.base, self.committed = int(stored.get("base", 0) or 0), int(stored["batch"])
            return (f"restored state of batch {stored['batch']} from the local snapshot {snapshots.path}: "
                    f"{self.reasoner.sizes()['facts']} facts (in {time.perf_counter() - started:.1f} s)")  # fmt: skip
        started = time.perf_counter()
        snap = self.store.load()
        read = time.perf_counter() - started
        if snap is not None:
            batch = snap.meta.get("batch")  # the state's own: no second read of the store
            if say is not None:
                facts, log = snap.counts()
                say(f"restoring the state of batch {batch} from the store: {facts:,} "
                    f"facts, {log:,} log entries (read in {read:.1f} s)")  # fmt: skip
            started = time.perf_counter()
            self.reasoner.restore(snap)
            self.base, self.committed = int(snap.meta.get("base", 0) or 0), batch
            return (f"restored state of batch {batch}: {self.reasoner.sizes()['facts']} facts "
                    f"(read {read:.1f} s, restored in {time.perf_counter() - started:.1f} s)")  # fmt: skip
        self.reasoner.load(initial_facts)
        added = self.codec.encode_all(self.reasoner)
        output = {"through": None, "added": added, "removed": [], "dead": []}
        self.store.commit(INITIAL_BATCH, self._changes(), output)
        self.committed = INITIAL_BATCH
        self.initial = BatchOutcome(INITIAL_BATCH, added=len(added), output=output)
        self.initial.published = self._publish(INITIAL_BATCH, output)
        return f"initial materialisation: {len(added)} facts"

    def begin(self, initial_facts: list[tuple]) -> bool:
        """Restore the engine from the store, or load the initial facts without committing them.

        A key's state (stream.keyed) begins so: its first batch commits the
        initial facts with its own changes, in one transaction, and its first
        delta carries the whole materialisation (the initial facts' consequences
        too), so a crash can never separate the two. True when restored.
        """
        snap = self.store.load()
        if snap is not None:
            self._adopt(snap.meta)
            self.reasoner.restore(snap)
            self.base = int(snap.meta.get("base", 0) or 0)
            self.fresh = None
            return True
        self.reasoner.load(initial_facts)
        self.fresh = list(initial_facts)
        return False

    def _adopt(self, meta: dict) -> None:
        """Go on with the program the stored state holds, when it may (stream.live_program.adopted).

        Before the facts are restored: a state is restored by the reasoner of its program.
        """
        self.reasoner, self.origin = live_program.adopted(self.reasoner, meta, self.origin)

    def _changes(self):
        """The state's changes to commit, with the program in force in their metadata."""
        changes = self.reasoner.export_changes()
        if live_program.changeable(self.reasoner):
            changes.meta.update(live_program.program_meta(self.reasoner, self.origin))
        return changes

    def _rollback(self) -> None:
        """Back to the last committed state (or, before the first commit, to the initial facts)."""
        snap = self.store.load()
        meta = snap.meta if snap is not None else self._configured
        if live_program.changeable(self.reasoner) and meta.get("program") is not None:
            # the batch's program changes are undone too (one that ran out of a limit left the engine half-changed)
            self.reasoner = live_program.rebuilt(self.reasoner, meta)
        if snap is None and self.fresh is not None:
            self.reasoner.load(self.fresh)
        else:
            self.reasoner.restore(snap)

    # ------------------------------------------------------------ batches
    def process(self, batch_id: int, rows: list, program: dict | None = None) -> BatchOutcome:
        """Apply one micro-batch (Spark's `batch_id`) and publish its delta.

        `program` (a key's processor): the program in force in the key's namespace
        (stream.live_program.namespace_program); a key at an older version catches up
        first, in the batch (its delta includes what the catch-up changed). One that
        cannot is a dead letter on the batch's first row and the key stays at its version.
        """
        start, phase = time.perf_counter(), self.on_phase
        batch = batch_id + self.base
        phase("check")
        last = self.store.last_batch()
        if last is not None and batch <= last:
            stored = self.store.output(batch)
            outcome = BatchOutcome(batch, replayed=True)
            if stored is not None:
                phase("publish")
                outcome.published = self._publish(batch, stored)
            outcome.seconds = time.perf_counter() - start
            return outcome
        reasoner = self.reasoner
        mark = reasoner.work_mark()
        clock = Clock()
        phase("decode")
        rows = Messages.of(rows)
        decoded = self.decoder.batch(reasoner, rows)
        clock.lap("decode")
        phase("engine")
        quarantined: dict[int, str] = {}  # row index -> the limit it ran out of
        alone = False  # each update to quiescence before the next (exact blame)
        catch_up = program if live_program.behind(reasoner, program) else None
        while True:
            outcome = BatchOutcome(batch)
            try:
                dead = self._apply(outcome, rows, decoded, quarantined, alone, catch_up)
                break
            except _Breach as breach:
                if breach.index == _CATCH_UP:  # not tried again: a dead letter (the reason)
                    catch_up = breach.reason
                elif alone:  # with overlap, the blame was a suspicion only
                    quarantined[breach.index] = breach.reason
                alone = alone or breach.index != _CATCH_UP
                phase("restore")
                self._rollback()
                phase("engine")
        reasoner = self.reasoner  # a rollback may have rebuilt it (another program)
        clock.lap("engine")
        added, removed = self._delta(decoded, outcome, clock)
        output = {"through": reasoner.last_id, "added": added, "removed": removed, "dead": dead}
        runs = cause_runs(outcome.causes["added"] + outcome.causes["removed"]) if outcome.causes else []
        if runs:
            output["causes"] = runs  # stored with the output: a replay re-publishes them
        clock.lap("deltas")
        phase("export")
        changes = self._changes()
        clock.lap("export")
        crash_point("before-commit", batch)
        phase("commit")
        self.store.commit(batch, changes, output)
        self.fresh = None
        self.committed = batch
        clock.lap("commit")
        crash_point("after-commit", batch)
        phase("publish")
        outcome.published = self._publish(batch, output)
        clock.lap("publish")
        crash_point("after-publish", batch)
        outcome.phases = clock.phases
        outcome.stats, outcome.rules = reasoner.work_since(mark)
        if outcome.shared_deletes:
            outcome.stats["shared_deletes"] = outcome.shared_deletes
        outcome.dead, outcome.quarantined = len(dead), len(quarantined)
        outcome.added, outcome.removed = len(output["added"]), len(output["removed"])
        outcome.through = output["through"]
        outcome.output = output
        outcome.seconds = time.perf_counter() - start
        return outcome

    def _apply(self, outcome: BatchOutcome, rows: Messages, decoded: Decoded,
               quarantined: dict[int, str], alone: bool, catch_up: dict | str | None = None) -> list[list]:  # fmt: skip
        """Submit the batch's valid updates and run to quiescence; return the dead letters.

        Updates overlap (`budget` units of work between them) unless `alone`:
        then each runs to quiescence before the next, so each is charged
        exactly its own work and facts. `catch_up`: the namespace's program to
        take first (`process`), or why that failed (a dead letter on the first row).

        Raises:
            _Breach: an update ran out of a limit (the engine is left mid-way),
                or the catch-up failed (index `_CATCH_UP`).
        """
        dead: list[list] = []

        def letter(i: int, reason: str) -> None:
            m = rows.row(i)
            dead.append(DeadLetter.of(reason, m.partition, m.offset, m.value, m.size).stored())

        def updates(lo: int, hi: int):
            for i in range(lo, hi):
                upd = decoded[i]
                reason = quarantined.get(i, upd if isinstance(upd, str) else None)
                if reason is not None:
                    letter(i, reason)
                    continue
                yield Fed(i, upd.add, self._own(upd.delete, outcome), decoded.uid(i))

        def rejected(i: int, exc: Exception) -> None:  # a bad update stops only itself
            letter(i, str(exc) if isinstance(exc, FluxmatError) else f"{type(exc).__name__}: {exc}")

        def after_each(fed: Fed, _seq: int) -> None:
            _count(outcome, decoded, [fed.key])
            if self.progress is not None:
                self.progress(self.reasoner.pending)

        self._fed = {}
        if self.bulk and decoded.columns is not None and not (alone or catch_up or quarantined or self.shared):
            return self._feed_columns(outcome, decoded)
        if isinstance(catch_up, dict):
            self._catch_up(catch_up)
        elif catch_up is not None and rows:
            letter(0, catch_up)
        lo = 0
        for cut in [*self._program_rows(decoded, quarantined), decoded.n]:
            self._feed(outcome, updates(lo, cut), rejected, after_each, alone)
            if cut < decoded.n:  # a program message: the updates before it are integrated
                self._change_program(cut, decoded[cut], letter, decoded.uid(cut))
                crash_point("program-change", outcome.batch)
            lo = cut + 1
        if self.progress is not None:
            self.progress(0)
        return dead

    def _feed_columns(self, outcome: BatchOutcome, decoded: Decoded) -> list[list]:
        """Submit the batch's updates as columns (stream.batch_decode), run to quiescence; the dead letters.

        The same dead letters in the same order as `_apply` one update at a time,
        where the engine reads one update ahead: an update it refuses is
        lettered after the undecodable messages before the next update.
        """
        reasons = dict(decoded.reasons)
        order = {i: float(i) for i in reasons}
        fed_rows = decoded.columns.keys
        after = dict(zip(fed_rows, [*fed_rows[1:], decoded.n], strict=False))  # the next update's row

        def rejected(i: int, exc: Exception) -> None:
            reasons[i] = str(exc) if isinstance(exc, FluxmatError) else f"{type(exc).__name__}: {exc}"
            order[i] = after[i] - 0.5

        try:
            fed = self.reasoner.feed_columns(decoded.columns, rejected)
        except LimitExceeded as exc:
            if exc.key is None:
                raise
            raise _Breach(exc.key, str(exc)) from None
        outcome.peak_pending = max(outcome.peak_pending, fed.peak_pending)
        self._fed = fed.keys
        _count(outcome, decoded, sorted(fed.keys.values()))
        if self.progress is not None:
            self.progress(0)
        rows = decoded.rows
        return [DeadLetter.of(reasons[i], rows.partition[i], rows.offset[i], rows.value[i], rows.size[i]).stored()
                for i in sorted(reasons, key=order.__getitem__)]  # fmt: skip

    @staticmethod
    def _program_rows(decoded: list, quarantined: dict[int, str]) -> list[int]:
        """The rows holding program changes (applied between the updates before and after them)."""
        return [i for i, u in enumerate(decoded)
                if isinstance(u, Update) and u.program is not None and i not in quarantined]  # fmt: skip

    def _feed(self, outcome: BatchOutcome, updates, rejected, after_each, alone: bool) -> None:
        """Submit updates to the engine and work until quiescent (`_Breach`: one ran out of a limit)."""
        try:
            fed = self.reasoner.feed(updates, rejected, after_each, overlap=not alone)
        except LimitExceeded as exc:
            if exc.key is None:
                raise
            raise _Breach(exc.key, str(exc)) from None
        outcome.peak_pending = max(outcome.peak_pending, fed.peak_pending)
        self._fed.update(fed.keys)

    def _change_program(self, i: int, update: Update, letter, uid: object) -> None:
        """Apply row `i`'s program change to the quiescent engine; one that fails validation is a dead letter.

        An applied change is the last update integrated so far: `uid` (its id) is the `through` of a
        batch it ends.
        """
        try:
            live_program.apply(self.reasoner, update, uid)
        except LimitExceeded as exc:  # quarantined as an update is (the engine is left mid-way)
            raise _Breach(i, str(exc)) from None
        except FluxmatError as exc:
            letter(i, f"{update.where}: {exc}; nothing was changed")

    def _catch_up(self, target: dict) -> None:
        """Take the namespace's program (a key's processor); `_Breach(_CATCH_UP)` naming why it could not."""
        before = self.reasoner.program_version
        try:
            live_program.catch_up(self.reasoner, target)
        except FluxmatError as exc:  # also a limit: the engine is rolled back to the committed state
            raise _Breach(_CATCH_UP, f"key {self.key}: cannot take program version {target['program_version']} "
                                     f"({exc}); the key stays at program version {before}") from None  # fmt: skip

    def _own(self, delete: tuple, outcome: BatchOutcome) -> tuple:
        """An update's deletions without those of shared facts (a key cannot delete what F holds)."""
        if not self.shared or not delete:
            return delete
        own = tuple(f for f in delete if f not in self.shared)
        outcome.shared_deletes += len(delete) - len(own)
        return own

    def _delta(self, decoded: Decoded, outcome: BatchOutcome, clock: Clock) -> tuple[list, list]:
        """The batch's added and removed facts encoded, each cause's together (the deltas name a cause once per run).

        Sets `outcome.causes` (parallel to the facts returned): the update that
        changed each fact, its id or partition:offset (None: several). From the
        engine's rows of term ids when it gives them (`Reasoner.poll_rows`, a JSON
        format): the same lists as from its Python facts, without a tuple per fact.
        A key's first batch: its whole materialisation, no causes.
        """
        reasoner, codec = self.reasoner, self.codec
        point = reasoner.poll_rows() if self.rows_out and codec.triples is None else None
        if point is None:
            point = reasoner.poll()
        clock.lap("poll")
        if self.fresh is not None:
            if self.rows_out:
                return codec.encode_all(reasoner), []
            return [codec.encode(f) for f in reasoner.facts()], []

        def name(seq: int):
            i = self._fed.get(seq)
            return None if i is None else decoded.ids[i]

        if isinstance(point, PointRows):
            added, added_by, removed, removed_by = codec.encode_point(point, name)
        else:
            added, added_by = grouped(point.added, [name(s) for s in point.added_by])
            removed, removed_by = grouped(point.removed, [name(s) for s in point.removed_by])
            added, removed = [codec.encode(f) for f in added], [codec.encode(f) for f in removed]
        outcome.causes = {"added": added_by, "removed": removed_by}
        return added, removed

    # ------------------------------------------------------------ output
    def _publish(self, batch: int, output: dict) -> dict[str, int]:
        """Publish a batch's delta and dead letters; what was sent (`BatchOutcome.published`)."""
        keyed = {} if self.key is None else {"key": self.key}
        if output.get("causes"):
            keyed["causes"] = output["causes"]
        sent = self.publisher.publish_delta(batch, output["through"], output["added"], output["removed"], **keyed)
        for item in output.get("dead", ()):
            DeadLetter.read(item).publish(self.publisher)
        return {"messages": sent if isinstance(sent, int) else 1,
                "added": len(output["added"]), "removed": len(output["removed"])}  # fmt: skip

    def facts(self) -> set[tuple]:
        return self.reasoner.facts()


def _count(outcome: BatchOutcome, decoded: Decoded, fed: list[int]) -> None:
    """Count the rows `fed` (submitted, in order) in the outcome: updates, fact operations, timestamps."""
    outcome.updates += len(fed)
    outcome.adds += int(decoded.adds[fed].sum())
    outcome.deletes += int(decoded.deletes[fed].sum())
    stamps = decoded.rows.timestamp
    ts = [stamps[i] for i in fed if stamps[i] is not None]
    outcome.timestamps_ms.extend(ts)
    if ts:
        oldest = outcome.oldest_timestamp_ms
        outcome.oldest_timestamp_ms = min(ts) if oldest is None else min(oldest, *ts)
