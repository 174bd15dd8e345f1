"""The columnar candidate on the bake-off workload, checked against the current engine.

    python -m tests.benchmarks.bakeoff.columnar_bench [--universities N] [--batches 3] [--updates 10000]
                                                       [--singles 20] [--no-check] [--snapshot DIR]

The corpus program `programs/lubm.dlog` over `lubm_gen.generate(1, 2)` (the
per-batch processor benchmark's LUBM-1; `--universities N` for LUBM-N) minus the
held-out facts, dictionary-encoded to int64 columns and loaded; then `--batches`
batches of `--updates` updates of 1 add + 1 delete (the pipeline benchmark's
`UpdateMaker`), each batch applied as one update (its net change); then
`--singles` single 1+1 updates (median). After the load, every batch and the
singles, the materialisation is compared with the current engine's
(fd-counting) unless `--no-check`. Then the state is saved as Arrow IPC and
restored in a new process. Every line carries the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fluxmat.engine import EngineOptions, Reasoner, parse_program
from fluxmat.engine.syntax import Atom, Const, Var
from tests.benchmarks.bakeoff.columnar import ColumnarCore
from tests.benchmarks.lubm_gen import generate
from tests.benchmarks.pipeline import HELD_OUT, PROGRAM, UpdateMaker
from tests.benchmarks.workloads import corpus_dir


@dataclass(frozen=True)
class Rule:
    """A rule in the bake-off's shape: head (pred, terms) and body ((pred, terms), ...)."""

    head: tuple
    body: tuple


def convert_rules(program, encode) -> list[Rule]:
    """The positive rules of an engine `Program` in the bake-off shape; constants through `encode`."""

    def term(t):
        if isinstance(t, Var):
            return ("var", t.name)
        if isinstance(t, Const):
            return ("const", encode(t.value))
        raise ValueError(f"term {t}: only variables and constants are supported")

    def atom(a):
        if not isinstance(a, Atom):
            raise ValueError(f"literal {a}: only positive atoms are supported")
        return (a.pred, tuple(term(t) for t in a.args))

    return [Rule(atom(r.head), tuple(atom(b) for b in r.body)) for r in program.rules]


class Dictionary:
    """Term <-> int64 id."""

    def __init__(self):
        self.ids: dict[object, int] = {}

    def encode(self, value) -> int:
        return self.ids.setdefault(value, len(self.ids))

    def columns(self, facts) -> dict[str, np.ndarray]:
        rows: dict[str, list] = {}
        enc = self.encode
        for f in facts:
            rows.setdefault(f[0], []).append([enc(v) for v in f[1:]])
        return {p: np.array(r, dtype=np.int64).reshape(len(r), -1) for p, r in rows.items()}

    def encoded(self, facts) -> set[tuple]:
        ids = self.ids
        return {(f[0], *(ids.get(v, -1) for v in f[1:])) for f in facts}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _load() -> str:
    return "load average " + "/".join(f"{x:.2f}" for x in os.getloadavg())


def _tuples(core: ColumnarCore) -> set[tuple]:
    return {(p, *row) for p, rows in core.facts().items() for row in rows}


def _digest(core: ColumnarCore) -> list:
    """An order-independent fingerprint of the materialisation: per predicate, rows and a sum of row hashes."""
    return [[p, f.height, int(f.select(f.columns[: core.arities[p]]).hash_rows(seed=1).cast(pl.UInt128).sum() or 0)]
            for p, f in sorted(core.rel.items())]  # fmt: skip


class Bench:
    def __init__(self, args):
        self.args = args
        path = corpus_dir() / PROGRAM
        self.program = parse_program(path.read_text(encoding="utf-8"), str(path))
        self.ref = Reasoner.from_file(path, options=EngineOptions("fd-counting")) if not args.no_check else None
        prefixes = dict(self.program.prefixes)
        n = args.universities
        self.label = f"generate({n})" if n else "generate(1, 2)"
        self.maker = UpdateMaker(generate(n, prefixes=prefixes) if n else generate(1, 2, prefixes=prefixes), HELD_OUT)
        self.dic = Dictionary()
        self.rules = convert_rules(self.program, self.dic.encode)
        self.arities = {r.head[0]: len(r.head[1]) for r in self.rules}
        self.arities |= {b[0]: len(b[1]) for r in self.rules for b in r.body}
        self.arities |= {f[0]: len(f) - 1 for f in self.maker.initial}

    def check(self, what: str, core: ColumnarCore) -> None:
        if self.ref is None:
            return
        ok = _tuples(core) == self.dic.encoded(self.ref.facts())
        print(f"check {what}: {'same as the engine (fd-counting)' if ok else 'DIFFERENT from the engine'}")
        if not ok:
            raise SystemExit(1)

    def run(self) -> None:
        rss0 = _rss()
        cols = self.dic.columns(self.maker.initial)
        core = ColumnarCore(self.rules, self.arities)
        t = time.perf_counter()
        core.load(cols)
        load_s = time.perf_counter() - t
        print(f"# lubm.dlog over lubm_gen.{self.label}: {len(self.maker.initial):,} explicit, {core.size():,} "
              f"materialised; columnar load {load_s:.2f} s; {_load()}")
        if self.ref is not None:
            t = time.perf_counter()
            self.ref.load(self.maker.initial)
            print(f"engine (fd-counting) load {time.perf_counter() - t:.2f} s; {_load()}")
        self.check("after the load", core)
        if self.args.compare_joins:
            compare_joins(core)
        self.batches(core)
        self.singles(core)
        size = core.size()
        print(f"memory: nbytes {core.nbytes():,} = {core.nbytes() / size:.1f} bytes per materialised fact "
              f"({size:,} facts); RSS {rss0 / 2**20:.0f} MiB before the data, {_rss() / 2**20:.0f} MiB now "
              f"(includes the engine oracle: {self.ref is not None})")
        self.snapshot(core)
        top = sorted(core.profile.items(), key=lambda kv: -kv[1])[:8]
        print("profile (seconds per stratum, all updates): " + ", ".join(f"{k} {v:.2f}" for k, v in top))

    def batches(self, core: ColumnarCore) -> None:
        for b in range(self.args.batches):
            before = set(self.maker.present)
            for _ in range(self.args.updates):
                self.maker.make(1, 1)
            after = set(self.maker.present)
            add, dele = after - before, before - after
            ops = 2 * self.args.updates
            t = time.perf_counter()
            added, removed = core.update(self.dic.columns(add), self.dic.columns(dele))
            s = time.perf_counter() - t
            line = (f"batch {b}: {self.args.updates:,} updates = {ops:,} fact ops (net +{len(add):,} -{len(dele):,} "
                    f"explicit; +{added:,} -{removed:,} materialised) in {s:.3f} s = {ops / s:,.0f} fact ops/s")
            if self.ref is not None:
                t = time.perf_counter()
                self.ref.update(add, dele)
                line += f"; engine {time.perf_counter() - t:.3f} s on the same net change"
            print(f"{line}; {_load()}")
            self.check(f"after batch {b}", core)

    def singles(self, core: ColumnarCore) -> None:
        if not self.args.singles:
            return
        mine, theirs = [], []
        for _ in range(self.args.singles):
            add, dele = self.maker.make(1, 1)
            cadd, cdel = self.dic.columns(add), self.dic.columns(dele)
            t = time.perf_counter()
            core.update(cadd, cdel)
            mine.append(time.perf_counter() - t)
            if self.ref is not None:
                t = time.perf_counter()
                self.ref.update(add, dele)
                theirs.append(time.perf_counter() - t)
        line = f"single 1+1 update: median {statistics.median(mine) * 1e3:.1f} ms (max {max(mine) * 1e3:.1f})"
        if theirs:
            line += f"; engine median {statistics.median(theirs) * 1e3:.2f} ms (max {max(theirs) * 1e3:.1f})"
        print(f"{line} over {len(mine)}; {_load()}")
        self.check("after the single updates", core)

    def snapshot(self, core: ColumnarCore) -> None:
        with tempfile.TemporaryDirectory(prefix="columnar-snap-") as tmp:
            snap = os.path.join(tmp, "snap")
            t = time.perf_counter()
            core.save(snap)
            saved = time.perf_counter() - t
            disk = sum(f.stat().st_size for f in Path(snap).iterdir())
            Path(tmp, "arities.json").write_text(json.dumps(self.arities))
            cmd = [sys.executable, "-m", "tests.benchmarks.bakeoff.columnar_bench", "--restore-child", snap]
            if self.args.universities:
                cmd += ["--universities", str(self.args.universities)]
            t = time.perf_counter()
            child = subprocess.run(cmd, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - t
            got = json.loads(child.stdout.strip().splitlines()[-1])
            same = got["digest"] == _digest(core)
            print(f"snapshot: saved in {saved:.2f} s, {disk / 2**20:.1f} MiB on disk; restore in a new process "
                  f"{got['restore']:.2f} s (process wall {wall:.2f} s incl. start-up and imports), RSS "
                  f"{got['rss'] / 2**20:.0f} MiB; same state: {same}; {_load()}")
            if not same:
                raise SystemExit(1)


def compare_joins(core: ColumnarCore, reps: int = 20) -> None:
    """One semi-naive step of a transitive rule, r(x, z) :- delta(x, y), r(y, z), deduplicated, by three engines.

    `r` is the largest materialised binary relation (LUBM: connectedCourses); deltas of
    2 rows (a small update) and of 60% of `r` (what DRed over-deletes on a batch).
    """
    import duckdb

    p = max((q for q in core.rel if core.arities[q] == 2), key=lambda q: core.rel[q].height)
    rel = core.rel[p].select("c0", "c1")
    con = duckdb.connect()
    con.register("r", rel.to_arrow())
    for k in (2, int(0.6 * rel.height)):
        delta = rel.sample(k, seed=1)
        con.register("d", delta.to_arrow())

        def eager(delta=delta):
            return delta.join(rel, left_on="c1", right_on="c0").select("c0", pl.col("c1_right").alias("c1")).unique()

        def lazy(delta=delta):
            q = delta.lazy().join(rel.lazy(), left_on="c1", right_on="c0")
            return q.select("c0", pl.col("c1_right").alias("c1")).unique().collect()

        def duck():
            return con.sql("SELECT DISTINCT d.c0, r.c1 FROM d JOIN r ON d.c1 = r.c0").arrow()

        times = {}
        for name, fn in (("polars eager", eager), ("polars lazy", lazy), ("duckdb", duck)):
            fn()
            t = time.perf_counter()
            for _ in range(reps):
                fn()
            times[name] = (time.perf_counter() - t) / reps
        print(f"join delta({k:,} rows) x {p.rsplit('#', 1)[-1]}({rel.height:,}): "
              + ", ".join(f"{n} {v * 1e3:.2f} ms" for n, v in times.items()) + f"; {_load()}")


def restore_child(snap: str) -> int:
    """In a new process: restore the snapshot at `snap`, print one JSON line."""
    path = corpus_dir() / PROGRAM
    program = parse_program(path.read_text(encoding="utf-8"), str(path))
    rules = convert_rules(program, lambda v: (_ for _ in ()).throw(ValueError(f"constant {v} in the program")))
    arities = json.loads(Path(snap).parent.joinpath("arities.json").read_text())
    t = time.perf_counter()
    core = ColumnarCore.restore(snap, rules, arities)
    s = time.perf_counter() - t
    print(json.dumps({"restore": s, "rss": _rss(), "digest": _digest(core)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, default=None)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--updates", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=20)
    ap.add_argument("--no-check", action="store_true", help="do not compare with the current engine")
    ap.add_argument("--compare-joins", action="store_true", help="after the load: one join by Polars and DuckDB")
    ap.add_argument("--restore-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.restore_child:
        return restore_child(args.restore_child)
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
