"""One codec (engine.wire) -- every constant survives every path, a restart from Redis included."""

import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluxmat.connectors.files import decode_json, parse_update
from fluxmat.connectors.state import RedisStateStore
from fluxmat.engine import EngineOptions, Iri, Reasoner, atom_to_fact, parse_facts
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.wire import fact_from_json, fact_from_text, fact_json, fact_text, pred_json
from fluxmat.stream.batch import BatchProcessor
from tests.support.gen import CONSTANTS, FACTS, examples

PREFIXES = {"ex": "http://example.org/", "p": "http://p/"}
PRINTER = FactPrinter(PREFIXES.items())


@settings(max_examples=examples(300), deadline=None)
@given(FACTS)
def test_a_fact_survives_the_wire_the_state_and_program_text(fact):
    sent = json.dumps(fact_json(fact, PRINTER), ensure_ascii=False)  # a delta or update message
    assert atom_to_fact(fact_from_json(decode_json(sent), PREFIXES)) == fact
    assert fact_from_text(fact_text(fact)) == fact  # a state entry


@settings(max_examples=examples(200), deadline=None)
@given(FACTS.filter(lambda f: all(not isinstance(a, int) or abs(a) < 10**100 for a in f[1:])))
def test_program_text_reads_back_as_the_same_fact(fact):
    (atom,) = parse_facts(PRINTER.fact(fact), "<f>", PREFIXES)
    assert atom_to_fact(atom) == fact


def test_a_string_that_looks_like_an_iri_is_written_as_a_value_object():
    assert fact_json(("p", "<x>", Iri("x"), "x")) == ["p", {"@value": "<x>"}, "<x>", "x"]
    assert pred_json("<x>", PRINTER) == "<<x>>" and pred_json("http://example.org/r", PRINTER) == "ex:r"
    assert pred_json("ex:r", PRINTER) == "<ex:r>"  # would be expanded when read back


PROGRAM = "@prefix ex: <http://example.org/> .\nreach(X, Y) :- link(X, Y).\nreach(X, Z) :- reach(X, Y), link(Y, Z)."


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(CONSTANTS, CONSTANTS), min_size=1, max_size=4), st.integers(0, 10**6))
def test_constants_survive_a_restart_from_redis(redis_server, edges, n):
    """Facts sent as update messages, committed to redis-server, restored by a new job: the same facts."""
    namespace = f"wire-{n}"
    store = RedisStateStore(redis_server.url, namespace=namespace)
    store.clear()
    deltas = []

    class Publisher:
        def publish_delta(self, batch, through, added, removed, causes=None):
            deltas.append((added, removed))

        def publish_dead_letter(self, *args, **kw):
            raise AssertionError(f"no dead letters expected: {args}")

    objects = EngineOptions(core="objects")  # reads the objects engine's `born`
    first = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting", options=objects), store, Publisher())
    first.start([])
    facts = [("link", a, b) for a, b in edges]
    message = json.dumps({"add": [first.codec.encode(f) for f in facts]})
    parse_update(decode_json(message), first.reasoner.prefixes, "m")  # valid as sent
    first.process(0, [(0, 0, None, message, None, True, len(message.encode()))])
    before = first.facts()
    assert set(facts) <= before
    rebuilt = set()
    for added, removed in deltas:  # what a consumer rebuilds from the deltas
        rebuilt |= {atom_to_fact(fact_from_json(f, first.reasoner.prefixes)) for f in added}
        rebuilt -= {atom_to_fact(fact_from_json(f, first.reasoner.prefixes)) for f in removed}
    assert rebuilt == before
    store.close()
    store = RedisStateStore(redis_server.url, namespace=namespace)
    second = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting", options=objects), store, Publisher())
    said: list[str] = []
    done = second.start([], say=said.append)
    assert re.fullmatch(r"restored state of batch \d+: \d+ facts \(read \d+\.\d s, restored in \d+\.\d s\)", done), done
    n = len(first.reasoner.maintainer.born)  # a restore says what it restores before it starts
    assert len(said) == 1 and re.fullmatch(rf"restoring the state of batch \d+ from the store: {n:,} facts, "
                                           r"[\d,]+ log entries \(read in \d+\.\d s\)", said[0]), said  # fmt: skip
    assert second.facts() == before
    store.clear()
    store.close()
