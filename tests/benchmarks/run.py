"""Benchmark runner: fluxmat's maintenance algorithms against from-scratch peers.

    python3 -m tests.benchmarks.run [--workload dag|lubm|lubm-corpus|streams|pipeline|all]
                                    [--json OUT.json] [--repeat N] [--markdown]
                                    [--cap SECONDS] [--lubm-universities N]
                                    [--lubm-departments N] [--stream-cap SECONDS]

Per workload (tests/benchmarks/workloads.py):

* initial materialisation: fluxmat `remat` (and the `load` of every other
  algorithm, which also builds its bookkeeping). `remat` loads twice: the
  second ("initial, warm") load, with rule plans already compiled, is the
  "remat from scratch" baseline of the ratio column; peers DuckDB (`WITH RECURSIVE`,
  DAG only) and clingo (ground + solve via its Python API, atoms counted);
* delete 1% of the explicit facts (random sample, fixed seed), then re-insert
  them, with each fluxmat algorithm (`counting` only on non-recursive
  programs), timed by `Report.seconds` and by the wall clock around `update`;
  every resulting state is checked against a from-scratch `remat`. Peers
  recompute from scratch after the change; that is their update time;
* delete+insert 1,000: one mixed update that deletes 1,000 random explicit
  facts and inserts the workload's 1,000 `extra` (non-explicit) facts, from
  the state after the re-insert (skipped for workloads without `extra`).

`--workload streams` (also part of `all`) is the fully dynamic benchmark of
tests/benchmarks/fd_streams.py: corpus `overlap` / `random-large` streams and a
DAG stream under `dredc`, `fd-dred` and `fd-counting` (sequential and
interleaved schedules); single run each, capped at --stream-cap seconds.

Every figure is the median of --repeat runs (all in this process). Tasks are
capped at --cap seconds (SIGALRM for fluxmat/clingo, `interrupt()` for DuckDB);
a capped task is reported as such and its dependants are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

from engine import ALGORITHMS, Reasoner
from tests.benchmarks.fd_streams import STREAM_CAP, run_streams, stream_table
from tests.benchmarks.peers import AspTranslator, DuckDBClosure, clingo_from_scratch
from tests.benchmarks.workloads import (
    LUBM_DEPARTMENTS,
    LUBM_UNIVERSITIES,
    SEED,
    WORKLOADS,
    Workload,
    render_table,
)

STREAMS = "streams"  # --workload streams: tests/benchmarks/fd_streams.py
PIPELINE = "pipeline"  # --workload pipeline: tests/benchmarks/pipeline.py (servers; not in all)
FLUXMAT_ALGORITHMS = ("remat", "dred", "dredc", "bf", "counting")
DELETE_FRACTION = 0.01


class Capped(Exception):
    pass


@contextmanager
def cap(seconds: float):
    """Raise `Capped` in the main thread after `seconds` (checked between bytecodes)."""

    def alarm(_sig, _frame):
        raise Capped(f"capped at {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Row:
    workload: str
    system: str  # fluxmat/<algorithm>, duckdb, clingo
    task: str  # initial, delete 1%, re-insert 1%
    seconds: float | None = None  # Report.seconds for fluxmat, wall clock for peers
    wall: float | None = None
    applications: int | None = None  # fluxmat rule applications
    facts: int | None = None  # size of the materialisation afterwards
    check: str = ""  # ok / MISMATCH ... / capped / error
    runs: list[float] = field(default_factory=list)
    ratio: float | None = None  # remat-from-scratch seconds / seconds


def _median(xs):
    return statistics.median(xs) if xs else None


def _mixed_label(w: Workload) -> str:
    return f"delete+insert {len(w.extra):,}"


def _after_mixed(w: Workload, mix_delete: list[tuple]) -> list[tuple]:
    """The explicit facts after the mixed update (from the full explicit set)."""
    gone = set(mix_delete)
    return sorted({f for f in w.facts if f not in gone} | set(w.extra), key=repr)


def _fluxmat(
    w: Workload, repeat: int, cap_s: float, sample: list[tuple], mix_delete: list[tuple]
) -> list[Row]:
    """Initial load, delete sample, re-insert sample, mixed update, for every algorithm."""
    explicit = set(w.facts)
    ref = Reasoner(w.program, "remat")
    ref.load(w.facts)
    full = ref.facts()
    ref.load(sorted(explicit - set(sample), key=repr))
    after_delete = ref.facts()
    after_mixed = None
    if w.extra:
        ref.load(_after_mixed(w, mix_delete))
        after_mixed = ref.facts()
    del ref
    rows = []
    for alg in FLUXMAT_ALGORITHMS:
        if alg not in ALGORITHMS:
            continue
        if alg == "counting" and w.recursive:
            continue
        init = Row(w.name, f"fluxmat/{alg}", "initial")
        warm = Row(w.name, f"fluxmat/{alg}", "initial, warm")
        dele = Row(w.name, f"fluxmat/{alg}", f"delete {DELETE_FRACTION:.0%}")
        ins = Row(w.name, f"fluxmat/{alg}", f"re-insert {DELETE_FRACTION:.0%}")
        mix = Row(w.name, f"fluxmat/{alg}", _mixed_label(w))
        walls: dict[str, list[float]] = {
            "initial": [], "warm": [], "delete": [], "insert": [], "mixed": [],
        }  # fmt: skip
        for _ in range(repeat):
            r = Reasoner(w.program, alg)
            steps = [(init, "initial", lambda r=r: r.load(w.facts), full)]
            if alg == "remat":  # from scratch again, plans compiled: the ratio baseline
                steps.append((warm, "warm", lambda r=r: r.load(w.facts), full))
            steps += [
                (dele, "delete", lambda r=r: r.update((), sample), after_delete),
                (ins, "insert", lambda r=r: r.update(sample, ()), full),
            ]
            if w.extra:
                steps.append((mix, "mixed", lambda r=r: r.update(w.extra, mix_delete), after_mixed))
            for row, key, do, expected in steps:
                if row.check and row.check != "ok":
                    break
                try:
                    with cap(cap_s):
                        start = time.perf_counter()
                        report = do()
                        wall = time.perf_counter() - start
                except Capped as exc:
                    row.check = str(exc)
                    for later in (warm, dele, ins, mix) if alg == "remat" else (dele, ins, mix):
                        if later is not row and not later.check:
                            later.check = f"skipped ({key} capped)"
                    break
                row.runs.append(report.seconds)
                walls[key].append(wall)
                row.applications = report.total_applications
                got = r.facts()
                row.facts = len(got)
                if got == expected:
                    row.check = row.check or "ok"
                else:
                    row.check = (
                        f"MISMATCH: {len(expected - got)} missing, {len(got - expected)} extra"
                    )
            del r
        parts = [(init, "initial"), (warm, "warm"), (dele, "delete"), (ins, "insert"),
                 (mix, "mixed")]  # fmt: skip
        for row, key in parts:
            row.seconds, row.wall = _median(row.runs), _median(walls[key])
        rows += [row for row, _ in parts if row.runs or row.check]
    return rows


def _peer_rows(
    w: Workload, repeat: int, cap_s: float, sample: list[tuple], mix_delete: list[tuple]
) -> list[Row]:
    rows = []
    kept = sorted(set(w.facts) - set(sample), key=repr)
    tasks = [
        ("initial", w.facts),
        (f"delete {DELETE_FRACTION:.0%}", kept),
        (f"re-insert {DELETE_FRACTION:.0%}", w.facts),
    ]
    if w.extra:
        tasks.append((_mixed_label(w), _after_mixed(w, mix_delete)))
    # clingo: from scratch over each explicit set
    try:
        asp = AspTranslator(w.program)
    except ValueError as exc:
        rows.append(Row(w.name, "clingo", "initial", check=f"not translatable: {exc}"))
        asp = None
    if asp is not None:
        for task, facts in tasks:
            row = Row(w.name, "clingo", task)
            for _ in range(repeat):
                try:
                    with cap(cap_s):
                        secs, n = clingo_from_scratch(asp, facts)
                except Capped as exc:
                    row.check = str(exc)
                    break
                row.runs.append(secs)
                row.facts = n
            row.seconds = row.wall = _median(row.runs)
            rows.append(row)
    # DuckDB: transitive closure only (the DAG workload)
    if w.name == "dag":
        task_rows = {t: Row(w.name, "duckdb", t) for t, _ in tasks}
        threads = None
        for _ in range(repeat):
            db = DuckDBClosure(cap_s)
            threads = db.threads
            steps = [
                (tasks[0][0], lambda db=db: db.load(w.facts)),
                (tasks[1][0], lambda db=db: db.delete(sample)),
                (tasks[2][0], lambda db=db: db.insert(sample)),
            ]
            if w.extra:
                steps.append((tasks[3][0], lambda db=db: db.update(w.extra, mix_delete)))
            try:
                for task, do in steps:
                    secs, n = do()
                    task_rows[task].runs.append(secs)
                    task_rows[task].facts = n
            except Exception as exc:  # duckdb.InterruptException when capped
                task_rows[task].check = f"capped/error: {type(exc).__name__}"
                break
            finally:
                db.close()
        for row in task_rows.values():
            row.seconds = row.wall = _median(row.runs)
            if not row.check:
                row.check = f"threads={threads}"
            rows.append(row)
    return rows


def run_workload(
    name: str, repeat: int, cap_s: float, peers: bool = True, options: dict | None = None
) -> tuple[dict, list]:
    """`options`: keyword arguments of the workload function (e.g. lubm's `universities`)."""
    w = WORKLOADS[name](**(options or {}))
    rng = random.Random(SEED)
    k = max(1, round(len(w.facts) * DELETE_FRACTION))
    ordered = sorted(w.facts, key=repr)
    sample = rng.sample(ordered, k)
    mix_delete = rng.sample(ordered, min(len(w.extra), len(ordered))) if w.extra else []
    info = {
        "workload": name,
        "source": w.source,
        "explicit_facts": len(w.facts),
        "sample": k,
        "mixed_update": len(w.extra),
        "recursive": w.recursive,
    }
    if name == "dag":
        info["path_facts"] = None  # filled in below from fluxmat remat
    print(f"# {name}: {w.source}; {len(w.facts)} explicit facts, deleting {k}", file=sys.stderr)
    rows = _fluxmat(w, repeat, cap_s, sample, mix_delete)
    if peers:
        rows += _peer_rows(w, repeat, cap_s, sample, mix_delete)
    info["materialisation"] = next(
        (r.facts for r in rows if r.system == "fluxmat/remat" and r.task == "initial"), None
    )
    # baseline: fluxmat remat from scratch with its plans already compiled (second load);
    # the cold first load also pays one-off compilation
    base = next(
        (r.seconds for r in rows if r.system == "fluxmat/remat" and r.task == "initial, warm"),
        None,
    )
    if name == "dag":
        total = next((r.facts for r in rows if r.system == "fluxmat/remat"), None)
        info["path_facts"] = None if total is None else total - len(w.facts)
    for r in rows:
        if base and r.seconds:
            r.ratio = base / r.seconds
    return info, rows


# ---------------------------------------------------------------- output


def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}" if x < 1 else f"{x:.2f}"


def _fmt_ratio(x: float | None) -> str:
    if x is None:
        return "-"
    if 0.995 <= x <= 1.005:
        return "1.0x (same)"
    if x > 1:
        return f"{x:.1f}x faster" if x >= 10 else f"{x:.2f}x faster"
    return f"{1 / x:.1f}x slower" if x <= 0.1 else f"{1 / x:.2f}x slower"


HEADER = ("workload", "system", "task", "seconds", "wall s", "rule apps", "facts",
          "vs remat from scratch", "check")  # fmt: skip


def _cells(r: Row) -> tuple[str, ...]:
    return (
        r.workload, r.system, r.task, _fmt_s(r.seconds), _fmt_s(r.wall),
        "-" if r.applications is None else f"{r.applications:,}",
        "-" if r.facts is None else f"{r.facts:,}", _fmt_ratio(r.ratio), r.check,
    )  # fmt: skip


def table(rows: list[Row], markdown: bool = False) -> str:
    return render_table(HEADER, [_cells(r) for r in rows], {3, 4, 5, 6}, markdown)


def meta(args) -> dict:
    versions = {}
    for mod in ("duckdb", "clingo"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception as exc:  # pragma: no cover - optional peers
            versions[mod] = f"unavailable: {exc}"
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "cap_seconds": args.cap,
        "seed": SEED,
        "delete_fraction": DELETE_FRACTION,
        "stream_cap_seconds": args.stream_cap,
        "peers": versions,
        "timing": "median of --repeat runs; fluxmat 'seconds' = Report.seconds, "
        "'wall s' = perf_counter around the call; peers: perf_counter, from scratch",
    }


def _run_pipeline(args) -> int:
    """`--workload pipeline`: broker + Redis + `fluxmat run` end to end (pipeline.py)."""
    from tests.benchmarks.pipeline import pipeline_table, run_pipeline, summary, to_json

    info, prows = run_pipeline()
    print(summary(info))
    print(pipeline_table(prows, args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"meta": meta(args), "pipeline": to_json(info, prows)}, fh, indent=2)
            fh.write("\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if any(r.check.startswith("MISMATCH") for r in prows) else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--workload", choices=[*WORKLOADS, STREAMS, PIPELINE, "all"], default="all")
    ap.add_argument("--json", metavar="OUT.json", help="write results as JSON")
    ap.add_argument("--repeat", type=int, default=1, help="runs per task; median reported")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per task before giving up")
    ap.add_argument("--no-peers", action="store_true", help="fluxmat only")
    ap.add_argument("--lubm-universities", type=int, default=LUBM_UNIVERSITIES, metavar="N",
                    help="universities of generated data for the lubm workload "
                    f"(default {LUBM_UNIVERSITIES})")  # fmt: skip
    ap.add_argument("--lubm-departments", type=int, default=LUBM_DEPARTMENTS, metavar="N",
                    help=f"departments per university for lubm (default {LUBM_DEPARTMENTS})")  # fmt: skip
    ap.add_argument("--stream-cap", type=float, default=STREAM_CAP, metavar="SECONDS",
                    help=f"seconds per stream run of --workload streams (default {STREAM_CAP:g})")  # fmt: skip
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.lubm_universities < 1 or args.lubm_departments < 1:
        ap.error("--lubm-universities and --lubm-departments must be at least 1")
    options = {"lubm": {"universities": args.lubm_universities,
                        "departments": args.lubm_departments}}  # fmt: skip
    if args.workload == PIPELINE:
        return _run_pipeline(args)
    names = list(WORKLOADS) if args.workload == "all" else [args.workload]
    names = [n for n in names if n != STREAMS]
    with_streams = args.workload in (STREAMS, "all")
    infos, rows = [], []
    for name in names:
        info, rs = run_workload(name, args.repeat, args.cap, peers=not args.no_peers,
                                options=options.get(name))  # fmt: skip
        infos.append(info)
        rows += rs
    for info in infos:
        print(f"{info['workload']}: {info['source']}; {info['explicit_facts']:,} explicit facts, "
              f"1% sample = {info['sample']} facts"
              + (f"; mixed update = {info['mixed_update']:,} + {info['mixed_update']:,} facts"
                 if info["mixed_update"] else "")
              + (f"; {info['path_facts']:,} path facts" if info.get("path_facts") else "")
              + (f"; materialisation {info['materialisation']:,} facts"
                 if info["materialisation"] is not None else ""))  # fmt: skip
    if rows:
        print(table(rows, args.markdown))
    stream_infos, stream_rows = [], []
    if with_streams:
        stream_infos, stream_rows = run_streams(args.stream_cap)
        if rows:
            print()
        for info in stream_infos:
            print(f"{info['stream']}: {info['source']}; {info['initial_facts']:,} initial facts, "
                  f"{info['updates']} updates (+{info['added']:,}/-{info['deleted']:,}); "
                  f"final E {info['final_explicit']:,} facts, "
                  f"materialisation {info['final_materialisation']:,} facts")  # fmt: skip
        print(stream_table(stream_rows, args.markdown))
    if args.json:
        out = {"meta": meta(args), "workloads": infos, "rows": [asdict(r) for r in rows]}
        if with_streams:
            out["streams"] = stream_infos
            out["stream_rows"] = [asdict(r) for r in stream_rows]
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=2)
            fh.write("\n")
        print(f"wrote {args.json}", file=sys.stderr)
    bad = [r for r in [*rows, *stream_rows] if r.check.startswith("MISMATCH")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
