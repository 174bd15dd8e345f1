"""The job's health state machine: healthy, degraded or failing, with the reason.

`judge(status)` reads a job's status value (ops.status.JobStatus) and answers
`(state, reason)`. The checks run in `CHECKS` order, the first that finds a
condition answers: a failed batch or self-check makes the job failing; retries
of Redis or the broker, a stalled batch, a weakened Redis Cluster, recent dead
letters, OWL inconsistencies and a growing consumer lag make it degraded; else
it is healthy (idle, or applying updates). `/healthz`, the page's header and
the `fluxmat_health_state` gauge all read this one answer (through
`JobStatus.health`).

Not here: the status value itself (ops.status), the gauges (ops.collectors).
"""

from __future__ import annotations

import time
from itertools import pairwise

HEALTH_STATES = ("healthy", "degraded", "failing")  # fluxmat_health_state is the index
TIME_LAG_UNKNOWN = "time lag unknown: the timestamp of the oldest waiting update could not be read"
DEGRADED_WINDOW = 60  # seconds: dead letters or a growing lag within it make the job degraded


def _failed(status) -> tuple[str, str] | None:
    if status.failing:
        return "failing", status.failing
    if status.verify_failing:
        return "failing", status.verify_failing
    return None


def _retrying(status) -> tuple[str, str] | None:
    """Retries count until a batch commits after them (at most `DEGRADED_WINDOW` seconds)."""
    since = time.time() - DEGRADED_WINDOW
    since = max(since, status.now["last_commit"] or since)
    retried = [(target, why) for t, target, why in status.retries if t >= since]
    if not retried:
        return None
    target, why = retried[-1]
    name = "Redis" if target == "redis" else "the broker"
    return "degraded", f"retrying {name} ({len(retried)} retries in the last {DEGRADED_WINDOW} s): {why}"


def _stalled(status) -> tuple[str, str] | None:
    """A batch in flight too long; a weakened Redis Cluster at the same time is named too (a likely cause)."""
    work = status.in_flight()
    if work is not None and work.seconds >= status.stall_seconds:
        return "degraded", work.text + (f"; {status.redis_problem}" if status.redis_problem else "")
    return None


def _redis_weakened(status) -> tuple[str, str] | None:
    return ("degraded", status.redis_problem) if status.redis_problem else None


def _dead_letters(status) -> tuple[str, str] | None:
    recent = [b for b in status.batches if b["t"] >= time.time() - DEGRADED_WINDOW]
    dead = sum(b["dead"] for b in recent)
    if not dead:
        return None
    return "degraded", f"{dead} dead letter{'s' if dead != 1 else ''} in the last {DEGRADED_WINDOW} s"


def _inconsistent(status) -> tuple[str, str] | None:
    """The ontology and the data contradict each other."""
    n, first = status.now["inconsistencies"], status.now["inconsistent"]
    if not n:
        return None
    return "degraded", (f"{n} OWL inconsistenc{'ies' if n != 1 else 'y'} (fluxmat_owl_inconsistencies): "
                        + "; ".join(first))  # fmt: skip


def _lag_growing(status) -> tuple[str, str] | None:
    lags = [p["lag"] for p in status.history if p["t"] >= time.time() - DEGRADED_WINDOW]
    growing = all(b >= a for a, b in pairwise(lags)) and len(lags) >= 10 and lags[-1] > lags[0]
    if not growing:
        return None
    return "degraded", f"the consumer lag grew from {lags[0]} to {lags[-1]} messages in {len(lags)} s"


CHECKS = (_failed, _retrying, _stalled, _redis_weakened, _dead_letters, _inconsistent, _lag_growing)


def judge(status) -> tuple[str, str]:
    """(state, reason): `healthy`, `degraded` or `failing` (see `HEALTH_STATES` and the module docstring)."""
    for check in CHECKS:
        verdict = check(status)
        if verdict is not None:
            return verdict
    if status.time_lag_unknown:
        return "healthy", f"applying updates; {TIME_LAG_UNKNOWN}"
    return "healthy", "idle: nothing to do" if status.idle() else "applying updates"
