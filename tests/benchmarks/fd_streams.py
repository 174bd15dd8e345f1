"""Fully dynamic benchmark: update streams under `dredc`, `fd-dred` and `fd-counting`.

    python3 -m tests.benchmarks.run --workload streams [--markdown] [--json OUT.json]
                                    [--stream-cap SECONDS]

Streams:

* the corpus `overlap` and `random-large` streams (run0) of the `path`, `lubm`,
  `dbpedia` and `sequence` knowledge bases
  (`streams/<case>/<kb>/run0-*.jsonl`; the first line is the initial dataset,
  the other lines are the updates);
* `dag`: the DAG workload's edges (tests/benchmarks/workloads.py) as the initial
  dataset, then `DAG_UPDATES` updates, each deleting `DAG_CHANGE` random existing
  edges and adding `DAG_CHANGE` random new edges u < v (fixed seed). Consecutive
  updates overlap: each re-adds `DAG_OVERLAP` of the previous update's deletions
  and deletes `DAG_OVERLAP` of the previous update's additions.

Runs per stream:

* `dredc`, classic: `reasoner.update(add, delete)` per update;
* `fd-dred` / `fd-counting`, sequential (`configure(interleaved=False)`; per
  update `submit` then `run`) and interleaved (`configure(seed=1,
  interleaved=True)`; per update `submit` then `step(INTERLEAVED_BUDGET)`, and one
  `run()` after the last update).

Measured: initial load seconds and whole-stream seconds (perf_counter wall
clock), rule applications during the stream (`ev.counts.applications`), the FD
counters accumulated during the stream (`stats.as_dict()`) and the derivation
log size at the end (`fd-counting`). Check: the final materialisation equals
`remat` over the final explicit facts E_n, where E := (E \\ delete) u add per
update. Each run is capped at --stream-cap seconds (SIGALRM).
"""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fluxmat.connectors.files import read_updates
from fluxmat.engine import Program, Reasoner, parse_program
from tests.benchmarks.workloads import SEED, corpus_dir, dag, render_table

CASES = ("overlap", "random-large")
KBS = ("path", "lubm", "dbpedia", "sequence")
DAG_UPDATES = 50
DAG_CHANGE = 20
DAG_OVERLAP = 5
INTERLEAVED_BUDGET = 50
STREAM_CAP = 120.0  # seconds per run (run.py --stream-cap)
RUNS = (
    ("dredc", "classic"),
    ("fd-dred", "sequential"),
    ("fd-dred", "interleaved"),
    ("fd-counting", "sequential"),
    ("fd-counting", "interleaved"),
)


@dataclass
class Stream:
    name: str  # e.g. overlap/path, dag
    program: Program
    initial: list[tuple]
    updates: list[tuple[tuple, tuple]]  # (add, delete)
    source: str


@dataclass
class StreamRow:
    stream: str
    algorithm: str
    schedule: str  # classic, sequential, interleaved
    load_seconds: float | None = None
    stream_seconds: float | None = None
    applications: int | None = None
    stats: dict[str, int] = field(default_factory=dict)  # FD counters during the stream
    log_size: int | None = None  # fd-counting: derivation log size at the end
    facts: int | None = None
    check: str = ""


# ---------------------------------------------------------------- streams


def corpus_stream(case: str, kb: str) -> Stream:
    root = corpus_dir()
    path = root / "programs" / f"{kb}.dlog"
    program = parse_program(path.read_text(encoding="utf-8"), str(path))
    files = sorted((root / "streams" / case / kb).glob("run0-*.jsonl"))
    if not files:
        raise SystemExit(f"no run0 stream in {root / 'streams' / case / kb}")
    ups = list(read_updates(files[0], dict(program.prefixes)))
    first, rest = ups[0], ups[1:]
    return Stream(
        f"{case}/{kb}", program, list(first.add), [(u.add, u.delete) for u in rest],
        str(Path("streams") / case / kb / files[0].name),
    )  # fmt: skip


def dag_stream(updates: int = DAG_UPDATES, change: int = DAG_CHANGE,
               overlap: int = DAG_OVERLAP, seed: int = SEED) -> Stream:  # fmt: skip
    w = dag()
    nodes = 1 + max(max(f[1], f[2]) for f in w.facts)
    rng = random.Random(seed + 2)
    current = {(f[1], f[2]) for f in w.facts}
    prev_add: list[tuple[int, int]] = []
    prev_del: list[tuple[int, int]] = []
    out = []
    for _ in range(updates):
        # overlap with the previous update: undo some of its deletions and additions
        add = rng.sample(prev_del, min(overlap, len(prev_del)))
        dele = rng.sample(prev_add, min(overlap, len(prev_add)))
        gone = set(dele)
        rest = sorted(current - gone)
        dele += rng.sample(rest, change - len(dele))
        chosen = set(add)
        while len(add) < change:
            u, v = sorted(rng.sample(range(nodes), 2))
            if (u, v) not in current and (u, v) not in chosen:
                chosen.add((u, v))
                add.append((u, v))
        current = (current - set(dele)) | chosen
        prev_add, prev_del = add, dele
        out.append((tuple(("edge", u, v) for u, v in add), tuple(("edge", u, v) for u, v in dele)))
    return Stream(
        "dag", w.program, w.facts, out,
        f"{w.source}; {updates} updates of -{change}/+{change} edges "
        f"({overlap} re-added / re-deleted from the previous update), seed {seed + 2}",
    )  # fmt: skip


def all_streams() -> list[Stream]:
    return [corpus_stream(c, kb) for c in CASES for kb in KBS] + [dag_stream()]


def final_explicit(s: Stream) -> list[tuple]:
    e = set(s.initial)
    for add, delete in s.updates:
        e = (e - set(delete)) | set(add)
    return sorted(e, key=repr)


# ---------------------------------------------------------------- runs


def _apps(m) -> int:
    return sum(m.ev.counts.applications.values())


def run_one(s: Stream, algorithm: str, schedule: str, expected: set, cap_s: float) -> StreamRow:
    from tests.benchmarks.isolate import Capped, cap

    row = StreamRow(s.name, algorithm, schedule)
    r = Reasoner(s.program, algorithm)
    m = r.maintainer
    try:
        with cap(cap_s):
            start = time.perf_counter()
            r.load(s.initial)
            row.load_seconds = time.perf_counter() - start
    except Capped as exc:
        row.check = f"load {exc}"
        return row
    fd = schedule != "classic"
    if fd:
        if schedule == "interleaved":
            m.configure(seed=1, interleaved=True)
        else:
            m.configure(interleaved=False)
        stats0 = m.stats.as_dict()
    apps0 = _apps(m)
    try:
        with cap(cap_s):
            start = time.perf_counter()
            if not fd:
                for add, delete in s.updates:
                    r.update(add, delete)
            elif schedule == "sequential":
                for add, delete in s.updates:
                    m.submit(add, delete)
                    m.run()
            else:
                for add, delete in s.updates:
                    m.submit(add, delete)
                    m.step(INTERLEAVED_BUDGET)
                m.run()
            row.stream_seconds = time.perf_counter() - start
    except Capped as exc:
        row.check = f"stream {exc}"
        row.applications = _apps(m) - apps0
        return row
    row.applications = _apps(m) - apps0
    if fd:
        now = m.stats.as_dict()
        row.stats = {k: now[k] - stats0.get(k, 0) for k in now}
        if algorithm == "fd-counting":
            row.log_size = m.log_size()
    got = r.facts()
    row.facts = len(got)
    row.check = (
        "ok" if got == expected
        else f"MISMATCH: {len(expected - got)} missing, {len(got - expected)} extra"
    )  # fmt: skip
    return row


def run_streams(cap_s: float = STREAM_CAP) -> tuple[list[dict], list[StreamRow]]:
    infos, rows = [], []
    for s in all_streams():
        ref = Reasoner(s.program, "remat")
        e_n = final_explicit(s)
        ref.load(e_n)
        expected = ref.facts()
        del ref
        n_add = sum(len(a) for a, _ in s.updates)
        n_del = sum(len(d) for _, d in s.updates)
        infos.append({
            "stream": s.name, "source": s.source, "initial_facts": len(s.initial),
            "updates": len(s.updates), "added": n_add, "deleted": n_del,
            "final_explicit": len(e_n), "final_materialisation": len(expected),
        })  # fmt: skip
        print(f"# stream {s.name}: {s.source}; {len(s.initial)} initial facts, "
              f"{len(s.updates)} updates (+{n_add}/-{n_del})", file=sys.stderr)  # fmt: skip
        for algorithm, schedule in RUNS:
            row = run_one(s, algorithm, schedule, expected, cap_s)
            print(f"#   {algorithm:<11} {schedule:<11} stream "
                  f"{_fmt_s(row.stream_seconds)} s  {row.check}", file=sys.stderr)  # fmt: skip
            rows.append(row)
    return infos, rows


# ---------------------------------------------------------------- output


def _fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.4f}" if x < 1 else f"{x:.2f}"


def _fmt_n(x: int | None) -> str:
    return "-" if x is None else f"{x:,}"


HEADER = ("stream", "algorithm", "schedule", "load s", "stream s", "rule apps", "units",
          "recursion stops", "rederivations", "log size", "check")  # fmt: skip


def _cells(r: StreamRow) -> tuple[str, ...]:
    st = r.stats
    return (
        r.stream, r.algorithm, r.schedule, _fmt_s(r.load_seconds), _fmt_s(r.stream_seconds),
        _fmt_n(r.applications), _fmt_n(st.get("units")), _fmt_n(st.get("recursion_stops")),
        _fmt_n(st.get("rederivations")), _fmt_n(r.log_size), r.check,
    )  # fmt: skip


def stream_table(rows: list[StreamRow], markdown: bool = False) -> str:
    return render_table(HEADER, [_cells(r) for r in rows], set(range(3, 10)), markdown)
