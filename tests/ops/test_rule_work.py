"""Work per rule -- rule applications and derivation-log growth by the rule's file:line, bounded.

The engine counts, through the Reasoner door, each rule's applications and its
instances in the derivation log (fd-counting); a batch reports the changes; the
metrics keep a series for each batch's top rules (at most `RULE_SERIES` over the
job's life) and put the rest under "other", so the label set stays bounded and
the sums stay exact.

What a rule's numbers mean depends on the core. The objects core counts the rule
instances its units applied and keeps a derivation log (fd-counting). The arrays
core (the default) counts the head instances its compiled plans produced (every
delta plan's, an instance that adds and one that takes away each count) and keeps
counters, no log: its log entries are 0. Both name rules by file and line.
"""

import json
import random
from collections import Counter

import pytest
from prometheus_client import generate_latest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Fed, Reasoner
from fluxmat.ops.metrics import RULE_SERIES, JobMetrics
from fluxmat.stream.batch import BatchProcessor
from tests.support.shared import NullPublisher

CHAIN = """\
path(X, Y) :- edge(X, Y).
path(X, Z) :- path(X, Y), edge(Y, Z).
far(X, Y) :- path(X, Y), not edge(X, Y).
"""
LINES = {"<input>:1", "<input>:2", "<input>:3"}
OBJECTS = EngineOptions(core="objects")


def _row(offset: int, update: dict) -> tuple:
    value = json.dumps(update)
    return (0, offset, None, value, None, True, len(value))


def _series(m, name: str) -> dict[str, float]:
    out = {}
    for line in generate_latest(m.registry).decode().splitlines():
        if line.startswith(name + "{"):
            labels, value = line.rsplit(" ", 1)
            out[labels.split('rule="', 1)[1].rsplit('"', 1)[0]] = float(value)
    return out


def _feeds(r: Reasoner):
    """30 batches of overlapping updates with deletions, fed to `r`; yields after each."""
    rnd = random.Random(5)
    pool = [("edge", a, b) for a in "abcde" for b in "abcde" if a != b]
    for step in range(30):
        add = set(rnd.sample(pool, 3))
        r.feed([Fed((step, i), add - {e}, {e}) for i, e in enumerate(rnd.sample(pool, 2))])  # overlapping
        yield step


@pytest.mark.parametrize("modules", [True, False])
def test_the_log_per_rule_is_kept_exactly_through_overlapping_updates_and_deletions(modules):
    r = Reasoner.from_text(CHAIN, "fd-counting", modules=modules, options=OBJECTS)  # recounts its derivation log
    r.load([])
    for _ in _feeds(r):
        recount = Counter(r.rule_labels[lk[0]] for lk, _head in r.maintainer.log_entries())
        work = r.rule_work()
        assert {label: n for label, (_, n) in work.items() if n} == dict(recount)
        rules = [a for label, (a, _) in work.items() if not label.startswith("module ")]
        assert sum(rules) == r.work_counts()["rule_applications"] and ("module ltc(path)" in work) == modules


@pytest.mark.parametrize("modules", [True, False])
def test_on_the_arrays_core_each_rule_reports_its_instances_and_no_log(modules):
    r = Reasoner.from_text(CHAIN, "fd-counting", modules=modules)
    assert r.core == "arrays"
    r.load([])
    before = {label: 0 for label in LINES}
    for _ in _feeds(r):
        work = r.rule_work()
        assert set(work) <= LINES | {f"module {m}" for m in r.modules_used()}
        assert all(logged == 0 for _, logged in work.values()) and r.sizes()["log"] == 0  # counters, no log
        assert all(work.get(label, (0, 0))[0] >= n for label, n in before.items())  # applications only grow
        before = {label: a for label, (a, _) in work.items()}
        assert sum(before.values()) == r.work_counts()["rule_applications"]
    assert set(before) == LINES and all(before.values())


def test_a_batch_reports_its_rules_and_the_metrics_name_them_by_file_and_line():
    # the objects core's counts: one application per instance its units applied, one log entry each
    reasoner = Reasoner.from_text(CHAIN, "fd-counting", modules=False, options=OBJECTS)  # line 2 by rule, not ltc
    processor = BatchProcessor(reasoner, MemoryStateStore(), NullPublisher())
    processor.start([])
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    outcome = processor.process(0, [_row(0, {"add": [["edge", "a", "b"], ["edge", "b", "c"], ["edge", "c", "d"]]})])
    # 3 edges: 3 paths by line 1, the longer a-c, b-d, a-d by line 2, far() of those 3 by line 3
    assert outcome.rules == {"<input>:1": (3, 3, 3), "<input>:2": (3, 3, 3), "<input>:3": (3, 3, 3)}
    m.on_batch(outcome, processor, processor.store)
    outcome = processor.process(1, [_row(1, {"del": [["edge", "b", "c"]]})])
    # left: paths a-b and c-d (line 1), no longer path (line 2), no far() (line 3)
    assert {label: grown for label, (_, grown, _) in outcome.rules.items()} == {
        "<input>:1": -1, "<input>:2": -3, "<input>:3": -3}  # fmt: skip
    m.on_batch(outcome, processor, processor.store)
    assert _series(m, "fluxmat_rule_log_entries") == {"<input>:1": 2, "<input>:2": 0, "<input>:3": 0, "other": 0}
    applications = _series(m, "fluxmat_rule_applications_total")
    assert sum(applications.values()) == reasoner.work_counts()["rule_applications"]
    top = m.status()["now"]["rules"]
    assert top["batch"] == 1 and [r["rule"] for r in top["top"]][0] in {"<input>:1", "<input>:2", "<input>:3"}
    assert top["top"][0]["text"].startswith(("path(", "far("))


def test_on_the_arrays_core_a_batch_reports_its_rules_and_the_metrics_name_them_by_file_and_line():
    reasoner = Reasoner.from_text(CHAIN, "fd-counting", modules=False)
    assert reasoner.core == "arrays"
    processor = BatchProcessor(reasoner, MemoryStateStore(), NullPublisher())
    processor.start([])
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    outcome = processor.process(0, [_row(0, {"add": [["edge", "a", "b"], ["edge", "b", "c"], ["edge", "c", "d"]]})])
    # each line derives 3 facts (as above): at least one head instance each; no log
    assert set(outcome.rules) == LINES
    assert all(applied >= 3 and (grown, entries) == (0, 0) for applied, grown, entries in outcome.rules.values())
    m.on_batch(outcome, processor, processor.store)
    outcome = processor.process(1, [_row(1, {"del": [["edge", "b", "c"]]})])
    assert set(outcome.rules) == LINES  # the deletion's instances, by every line it undid
    assert all(applied > 0 and (grown, entries) == (0, 0) for applied, grown, entries in outcome.rules.values())
    m.on_batch(outcome, processor, processor.store)
    assert _series(m, "fluxmat_rule_log_entries") == {"<input>:1": 0, "<input>:2": 0, "<input>:3": 0, "other": 0}
    applications = _series(m, "fluxmat_rule_applications_total")
    assert set(applications) == LINES | {"other"} and applications["other"] == 0
    assert sum(applications.values()) == reasoner.work_counts()["rule_applications"]
    top = m.status()["now"]["rules"]
    assert top["batch"] == 1 and {r["rule"] for r in top["top"]} == LINES
    assert all(r["text"].startswith(("path(", "far(")) for r in top["top"])


def test_rule_labels_stay_bounded_and_the_rest_is_counted_as_other():
    n = RULE_SERIES + 30  # more rules than series: one rule per line, one predicate each
    program = "\n".join(f"q{i}(X) :- p{i}(X)." for i in range(n))
    processor = BatchProcessor(Reasoner.from_text(program, "fd-counting"), MemoryStateStore(), NullPublisher())
    processor.start([])
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    for b in range(n // 5):  # each batch applies 5 other rules
        adds = [[f"p{i}", j] for i in range(5 * b, 5 * b + 5) for j in range(i % 3 + 1)]
        m.on_batch(processor.process(b, [_row(b, {"add": adds})]), processor, processor.store)
    applications = _series(m, "fluxmat_rule_applications_total")
    assert len(applications) == RULE_SERIES + 1 and applications["other"] > 0
    assert sum(applications.values()) == processor.reasoner.work_counts()["rule_applications"]
    log = _series(m, "fluxmat_rule_log_entries")
    assert set(log) == set(applications) and sum(log.values()) == processor.reasoner.sizes()["log"]
