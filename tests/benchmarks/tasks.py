"""The tasks of every workload and the fluxmat side of the benchmark (run in children).

Tasks, in this order, each from the state the previous one left:

* `initial`: load the explicit facts E0 (for `remat` also `initial, warm`: a
  second load with the rule plans already compiled);
* `delete 1%`: delete a random 1% of E0 (fixed seed), then `re-insert 1%`;
* `delete 10`: delete 10 random facts of E0, then `re-insert 10` (the issue's
  "10 edges on DAG-R");
* `delete+insert 1,000`: one update deleting 1,000 random explicit facts and
  inserting the workload's 1,000 held-out `extra` facts (workloads with `extra`);
* `delete 25%`: delete a random 25% of the explicit facts left by the previous
  task (the large deletion of Hu, Motik & Horrocks 2019).

`plan(w)` gives each task's update and the explicit set after it; peers that
recompute from scratch use the latter, incremental peers the former.

`run_reference` computes, per distinct explicit set, the fact count and an
order-independent digest of `remat` from scratch; `run_fluxmat` runs one
algorithm through all tasks and digests its materialisation after each, so the
parent checks every fluxmat result against a from-scratch `remat` without
shipping the facts between processes. `run_memory` compares the memory of the
fd-counting derivation log with the materialisation's.
"""

from __future__ import annotations

import inspect
import random
import time
from dataclasses import dataclass
from hashlib import blake2b

from fluxmat.engine import EngineOptions, Reasoner
from tests.benchmarks.isolate import Capped, cap, deep_size, status_kb
from tests.benchmarks.workloads import SEED, WORKLOADS, Workload

SMALL = 0.01  # small deletion / re-insertion: this fraction of E0
LARGE = 0.25  # large deletion: this fraction of the explicit facts at that point
INITIAL, WARM = "initial", "initial, warm"
DELETE, REINSERT, LARGE_DELETE = "delete 1%", "re-insert 1%", "delete 25%"
TINY = 10  # the few-facts deletion / re-insertion
DELETE_TINY, REINSERT_TINY = f"delete {TINY}", f"re-insert {TINY}"
_MASK = (1 << 64) - 1


def mixed_label(n: int) -> str:
    return f"delete+insert {n:,}"


@dataclass
class Task:
    name: str
    add: list[tuple]
    delete: list[tuple]
    state: str  # key of the explicit set after the task (E0, E1, E3, E4)


def plan(w: Workload) -> tuple[list[Task], dict[str, list[tuple]]]:
    """The tasks and the explicit sets (sorted by repr) they lead to."""
    rng = random.Random(SEED)
    e0 = sorted(set(w.facts), key=repr)
    small = rng.sample(e0, max(1, round(len(e0) * SMALL)))
    states = {"E0": e0, "E1": sorted(set(e0) - set(small), key=repr)}
    tiny = rng.sample(e0, min(TINY, len(e0)))
    states["E2"] = sorted(set(e0) - set(tiny), key=repr)
    tasks = [Task(INITIAL, e0, [], "E0"), Task(DELETE, [], small, "E1"),
             Task(REINSERT, small, [], "E0"), Task(DELETE_TINY, [], tiny, "E2"),
             Task(REINSERT_TINY, tiny, [], "E0")]  # fmt: skip
    last = e0
    if w.extra:
        mix = rng.sample(e0, min(len(w.extra), len(e0)))
        last = states["E3"] = sorted((set(e0) - set(mix)) | set(w.extra), key=repr)
        tasks.append(Task(mixed_label(len(w.extra)), list(w.extra), mix, "E3"))
    big = rng.sample(last, round(len(last) * LARGE))
    states["E4"] = sorted(set(last) - set(big), key=repr)
    tasks.append(Task(LARGE_DELETE, [], big, "E4"))
    return tasks, states


def digest(facts) -> tuple[int, int]:
    """(count, sum of 64-bit blake2b of repr) over an iterable of facts: order-free."""
    n = total = 0
    for f in facts:
        total += int.from_bytes(blake2b(repr(f).encode(), digest_size=8).digest(), "little")
        n += 1
    return n, total & _MASK


def workload(arg: dict) -> Workload:
    return WORKLOADS[arg["workload"]](**arg.get("options", {}))


_OPTIONS = {"modules", "hypertree", "levels"} & set(inspect.signature(Reasoner.__init__).parameters)


def reasoner(w: Workload, algorithm: str, optimised: bool = False, core: str = "objects") -> Reasoner:
    """A reasoner, plain or `optimised`: the engine's tc/stc modules and hypertree
    decompositions on (where it has them); plain turns both off. `core="arrays"`:
    the arrays core, with its closure modules as `optimised` says."""
    if core != "objects":
        return Reasoner(w.program, options=EngineOptions(algorithm, core=core, modules=optimised))
    if optimised and not _OPTIONS:
        raise ValueError("this engine has no modules nor hypertree decompositions")
    return Reasoner(w.program, algorithm, **{k: optimised for k in _OPTIONS})


def engine_options() -> list[str]:
    """The optimisations `optimised=True` switches on (empty: none in this engine)."""
    return sorted(_OPTIONS)


def capped_steps(r: Reasoner, steps, cap_s: float, rows: list[dict]):
    """Apply each (name, task) to `r` (load for `initial`, else update), `cap_s` each.

    Appends a row per step to `rows` (with `wall` seconds, or why it has none)
    and yields (row, task, report) for every step that finished; a capped step
    skips the rest.
    """
    stop = None
    for name, t in steps:
        row = {"task": name}
        rows.append(row)
        if stop:
            row["check"] = f"skipped ({stop})"
            continue
        try:
            with cap(cap_s):
                start = time.perf_counter()
                report = r.load(t.add) if t.name == INITIAL else r.update(t.add, t.delete)
                row["wall"] = time.perf_counter() - start
        except (Capped, SystemError) as exc:
            capped = exc if isinstance(exc, Capped) else exc.__cause__ or exc.__context__
            if not isinstance(capped, Capped):  # the cap's signal inside a numba call arrives wrapped
                raise
            row["check"], stop = str(capped), f"{name} capped"
            continue
        yield row, t, report


# ---------------------------------------------------------------- child entry points


def run_reference(arg: dict) -> dict:
    """remat from scratch over every explicit set: {state: [count, digest]} and the plan."""
    w = workload(arg)
    tasks, states = plan(w)
    out = {}
    for key, facts in states.items():
        r = reasoner(w, "remat")
        r.load(facts)
        out[key] = digest(r.maintainer.facts())
        del r
    return {
        "states": out,
        "tasks": [(t.name, t.state, len(t.add), len(t.delete)) for t in tasks],
        "info": {
            "workload": w.name, "source": w.source, "explicit_facts": len(w.facts),
            "extra": len(w.extra), "recursive": w.recursive,
            "materialisation": out["E0"][0],
            "explicit_sets": {k: len(v) for k, v in states.items()},
        },
    }  # fmt: skip


def run_fluxmat(arg: dict) -> dict:
    """One algorithm through every task: rows with seconds, wall, applications, digest."""
    w = workload(arg)
    tasks, _ = plan(w)
    algorithm, optimised, cap_s = arg["algorithm"], arg.get("optimised", False), arg["cap"]
    base_kb = status_kb("VmRSS")
    r = reasoner(w, algorithm, optimised, arg.get("core", "objects"))
    steps = [(t.name, t) for t in tasks]
    if algorithm == "remat":
        steps.insert(1, (WARM, tasks[0]))
    rows: list[dict] = []
    for row, t, report in capped_steps(r, steps, cap_s, rows):
        row["seconds"] = report.seconds
        row["applications"] = report.total_applications
        row["state"] = t.state
        row["digest"] = digest(r.maintainer.facts())
        row["facts"] = row["digest"][0]
    return {"rows": rows, "base_rss_mb": round((base_kb or 0) / 1024, 1)}


def run_memory(arg: dict) -> dict:
    """fd-counting after load: deep size of I vs the derivation log structures.

    The materialisation is the maintainer's relations `I` (fact sets and their
    hash indexes); the log is FDCounting's `log` and `heads` (instances, and per
    fact its supporting count and instances), counting only objects not already part of I (shared fact tuples are
    counted once, with I). `born` (FD timestamps per fact) is reported apart.
    """
    w = workload(arg)
    r = reasoner(w, "fd-counting", optimised=True)  # the defaults: modules on
    with cap(arg["cap"]):
        r.load(w.facts)
    m = r.maintainer
    seen: set[int] = set()
    facts_only = sum(deep_size(rel.facts, set()) for rel in m.I.values())
    mat = deep_size(m.I, seen)
    log = deep_size(m.heads, seen)
    born = deep_size(m.born, seen)
    return {
        "facts": sum(len(rel) for rel in m.I.values()),
        "log_instances": m.log_size(),
        "mat_bytes": mat, "mat_facts_only_bytes": facts_only,
        "log_bytes": log, "born_bytes": born, "ratio": round(log / mat, 2) if mat else None,
    }  # fmt: skip
