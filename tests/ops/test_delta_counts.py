"""Delta messages and facts are counted as published -- what a consumer of the deltas topic receives.

A real tansu broker and a publisher that splits deltas into parts of 3 facts:
the initial materialisation (batch -1), multi-part batches and a replay that
re-sends a stored output are all counted, and the counters equal what is read
back from the topic.
"""

import json

from prometheus_client import generate_latest

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.kafka_sink import KafkaPublisher
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from tests.support.messages import read_deltas

PROGRAM = "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z)."


def _metrics(m) -> dict[str, float]:
    out = {}
    for line in generate_latest(m.registry).decode().splitlines():
        if line.startswith(("fluxmat_delta_", "fluxmat_batches_total")):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, None, True, len(value))


def test_every_message_sent_is_counted_with_its_facts(broker):
    bs, topic = broker.bootstrap, "counted-deltas"
    ensure_topics(bs, {topic: 1})
    publisher = KafkaPublisher(bs, topic, max_facts_per_message=3)
    store = MemoryStateStore()
    processor = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, publisher)
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    try:
        processor.start([("edge", "a", "b"), ("edge", "b", "c")])  # 2 edges + 3 paths: 2 messages
        m.on_start(processor, store)
        chain = [["edge", "c", "d"], ["edge", "d", "e"]]  # 2 edges + 7 paths: 3 messages
        m.on_batch(processor.process(0, [_row(0, {"add": chain})]), processor, store)
        m.on_batch(processor.process(1, [_row(1, {"del": [["edge", "b", "c"]]})]), processor, store)
        m.on_batch(processor.process(1, [_row(1, {"del": [["edge", "b", "c"]]})]), processor, store)  # a replay
    finally:
        publisher.close()
    sent = read_deltas(bs, topic)
    assert [(d["batch"], d["part"], d["parts"]) for d in sent][:5] == [
        (-1, 0, 2), (-1, 1, 2), (0, 0, 3), (0, 1, 3), (0, 2, 3)]  # fmt: skip
    assert sent[-1]["batch"] == 1 and len(sent) > 5 + 1  # batch 1 was sent twice
    got = _metrics(m)
    assert got["fluxmat_delta_messages_total"] == len(sent)
    assert got['fluxmat_delta_facts_total{kind="added"}'] == sum(len(d["added"]) for d in sent) == 14
    assert got['fluxmat_delta_facts_total{kind="removed"}'] == sum(len(d["removed"]) for d in sent)
    assert got['fluxmat_batches_total{outcome="replayed"}'] == 1
    assert m.status()["totals"]["deltas"] == len(sent)
