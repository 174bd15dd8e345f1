"""The compact-core bake-off: every candidate on one workload, checked against today's engine.

    python -m tests.benchmarks.bakeoff.run [--universities 1] [--batches 3] [--updates 10000]
                                           [--singles 20] [--candidates current,door,columnar]

Workload (tests/benchmarks/bakeoff/workload.py): `lubm.dlog` over LUBM-N
(`--universities 1`: `generate(1, 2)`, the per-batch processor benchmark's
LUBM-1), then `--batches` batches of `--updates` updates of 1 add + 1 delete
(`UpdateMaker`, fixed seed; a batch is netted and given to the candidate as
one update), then `--singles` single updates of 1 + 1, each timed.

Each candidate runs in a fresh process (so its RSS growth is its own) and
reports: JIT/compile warm-up, load time, fact ops/s per batch (fact ops = the
batch's adds + deletes, 2 x updates, as the per-batch processor counts them),
the median single-update latency, `nbytes` and RSS growth over the load per
materialised fact, snapshot save time and size; then a second fresh process
restores the snapshot and reports the restore time. After the load, every
batch, the singles and the restore, the candidate's materialisation (decoded
to Python facts) is digested and compared with the current engine's.
Candidates are named in `CANDIDATES`; one whose module or library is missing
is skipped with a note.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CANDIDATES = {  # name -> (module, class)
    "current": ("tests.benchmarks.bakeoff.current", "CurrentCore"),
    "columnar": ("tests.benchmarks.bakeoff.columnar", "ColumnarCore"),
    "door": ("tests.benchmarks.bakeoff.door", "DoorCore"),  # the arrays core through Reasoner
}


def core_class(name: str):
    """The candidate's class; ImportError when its module or library is missing."""
    module, cls = CANDIDATES[name]
    return getattr(importlib.import_module(module), cls)


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


class Clock:
    """Wall and CPU seconds of a block (on a shared machine the CPU time is the steadier figure)."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.w, time.process_time() - self.c


def digest(dictionary, facts: dict[str, set]) -> str:
    """A fingerprint of a materialisation as decoded Python facts (comparable across candidates)."""
    decoded = dictionary.decode(facts)
    return hashlib.sha256("\n".join(sorted(map(repr, decoded))).encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------- child: one candidate
def child_run(args) -> dict:
    from tests.benchmarks.bakeoff.workload import lubm

    w = lubm(args.universities, held_out=args.held_out)
    initial = w.encode(w.initial)
    cls = core_class(args.child)
    out: dict = {"candidate": args.child, "workload": w.label, "explicit": len(w.initial)}
    with Clock() as c:
        warm = getattr(cls, "warm", None)
        if warm is not None:
            warm()
    out["warm_s"], out["warm_cpu"] = c.wall, c.cpu
    gc.collect()
    rss0 = out["rss_before"] = _status("VmRSS")
    with Clock() as c:
        core = cls(w.rules, w.arities)
        core.load(initial)
    out["load_s"], out["load_cpu"] = c.wall, c.cpu
    gc.collect()
    out["rss_growth"] = _status("VmRSS") - rss0
    out["nbytes"] = core.nbytes()
    facts = core.facts()
    out["facts"] = sum(map(len, facts.values()))
    out["digests"] = [digest(w.dictionary, facts)]
    del facts
    out["batches"] = []
    for _ in range(args.batches):
        add, dele, ops = w.batch(args.updates)
        a, d = w.encode(add), w.encode(dele)
        with Clock() as c:
            added, removed = core.update(a, d)
        out["batches"].append({"ops": ops, "net": len(add) + len(dele), "seconds": c.wall, "cpu": c.cpu,
                               "added": added, "removed": removed})  # fmt: skip
        out["digests"].append(digest(w.dictionary, core.facts()))
    singles, single_cpu = [], []
    for _ in range(args.singles):
        add, dele = w.maker.make(1, 1)
        a, d = w.encode(add), w.encode(dele)
        with Clock() as c:
            core.update(a, d)
        singles.append(c.wall)
        single_cpu.append(c.cpu)
    out["single_ms"] = 1000 * statistics.median(singles) if singles else None
    out["single_cpu_ms"] = 1000 * statistics.median(single_cpu) if singles else None
    final = core.facts()
    out["final_facts"] = sum(map(len, final.values()))
    out["digests"].append(digest(w.dictionary, final))
    del final
    snap = str(Path(args.snapshot) / f"{args.child}.snap")
    with Clock() as c:
        core.save(snap)
    out["save_s"] = c.wall
    out["snapshot_bytes"] = sum(p.stat().st_size for p in Path(args.snapshot).glob(f"{args.child}.snap*"))
    out["snapshot"] = snap
    (Path(args.snapshot) / "terms.json").write_text(json.dumps(w.dictionary.values), encoding="utf-8")
    out["peak_rss"] = _status("VmHWM")
    out["arities"] = w.arities
    return out


def child_restore(args) -> dict:
    """A fresh process: restore the snapshot (timed), then digest what it holds."""
    from fluxmat.engine import parse_program
    from fluxmat.engine.lexer import read_source
    from tests.benchmarks.bakeoff.workload import Dictionary, convert

    t0 = time.perf_counter()
    cls = core_class(args.child)
    path = args.program
    d = Dictionary()
    rules, arities = convert(parse_program(read_source(path), path), d)
    arities.update(json.loads(args.arities))
    with Clock() as warm:
        if getattr(cls, "warm", None) is not None:
            cls.warm()
    with Clock() as c:
        core = cls.restore(args.restore, rules, arities)
    setup = time.perf_counter() - t0 - c.wall - warm.wall
    rss = _status("VmHWM")  # before the check below decodes the facts into Python objects
    for v in json.loads((Path(args.restore).parent / "terms.json").read_text(encoding="utf-8")):
        d.intern(v)
    return {"restore_s": c.wall, "restore_cpu": c.cpu, "warm_s": warm.wall, "warm_cpu": warm.cpu, "setup_s": setup, "digest": digest(d, core.facts()),
            "rss": rss}  # fmt: skip


# ---------------------------------------------------------------- parent
def _child(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "tests.benchmarks.bakeoff.run", *argv], capture_output=True,
                          text=True)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "child failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(name: str, args, tmp: str) -> dict:
    base = ["--universities", str(args.universities), "--batches", str(args.batches), "--updates",
            str(args.updates), "--singles", str(args.singles), "--snapshot", tmp]  # fmt: skip
    if args.held_out is not None:
        base += ["--held-out", str(args.held_out)]
    res = _child(["--child", name, *base])
    from tests.benchmarks.bakeoff.workload import lubm_program_path

    res["restore"] = _child(["--child", name, "--restore", res["snapshot"], "--program", lubm_program_path(),
                             "--arities", json.dumps(res.get("arities", {}))])  # fmt: skip
    return res


def row(name: str, r: dict, ref: dict | None) -> str:
    facts = max(r["facts"], 1)
    ops = sum(b["ops"] for b in r["batches"])
    secs = sum(b["seconds"] for b in r["batches"])
    cpu = sum(b["cpu"] for b in r["batches"])
    per_batch = ", ".join(f"{b['ops'] / b['seconds']:,.0f}" for b in r["batches"]) or "-"
    net = sum(b["net"] for b in r["batches"]) // max(len(r["batches"]), 1)
    rate = f"{ops / secs:,.0f} ({per_batch}); CPU {ops / cpu:,.0f}; net {net:,}/batch" if secs and cpu else "-"
    if ref is None:
        ok = "unchecked"
    else:
        same = r["digests"] == ref["digests"] and r["restore"]["digest"] == ref["digests"][-1]
        ok = "ok" if same else "DIFFERENT"
    nb = f"{r['nbytes'] / facts:,.0f}" if r.get("nbytes") else "-"
    single = f"{r['single_ms']:.2f} (CPU {r['single_cpu_ms']:.2f})" if r.get("single_ms") is not None else "-"
    rs = r["restore"]
    return (f"| {name} | {r['warm_s']:.2f} (CPU {r.get('warm_cpu', 0):.2f}) | {r['load_s']:.2f} (CPU {r['load_cpu']:.2f}) | {rate} | "
            f"{single} | {nb} | {r['rss_growth'] / facts:,.0f} | {r['rss_before'] / 2**20:,.0f} / "
            f"{r['peak_rss'] / 2**20:,.0f} | {r['save_s']:.2f} | {r['snapshot_bytes'] / 2**20:,.1f} | "
            f"{rs['restore_s']:.2f} (CPU {rs['restore_cpu']:.2f}) + warm-up {rs['warm_s']:.2f} "
            f"(CPU {rs.get('warm_cpu', 0):.2f}) | "
            f"{rs['rss'] / 2**20:,.0f} | {ok} |")


HEADER = ("| candidate | warm-up s | load s | fact ops/s (per batch) | single 1+1 ms (median) | nbytes/fact | "
          "RSS growth/fact | RSS before load / peak MiB | save s | snapshot MiB | restore s (new process) | "
          "restore peak RSS MiB | check |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, default=1)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--updates", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=20)
    ap.add_argument("--held-out", type=int, default=None,
                    help="generated facts held out of the initial data (default 300, as the per-batch benchmark): "
                         "a batch nets to at most about this many adds and deletes")
    ap.add_argument("--candidates", default="current,door,columnar",
                    help="without `current`, nothing is checked (the rows say unchecked)")
    ap.add_argument("--json", help="also write every measurement (digests included) to this file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", help=argparse.SUPPRESS)
    ap.add_argument("--restore", help=argparse.SUPPRESS)
    ap.add_argument("--program", help=argparse.SUPPRESS)
    ap.add_argument("--arities", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child and args.restore:
        print(json.dumps(child_restore(args)))
        return 0
    if args.child:
        print(json.dumps(child_run(args)))
        return 0
    names = [n.strip() for n in args.candidates.split(",") if n.strip()]
    unknown = [n for n in names if n not in CANDIDATES]
    if unknown:
        ap.error(f"unknown candidate(s) {', '.join(unknown)}; known: {', '.join(CANDIDATES)}")
    results: dict[str, dict] = {}
    notes = []
    with tempfile.TemporaryDirectory(prefix="fluxmat-bakeoff-") as tmp:
        for name in sorted(names, key=lambda n: n != "current"):  # the reference first, when asked for
            try:
                core_class(name)
            except ImportError as exc:
                notes.append(f"{name}: skipped ({exc})")
                continue
            try:
                results[name] = measure(name, args, tmp)
            except RuntimeError as exc:
                notes.append(f"{name}: failed ({exc})")
            print(f"# {name} done; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    ref = results.get("current")
    first = next(iter(results.values()), None)
    if first:
        print(f"# lubm.dlog over {first['workload']}: {first['explicit']:,} explicit facts, {first['facts']:,} in "
              f"the materialisation; {args.batches} batches of {args.updates:,} updates of 1 + 1; "
              f"load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(HEADER)
    for name, r in results.items():
        print(row(name, r, ref))
    for note in notes:
        print(f"\n{note}")
    bad = [n for n, r in results.items() if ref is not None and row(n, r, ref).endswith("DIFFERENT |")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
