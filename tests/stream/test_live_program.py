"""Program messages applied by the streaming job's batch processor on the arrays core (stream.live_program).

A program change is applied at its place in the batch (the updates before it
integrated first); the batch's delta is the net change; the program in force
is committed with the state, so a restart rebuilds with it, and a batch re-run
after a crash before its commit applies the change once. A change that fails
validation is a dead letter and changes nothing. With a MemoryStateStore and a
real redis-server.
"""

from __future__ import annotations

import json

import pytest

from fluxmat.connectors.state import MemoryStateStore, RedisStateStore
from fluxmat.engine import EngineOptions, Reasoner, StateMismatch
from fluxmat.engine.equality import SAME_AS
from fluxmat.engine.limits import Limits
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import DeadLetters
from tests.support.state import FlakyStore

PROGRAM = "path(X, Y) :- edge(X, Y).\n"
CLOSURE = "path(X, Z) :- path(X, Y), edge(Y, Z)."
INITIAL = [("edge", "a", "b")]
BATCH = [{"add": [["edge", "b", "c"]]}, {"program": {"add": CLOSURE}, "id": "v2"},
         {"add": [["edge", "c", "d"]]}, {"del": [["edge", "a", "b"]]}]  # fmt: skip


def _rows(items, first: int = 0) -> list[tuple]:
    values = [json.dumps(item) for item in items]
    return [(0, first + i, None, v, None, True, len(v)) for i, v in enumerate(values)]


def _reasoner(text: str = PROGRAM) -> Reasoner:
    return Reasoner.from_text(text, options=EngineOptions("fd-counting", core="arrays"))


def _processor(store, publisher=None) -> BatchProcessor:
    p = BatchProcessor(_reasoner(), store, publisher or DeadLetters())
    p.start(INITIAL)
    return p


def _scratch(text: str, explicit) -> set[tuple]:
    r = Reasoner.from_text(text)
    r.load(explicit)
    return r.facts()


def _fold(facts: set, output: dict) -> set:
    added = {tuple(f) for f in output["added"]}
    removed = {tuple(f) for f in output["removed"]}
    assert not added & removed
    return (facts - removed) | added


def _change_restart_replay(open_store) -> None:
    p = _processor(open_store())
    seen = {tuple(f) for f in p.initial.output["added"]}
    seen = _fold(seen, p.process(0, _rows(BATCH)).output)
    explicit = {("edge", "b", "c"), ("edge", "c", "d")}
    assert seen == _scratch(PROGRAM + CLOSURE, explicit) == p.facts()
    assert ("path", "b", "d") in seen and p.reasoner.program_version == 2
    restarted = _processor(open_store())  # configured with PROGRAM: the stored program wins
    assert restarted.reasoner.program_version == 2
    assert restarted.reasoner.program_text() == p.reasoner.program_text()
    assert restarted.reasoner.program_history == p.reasoner.program_history
    later = _rows([{"add": [["edge", "d", "e"]]}], 4)
    out = restarted.process(1, later).output
    seen = _fold(seen, out)
    assert seen == _scratch(PROGRAM + CLOSURE, explicit | {("edge", "d", "e")})
    again = _processor(open_store())
    replay = again.process(1, later)
    assert replay.replayed and replay.output is None
    assert again.store.output(1) == out and again.reasoner.program_version == 2


def test_a_program_change_mid_batch_is_applied_in_order_kept_on_restart_and_replayed_once():
    store = MemoryStateStore()
    _change_restart_replay(lambda: store)


def test_the_program_in_force_survives_a_restart_from_redis(redis_server):
    namespace = "live-program"
    _change_restart_replay(lambda: RedisStateStore(redis_server.url, namespace))


def test_a_batch_rerun_after_a_crash_before_its_commit_applies_the_change_once():
    store = FlakyStore(fail_at=0)
    with pytest.raises(ConnectionError):
        _processor(store).process(0, _rows(BATCH))
    p = _processor(store)  # restarted: the state as of batch -1
    assert p.reasoner.program_version == 1
    seen = _fold({tuple(f) for f in store.output(-1)["added"]}, p.process(0, _rows(BATCH)).output)
    assert seen == _scratch(PROGRAM + CLOSURE, {("edge", "b", "c"), ("edge", "c", "d")})
    assert p.reasoner.program_version == 2 and store.state_meta()["program_version"] == 2


def test_a_program_change_that_fails_validation_is_a_dead_letter_and_changes_nothing():
    store, publisher = MemoryStateStore(), DeadLetters()
    p = _processor(store, publisher)
    before = store.state_meta()["program"]
    items = [{"add": [["q", "a", "b"]]}, {"program": {"add": "q(X) :- edge(X, Y)."}},
             {"program": {"add": "path(X, Y) :- edge(X, Y"}}, {"add": [["edge", "b", "c"]]}]  # fmt: skip
    out = p.process(0, _rows(items)).output
    assert [offset for _, offset in publisher.dead] == [1, 2]
    assert publisher.dead[0][0] == (
        "partition 0 offset 1: <add>:1:1: predicate q has 1 arguments here but 2 in "
        "the materialisation; nothing was changed"
    )
    explicit = {("edge", "a", "b"), ("edge", "b", "c"), ("q", "a", "b")}
    assert _fold({tuple(f) for f in p.initial.output["added"]}, out) == _scratch(PROGRAM, explicit)
    assert p.reasoner.program_version == 1 and store.state_meta()["program"] == before
    assert store.state_meta()["program_version"] == 1


def test_a_changed_state_is_refused_by_a_job_of_another_program_and_taken_by_one_of_the_new_program():
    store = MemoryStateStore()
    changed = _processor(store)
    changed.process(0, _rows(BATCH))
    other = BatchProcessor(_reasoner("path(X, Y) :- edge(Y, X).\n"), store, DeadLetters())
    with pytest.raises(StateMismatch, match="another program"):
        other.start(INITIAL)
    redeployed = BatchProcessor(_reasoner(changed.reasoner.program_text()), store, DeadLetters())
    redeployed.start(INITIAL)
    assert redeployed.facts() == changed.facts()


def test_a_batch_rerun_for_a_quarantined_update_starts_again_from_the_committed_program():
    store, publisher = MemoryStateStore(), DeadLetters()
    p = BatchProcessor(_reasoner(), store, publisher, limits=Limits(work=50))
    p.start(INITIAL)
    nodes = [["node", f"n{i}"] for i in range(100)]
    items = [{"program": {"add": "seen(X) :- node(X)."}}, {"add": nodes}, {"add": [["node", "m"]]}]
    out = p.process(0, _rows(items)).output
    assert [offset for _, offset in publisher.dead] == [1]
    assert publisher.dead[0][0].startswith("work limit exceeded")
    explicit = {("edge", "a", "b"), ("node", "m")}
    expected = _scratch(PROGRAM + "seen(X) :- node(X).", explicit)
    assert _fold({tuple(f) for f in p.initial.output["added"]}, out) == expected == p.facts()
    assert p.reasoner.program_version == 2 and store.state_meta()["program_version"] == 2


def test_a_program_change_that_runs_out_of_the_work_limit_is_quarantined():
    store, publisher = MemoryStateStore(), DeadLetters()
    p = BatchProcessor(_reasoner(), store, publisher, limits=Limits(work=20))
    p.start([("node", f"n{i}") for i in range(50)])
    items = [{"add": [["edge", "b", "c"]]}, {"program": {"add": "seen(X) :- node(X)."}}]
    p.process(0, _rows(items))
    assert [offset for _, offset in publisher.dead] == [1]
    assert publisher.dead[0][0].startswith("work limit exceeded")
    assert p.reasoner.program_version == 1 and ("edge", "b", "c") in p.facts()
    assert not any(f[0] == "seen" for f in p.facts())


def test_a_program_message_that_ends_its_batch_is_the_batch_through():
    store = MemoryStateStore()
    p = _processor(store)
    items = [{"add": [["edge", "b", "c"]], "id": "u1"}, {"program": {"add": CLOSURE}, "id": "v2"}]
    out = p.process(0, _rows(items)).output
    assert out["through"] == "v2" and store.state_meta()["through"] == "v2"
    assert ("path", "a", "c") in {tuple(f) for f in out["added"]}
    nameless = p.process(1, _rows([{"program": {"del": CLOSURE}}], 2)).output
    assert nameless["through"] == "0:2"
    failed = p.process(2, _rows([{"add": [["edge", "c", "d"]], "id": "u3"}, {"program": {"del": CLOSURE}}], 3))
    assert failed.dead == 1 and failed.output["through"] == "u3"  # a dead letter is not reflected


def test_a_job_redeployed_with_the_program_in_force_keeps_its_version_and_history():
    store = MemoryStateStore()
    changed = _processor(store)
    changed.process(0, _rows(BATCH))
    redeployed = BatchProcessor(_reasoner(changed.reasoner.program_text()), store, DeadLetters())
    redeployed.start(INITIAL)
    assert redeployed.reasoner.program_version == 2
    assert redeployed.reasoner.program_history == changed.reasoner.program_history
    redeployed.process(1, _rows([{"add": [["edge", "d", "e"]]}], 4))
    meta = store.state_meta()
    assert meta["program_version"] == 2 and meta["program_origin"] == changed.origin
    original = _processor(store)  # the file the changes started from still finds the stored program
    assert original.reasoner.program_version == 2 and ("path", "b", "e") in original.facts()


def test_a_changed_state_meeting_another_program_is_refused_naming_both():
    store = MemoryStateStore()
    _processor(store).process(0, _rows(BATCH))
    other = Reasoner.from_text("path(X, Y) :- edge(Y, X).\n", source="other.dl",
                               options=EngineOptions("fd-counting", core="arrays"))  # fmt: skip
    with pytest.raises(StateMismatch) as refused:
        BatchProcessor(other, store, DeadLetters()).start(INITIAL)
    message = str(refused.value)
    assert "\n" not in message and "another program" in message
    assert "program version 2" in message and "other.dl (digest " in message
    assert store.state_meta()["program_version"] == 2


# ---------------------------------------------------------------- with equality (engine.compact.eq_program)

OWL = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
EQ_PROGRAM = OWL + "p(X, Y) :- e(X, Y).\n"
SAME_TARGET = "owl:sameAs(X, Y) :- p(X, Z), p(Y, Z)."  # one target: the sources are one individual
EQ_BATCH = [{"add": [["e", "b", "c"]]}, {"program": {"add": OWL + SAME_TARGET}, "id": "v2"},
            {"add": [["e", "d", "c"], ["f", "d"]]}, {"del": [["e", "a", "x"]]}]  # fmt: skip


def _eq_processor(store) -> BatchProcessor:
    options = EngineOptions("fd-counting", core="arrays", equality="rewrite")
    p = BatchProcessor(Reasoner.from_text(EQ_PROGRAM, options=options), store, DeadLetters())
    p.start([("e", "a", "x"), ("e", "a", "c")])
    return p


def _eq_scratch(text: str, explicit) -> set[tuple]:
    r = Reasoner.from_text(text, "remat", equality="rewrite")  # the objects core's
    r.load(explicit)
    return r.facts()


def _expanded(output: dict) -> dict:
    """The output's facts with the prefixed owl:sameAs written out (as the engine's facts have it)."""

    def full(f):
        return [SAME_AS if f[0] == "owl:sameAs" else f[0], *f[1:]]

    return {k: [full(f) for f in output[k]] for k in ("added", "removed")}


def _equality_change_restart_replay(open_store) -> None:
    p = _eq_processor(open_store())
    initial = {tuple(f) for f in _expanded(p.initial.output)["added"]}
    seen = _fold(initial, _expanded(p.process(0, _rows(EQ_BATCH)).output))
    explicit = {("e", "a", "c"), ("e", "b", "c"), ("e", "d", "c"), ("f", "d")}
    changed = EQ_PROGRAM + SAME_TARGET + "\n"
    assert p.facts() == _eq_scratch(changed, explicit) == seen
    assert ("f", "a") in seen and p.reasoner.program_version == 2  # a, b, d are one
    restarted = _eq_processor(open_store())  # the stored program, classes and rewritten facts
    assert restarted.reasoner.program_version == 2 and restarted.facts() == seen
    split = {"del": OWL + SAME_TARGET, "add": "q(X) :- f(X)."}  # the class splits: a rebuild
    later = [{"add": [["e", "x", "c"]]}, {"program": split}]
    out = restarted.process(1, _rows(later, 4)).output
    seen = _fold(seen, _expanded(out))
    final = EQ_PROGRAM + "q(X) :- f(X).\n"
    assert seen == _eq_scratch(final, explicit | {("e", "x", "c")}) == restarted.facts()
    assert ("f", "a") not in seen and ("q", "d") in seen
    again = _eq_processor(open_store())
    replay = again.process(1, _rows(later, 4))
    assert replay.replayed and again.store.output(1) == out
    assert again.reasoner.program_version == 3 and again.facts() == seen


def test_a_program_change_with_equality_is_applied_in_order_kept_on_restart_and_replayed_once():
    store = MemoryStateStore()
    _equality_change_restart_replay(lambda: store)


def test_a_program_change_with_equality_survives_a_restart_from_redis(redis_server):
    _equality_change_restart_replay(lambda: RedisStateStore(redis_server.url, "live-program-eq"))
