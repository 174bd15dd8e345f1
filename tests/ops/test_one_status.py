"""One status value: the page's /api/status, /healthz and fluxmat_health_state read the same object.

The job's health used to be told three ways (the page's JSON, the health check,
the health gauge); now `JobMetrics.state` (ops.status.JobStatus) is the one
value, and every reader goes through it. A condition set on that value is seen
by all three at once, and an event fed to the metrics reaches all three alike.
"""

import json
import urllib.error
import urllib.request

from fluxmat.ops.dashboard import LiveSource, serve
from fluxmat.ops.metrics import JobMetrics
from fluxmat.ops.status import HEALTH_STATES, JobStatus


def _three(m: JobMetrics, base: str) -> tuple[str, str, str]:
    """The state as /api/status, /healthz and the gauge (after a sample) tell it."""
    m.sample()
    with urllib.request.urlopen(f"{base}/api/status", timeout=10) as resp:
        page = json.loads(resp.read())["health"]["state"]
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=10) as resp:
            check = resp.read().decode().split(":")[0]
    except urllib.error.HTTPError as exc:  # 503: failing
        check = exc.read().decode().split(":")[0]
    gauge = HEALTH_STATES[int(m.registry.get_sample_value("fluxmat_health_state"))]
    return page, check, gauge


def test_the_page_the_health_check_and_the_gauge_read_one_status_value():
    m = JobMetrics("p.dl", "fd-counting", "ns", "updates")
    assert isinstance(m.state, JobStatus)
    server = serve(LiveSource(m, None), "127.0.0.1", 0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert _three(m, base) == ("healthy",) * 3
        m.state.redis_problem = "node 10.0.0.3:7001 is failing"  # set on the value itself
        assert _three(m, base) == ("degraded",) * 3
        m.state.redis_problem = None
        m.on_error(RuntimeError("the broker is gone"))  # an event fed to the metrics
        assert _three(m, base) == ("failing",) * 3
        m.state.failing = None
        assert _three(m, base) == ("healthy",) * 3
    finally:
        server.shutdown()
        server.server_close()


def _key(key, facts, updates, pid, engines, cache="hit"):
    return {"key": key, "facts": facts, "updates": updates, "pid": pid, "engines": engines, "cache": cache,
            "seconds": 0.01, "rebuild": None}  # fmt: skip


def test_the_keys_panel_and_the_key_gauges_read_one_value():
    """With --partition-by: the page's keys panel and fluxmat_keys_* / engines_cached agree."""
    m = JobMetrics("p.dl", "fd-counting", "ns", "updates")
    m.on_keys([_key("a", 10, 2, 1, 3), _key("b", 30, 1, 2, 4)], store=None, tasks=[0.1])
    m.on_keys([_key("a", 12, 5, 1, 2)], store=None, tasks=[0.1])  # only a is active: b is still seen
    keys = m.status()["now"]["keys"]
    gauge = m.registry.get_sample_value
    assert (keys["seen"], keys["active"], keys["engines"]) == (2, 1, 6)
    assert (gauge("fluxmat_keys_seen"), gauge("fluxmat_keys_active"), gauge("fluxmat_engines_cached")) == (2, 1, 6)
    assert keys["largest"] == [("b", 30), ("a", 12)] and keys["busiest"] == [("a", 7), ("b", 1)]
    assert m.status()["now"]["facts"] == 42
