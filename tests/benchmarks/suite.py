"""The suite: every workload, every system, each in its own child process.

Per suite entry (a workload at a size): a reference child (remat from scratch
per explicit set, tasks.run_reference); one child per fluxmat system
(tasks.run_fluxmat), checked against the reference by digest; one child per
peer (peers_inc.run_peer), fact counts compared with the reference; for
`MEMORY_ENTRIES` one more child measuring the derivation log against the
materialisation (tasks.run_memory). Children run one at a time, so timings do
not compete with each other and every peak RSS belongs to one system.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass, field

from tests.benchmarks.isolate import isolated
from tests.benchmarks.peers_inc import PEERS, run_peer
from tests.benchmarks.tasks import WARM, engine_options, run_fluxmat, run_memory, run_reference

# (label, algorithm, optimised); `counting` only on non-recursive programs. Plain: no
# tc/stc modules, no hypertree decompositions; `+opt`: both on (Hu et al. 2019's
# Mat-Mod / DRed^c-Mod, Zhang et al. 2023's combined mode)
FLUXMAT_SYSTEMS = (
    ("remat", "remat", False), ("remat+opt", "remat", True), ("dred", "dred", False),
    ("dredc", "dredc", False), ("dredc+opt", "dredc", True), ("bf", "bf", False),
    ("counting", "counting", False), ("fd-dred", "fd-dred", False),
    ("fd-dred+opt", "fd-dred", True), ("fd-counting", "fd-counting", False),
    ("fd-counting+opt", "fd-counting", True),
)  # fmt: skip
# the arrays core (engine.compact; remat evaluates from scratch on every update, fd-counting
# runs counting + DRed^c set-at-a-time, recomputing a component when cheaper), with
# its closure modules: (label, algorithm, modules)
ARRAYS_SYSTEMS = (("arrays/remat+opt", "remat", True), ("arrays/fd-counting+opt", "fd-counting", True))
MEMORY_ENTRIES = ("lubm", "stc")  # labels


@dataclass
class Entry:
    label: str  # shown in tables (e.g. dag, dag-small)
    workload: str  # key of WORKLOADS
    options: dict = field(default_factory=dict)


@dataclass
class Row:
    workload: str
    system: str  # fluxmat/<algorithm>[+mod], clingo, duckdb, pathway, pydbsp, owlrl
    task: str
    seconds: float | None = None  # Report.seconds for fluxmat, wall clock for peers
    wall: float | None = None
    applications: int | None = None
    facts: int | None = None
    check: str = ""
    ratio: float | None = None  # remat's wall time on the same task / wall time
    peak_rss_mb: float | None = None  # of the system's child process (all its tasks)
    runs: list[float] = field(default_factory=list)
    note: str = ""


def _median(xs):
    return statistics.median(xs) if xs else None


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _collect(results: list[dict], label: str, system: str, ref: dict, digests: bool) -> list[Row]:
    """Rows of one system from `repeat` child results (medians), checked against `ref`."""
    first = results[0]
    if "error" in first or "na" in first:
        reason = first.get("na") or first.get("error", "")
        prefix = "n/a" if "na" in first else "error"
        return [Row(label, system, "initial", check=f"{prefix} ({reason})",
                    peak_rss_mb=first.get("peak_rss_mb"))]  # fmt: skip
    rows = []
    for i, r in enumerate(first["rows"]):
        row = Row(label, system, r["task"], applications=r.get("applications"),
                  facts=r.get("facts"), note=r.get("note", ""),
                  peak_rss_mb=r.get("peak_rss_mb", first.get("peak_rss_mb")))  # fmt: skip
        runs = [x["rows"][i] for x in results if "rows" in x and len(x["rows"]) > i]
        row.runs = [x["seconds"] for x in runs if x.get("seconds") is not None]
        row.seconds = _median(row.runs)
        row.wall = _median([x["wall"] for x in runs if x.get("wall") is not None]) or row.seconds
        if "seconds" not in r:
            row.check = r.get("check", "no result")
        else:
            n, dg = ref["states"][r["state"]]
            if digests:
                ok = tuple(r["digest"]) == (n, dg)
                row.check = "ok" if ok else f"MISMATCH: {r['facts']:,} facts, expected {n:,}"
            elif system == "owlrl":
                row.check = f"{r['facts']:,} over the program's vocabulary (fluxmat {n:,})"
            else:
                ok = r["facts"] == n
                row.check = "ok (count)" if ok else (
                    f"MISMATCH: {r['facts']:,} facts, expected {n:,}")
        rows.append(row)
    return rows


def _chosen(system: str, systems: tuple[str, ...] | None) -> bool:
    """Whether `--systems` keeps this system (fluxmat/remat, the ratios' base, always)."""
    return systems is None or system == "fluxmat/remat" or any(w in system for w in systems)


def _fluxmat_systems(recursive: bool):
    """(label, the child's options, seconds of slack) of every fluxmat system for this workload."""
    for label, algorithm, optimised in FLUXMAT_SYSTEMS:
        if (optimised and not engine_options()) or (algorithm == "counting" and recursive):
            continue
        yield label, {"algorithm": algorithm, "optimised": optimised}, 60
    for label, algorithm, modules in ARRAYS_SYSTEMS:  # the arrays core loads numba in the child
        yield label, {"algorithm": algorithm, "optimised": modules, "core": "arrays"}, 300


def run_entry(
    e: Entry, cap_s: float, repeat: int = 1, peers: bool = True, systems: tuple[str, ...] | None = None
) -> tuple[dict, list[Row]]:
    arg = {"workload": e.workload, "options": e.options, "cap": cap_s}
    _log(f"# {e.label}: reference (remat from scratch per explicit set)")
    ref = isolated(run_reference, arg, timeout=cap_s * 8)
    if "error" in ref:
        info = {"label": e.label, "workload": e.workload, "error": ref["error"]}
        return info, [Row(e.label, "reference", "initial", check=f"error ({ref['error']})")]
    info = {"label": e.label, **ref["info"], "options": e.options,
            "tasks": ref["tasks"], "reference_peak_rss_mb": ref["peak_rss_mb"]}  # fmt: skip
    n_tasks = len(ref["tasks"]) + 1
    rows: list[Row] = []
    info["optimisations"] = engine_options()
    for label, options, slack in _fluxmat_systems(info["recursive"]):
        if not _chosen(f"fluxmat/{label}", systems):
            continue
        _log(f"#   fluxmat/{label}")
        a = {**arg, **options}
        results = [isolated(run_fluxmat, a, timeout=cap_s * n_tasks + slack) for _ in range(repeat)]
        rows += _collect(results, e.label, f"fluxmat/{label}", ref, digests=True)
    if peers:
        for peer in (p for p in PEERS if _chosen(p, systems)):
            _log(f"#   {peer}")
            a = {**arg, "peer": peer}
            results = [isolated(run_peer, a, timeout=cap_s * n_tasks + 120)]
            if "rows" in results[0] and repeat > 1 and peer not in ("pydbsp", "owlrl"):
                results += [isolated(run_peer, a, timeout=cap_s * n_tasks + 120)
                            for _ in range(repeat - 1)]  # fmt: skip
            rows += _collect(results, e.label, peer, ref, digests=False)
            info.setdefault("peer_versions", {})[peer] = results[0].get(
                "version", results[0].get("na") or results[0].get("error"))
    base = {r.task: r.wall for r in rows if r.system == "fluxmat/remat"}
    base["initial"] = base.get(WARM, base.get("initial"))
    for r in rows:
        b = base.get(r.task)
        if b and r.wall and r.task != WARM:
            r.ratio = b / r.wall
    if e.label in MEMORY_ENTRIES:
        _log("#   memory: fd-counting derivation log vs materialisation")
        info["memory"] = isolated(run_memory, arg, timeout=cap_s * 3)
    return info, rows


def run_streams_child(arg: dict) -> dict:
    """Child entry: the fully dynamic stream benchmark (fd_streams.py)."""
    from dataclasses import asdict

    from tests.benchmarks.fd_streams import run_streams

    infos, rows = run_streams(arg["cap"])
    return {"infos": infos, "rows": [asdict(r) for r in rows]}
