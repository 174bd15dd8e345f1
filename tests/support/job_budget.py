"""How long a test waits for a Spark job: a budget of the job's own CPU time, not of wall time.

A job needs a roughly fixed amount of CPU to get somewhere: a local Spark job of
a job of tests/stream/test_pipeline.py uses ~35-50 CPU seconds (its JVM, its driver and its
Python workers) from its start to its first micro-batch, alone or not. How much
wall time that takes depends on what else shares the cores: on a 2-core machine
with a load average of 10-13 from other work, one job alone took 165-180 s;
four at once had used ~43 CPU s each after 400 s and none had made a batch. A
wait limited in wall time therefore fails a healthy job on a busy machine. A `Budget` instead counts the
CPU time the job's session used since the wait began (every process of its
session, the exited and reaped ones too): a job that computes without getting
anywhere exhausts it; a job that waits for nothing (a real stall: it uses no
CPU) is caught by the wall-time cap, `WALL_FACTOR` times the budget.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

# A wait gives up after this many times its budget in wall seconds, whatever CPU the job used.
WALL_FACTOR = 5.0
_TICK = os.sysconf("SC_CLK_TCK")


def session_cpu_seconds(sid: int) -> float:
    """CPU seconds used by the processes of session `sid`, with their reaped children's."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:  # utime, stime, cutime, cstime
            total += sum(int(f) for f in fields[11:15])
    return total / _TICK


class Budget:
    """`seconds` of CPU time of session `sid` from now, and at most `WALL_FACTOR` times as long."""

    def __init__(self, sid: int, seconds: float):
        self.sid, self.seconds = sid, seconds
        self._cpu = session_cpu_seconds(sid)
        self._started = time.monotonic()

    def spent(self) -> str | None:
        """None while the budget lasts; else what ran out, for the failure message."""
        wall = time.monotonic() - self._started
        cpu = session_cpu_seconds(self.sid) - self._cpu
        if cpu > self.seconds:
            return f"{cpu:.0f} CPU s ({wall:.0f} s)"
        if wall > WALL_FACTOR * self.seconds:
            return f"{wall:.0f} s (only {cpu:.0f} CPU s used: stalled?)"
        return None
