"""Operations for the streaming job: the metrics and the dashboard plugged into stream.job.

`Operations` is what `fluxmat run` and `fluxmat demo` hand to `stream.job.Job`
(the job knows only the bases in stream.observe): it refuses a dashboard bound
beyond loopback without a token before anything starts, feeds `JobMetrics`,
and runs the Prometheus endpoint and the live page the configuration asks for.
"""

from __future__ import annotations

import threading

from fluxmat.ops.collectors import serve_metrics
from fluxmat.ops.dashboard import KeyedLiveSource, LiveSource, check_binding, serve
from fluxmat.ops.inspect import StateView
from fluxmat.ops.metrics import JobMetrics
from fluxmat.stream import observe


class Operations(observe.Operations):
    """Metrics and dashboard for one job (see the module docstring)."""

    def check(self, cfg) -> None:
        if cfg.dashboard_port is not None:
            check_binding(cfg.dashboard_host, cfg.auth_token)

    def observer(self, cfg) -> JobMetrics:
        return JobMetrics(cfg.program, cfg.engine.algorithm, cfg.namespace, cfg.updates_topic)

    def serve(self, cfg, observer, reasoner, lock: threading.Lock) -> list[tuple[str, object]]:
        servers: list[tuple[str, object]] = []
        try:
            if cfg.metrics_port is not None:
                server, _thread = serve_metrics(observer, cfg.metrics_host, cfg.metrics_port)
                servers.append(("metrics", server))
            if cfg.dashboard_port is not None:
                if cfg.keyed:
                    source = KeyedLiveSource(observer, cfg)
                else:
                    source = LiveSource(observer, StateView(reasoner, lock))
                servers.append(("dashboard", serve(source, cfg.dashboard_host, cfg.dashboard_port, cfg.auth_token)))
        except BaseException:
            for _name, server in servers:
                server.shutdown()
                server.server_close()
            raise
        return servers
