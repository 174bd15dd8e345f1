"""`--verify-every N` recomputes the materialisation from scratch and catches a tampered state."""

import json

import pytest

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, FluxmatError, Reasoner
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream.batch import BatchProcessor
from fluxmat.stream.verify import Verifier
from tests.support.shared import NullPublisher

PROGRAM = "path(X, Y) :- edge(X, Y).\npath(X, Z) :- path(X, Y), edge(Y, Z)."
OBJECTS = EngineOptions(core="objects")  # the tests tamper with the objects engine's sets


def _job():
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting", options=OBJECTS), MemoryStateStore(), NullPublisher())
    p.start([("edge", "a", "b")])
    msg = json.dumps({"add": [["edge", "b", "c"], ["edge", "c", "d"]]})
    p.process(0, [(0, 0, None, msg, None, True, len(msg))])
    return p


def _check(processor, batch=0, every=1):
    results = []
    v = Verifier(every, results.append)
    started = v.after_batch(batch, processor.reasoner)
    v.wait(30)
    return started, results


def test_an_exact_state_is_verified_and_only_due_batches_are_checked():
    p = _job()
    started, results = _check(p)
    assert started and [(r.batch, r.ok, r.facts, r.missing, r.extra) for r in results] == [(0, True, 9, 0, 0)]
    assert _check(p, batch=3, every=2) == (False, [])  # not due
    assert _check(p, batch=4, every=0) == (False, [])  # off


def test_a_tampered_state_is_caught_with_what_differs():
    """A fact taken out of the engine and another put in (sizes unchanged) are both named."""
    p = _job()
    m = p.reasoner.maintainer  # tampering reaches inside on purpose
    pred, f = m.encode(("path", "a", "d"))
    m.rel(pred).discard(f)
    pred, g = m.encode(("path", "d", "a"))
    m.rel(pred).add(g)
    _, [result] = _check(p)
    assert not result.ok and (result.missing, result.extra) == (1, 1)
    assert result.sample == ["-path(a, d)", "+path(d, a)"]


def test_a_job_with_equality_is_verified_with_equality():
    """The reference treats owl:sameAs as equality too: a, b and d are one individual, so f(a) holds."""
    owl = "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
    text = owl + "p(X, Y) :- e(X, Y).\nowl:sameAs(X, Y) :- p(X, Z), p(Y, Z).\n"
    options = EngineOptions("fd-counting", core="arrays", equality="rewrite")
    p = BatchProcessor(Reasoner.from_text(text, options=options), MemoryStateStore(), NullPublisher())
    p.start([("e", "a", "c"), ("e", "b", "c"), ("e", "d", "c"), ("f", "d")])
    assert ("f", "a") in p.facts()
    _, [result] = _check(p)
    assert result.ok and (result.missing, result.extra) == (0, 0), result.sample


def test_the_result_reaches_the_metrics_and_the_page_data():
    p = _job()
    metrics = JobMetrics("p.dl", "fd-counting", "default", "updates")
    _, [ok] = _check(p)
    metrics.on_verified(ok)
    m = p.reasoner.maintainer
    pred, f = m.encode(("path", "a", "c"))
    m.rel(pred).discard(f)
    _, [bad] = _check(p)
    metrics.on_verified(bad)
    from prometheus_client import generate_latest

    text = generate_latest(metrics.registry).decode()
    assert 'fluxmat_verifications_total{result="exact"} 1.0' in text
    assert 'fluxmat_verifications_total{result="different"} 1.0' in text
    assert "fluxmat_verified_batch 0.0" in text
    status = metrics.status()
    assert status["now"]["verified"]["result"] == "different"
    assert "-path(a, c)" in status["errors"][-1]["message"]


def test_the_flag(tmp_path):
    from fluxmat.ops.cli import build_parser
    from fluxmat.ops.stream_cli import job_config

    base = ["run", "p.dl", "--bootstrap-servers", "x:1", "--updates-topic", "u", "--deltas-topic", "d",
            "--redis", "memory://", "--checkpoint", str(tmp_path)]  # fmt: skip
    assert job_config(build_parser().parse_args([*base, "--verify-every", "3"])).verify_every == 3
    assert job_config(build_parser().parse_args(base)).verify_every == 0
    with pytest.raises(FluxmatError, match="--verify-every must be at least 0"):
        job_config(build_parser().parse_args([*base, "--verify-every", "-1"]))
