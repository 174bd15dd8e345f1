"""`fluxmat program apply` against a real broker: one control message, readable as a program change."""

from __future__ import annotations

import json

from kafka import KafkaConsumer

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.files import ProgramChange, parse_update
from tests.support.cli import NEW, OLD, fluxmat, ok


def test_apply_sends_one_program_change(broker, tmp_path):
    (tmp_path / "old.dl").write_text(OLD)
    (tmp_path / "new.dl").write_text(NEW)
    ensure_topics(broker.bootstrap, {"program-updates": 1})
    out = ok(fluxmat("program", "apply", tmp_path / "new.dl", "--program", tmp_path / "old.dl",
                     "--bootstrap-servers", broker.bootstrap, "--updates-topic", "program-updates", "--id", "v2"))  # fmt: skip
    assert out.splitlines()[-1] == "sent the program change to program-updates"
    consumer = KafkaConsumer("program-updates", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)  # fmt: skip
    messages = [json.loads(m.value) for m in consumer]
    consumer.close()
    assert messages == [{"program": {"whole": NEW}, "id": "v2"}]
    update = parse_update(messages[0], {}, "program-updates:0")
    assert update.program == ProgramChange(whole=NEW) and update.id == "v2"


ONTOLOGY = """@prefix : <http://example.org/u#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
:Person a owl:Class .
:Student a owl:Class ; rdfs:subClassOf :Person .
:GradStudent a owl:Class .
:advisor rdfs:domain :GradStudent .
"""
# one axiom removed (Student ⊑ Person), one added (GradStudent ⊑ Student)
NEW_ONTOLOGY = ONTOLOGY.replace("rdfs:subClassOf :Person .", ".").replace(
    ":GradStudent a owl:Class .", ":GradStudent a owl:Class ; rdfs:subClassOf :Student ."
)
DATA = """@prefix : <http://example.org/u#> .
:ann :advisor :prof .
:bob a :Student .
:cid a :Person .
"""


def test_an_ontology_swap_applies_the_difference_of_its_owl_rl_rules(broker, tmp_path):
    """`program apply --ontology NEW.ttl --old-ontology OLD.ttl`: the job's state equals a rebuild with NEW.ttl."""
    from fluxmat.connectors.files import read_facts
    from fluxmat.connectors.programs import build_reasoner
    from fluxmat.connectors.state import MemoryStateStore
    from fluxmat.engine import EngineOptions
    from fluxmat.stream.batch import BatchProcessor
    from tests.support.shared import DeadLetters

    old, new, data = tmp_path / "old.ttl", tmp_path / "new.ttl", tmp_path / "data.ttl"
    old.write_text(ONTOLOGY)
    new.write_text(NEW_ONTOLOGY)
    data.write_text(DATA)
    ensure_topics(broker.bootstrap, {"ontology-updates": 1})
    out = ok(fluxmat("program", "apply", "--ontology", new, "--old-ontology", old, "--facts", data,
                     "--bootstrap-servers", broker.bootstrap, "--updates-topic", "ontology-updates"))  # fmt: skip
    lines = out.splitlines()
    assert sum(line.startswith("- ") for line in lines) == 1 and sum(line.startswith("+ ") for line in lines) == 1
    assert "facts added: 1, removed: 1" in out  # ann becomes a Student; bob is no longer a Person
    consumer = KafkaConsumer("ontology-updates", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)  # fmt: skip
    [message] = [m.value.decode() for m in consumer]
    consumer.close()
    job = build_reasoner(None, [str(old)], EngineOptions("fd-counting", core="arrays"))
    facts = read_facts(str(data), job.prefixes)
    p = BatchProcessor(job, MemoryStateStore(), DeadLetters())
    p.start(facts)
    p.process(0, [(0, 0, None, message, None, True, len(message))])
    scratch = build_reasoner(None, [str(new)], EngineOptions("remat"))
    scratch.load(facts)
    assert p.facts() == scratch.facts() and p.reasoner.program_version == 2
