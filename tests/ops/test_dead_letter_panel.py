"""Dead letters are reasons, not a number -- kinds as a bounded label, the last ones on the page."""

import json

from prometheus_client import generate_latest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Limits, Reasoner
from fluxmat.ops.metrics import Exported, JobMetrics
from fluxmat.stream.batch import DEAD_LETTER_KINDS, OTHER_KIND, BatchProcessor, dead_letter_kind
from tests.support.shared import NullPublisher

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z)."


def _row(offset, value, size=None, utf8=True):
    return (0, offset, None, value, None, utf8, size if size is not None else len(value or ""))


def test_every_dead_letter_has_a_kind_from_a_bounded_set_and_is_listed_with_its_offset():
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), MemoryStateStore(), NullPublisher(),
                       limits=Limits(work=40), max_message_bytes=2000)  # fmt: skip
    p.start([])
    chain = json.dumps({"add": [["edge", f"n{i}", f"n{i + 1}"] for i in range(12)]})
    rows = [_row(0, "{oops"), _row(1, json.dumps({"add": [["edge", "a"]], "x": 1})), _row(2, "x" * 3000, 3000),
            _row(3, "\ufffd", utf8=False), _row(4, chain), _row(5, json.dumps({"add": [["edge", "a", "b"]]}))]  # fmt: skip
    outcome = p.process(0, rows)
    m = JobMetrics("p.dl", "fd-counting", "default", "updates")
    m.on_batch(outcome, p, MemoryStateStore())
    listed = m.status()["dead_letters"]
    assert [(d["offset"], d["kind"]) for d in listed] == [
        (0, "invalid_json"), (1, "invalid_update"), (2, "too_large"), (3, "not_utf8"), (4, "work_limit")]
    assert all(d["reason"] and d["partition"] == 0 and d["batch"] == 0 for d in listed)
    text = generate_latest(m.registry).decode()
    assert 'fluxmat_dead_letters_by_reason_total{reason="invalid_json"} 1.0' in text
    assert 'fluxmat_dead_letters_by_reason_total{reason="work_limit"} 1.0' in text
    assert "fluxmat_dead_letters_total 5.0" in text
    assert 'fluxmat_engine_work_total{kind="units"}' in text
    served = generate_latest(Exported(m.registry, m.process, namespace="default")).decode()  # what /metrics serves
    assert "process_cpu_seconds_total" in served and "process_resident_memory_bytes" in served
    samples = [line for line in served.splitlines() if line and not line.startswith("#")]
    assert samples and all('namespace="default"' in line for line in samples)  # Grafana's $namespace
    labels = {line.split('reason="')[1].split('"')[0] for line in text.splitlines()
              if line.startswith("fluxmat_dead_letters_by_reason_total{")}  # fmt: skip
    assert labels <= set(DEAD_LETTER_KINDS.values()) | {OTHER_KIND}


def test_kinds_by_reason():
    assert dead_letter_kind("fact limit exceeded: 10 facts ...") == "fact_limit"
    assert dead_letter_kind("cannot decode the message: MemoryError: ") == "error"
    assert dead_letter_kind("partition 0 offset 3: unknown key 'x' in update") == OTHER_KIND
