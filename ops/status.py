"""The one status value of a running job: what the page, `/api/status`, `/healthz` and the metrics read.

`JobStatus` holds what a job reports about itself between batches: its
totals, its current values (`now`), the page's short histories (ring buffers
of points, batches, deltas, errors, dead letters, retries), its keys (`Keys`,
with `--partition-by`) and the conditions
its health is judged by. `health()` answers the health state machine's
verdict (ops.health: healthy, degraded, failing, with the reason); `as_dict()`
is the JSON of `/api/status`, which the dashboard apart from the job reads
too. `ops.metrics.JobMetrics` owns one, feeds it from the job's events (the
rows of the page's series: ops.series) and sets its gauges from it
(`fluxmat_health_state` is `health()`'s state), the live dashboard serves it,
so the page, `/healthz` and the metrics cannot tell different stories.

Thread-safety: none of its own; its owner (JobMetrics) holds one lock around
every read and write.

Not here: Prometheus collectors (ops.collectors), the health checks (ops.health), HTTP (ops.dashboard).
"""

from __future__ import annotations

import time
from collections import deque

from fluxmat.ops.health import HEALTH_STATES, judge
from fluxmat.stream.inflight import InFlight, Work

__all__ = ["HEALTH_STATES", "JobStatus", "Keys", "program_in_force"]

KEYS_SHOWN = 10  # the largest and the busiest keys the dashboard lists
PROGRAM_CHANGES_SHOWN = 20  # the last program changes the dashboard lists
TOTALS = ("updates", "adds", "deletes", "batches", "replayed", "deltas", "added", "removed",
          "dead_letters", "failures", "cancelled", "recursion_stops", "rederivations")  # fmt: skip


def program_in_force(version, history) -> dict:
    """The program version in force and its last changes (stream.live_program's metadata), as the page shows them."""
    return {"version": int(version or 1), "history": list(history or [])[-PROGRAM_CHANGES_SHOWN:]}


class Keys:
    """With `--partition-by`: what the job knows of its keys, from the summaries of their batches."""

    def __init__(self):
        self.facts: dict[str, int] = {}  # facts of each key, as last reported
        self.updates: dict[str, int] = {}  # and its updates applied
        self.workers: dict[int, int] = {}  # engines cached, by executor worker pid

    def add(self, keys: list[dict]) -> None:
        """One batch's key summaries (stream.keyed.SUMMARY rows)."""
        for k in keys:
            self.facts[k["key"]] = k["facts"]
            self.updates[k["key"]] = self.updates.get(k["key"], 0) + (k["updates"] or 0)
            self.workers[k["pid"]] = k["engines"]

    def facts_total(self) -> int:
        return sum(self.facts.values())

    def summary(self, active: int) -> dict:
        """The page's keys panel: counts, and the largest and the busiest keys."""
        return {
            "seen": len(self.facts), "active": active, "engines": sum(self.workers.values()),
            "largest": sorted(self.facts.items(), key=lambda kv: -kv[1])[:KEYS_SHOWN],
            "busiest": sorted(self.updates.items(), key=lambda kv: -kv[1])[:KEYS_SHOWN],
        }  # fmt: skip


class JobStatus:
    """What one running job reports about itself (see the module docstring)."""

    def __init__(self, program: str, algorithm: str, namespace: str, topic: str):
        self.info = {"program": program, "algorithm": algorithm, "namespace": namespace, "topic": topic}
        self.started = time.time()
        self.totals = dict.fromkeys(TOTALS, 0)
        self.now: dict[str, object] = {"facts": 0, "explicit": 0, "log": 0, "pending": 0,
                                       "state_entries": 0, "state_bytes": None, "redis_bytes": None, "lag": {},
                                       "last_batch": None, "through": None, "last_commit": None,
                                       "verified": None, "time_lag": 0.0,
                                       "inconsistencies": 0, "inconsistent": [],
                                       "program": None}  # fmt: skip
        self.history: deque[dict] = deque(maxlen=900)  # one sample per second: 15 minutes
        self.batches: deque[dict] = deque(maxlen=120)
        self.deltas: deque[dict] = deque(maxlen=20)
        self.errors: deque[dict] = deque(maxlen=20)
        self.dead_letters: deque[dict] = deque(maxlen=20)
        self.retries: deque[tuple[float, str, str]] = deque(maxlen=100)  # (time, target, why): the last ones
        self.oldest_ms: int | None = None  # Kafka timestamp of the oldest waiting update (set_lag)
        self.time_lag_unknown = False  # updates wait, but the oldest one's timestamp could not be read
        self.failing: str | None = None  # why the job is failing (a batch failed)
        self.verify_failing: str | None = None  # a self-check found a different materialisation
        self.redis_problem: str | None = None  # a Redis Cluster node failing or a primary without replica
        self.keys = Keys()  # --partition-by
        self.inflight = InFlight()  # the job's (JobMetrics.watch); this one stays idle
        self.stall_seconds = float("inf")

    def in_flight(self) -> Work | None:
        """The batch in flight now (the job's tracker's lock is a leaf), noted in `now`."""
        work = self.inflight.now()
        self.now["in_flight"] = None if work is None else {
            "batch": work.batch, "phase": work.phase, "seconds": round(work.seconds, 1),
            "phase_seconds": round(work.phase_seconds, 1), "text": work.text,
            "stalled": work.seconds >= self.stall_seconds}  # fmt: skip
        return work

    def idle(self) -> bool:
        return not sum(self.now["lag"].values()) and not self.now["pending"]

    def health(self) -> tuple[str, str]:
        """(state, reason): `healthy`, `degraded` or `failing` (the state machine of ops.health)."""
        return judge(self)

    def as_dict(self) -> dict:
        """Everything the dashboard shows, as one JSON-ready dict (`/api/status`)."""
        self.in_flight()
        return {
            "mode": "live",
            "job": {**self.info, "started": self.started, "uptime": time.time() - self.started},
            "totals": dict(self.totals),
            "now": {**self.now, "lag": dict(self.now["lag"])},
            "history": list(self.history),
            "batches": list(self.batches),
            "deltas": list(self.deltas),
            "errors": list(self.errors),
            "dead_letters": list(self.dead_letters),
            "health": dict(zip(("state", "reason"), self.health(), strict=True)),
        }
