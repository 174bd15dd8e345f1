"""Output of the suite: the long table, one pivot table and one PNG per workload.

Pivot: a row per system, a column per task with "wall seconds (ratio)", where
the ratio is fluxmat `remat`'s wall time on the same task (a from-scratch
recomputation; for `initial` its warm second load) divided by the system's (wall
time around the call: fluxmat's `Report.seconds` leaves out work after the
report is made, e.g. fd-counting's derivation log at load); plus the peak RSS
of the system's child process and the checks. Plots: grouped bars (tasks x
systems), log-scale seconds, matplotlib's Agg backend.
"""

from __future__ import annotations

from pathlib import Path

from tests.benchmarks.suite import Row
from tests.benchmarks.tasks import WARM
from tests.benchmarks.workloads import render_table


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if x < 0.1 else f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    if 0.995 <= x <= 1.005:
        return "1.0x"
    if x > 1:
        return f"{x:.1f}x faster" if x >= 10 else f"{x:.2f}x faster"
    return f"{1 / x:.1f}x slower" if x <= 0.1 else f"{1 / x:.2f}x slower"


HEADER = ("workload", "system", "task", "seconds", "wall s", "rule apps", "facts",
          "vs remat (same task)", "peak RSS MiB", "check")  # fmt: skip


def _cells(r: Row) -> tuple[str, ...]:
    return (
        r.workload, r.system, r.task, fmt_s(r.seconds), fmt_s(r.wall),
        "-" if r.applications is None else f"{r.applications:,}",
        "-" if r.facts is None else f"{r.facts:,}", fmt_ratio(r.ratio),
        "-" if r.peak_rss_mb is None else f"{r.peak_rss_mb:,.0f}", r.check,
    )  # fmt: skip


def table(rows: list[Row], markdown: bool = False) -> str:
    return render_table(HEADER, [_cells(r) for r in rows], {3, 4, 5, 6, 8}, markdown)


def _tasks(rows: list[Row]) -> list[str]:
    out: list[str] = []
    for r in rows:
        if r.task not in out:
            out.append(r.task)
    return out


def _short(check: str) -> str:
    if check.startswith(("ok", "MISMATCH")) or not check:
        return check.split(":")[0]
    return check


def pivot(rows: list[Row], markdown: bool = False) -> str:
    """One line per system: 'seconds (ratio)' per task, peak RSS, checks."""
    tasks = _tasks(rows)
    systems: dict[str, list[Row]] = {}
    for r in rows:
        systems.setdefault(r.system, []).append(r)
    lines = []
    for system, rs in systems.items():
        by_task = {r.task: r for r in rs}
        cells = []
        for t in tasks:
            r = by_task.get(t)
            if r is None or r.wall is None:
                cells.append("-" if r is None or not r.check else r.check.split(" ")[0])
                continue
            cell = f"{fmt_s(r.wall)} s"
            if r.ratio is not None and t != WARM and system != "fluxmat/remat":
                cell += f" ({r.ratio:.2g}x)" if r.ratio < 10 else f" ({r.ratio:.0f}x)"
            cells.append(cell)
        checks = sorted({_short(r.check) for r in rs
                         if r.check and not r.check.startswith("skipped")})  # fmt: skip
        peak = next((r.peak_rss_mb for r in rs if r.peak_rss_mb is not None), None)
        lines.append((system, *cells, "-" if peak is None else f"{peak:,.0f}", ", ".join(checks)))
    header = ("system", *tasks, "peak RSS MiB", "check")
    return render_table(header, lines, set(range(1, len(tasks) + 2)), markdown)


def plot(label: str, rows: list[Row], out_dir: Path) -> Path | None:
    """Grouped bars: a group per task, a bar per system; log seconds. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    tasks = [t for t in _tasks(rows) if t != WARM]
    systems = list(dict.fromkeys(r.system for r in rows if r.wall is not None))
    if not systems:
        return None
    data = {(r.system, r.task): r.wall for r in rows if r.wall}
    fig, ax = plt.subplots(figsize=(10, 4.2), dpi=80)
    width = 0.8 / len(systems)
    cmap = plt.get_cmap("tab20")
    for i, s in enumerate(systems):
        xs = [j + (i - (len(systems) - 1) / 2) * width for j in range(len(tasks))]
        ys = [data.get((s, t), 0) for t in tasks]
        ax.bar(xs, [y or float("nan") for y in ys], width, label=s, color=cmap(i % 20))
    ax.set_yscale("log")
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("wall seconds (log)")
    ax.set_title(f"{label}: time per task (missing bar = capped, n/a or error)")
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", which="major", alpha=0.3)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{label}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def memory_line(info: dict) -> str | None:
    m = info.get("memory")
    if not m:
        return None
    if "error" in m:
        return f"{info['label']}: memory measurement failed: {m['error']}"
    mib = 1 << 20
    return (f"{info['label']}: fd-counting derivation log {m['log_instances']:,} instances, "
            f"{m['log_bytes'] / mib:,.1f} MiB vs the materialisation's {m['facts']:,} facts "
            f"{m['mat_bytes'] / mib:,.1f} MiB with indexes ({m['mat_facts_only_bytes'] / mib:,.1f} "
            f"MiB fact sets only): log/materialisation = {m['ratio']}x "
            f"(+{m['born_bytes'] / mib:,.1f} MiB of FD timestamps)")  # fmt: skip
