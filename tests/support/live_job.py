"""A running job for the operations tests: tansu, redis-server, Spark, its metrics and API port."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.support.messages import read_deltas
from tests.support.pipeline import (
    INITIAL,
    Proc,
    check_initial,
    final_explicit,
    rebuild,
    remat,
)

TOKEN = "s3cret-token"


class LiveJob:
    def __init__(self, setup, proc: Proc, metrics_port: int, dashboard_port: int):
        self.s, self.proc = setup, proc
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        self.base = f"http://127.0.0.1:{dashboard_port}"
        self.max_lag_seen = 0
        self.statuses: list[dict] = []

    def get(self, path: str, token: str | None = TOKEN):
        req = urllib.request.Request(self.base + path)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def metrics(self) -> dict[str, float]:
        with urllib.request.urlopen(self.metrics_url, timeout=10) as resp:
            text = resp.read().decode("utf-8")
        out = {}
        for family in text_string_to_metric_families(text):
            for (
                s
            ) in family.samples:  # every series names the job's namespace (Grafana's $namespace)
                assert s.labels.get("namespace") == self.s.namespace, s
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items())
                                  if k != "namespace" or s.name == "fluxmat_info")  # fmt: skip
                out[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
        return out


def healthz(job: LiveJob) -> tuple[int, str] | None:
    """(HTTP status, body) of /healthz; None when the job no longer answers."""
    try:
        with urllib.request.urlopen(job.base + "/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def updates(prefix: str, n: int) -> list[dict]:
    """A chain prefix0 -> prefix1 -> ...; every third update deletes the edge before."""
    out = []
    for i in range(n):
        u = {"add": [["edge", f"{prefix}{i}", f"{prefix}{i + 1}"]], "id": f"{prefix}{i}"}
        if i % 3 == 2:
            u["del"] = [["edge", f"{prefix}{i - 1}", f"{prefix}{i}"]]
        out.append(u)
    return out


def assert_nothing_lost(s, sent: list[dict]) -> None:
    msgs = read_deltas(s.bootstrap, s.deltas)
    check_initial(msgs)
    assert rebuild(msgs) == remat(final_explicit(INITIAL, sent))
