"""Processing one micro-batch: one interface, two implementations (whole stream, keyed).

The job (stream.job) hands each micro-batch Spark gives `foreachBatch` to a
`MicroBatches` and does the bookkeeping every batch shares around it, once:
the batch in flight (stream.inflight), a failed batch reported and re-raised,
the outcome handed to the observer, kept (`Job.record`) and passed on
(`on_batch`). What differs is behind the interface:

- `WholeStream` (`--partition-by none`): the rows are collected on the driver
  and applied by the one `BatchProcessor` (stream.batch) under the job's batch
  lock, then the self-check and the local snapshot run; the consumed offsets
  (the lag's baseline) move on.
- `Keyed` (`--partition-by message-key|graph`): the batch is planned onto the
  executors by a `KeyedDriver` (stream.keyed); the observer also hears of its
  keys and tasks.

`open_whole_stream` and `open_keyed` build either from a job's parts (state
restored, batch numbering rebased) and say what they did in the job's log.

Not here: Spark sessions, the query, servers (stream.job); applying updates
(stream.batch); the keyed operator itself (stream.keyed).
"""

from __future__ import annotations

import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable

from fluxmat.connectors.message import Messages
from fluxmat.connectors.publisher import Publisher
from fluxmat.connectors.state import JobStore
from fluxmat.stream.batch import BatchOutcome, BatchProcessor
from fluxmat.stream.keyed import KeyedDriver
from fluxmat.stream.observe import JobObserver


class MicroBatches(ABC):
    """What the job asks of the thing that processes its micro-batches."""

    first_phase = "collect"  # the phase a batch starts in (stream.inflight.PHASES)
    base = 0  # added to Spark's batch ids (connectors.state: rebase)

    @abstractmethod
    def apply(self, df, batch_id: int) -> BatchOutcome:
        """Process Spark's micro-batch `batch_id` (a DataFrame of `Message` rows): commit and publish it."""

    @abstractmethod
    def report(self, outcome: BatchOutcome, observer: JobObserver, store) -> None:
        """Hand a processed batch's outcome to the observer (with what this kind knows besides)."""


class WholeStream(MicroBatches):
    """One materialisation: the rows to the driver, one `BatchProcessor` under the batch lock."""

    # The batch's rows as Arrow: Spark's job by default; the job reads them on its driver (stream.collect).
    collect: Callable = staticmethod(lambda df: df.toArrow())

    def __init__(self, processor: BatchProcessor, lock: threading.Lock, inflight, verifier, snapshots,
                 consumed: dict[str, int], log: Callable[[str], None]):  # fmt: skip
        self.processor, self.lock, self.inflight = processor, lock, inflight
        self.verifier, self.snapshots = verifier, snapshots
        self.consumed = consumed  # partition -> the next offset to read (the lag's baseline)
        self.log = log
        self.base = processor.base  # numbered by now: restored or rebased before the first batch

    def apply(self, df, batch_id: int) -> BatchOutcome:
        started = time.perf_counter()
        table = self.collect(df)
        collected = time.perf_counter() - started  # the source read on the executor, and the rows to here
        rows = messages(table)
        converted = time.perf_counter() - started - collected
        processor, inflight = self.processor, self.inflight
        with self.lock:
            outcome = processor.process(batch_id, rows)
            outcome.phases = {"collect": collected, "rows": converted, **outcome.phases}
            if not outcome.replayed:
                if self.verifier is not None:  # --verify-every
                    inflight.enter("verify")
                    self.verifier.after_batch(outcome.batch, processor.reasoner)
                if self.snapshots is not None:
                    inflight.enter("snapshot")
                    self.snapshots.after_batch(processor.committed, processor.reasoner)
        for partition, offset in zip(rows.partition, rows.offset, strict=True):
            p = str(partition)
            self.consumed[p] = max(self.consumed.get(p, 0), offset + 1)
        return outcome

    def report(self, outcome: BatchOutcome, observer: JobObserver, store) -> None:
        observer.on_batch(outcome, self.processor, store)
        if outcome.quarantined:
            self.log(f"batch {outcome.batch}: {outcome.quarantined} update(s) over a work limit "
                     "quarantined (their dead letters say which and why)")  # fmt: skip


class Keyed(MicroBatches):
    """One materialisation per key: the batch planned onto the executors by a `KeyedDriver`."""

    first_phase = "tasks"

    def __init__(self, driver: KeyedDriver):
        self.driver = driver
        self.last = None  # the last batch's stream.keyed.KeyedBatch (its keys and tasks)
        self.base = driver.base  # numbered by now (open_keyed)

    def apply(self, df, batch_id: int) -> BatchOutcome:
        self.last = self.driver.process(df, batch_id)
        return self.last.outcome

    def report(self, outcome: BatchOutcome, observer: JobObserver, store) -> None:
        observer.on_keys(self.last.keys, store, self.last.tasks)
        observer.on_batch(outcome, None, store)


def open_keyed(cfg, store: JobStore, publisher: Publisher, rebase: bool, inflight,
               log: Callable[[str], None]) -> Keyed:  # fmt: skip
    """The keyed micro-batches of a job, numbered after the stored batches (rebased when asked)."""
    driver = KeyedDriver(cfg, store, publisher, cfg.key_partitions, on_phase=inflight.enter)
    driver.base = store.rebase() if rebase else store.batch_base()
    log(f"one materialisation per key ({cfg.partition_by}), reasoned in executor tasks; "
        f"batches numbered from {driver.base}")  # fmt: skip
    return Keyed(driver)


def open_whole_stream(cfg, reasoner, facts, store: JobStore, publisher: Publisher, rebase: bool,
                      observer: JobObserver, *,
                      lock: threading.Lock, inflight, verifier, snapshots, consumed: dict[str, int],
                      log: Callable[[str], None]) -> WholeStream:  # fmt: skip
    """The job's one `BatchProcessor`, its state restored (or the initial materialisation committed)."""
    processor = BatchProcessor(
        reasoner, store, publisher, progress=observer.on_pending,
        max_message_bytes=cfg.max_message_bytes or sys.maxsize, delta_format=cfg.delta_format,
        on_phase=inflight.enter,
    )  # fmt: skip
    with lock:
        inflight.start(None, "start")
        try:  # refuses a state built for another program
            log(processor.start(facts, say=log, snapshots=snapshots))
        finally:
            inflight.done()
        if rebase:
            processor.base = store.rebase()
            log(f"continuing the stored state with a new checkpoint from offsets "
                f"{cfg.starting_offsets}; batches numbered from {processor.base}")  # fmt: skip
        observer.on_start(processor, store)
    return WholeStream(processor, lock, inflight, verifier, snapshots, consumed, log)


def messages(table) -> Messages:
    """A micro-batch collected as Arrow (`df.toArrow()`: one columnar transfer) as columns of `Message` fields.

    The values are `collect()`'s (ints, strings, booleans, None), one list per
    column: no Python object per row (a `Message` is made for a row only when
    asked: connectors.message.Messages).
    """
    return Messages.from_arrow(table)
