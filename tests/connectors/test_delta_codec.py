"""The delta codec the job's processor and `fluxmat demo` share (connectors.delta_codec).

A consumer that rebuilds the materialisation from delta messages compares what it
read (`DeltaCodec.items`) with facts it computed (`DeltaCodec.item`): both sides
must agree for every fact, a triple or not, in every delta format.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluxmat.connectors import delta_codec
from fluxmat.connectors.delta_codec import DeltaCodec
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Iri, Reasoner
from fluxmat.engine.wire import fact_json
from fluxmat.stream.batch import BatchProcessor
from tests.support.gen import CONSTANTS, examples
from tests.support.gen import FACTS as GEN_FACTS

EX = "http://example.org/"
PROGRAM = f"@prefix ex: <{EX}> .\nreach(X, Y) :- link(X, Y).\nreach(X, Z) :- reach(X, Y), link(Y, Z).\n"
FACTS = [("link", Iri(f"{EX}a"), Iri(f"{EX}b")), ("link", Iri(f"{EX}b"), "c"),
         (f"{EX}knows", Iri(f"{EX}a"), Iri(f"{EX}b")), (f"{EX}Person", Iri(f"{EX}a"))]  # fmt: skip


class Publisher:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append({"added": added, "removed": removed})


def as_message(added: list, delta_format: str) -> dict:
    """A delta message as connectors.kafka_sink documents it: N-Triples text plus `not_triples`, or JSON."""
    if delta_format != "ntriples":
        return {"added": added, "removed": []}
    lines = [f for f in added if isinstance(f, str)]
    others = [f for f in added if not isinstance(f, str)]
    return {"format": "ntriples", "added": "\n".join(lines), "removed": "",
            "not_triples": {"added": others, "removed": []}}  # fmt: skip


@pytest.mark.parametrize("core", ["objects", "arrays"])
@pytest.mark.parametrize("delta_format", ["json", "ntriples", "debezium"])
def test_what_the_processor_publishes_reads_back_as_the_codecs_items(delta_format, core):
    reasoner = Reasoner.from_text(PROGRAM, options=EngineOptions("fd-counting", core=core))
    publisher = Publisher()
    processor = BatchProcessor(reasoner, MemoryStateStore(), publisher, delta_format=delta_format)
    processor.start(FACTS)
    codec = DeltaCodec(reasoner.program.prefixes, delta_format)  # as a consumer (the demo) makes it
    read = DeltaCodec.items(as_message(publisher.deltas[-1]["added"], delta_format), "added")
    assert sorted(map(repr, read)) == sorted(repr(codec.item(f)) for f in reasoner.facts())
    assert len(read) == len(reasoner.facts()) == 7


def test_ntriples_sends_triples_as_lines_and_other_facts_as_json():
    codec = DeltaCodec((("ex", EX),), "ntriples")
    assert codec.encode((f"{EX}knows", Iri(f"{EX}a"), Iri(f"{EX}b"))) == f"<{EX}a> <{EX}knows> <{EX}b> ."
    assert codec.encode((f"{EX}Person", Iri(f"{EX}a"))) == \
        f"<{EX}a> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{EX}Person> ."  # fmt: skip
    assert codec.encode(("link", Iri(f"{EX}b"), "c")) == ["link", f"<{EX}b>", "c"]
    assert DeltaCodec((("ex", EX),)).encode((f"{EX}knows", Iri(f"{EX}a"), "c")) == ["ex:knows", f"<{EX}a>", "c"]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(GEN_FACTS, min_size=1, max_size=6))
def test_json_encoding_is_fact_json_also_from_the_kept_predicates(facts):
    codec = DeltaCodec({"ex": EX, "p": "http://p/"}.items())
    for _ in range(2):  # the second time from the predicates' kept wire forms
        assert [codec.encode(f) for f in facts] == [fact_json(f, codec.printer) for f in facts]


def test_kept_predicates_are_bounded(monkeypatch):
    monkeypatch.setattr(delta_codec, "MAX_PREDS", 2)
    codec = DeltaCodec({"ex": EX}.items())
    for i in range(5):
        assert codec.encode((f"{EX}p{i}", 1)) == [f"ex:p{i}", 1] and len(codec.preds) <= 2


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(CONSTANTS, CONSTANTS), max_size=6))
def test_the_initial_delta_from_the_arrays_cores_rows_is_every_facts_encoding(pairs):
    """`encode_all` encodes each term once from the core's rows; the facts must come out as `encode` gives them."""
    reasoner = Reasoner.from_text(PROGRAM, options=EngineOptions("fd-counting", core="arrays"))
    reasoner.load([("link", a, b) for a, b in pairs] + [(f"{EX}Person", b) for _, b in pairs])
    codec = DeltaCodec(reasoner.program.prefixes)
    assert reasoner.fact_rows() is not None  # the fast path is the one tested
    got = codec.encode_all(reasoner)
    assert sorted(map(repr, got)) == sorted(repr(codec.encode(f)) for f in reasoner.facts())
