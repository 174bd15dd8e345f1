"""Peers in a child process: `run_peer` dispatches by name; incremental peers live here.

* clingo, DuckDB (peers.py): from scratch over each task's explicit set;
* Pathway (differential dataflow, `pw.iterate`): dag, stc, sspe. One streaming
  run; the explicit facts enter through a Python connector, one commit per task
  (initial load, then each task's deletions and insertions), and the time of a
  task runs from its first row to the `on_time_end` of its commit. Each commit
  also carries a tick row, passed straight to the output next to the
  recursive result, so every commit ends with an output time even when the
  result does not change. Every table that enters `pw.iterate` is first made
  a set by a `groupby` (rows keyed by their values): with the raw connector
  rows as a constant argument of `pw.iterate` (SSPE's `b`), deletions were
  not propagated to the derived rows (the result kept every derived fact),
  while a from-scratch run on the same facts was right;
* PyDBSP (pydbsp_worker.py under Python 3.12): dag, stc, lubm (positive
  programs without arithmetic), incremental, one `saturate()` per task;
* owlrl (owl_peer.py): lubm up to OWLRL_MAX_FACTS, from scratch, initial only,
  capped at 3x --cap.

A peer that cannot run raises `NotApplicable(reason)`; its row says "n/a (reason)".
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.benchmarks.isolate import Capped, cap
from tests.benchmarks.peers import DUCKDB_SQL, AspTranslator, DuckDBPeer, clingo_from_scratch
from tests.benchmarks.tasks import plan, workload

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
PYDBSP_VENV = CACHE / "fluxmat" / "bench-py312"  # outside the repository
PYDBSP_WORKLOADS = ("dag", "stc", "lubm")
PATHWAY_WORKLOADS = ("dag", "stc", "sspe")
OWLRL_MAX_FACTS = 10_000  # one LUBM department (~6,700 facts) takes it ~45 s
PYDBSP_MAX_FACTS = 2_000  # a 300-edge DAG takes it ~1 s to load and ~10 s for 1,000 changes


class NotApplicable(Exception):
    pass


def _version(mod: str) -> str:
    try:
        return __import__(mod).__version__
    except ImportError as exc:
        raise NotApplicable(f"{mod} not installed: {exc}") from exc


# ---------------------------------------------------------------- from scratch


def clingo_rows(w, tasks, states, cap_s):
    version = _version("clingo")
    try:
        asp = AspTranslator(w.program)
    except ValueError as exc:
        raise NotApplicable(f"not translatable: {exc}") from exc
    rows = []
    for t in tasks:
        try:
            with cap(cap_s):
                secs, n = clingo_from_scratch(asp, states[t.state])
        except Capped as exc:
            rows.append({"task": t.name, "check": str(exc)})
            break
        rows.append({"task": t.name, "seconds": secs, "facts": n, "state": t.state})
    return rows, version


def duckdb_rows(w, tasks, states, cap_s):
    version = _version("duckdb")
    if w.name not in DUCKDB_SQL:
        raise NotApplicable(f"no SQL written for {w.name}")
    db = DuckDBPeer(w.name, cap_s)
    rows = []
    try:
        for t in tasks:
            try:
                secs, n = db.run(states[t.state])
            except Exception as exc:  # duckdb.InterruptException when capped
                rows.append({"task": t.name, "check": f"capped/error: {type(exc).__name__}"})
                break
            rows.append({"task": t.name, "seconds": secs, "facts": n, "state": t.state})
    finally:
        db.close()
    return rows, f"{version} ({db.threads} threads)"


def owlrl_rows(w, tasks, states, cap_s):
    version = _version("owlrl")
    if w.name != "lubm":
        raise NotApplicable("OWL ontology workload only (lubm)")
    if len(w.facts) > OWLRL_MAX_FACTS:
        raise NotApplicable(f"pure Python, run only up to {OWLRL_MAX_FACTS:,} explicit facts")
    from tests.benchmarks.owl_peer import owlrl_closure

    try:
        with cap(cap_s * 3):
            out = owlrl_closure(w.program, states["E0"])
    except Capped as exc:
        return [{"task": "initial", "check": str(exc)}], version
    note = (f"full OWL 2 RL; {out['triples']:,} triples in all; "
            f"{out['rules'] - out['untranslated']}/{out['rules']} rules as OWL axioms")  # fmt: skip
    return [{"task": "initial", "seconds": out["seconds"], "facts": out["facts"],
             "state": "E0", "note": note}], version  # fmt: skip


# ---------------------------------------------------------------- Pathway


def _pathway_result(pw, name: str, inp):
    """The recursive result (columns r0, r1) of workload `name` over input rows c0, c1, c2."""
    t = pw.this
    if name == "sspe":
        b = inp.groupby(t.c0, t.c1, t.c2).reduce(t.c0, t.c1, t.c2)
        init = b.filter(t.c0 == 0).select(r0=t.c1, r1=t.c2)

        def step(d, b, base):
            new = d.join(b, d.r0 == b.c0).select(r0=b.c1, r1=d.r1 + b.c2)
            d = base.concat_reindex(new).groupby(t.r0, t.r1).reduce(t.r0, t.r1)
            return dict(d=d, b=b, base=base)

        base = init.groupby(t.r0, t.r1).reduce(t.r0, t.r1)
        return pw.iterate(step, d=pw.iterate_universe(base), b=b, base=base)["d"]
    edge = inp.select(r0=t.c0, r1=t.c1)
    if name == "stc":
        edge = edge.concat_reindex(inp.select(r0=t.c1, r1=t.c0))
    edge = edge.groupby(t.r0, t.r1).reduce(t.r0, t.r1)

    def tc(path, edge):
        new = path.join(edge, path.r1 == edge.r0).select(r0=path.r0, r1=edge.r1)
        return dict(path=edge.concat_reindex(new).groupby(t.r0, t.r1).reduce(t.r0, t.r1),
                    edge=edge)  # fmt: skip

    return pw.iterate(tc, path=pw.iterate_universe(edge), edge=edge)["path"]


def pathway_rows(w, tasks, states, cap_s):
    version = _version("pathway")
    if w.name not in PATHWAY_WORKLOADS:
        raise NotApplicable(f"not written for {w.name} (dag, stc, sspe only)")
    import pathway as pw

    class Row(pw.Schema):
        c0: int
        c1: int
        c2: int
        tick: int

    cond = threading.Condition()
    ends: list[int] = []
    count = [0]
    rows: list[dict] = []
    # results (counts) exclude explicit facts kept apart from the derived relation
    explicit_apart = w.name in ("dag", "sspe")

    def fact_row(f):
        return {"c0": f[1], "c1": f[2], "c2": f[3] if len(f) > 3 else 0, "tick": 0}

    class Subject(pw.io.python.ConnectorSubject):
        def run(self):
            for i, t in enumerate(tasks):
                with cond:
                    seen = len(ends)
                start = time.perf_counter()
                for f in t.delete:
                    self.delete(**fact_row(f))
                for f in t.add:
                    self.next(**fact_row(f))
                self.next(c0=-1, c1=i, c2=0, tick=1)
                self.commit()
                with cond:
                    ok = cond.wait_for(lambda seen=seen: len(ends) > seen, timeout=cap_s)
                secs = time.perf_counter() - start
                if not ok:
                    rows.append({"task": t.name, "check": f"capped at {cap_s:g} s"})
                    return
                n = count[0] + (len(states[t.state]) if explicit_apart else 0)
                rows.append({"task": t.name, "seconds": secs, "facts": n, "state": t.state})

    inp = pw.io.python.read(Subject(), schema=Row, autocommit_duration_ms=None)
    data = inp.filter(pw.this.tick == 0)
    ticks = inp.filter(pw.this.tick == 1).select(r0=pw.this.c0, r1=pw.this.c1)
    out = _pathway_result(pw, w.name, data).concat_reindex(ticks)

    def on_change(key, row, time, is_addition):
        if row["r0"] != -1:  # tick rows have r0 = -1; nodes are >= 0
            count[0] += 1 if is_addition else -1

    def on_time_end(t):
        with cond:
            ends.append(t)
            cond.notify_all()

    pw.io.subscribe(out, on_change=on_change, on_time_end=on_time_end)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    return rows, version


# ---------------------------------------------------------------- PyDBSP


def _python312() -> str:
    """A Python 3.12 interpreter: $FLUXMAT_PYTHON312, python3.12 on PATH, or pyenv's."""
    candidates = [os.environ.get("FLUXMAT_PYTHON312"), shutil.which("python3.12")]
    candidates += sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.12*/bin/python3.12"))
    for exe in filter(None, candidates):
        try:
            out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)  # fmt: skip
        except OSError:
            continue
        if out.returncode == 0 and out.stdout.strip() == "(3, 12)":
            return exe
    raise NotApplicable("no Python 3.12 interpreter (set FLUXMAT_PYTHON312)")


def pydbsp_python() -> str:
    """The bench venv's interpreter with pydbsp, created on first use (PyPI)."""
    py = PYDBSP_VENV / "bin" / "python"
    check = [str(py), "-c", "import pydbsp"]
    if py.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return str(py)
    exe = _python312()
    steps = [[exe, "-m", "venv", str(PYDBSP_VENV)],
             [str(py), "-m", "pip", "install", "-q", "pydbsp>=2.1,<3"]]  # fmt: skip
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise NotApplicable(f"{' '.join(cmd[:3])} failed: {out.stderr.strip()[-200:]}")
    return str(py)


def pydbsp_rows(w, tasks, states, cap_s):
    from fluxmat.engine.syntax import Atom, Const, Var

    if w.name not in PYDBSP_WORKLOADS:
        raise NotApplicable("arithmetic not supported by pydbsp's Datalog")
    if len(w.facts) > PYDBSP_MAX_FACTS:
        raise NotApplicable(f"pure Python, run only up to {PYDBSP_MAX_FACTS:,} explicit facts")
    py = pydbsp_python()
    version = subprocess.run(
        [py, "-c", "import importlib.metadata as m, sys; "
         "print(m.version('pydbsp'), 'on Python', sys.version.split()[0])"],
        capture_output=True, text=True).stdout.strip()  # fmt: skip

    def atom(a):
        return [a.pred, [f"?{t.name}" if isinstance(t, Var) else t.value for t in a.args]]

    rules = []
    for r in w.program.rules:
        if not all(isinstance(b, Atom) and all(isinstance(t, Var | Const) for t in b.args)
                   for b in r.body):  # fmt: skip
            raise NotApplicable(f"rule not expressible: {r}")
        rules.append([atom(r.head)] + [atom(b) for b in r.body])
    spec = {"rules": rules, "tasks": [{"name": t.name, "add": t.add, "delete": t.delete}
                                      for t in tasks]}  # fmt: skip
    worker = Path(__file__).with_name("pydbsp_worker.py")
    proc = subprocess.Popen([py, str(worker)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    rows: list[dict] = []
    budget = cap_s * len(tasks)

    def feed():
        try:
            proc.stdin.write(json.dumps(spec))
            proc.stdin.close()
        except BrokenPipeError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    timer = threading.Timer(budget, proc.kill)  # our own child, by its handle
    timer.start()
    try:
        for line in proc.stdout:
            rows.append(json.loads(line))
    finally:
        timer.cancel()
        proc.wait()
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the worker's, MiB
    for r in rows:
        r["peak_rss_mb"] = round(peak, 1)
    by_name = {t.name: t for t in tasks}
    for r in rows:
        r["state"] = by_name[r["task"]].state
    if len(rows) < len(tasks):
        err = proc.stderr.read().strip().splitlines()[-1:] if proc.returncode > 0 else []
        reason = err[0][:120] if err else f"killed after {budget:g} s"
        rows.append({"task": tasks[len(rows)].name, "check": f"capped ({reason})"})
    return rows, version


PEERS = {"clingo": clingo_rows, "duckdb": duckdb_rows, "pathway": pathway_rows,
         "pydbsp": pydbsp_rows, "owlrl": owlrl_rows}  # fmt: skip


def run_peer(arg: dict) -> dict:
    """Child entry point: {"rows": [...], "version": ...} or {"na": reason}."""
    w = workload(arg)
    tasks, states = plan(w)
    try:
        rows, version = PEERS[arg["peer"]](w, tasks, states, arg["cap"])
    except NotApplicable as exc:
        return {"na": str(exc)}
    return {"rows": rows, "version": version, "python": sys.version.split()[0]}
