"""A micro-batch's updates fed as columns (stream.batch_decode, Reasoner.feed_columns) vs one by one.

The bulk path must be invisible: on random batches with poison (bad JSON, a
wrong arity, an unknown key, a fact both added and deleted, an oversized
value, a new predicate then used at another arity, literals that are valid
but not plain), the delta messages and the dead letters are byte for byte
those of the processor that decodes and feeds every message one by one
(`bulk=False`), on both cores, and the materialisation equals remat's from
scratch over the applied updates.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.message import Message, Messages
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.micro import messages
from tests.support.profile import examples
from tests.support.shared import TextRecorder

PROGRAM = "p(X, Y) :- e(X, Y).\np(X, Z) :- p(X, Y), e(Y, Z).\nq(X) :- n(X), not p(X, X).\n"
CONSTS = ["a", "b", "c", 1, 2, "<http://x.org/d>"]
MAX_BYTES = 400


const = st.sampled_from(CONSTS)
fact = st.one_of(
    st.tuples(st.just("e"), const, const).map(list), st.tuples(st.just("n"), const).map(list)
)
update = st.fixed_dictionaries({"add": st.lists(fact, max_size=3)}, optional={"del": st.lists(fact, max_size=3),
                                                                           "id": st.integers(0, 5)})  # fmt: skip
POISON = [
    "{not json", '{"add": [["e", "a"]]}', '{"add": [], "bogus": 1}', '{"add": [["e", "a", "b"]], "del": [["e", "a", "b"]]}',
    json.dumps({"add": [["e", "a", "x" * MAX_BYTES]]}), '{"add": [["z", "a"]]}', '{"add": [["z", "a", "b"]]}',
    '{"add": [["n", {"@value": "a", "@language": "en"}]]}', '{"add": [["e", "a", 1.5]]}', '[]', 'null',
    '{"add": [["e", "a", "b"]], "add": []}', '{"add" : [["e", "c", "a"]]}', '{"add": [["", "a"]]}',
    '{"add": [["e", "a", "b"]], "id": {"k": [1]}}',
]  # fmt: skip
value = st.one_of(update.map(json.dumps), update.map(json.dumps), st.sampled_from(POISON))


def _rows(values: list[str], start: int) -> list[Message]:
    return [
        Message(i % 2, start + i, None, v, 1000 + i, True, len(v.encode()))
        for i, v in enumerate(values)
    ]


def _run(core: str, batches: list[list[str]], bulk: bool, program: str = PROGRAM,
         initial=(("e", "a", "b"),)) -> tuple[list[str], set, BatchProcessor]:  # fmt: skip
    reasoner = Reasoner.from_text(program, options=EngineOptions("fd-counting", core=core))
    pub = TextRecorder()
    proc = BatchProcessor(reasoner, MemoryStateStore(), pub, max_message_bytes=MAX_BYTES, bulk=bulk)
    proc.start(list(initial))
    start = 0
    for b, values in enumerate(batches):
        proc.process(b, Messages.of(_rows(values, start)))
        start += len(values)
    return pub.sent, proc.facts(), proc


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(core=st.sampled_from(["arrays", "objects"]), batches=st.lists(st.lists(value, max_size=12), min_size=1,
                                                                    max_size=3))  # fmt: skip
def test_bulk_and_one_by_one_publish_the_same_bytes(core, batches):
    bulk, facts, proc = _run(core, batches, bulk=True)
    one, reference, _ = _run(core, batches, bulk=False)
    assert bulk == one
    assert facts == reference
    remat = Reasoner.from_text(PROGRAM, "remat")
    remat.load(proc.reasoner.explicit())
    assert facts == remat.facts()  # exact materialisation of what was applied


def test_a_plain_batch_takes_the_bulk_path_and_a_poisoned_message_only_itself():
    """The columns hold the plain updates; each poison is one dead letter with the one-by-one reason."""
    values = [json.dumps({"add": [["e", "b", "c"]]}), "{not json", '{"add": [["e", "a"]]}',
              json.dumps({"add": [["e", "c", "a"]], "del": [["e", "a", "b"]], "id": 7})]  # fmt: skip
    sent, facts, proc = _run("arrays", [values], bulk=True)
    assert proc.decoder.batch(proc.reasoner, Messages.of(_rows(values, 0))).columns is not None
    dead = [json.loads(m) for m in sent if m.startswith('["dead"')]
    assert [d[3] for d in dead] == [1, 2]
    assert (
        dead[0][1].startswith("invalid JSON")
        and "has 1 argument but predicate e has 2" in dead[1][1]
    )
    assert ("p", "b", "a") in facts and ("e", "a", "b") not in facts


@pytest.mark.parametrize("core", ["arrays", "objects"])
@pytest.mark.parametrize("bulk", [True, False])
def test_a_fact_of_an_internal_relation_is_a_dead_letter(core, bulk):
    """`__neg0` keeps the projected negation `not r(X, Y)`: a message giving one of its facts is refused."""
    program = "p(X) :- q(X), not r(X, Y).\n"
    values = [json.dumps({"add": [["q", "c"]]}), json.dumps({"add": [["__neg0", "a"]]}),
              json.dumps({"add": [["q", "d"]], "del": [["__neg0", "b"]]})]  # fmt: skip
    sent, facts, _ = _run(core, [values], bulk, program, [("q", "a"), ("q", "b")])
    dead = [json.loads(m) for m in sent if m.startswith('["dead"')]
    assert sorted(d[3] for d in dead) == [1, 2]
    assert all("predicate '__neg0' is reserved" in d[1] for d in dead)
    assert {("p", "a"), ("p", "b"), ("p", "c")} <= facts and ("q", "d") not in facts


def test_messages_from_arrow_are_columns_and_rows_on_demand():
    """`messages(df.toArrow())` keeps the columns; a row is a `Message` only when asked."""
    rows = _rows(['{"add": []}', "{"], 5)
    table = pa.table({f: [getattr(r, f) for r in rows] for f in Message._fields})
    got = messages(table)
    assert isinstance(got, Messages) and got.value == ['{"add": []}', "{"]
    assert got.row(1) == rows[1] and list(got.rows()) == rows
    assert list(Messages.of([rows[1], rows[0]]).rows()) == rows  # by (partition, offset)
