"""tests/support/job_budget.py: a wait's limit counts the CPU time of the job's session, not wall time."""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support.job_budget import Budget, session_cpu_seconds

BUSY = "import time\nend = time.process_time() + 60\nwhile time.process_time() < end: pass\n"
IDLE = "import time\ntime.sleep(60)\n"


def _session(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def _spent(budget: Budget) -> str:
    while (spent := budget.spent()) is None:
        time.sleep(0.05)
    return spent


def test_a_busy_session_spends_its_cpu_budget():
    proc = _session(BUSY)
    try:
        budget = Budget(proc.pid, 0.5)
        assert "CPU s (" in _spent(budget)
        assert session_cpu_seconds(proc.pid) >= 0.5
    finally:
        proc.kill()
        proc.wait()


def test_an_idle_session_runs_into_the_wall_time_cap():
    proc = _session(IDLE)
    try:
        assert "stalled?" in _spent(Budget(proc.pid, 0.2))
    finally:
        proc.kill()
        proc.wait()


def test_other_sessions_do_not_count():
    busy, idle = _session(BUSY), _session(IDLE)
    try:
        budget = Budget(idle.pid, 0.2)
        assert "stalled?" in _spent(budget), "the busy session's CPU counted for the idle one"
    finally:
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
