"""A program change reaching the streaming job's batch processor on each core.

Program changes need the arrays core (the job's default; tests/stream/test_live_program.py
covers them in depth): there a program message applies at its place in the batch. A job
run with the objects core refuses it -- a dead letter naming why, nothing changed -- while
the updates around it apply.
"""

import json

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z)."


def _row(offset, item):
    value = json.dumps(item)
    return (0, offset, None, value, None, True, len(value))


ROWS = [_row(0, {"add": [["edge", "a", "b"]]}), _row(1, {"program": {"add": "q(X) :- edge(X, Y)."}}),
        _row(2, {"add": [["edge", "b", "c"]]})]  # fmt: skip
PATHS = {("edge", "a", "b"), ("edge", "b", "c"), ("path", "a", "b"), ("path", "b", "c"), ("path", "a", "c")}


def test_program_message_is_a_dead_letter_naming_why_and_the_updates_around_it_apply():
    publisher = DeadLetters()
    objects = Reasoner.from_text(PROGRAM, "fd-counting", options=EngineOptions(core="objects"))  # the refusing core
    p = BatchProcessor(objects, MemoryStateStore(), publisher)
    p.start([])
    outcome = p.process(0, ROWS)
    assert outcome.dead == 1
    assert publisher.dead == [
        (
            "partition 0 offset 1: program changes need the arrays core (--core arrays); nothing was changed",
            1,
        )
    ]
    assert p.facts() == PATHS
    assert p.reasoner.program_text() == str(Reasoner.from_text(PROGRAM).program)


def test_on_the_default_core_the_program_message_applies_in_its_place():
    publisher = DeadLetters()
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), publisher)
    assert p.reasoner.core == "arrays"
    p.start([])
    outcome = p.process(0, ROWS)
    assert (outcome.dead, outcome.updates, publisher.dead) == (0, 2, [])
    assert p.facts() == PATHS | {("q", "a"), ("q", "b")}
    assert "q(X) :- edge(X, Y)." in p.reasoner.program_text()
