"""A program change reaching the streaming job's batch processor: a dead letter naming why, nothing changed.

The job runs the objects core (fully dynamic algorithms); program changes need
the arrays core, so a program message is refused in its place while the
updates around it apply.
"""

import json

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z)."


def _row(offset, item):
    value = json.dumps(item)
    return (0, offset, None, value, None, True, len(value))


def test_program_message_is_a_dead_letter_naming_why_and_the_updates_around_it_apply():
    publisher = DeadLetters()
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), publisher)
    p.start([])
    rows = [_row(0, {"add": [["edge", "a", "b"]]}), _row(1, {"program": {"add": "q(X) :- edge(X, Y)."}}),
            _row(2, {"add": [["edge", "b", "c"]]})]  # fmt: skip
    outcome = p.process(0, rows)
    assert outcome.dead == 1
    assert publisher.dead == [
        (
            "partition 0 offset 1: program changes need the arrays core (--core arrays); nothing was changed",
            1,
        )
    ]
    assert p.facts() == {("edge", "a", "b"), ("edge", "b", "c"), ("path", "a", "b"), ("path", "b", "c"),
                         ("path", "a", "c")}  # fmt: skip
    assert p.reasoner.program_text() == str(Reasoner.from_text(PROGRAM).program)
