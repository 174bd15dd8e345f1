"""A message of the updates topic is read by name (connectors/message.py), in the source's column order."""

import json

from fluxmat.connectors.message import SCHEMA, Message
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters


def test_the_schema_is_the_record_in_order():
    assert tuple(c.split()[0] for c in SCHEMA.split(", ")) == Message._fields
    full = Message.of((3, 7, "tenant", '{"add": []}', 1_000, False, 11))  # as the source yields it
    assert (full.partition, full.offset, full.key, full.timestamp, full.utf8, full.size) == (3, 7, "tenant", 1_000, False, 11)
    short = Message.of((0, 5, None, "{}"))  # shorter rows take the defaults
    assert (short.key, short.utf8, short.size) == (None, None, None)


def test_the_processor_reads_validity_and_size_by_name():
    dead = DeadLetters()
    p = BatchProcessor(Reasoner.from_text("p(X) :- q(X).", "fd-counting"), _store(), dead, 2, max_message_bytes=100)
    p.start([])
    ok = json.dumps({"add": [["q", "a"]]})
    rows = [(0, 0, None, ok, 1_000, True, len(ok)), (0, 1, None, ok, 1_001, False, len(ok)),
            (0, 2, None, ok, 1_002, True, 5_000)]  # fmt: skip
    out = p.process(0, rows)
    assert out.updates == 1 and [offset for _, offset in dead.dead] == [1, 2]
    assert "UTF-8" in dead.dead[0][0] and "too large" in dead.dead[1][0]


def _store():
    from fluxmat.connectors.state import MemoryStateStore

    return MemoryStateStore()
