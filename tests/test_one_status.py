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
