"""A batch's delta made from the arrays core's rows of term ids (`Reasoner.poll_rows`) vs from Python facts.

The rows path must be invisible: on random programs (tests.support.gen) whose
facts hold strings with unicode and escapes, strings that look like IRIs, IRIs,
literals with a language or a datatype, and integers at and beyond the int64
edges, fed in batches of updates with random ids (repeated, absent, JSON
objects), the delta messages -- facts, their order and their causes -- are
byte for byte those of the processor that encodes every fact from its Python
tuple (`rows_out=False`), the stored outputs are equal, and the state
committed to the store restores the materialisation and the explicit facts
the engine holds.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.message import Message, Messages
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import AnalysisError, EngineOptions, Iri, Reasoner
from fluxmat.engine.syntax import RdfLiteral
from fluxmat.engine.wire import json_value
from fluxmat.stream.batch import BatchProcessor
from tests.support.gen import (
    INT,
    IRI_TEXT,
    STRINGS,
    SYM,
    examples,
    facts,
    program_cases,
    update_sequences,
)
from tests.support.shared import TextRecorder

INT64 = (-(2**63), -(2**63) + 1, 2**63 - 1, -(2**63) - 1, 2**63, 2**64, -(2**70))
LITERALS = st.one_of(
    st.builds(RdfLiteral, st.text(max_size=6), st.just("http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"),
              st.sampled_from(["en", "de-ch"])),
    st.builds(RdfLiteral, st.text(max_size=6), st.sampled_from(["http://example.org/t", "urn:x:y"])),
)  # fmt: skip
OTHER = {SYM: st.one_of(STRINGS, IRI_TEXT.map(Iri), LITERALS), INT: st.sampled_from(INT64)}
IDS = st.one_of(st.none(), st.integers(0, 3), st.sampled_from(["u", "ü\n\"", "0:1"]),
                st.fixed_dictionaries({"k": st.integers(0, 1)}))  # fmt: skip


@st.composite
def cases(draw):
    """A random program, its facts with values replaced (a..e and the small integers by any constant)."""
    gp = draw(program_cases())
    try:
        Reasoner.from_text(gp.text)
    except AnalysisError:
        assume(False)
    initial = draw(facts(gp.schema))
    steps = draw(update_sequences(gp.schema, initial))
    originals = {
        (k, v)
        for f in (*initial, *(g for a, d in steps for g in (*a, *d)))
        for k, v in _typed(gp, f)
    }
    swap = {kv: draw(st.one_of(st.just(kv[1]), OTHER[kv[0]])) for kv in sorted(originals, key=repr)}

    def fact(f: tuple) -> tuple:
        return (f[0], *(swap[kv] for kv in _typed(gp, f)))

    cuts = sorted(draw(st.lists(st.integers(0, len(steps)), max_size=2)))
    ids = draw(st.lists(IDS, min_size=len(steps), max_size=len(steps)))
    messages = [json.dumps({"add": [_wire(fact(f)) for f in add], "del": [_wire(fact(f)) for f in dele],
                            **({} if i is None else {"id": i})})
                for (add, dele), i in zip(steps, ids, strict=True)]  # fmt: skip
    batches = [messages[a:b] for a, b in zip([0, *cuts], [*cuts, len(messages)], strict=True)]
    return gp.text, [fact(f) for f in sorted(initial, key=repr)], batches


def _typed(gp, f: tuple):
    return zip(gp.schema[f[0]], f[1:], strict=True)


def _wire(fact: tuple) -> list:
    return [fact[0], *map(json_value, fact[1:])]


def _run(
    text: str, initial: list, batches: list[list[str]], rows_out: bool, key: str | None = None
):
    reasoner = Reasoner.from_text(text, options=EngineOptions("fd-counting", core="arrays"))
    pub, store = TextRecorder(), MemoryStateStore()
    proc = BatchProcessor(reasoner, store, pub, rows_out=rows_out, key=key)
    if key is None:
        proc.start(initial)
    else:
        proc.begin(initial)
    offset = 0
    for b, values in enumerate(batches):
        rows = [
            Message(0, offset + i, None, v, 1000 + i, True, len(v.encode()))
            for i, v in enumerate(values)
        ]
        proc.process(b, Messages.of(rows))
        offset += len(values)
    return pub.sent, store, proc


def _restored(text: str, store: MemoryStateStore) -> Reasoner:
    r = Reasoner.from_text(text, options=EngineOptions("fd-counting", core="arrays"))
    r.restore(store.load())
    return r


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_the_rows_path_publishes_the_bytes_of_the_tuple_path(case):
    text, initial, batches = case
    rows, store, proc = _run(text, initial, batches, rows_out=True)
    tuples, reference, _ = _run(text, initial, batches, rows_out=False)
    assert rows == tuples  # every batch's delta, dead letters included, byte for byte
    assert store.outputs == reference.outputs
    assert store.tables == reference.tables  # the same state changes were committed
    back = _restored(text, store)
    assert back.facts() == proc.reasoner.facts()
    assert back.explicit() == proc.reasoner.explicit()


@settings(max_examples=examples(20), deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_a_keys_first_batch_publishes_its_whole_materialisation_from_rows(case):
    """A key's first delta is its whole materialisation (`encode_all`): the same facts, in any order."""
    text, initial, batches = case
    rows, _, proc = _run(text, initial, batches, rows_out=True, key="k")
    tuples, _, _ = _run(text, initial, batches, rows_out=False, key="k")
    first, want = json.loads(rows[0]), json.loads(tuples[0])
    assert sorted(first[3], key=json.dumps) == sorted(want[3], key=json.dumps)
    assert first[:3] == want[:3] and first[4:] == want[4:]
    assert len(first[3]) == len({json.dumps(f) for f in first[3]})
    assert rows[1:] == tuples[1:]
