"""One interface for processing a micro-batch (stream/micro.py): the job's bookkeeping is done once for both kinds.

`Job._one_batch` wraps any `MicroBatches`: the batch is in flight while it runs
(numbered after the stored batches), a failure is kept and reported before it
is re-raised (Spark then stops the query), and a processed batch is reported,
kept and passed on. Here with a `MicroBatches` of each outcome, no Spark.
"""

import pytest

from fluxmat.stream.batch import BatchOutcome
from fluxmat.stream.job import Job, JobConfig
from fluxmat.stream.micro import MicroBatches
from fluxmat.stream.observe import JobObserver


class Observer(JobObserver):
    def __init__(self):
        self.seen = []

    def on_error(self, exc):
        self.seen.append(("error", str(exc)))

    def on_batch(self, outcome, processor, store):
        self.seen.append(("batch", outcome.batch))


class Batches(MicroBatches):
    base = 10
    first_phase = "tasks"

    def __init__(self, job, fail=False):
        self.job, self.fail, self.in_flight = job, fail, None

    def apply(self, df, batch_id):
        self.in_flight = self.job.inflight.now()
        if self.fail:
            raise ConnectionError("redis lost")
        return BatchOutcome(batch_id + self.base, updates=3)

    def report(self, outcome, observer, store):
        observer.on_batch(outcome, None, store)


def _job(tmp_path):
    cfg = JobConfig(program="p.dl", bootstrap_servers="127.0.0.1:9", updates_topic="u", deltas_topic="d",
                    checkpoint=str(tmp_path / "ckpt"), redis="memory://", namespace="ns")  # fmt: skip
    passed = []
    job = Job(cfg, on_batch=passed.append, log=lambda msg: None)
    job.metrics = Observer()
    return job, passed


def test_a_processed_batch_is_reported_kept_and_passed_on(tmp_path):
    job, passed = _job(tmp_path)
    batches = Batches(job)
    job._one_batch(batches, None, df=None, batch_id=2)
    assert (batches.in_flight.batch, batches.in_flight.phase) == (12, "tasks")
    assert job.metrics.seen == [("batch", 12)] and [o.batch for o in passed] == [12]
    assert job.batches_done == 1 and job.inflight.now() is None and job.failed is None


def test_a_failed_batch_is_kept_and_reported_before_it_is_raised(tmp_path):
    job, passed = _job(tmp_path)
    with pytest.raises(ConnectionError):
        job._one_batch(Batches(job, fail=True), None, df=None, batch_id=2)
    assert isinstance(job.failed, ConnectionError) and job.metrics.seen == [("error", "redis lost")]
    assert passed == [] and job.batches_done == 0 and job.inflight.now() is None


def test_the_whole_stream_times_collecting_the_batch_and_its_arrow_columns_as_messages():
    """A micro-batch arrives as Arrow (`df.toArrow()`: collect), becomes messages (rows), then is processed."""
    import json
    import threading

    import pyarrow as pa

    from fluxmat.connectors.message import Message
    from fluxmat.connectors.state import MemoryStateStore
    from fluxmat.engine import Reasoner
    from fluxmat.stream.batch import BatchProcessor
    from fluxmat.stream.inflight import InFlight
    from fluxmat.stream.micro import WholeStream
    from fluxmat.stream.verify import Verifier
    from tests.support.shared import NullPublisher

    processor = BatchProcessor(Reasoner.from_text("p(X) :- q(X).", "fd-counting"), MemoryStateStore(), NullPublisher())
    processor.start([])
    values = [json.dumps({"add": [["q", i]], "id": f"u{i}"}) for i in range(3)]
    table = pa.table({"partition": [0, 0, 0], "offset": [5, 6, 7], "key": [None] * 3, "value": values,
                      "timestamp": [1, 2, 3], "utf8": [True] * 3, "size": [len(v) for v in values]})  # fmt: skip

    class Frame:  # what foreachBatch hands over: here only its Arrow form is read
        def toArrow(self):
            return table

    consumed: dict[str, int] = {}
    whole = WholeStream(processor, threading.Lock(), InFlight(), Verifier(0, print), None, consumed, print)
    outcome = whole.apply(Frame(), 0)
    assert list(outcome.phases)[:3] == ["collect", "rows", "decode"] and list(Message._fields) == table.column_names
    assert (outcome.updates, outcome.through, consumed) == (3, "u2", {"0": 8})
    assert processor.facts() == {("p", 0), ("p", 1), ("p", 2), ("q", 0), ("q", 1), ("q", 2)}
