"""What each test costs in CPU seconds: `pytest -p tests.support.cputime`, with $FLUXMAT_TEST_CPU set.

The machine the tests run on is shared, so wall-clock times (`--durations`)
say little. This plugin records, for each test (setup, call and teardown
together), its wall time and the CPU seconds of the pytest process and of
every process below it: the servers, the Spark JVM and its Python workers,
`fluxmat` subprocesses -- alive ones read from /proc, finished ones from
`getrusage(RUSAGE_CHILDREN)`. A module-scoped server's start is charged to the
module's first test and its stop to the last one, so sum by module.

One JSON line per test (with its outcome and the time it ended) is appended to the file $FLUXMAT_TEST_CPU names (each
pytest-xdist worker appends its own lines; `worker` tells them apart).
`python -m tests.support.cputime FILE` prints the totals per module and the
most expensive tests. Without $FLUXMAT_TEST_CPU the plugin does nothing.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

TICK = os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found = []
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def _descendants_cpu(root: int) -> float:
    """CPU seconds of the live processes below `root` (and of the children they reaped)."""
    total, todo = 0.0, _children(root)
    while todo:
        pid = todo.pop()
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) "
        total += sum(int(f) for f in fields[11:15]) / TICK  # utime stime cutime cstime
        todo += _children(pid)
    return total


def tree_cpu() -> float:
    """CPU seconds used so far by this process and every process below it."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.process_time() + children.ru_utime + children.ru_stime + _descendants_cpu(os.getpid())
    )


_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report):
    """Remember a test's outcome: failed if any phase failed, else skipped or passed from its call."""
    if (
        report.failed
        or report.when == "call"
        or (report.skipped and report.nodeid not in _outcomes)
    ):
        _outcomes[report.nodeid] = "failed" if report.failed else report.outcome


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = os.environ.get("FLUXMAT_TEST_CPU")
    if not out:
        yield
        return
    wall, cpu = time.monotonic(), tree_cpu()
    yield
    record = {
        "test": item.nodeid,
        "module": item.nodeid.partition("::")[0],
        "markers": sorted(
            {m.name for m in item.iter_markers()} & {"integration", "heavy", "alone"}
        ),
        "wall": round(time.monotonic() - wall, 3),
        "cpu": round(tree_cpu() - cpu, 3),
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "outcome": _outcomes.pop(item.nodeid, "?"),
        "end": round(time.time(), 1),
    }
    with open(out, "a") as f:
        f.write(json.dumps(record) + "\n")


def summary(path: str, top: int = 40) -> str:
    """Totals per module (CPU, wall, tests), largest first, then the `top` most expensive tests."""
    records = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    modules = defaultdict(lambda: [0.0, 0.0, 0])
    for r in records:
        m = modules[r["module"]]
        m[0] += r["cpu"]
        m[1] += r["wall"]
        m[2] += 1
    lines = [f"{len(records)} tests: {sum(r['cpu'] for r in records):.0f} s CPU, "
             f"{sum(r['wall'] for r in records):.0f} s wall (summed over workers)",
             f"{'cpu s':>8} {'wall s':>8} {'tests':>6}  module"]  # fmt: skip
    for name, (cpu, wall, n) in sorted(modules.items(), key=lambda kv: -kv[1][0]):
        lines.append(f"{cpu:8.1f} {wall:8.1f} {n:6d}  {name}")
    lines.append(f"\n{'cpu s':>8} {'wall s':>8}  test")
    for r in sorted(records, key=lambda r: -r["cpu"])[:top]:
        lines.append(f"{r['cpu']:8.1f} {r['wall']:8.1f}  {r['test']}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40))
