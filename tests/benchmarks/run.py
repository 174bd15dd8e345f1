"""Benchmark suite: fluxmat's algorithms against each other and against peers.

    python3 -m tests.benchmarks.run [--suite | --workload NAME] [--scale F] [--cap SECONDS]
                                    [--out DIR] [--json OUT.json] [--markdown] [--repeat N]
                                    [--no-peers] [--no-plots] [--stream-cap SECONDS]
                                    [--systems WORDS]

`--suite` (the default, also `--workload all`; `make bench`) runs every
workload of tests/benchmarks/workloads.py at `--scale` (dag-small, dag,
lubm-small, lubm, stc, sspe, exp), then the fully dynamic update streams
(fd_streams.py), prints per workload a pivot table (wall seconds and ratio per
system and task, peak RSS, checks) and the long table, and writes
`OUT/bench.json` and `OUT/<workload>.png`
(default OUT: tests/benchmarks/results/). `dag-small` (the DAG at 3% size) and
`lubm-small` (one department) are there for the pure-Python peers PyDBSP and
owlrl, which cannot do the full sizes within the caps.

Tasks (tasks.py): initial materialisation; delete 1% and re-insert it;
delete+insert 1,000 (1,000 explicit facts out, 1,000 held-out facts in);
delete 25%. Systems: fluxmat `remat`, `dred`, `dredc`, `bf`, `counting`
(non-recursive programs only), `fd-dred`, `fd-counting`, all plain (no tc/stc
modules, no hypertree decompositions), and `remat+opt` / `dredc+opt` with both
on; `arrays/remat+opt` and `arrays/fd-counting+opt`, the arrays core
(`core="arrays"`) with its closure modules; peers clingo and
DuckDB (from scratch), Pathway (incremental), PyDBSP (incremental, small sizes,
Python 3.12), owlrl (LUBM). Each system runs in its own child process
(isolate.py): its peak RSS is reported, and a missing package or a crash
becomes an "n/a (reason)" / "error (...)" row. Every fluxmat result is checked
against `remat` from scratch (digest of the whole materialisation), peers'
fact counts against the same. Tasks are capped at --cap seconds; a capped task
skips the rest of that system's tasks.

`--workload equality` (also part of the suite) is the equality benchmark
(equality.py): B/F~ against Remat~, DRed^c over the rewriting and the
axiomatised B/F^A and Remat^A on a genealogy with derived equalities.

`--workload pipeline` is the end-to-end streaming benchmark (pipeline.py; it
starts servers, so it is not part of the suite).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

from tests.benchmarks.equality import EqRow, equality_table, run_equality
from tests.benchmarks.fd_streams import STREAM_CAP, StreamRow, stream_table
from tests.benchmarks.isolate import isolated
from tests.benchmarks.report import memory_line, pivot, plot, table
from tests.benchmarks.suite import Entry, run_entry, run_streams_child
from tests.benchmarks.tasks import LARGE, SMALL
from tests.benchmarks.workloads import LUBM_DEPARTMENTS, LUBM_UNIVERSITIES, SEED, WORKLOADS

_ROOT = Path(__file__).resolve().parents[2]


def _relative(path) -> str:
    """A results path as bench.json records it: relative to the repository when inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(_ROOT)) if path.is_relative_to(_ROOT) else str(path)


STREAMS = "streams"  # --workload streams: tests/benchmarks/fd_streams.py
EQUALITY = "equality"  # --workload equality: tests/benchmarks/equality.py
PIPELINE = "pipeline"  # --workload pipeline: tests/benchmarks/pipeline.py (servers; not in all)
SUITE = ("dag-small", "dag", "lubm-small", "lubm", "stc", "sspe", "exp")
RESULTS = Path(__file__).resolve().parent / "results"
DAG_SMALL = 0.03
LUBM_SMALL = 0.1  # one department


def entries(names: list[str], scale: float, args) -> list[Entry]:
    out = []
    for name in names:
        if name == "dag-small":
            out.append(Entry(name, "dag", {"scale": DAG_SMALL * scale}))
        elif name in ("lubm", "lubm-small"):
            f = LUBM_SMALL if name == "lubm-small" else 1.0
            out.append(Entry(name, "lubm", {"scale": scale * f,
                                            "universities": args.lubm_universities,
                                            "departments": args.lubm_departments}))  # fmt: skip
        else:
            out.append(Entry(name, name, {"scale": scale}))
    return out


def meta(args) -> dict:
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(["python", "-m", "tests.benchmarks.run", *sys.argv[1:]]),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "scale": args.scale,
        "repeat": args.repeat,
        "cap_seconds": args.cap,
        "seed": SEED,
        "small_fraction": SMALL,
        "large_fraction": LARGE,
        "stream_cap_seconds": args.stream_cap,
        "timing": "median of --repeat runs; fluxmat 'seconds' = Report.seconds, 'wall' = "
        "perf_counter around the call; peers: perf_counter around evaluation (from scratch) "
        "or from the first row of an update to its output (Pathway)",
    }


def _run_pipeline(args) -> int:
    """`--workload pipeline`: broker + Redis + `fluxmat run` end to end (pipeline.py)."""
    from tests.benchmarks.pipeline import (
        phases_table,
        pipeline_table,
        run_pipeline,
        summary,
        to_json,
    )

    info, prows = run_pipeline()
    print(summary(info))
    print(pipeline_table(prows, args.markdown))
    print(phases_table(prows, args.markdown))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"meta": meta(args), "pipeline": to_json(info, prows)}, fh, indent=2)
            fh.write("\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 1 if any(r.check.startswith("MISMATCH") for r in prows) else 0


def _describe(info: dict) -> str:
    if "error" in info:
        return f"{info['label']}: error: {info['error']}"
    sets = info["explicit_sets"]
    return (f"{info['label']}: {info['source']}; {info['explicit_facts']:,} explicit facts, "
            f"materialisation {info['materialisation']:,} facts; 1% = "
            f"{sets['E0'] - sets['E1']:,} facts, 25% = "
            f"{max(sets.get('E3', sets['E0']) - sets['E4'], 0):,} facts")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.benchmarks.run", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    choices = [*WORKLOADS, "dag-small", "lubm-small", STREAMS, EQUALITY, PIPELINE, "all"]
    ap.add_argument("--workload", default="all", choices=choices)
    ap.add_argument("--suite", action="store_true", help="every workload and the streams (= all)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every workload's size")
    ap.add_argument("--out", type=Path, default=RESULTS, help=f"JSON and PNG directory ({RESULTS})")
    ap.add_argument("--json", metavar="OUT.json", help="JSON path (default OUT/bench.json)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per system; median reported")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    ap.add_argument("--cap", type=float, default=60.0, help="seconds per task before giving up")
    ap.add_argument("--no-peers", action="store_true", help="fluxmat only")
    ap.add_argument("--no-plots", action="store_true", help="no PNGs")
    ap.add_argument("--systems", metavar="WORDS", default=None,
                    help="only the systems whose name holds one of these comma-separated words "
                    "(e.g. arrays,duckdb; fluxmat/remat, the ratios' base, always runs)")
    ap.add_argument("--lubm-universities", type=int, default=LUBM_UNIVERSITIES, metavar="N")
    ap.add_argument("--lubm-departments", type=int, default=LUBM_DEPARTMENTS, metavar="N",
                    help="departments per university before --scale")  # fmt: skip
    ap.add_argument("--stream-cap", type=float, default=STREAM_CAP, metavar="SECONDS",
                    help=f"seconds per stream run (default {STREAM_CAP:g})")  # fmt: skip
    args = ap.parse_args(argv)
    if args.repeat < 1 or args.scale <= 0:
        ap.error("--repeat must be at least 1 and --scale positive")
    if args.workload == PIPELINE:
        return _run_pipeline(args)
    suite = args.suite or args.workload == "all"
    names = list(SUITE) if suite else [] if args.workload in (STREAMS, EQUALITY) else [args.workload]
    infos, rows = [], []
    for e in entries(names, args.scale, args):
        systems = tuple(w for w in args.systems.split(",") if w) if args.systems else None
        info, rs = run_entry(e, args.cap, args.repeat, peers=not args.no_peers, systems=systems)
        infos.append(info)
        rows += rs
        print(f"\n## {_describe(info)}\n")
        print(pivot(rs, args.markdown))
        line = memory_line(info)
        if line:
            print(line)
        if not args.no_plots and rs:
            path = plot(e.label, rs, args.out)
            if path:
                info["plot"] = _relative(path)
                print(f"plot: {path}")
        sys.stdout.flush()
    if rows:
        print("\n## all rows\n")
        print(table(rows, args.markdown))
    streams = None
    if suite or args.workload == STREAMS:
        streams = isolated(run_streams_child, {"cap": args.stream_cap},
                           timeout=args.stream_cap * 60)  # fmt: skip
        print("\n## fully dynamic update streams\n")
        if "error" in streams:
            print(f"streams: error: {streams['error']}")
        else:
            for s in streams["infos"]:
                print(f"{s['stream']}: {s['source']}; {s['initial_facts']:,} initial facts, "
                      f"{s['updates']} updates (+{s['added']:,}/-{s['deleted']:,})")  # fmt: skip
            srows = [StreamRow(**r) for r in streams["rows"]]
            print(stream_table(srows, args.markdown))
            print(f"peak RSS of the stream runs: {streams['peak_rss_mb']:,.0f} MiB")
    equality = None
    if suite or args.workload == EQUALITY:
        info, eq_rows = run_equality(args.cap)  # each system in its own child
        equality = {"info": info, "rows": [asdict(r) for r in eq_rows]}
        print("\n## equality: B/F~ and its baselines\n")
        if "error" in equality:
            print(f"equality: error: {equality['error']}")
        else:
            i = equality["info"]
            print(f"people: {i['people']:,} persons, {i['explicit_facts']:,} explicit facts "
                  f"({i['equalities']} owl:sameAs), J {i.get('materialisation', 0):,} facts, "
                  f"I {i.get('compact', 0):,} compact facts")  # fmt: skip
            print(equality_table([EqRow(**r) for r in equality["rows"]], args.markdown))
    path = Path(args.json) if args.json else args.out / "bench.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {"meta": meta(args), "workloads": infos, "rows": [asdict(r) for r in rows]}
    if streams is not None:
        out["streams"] = streams
    if equality is not None:
        out["equality"] = equality
    path.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
    # exit 1 when a fluxmat result differs from remat's; peers' differences are only reported
    bad = [r for r in rows if r.check.startswith("MISMATCH") and r.system.startswith("fluxmat")]
    if streams and "rows" in streams:
        bad += [r for r in streams["rows"] if r["check"].startswith("MISMATCH")]
    if equality and "rows" in equality:
        bad += [r for r in equality["rows"] if r["check"].startswith("MISMATCH")]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
