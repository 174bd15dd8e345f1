"""The equality benchmark: B/F~ against Remat~ and the axiomatised algorithms (Motik et al. 2015).

Workload (`people`, fixed seed, scalable): a genealogy of `PEOPLE` persons in
generations, each with mother, father, an `ssn` and a birth year; a fraction
of the persons also appear under a second identifier (a duplicate record with
the same ssn and parents, and some of their facts), and some duplicates are
linked by an explicit `owl:sameAs` instead. The program makes `hasMother` and
`hasFather` functional and `ssn` inverse-functional (equalities derived by
rules, as in the corpus `family` program) and derives ancestors, siblings and
persons:

    owl:sameAs(Y1, Y2) :- hasMother(X, Y1), hasMother(X, Y2).   (and hasFather)
    owl:sameAs(X1, X2) :- ssn(X1, S), ssn(X2, S).
    ancestor(X, Y) :- hasMother(X, Y).   ancestor(X, Y) :- hasFather(X, Y).
    ancestor(X, Z) :- hasMother(X, Y), ancestor(Y, Z).   (and hasFather)
    sibling(X, Y) :- hasMother(X, M), hasMother(Y, M).
    person(X) :- bornIn(X, Y).

Tasks, each from the state the previous one left: initial load, delete 100
random explicit facts (equalities and ssn facts among them), re-insert them,
then the same with 1,000. Systems, each in its own child process:
`bf` (B/F~: fully incremental), `remat` (Remat~: recomputes the
r-materialisation), `dredc` (DRed^c over the rewritten program, recomputing
when the classes can change), and `bf` and `remat` over the axiomatised
program with owl:sameAs an ordinary predicate (B/F^A and Remat^A, the paper's
baselines). Every system's expanded materialisation is digested after every
task and compared with Remat~'s. `--core arrays` runs `dredc~` and `remat~`
on the arrays core (engine.compact.equality) against Remat~ and `dredc~` on
the objects core; `--core both` runs every system.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from fluxmat.engine import EngineOptions, Reasoner, parse_program
from fluxmat.engine.equality import SAME_AS, axiomatise
from tests.benchmarks.isolate import isolated
from tests.benchmarks.tasks import INITIAL, capped_steps, digest
from tests.benchmarks.workloads import SEED, render_table

PROGRAM = """\
@prefix owl: <http://www.w3.org/2002/07/owl#> .
owl:sameAs(Y1, Y2) :- hasMother(X, Y1), hasMother(X, Y2).
owl:sameAs(Y1, Y2) :- hasFather(X, Y1), hasFather(X, Y2).
owl:sameAs(X1, X2) :- ssn(X1, S), ssn(X2, S).
ancestor(X, Y) :- hasMother(X, Y).
ancestor(X, Y) :- hasFather(X, Y).
ancestor(X, Z) :- hasMother(X, Y), ancestor(Y, Z).
ancestor(X, Z) :- hasFather(X, Y), ancestor(Y, Z).
sibling(X, Y) :- hasMother(X, M), hasMother(Y, M).
person(X) :- bornIn(X, Y).
"""
PEOPLE = 1_000
GENERATION = 100  # persons per generation
DUPLICATES = 0.15  # fraction of persons with a second identifier
SIZES = (100, 1_000)
# (label, algorithm, equality, core): the paper's B/F~, Remat~, and the axiomatised baselines
SYSTEMS = (
    ("bf (B/F~)", "bf", "rewrite", "objects"), ("remat (Remat~)", "remat", "rewrite", "objects"),
    ("dredc~", "dredc", "rewrite", "objects"), ("bf, axiomatised (B/F^A)", "bf", "off", "objects"),
    ("remat, axiomatised (Remat^A)", "remat", "off", "objects"),
)  # fmt: skip
ARRAYS_SYSTEMS = (
    ("dredc~, arrays", "dredc", "rewrite", "arrays"), ("remat~, arrays", "remat", "rewrite", "arrays"),
)  # fmt: skip
CORE_SYSTEMS = {
    "objects": SYSTEMS,
    "arrays": (*SYSTEMS[1:3], *ARRAYS_SYSTEMS),
    "both": (*SYSTEMS, *ARRAYS_SYSTEMS),
}
CAP = 120.0


def people(n: int = PEOPLE, seed: int = SEED) -> list[tuple]:
    """Explicit facts of the genealogy (see the module docstring), sorted by repr."""
    rng = random.Random(seed)
    facts: set[tuple] = set()
    dups: set[int] = set()  # persons with a second record r<i>
    for i in range(n):
        p = f"p{i}"
        year = 1900 + i // GENERATION
        facts |= {("ssn", p, 100_000 + i), ("bornIn", p, year)}
        if i >= 2 * GENERATION:  # parents from the previous generation
            base = (i // GENERATION - 1) * GENERATION
            m = rng.randrange(base, base + GENERATION, 2)
            f = rng.randrange(base + 1, base + GENERATION, 2)
            facts |= {("hasMother", p, f"p{m}"), ("hasFather", p, f"p{f}")}
            if m in dups and rng.random() < 0.5:  # the mother's other record: merged by the rule
                facts.add(("hasMother", p, f"r{m}"))
        if rng.random() < DUPLICATES:
            dups.add(i)
            q, kind = f"r{i}", rng.random()
            facts.add(("bornIn", q, year))
            if kind < 0.4:
                facts.add(("ssn", q, 100_000 + i))  # merged by the inverse-functional rule
            elif kind < 0.7:
                facts.add((SAME_AS, q, p))  # merged explicitly
            # else: merged only if a child's record names it as mother
    return sorted(facts, key=repr)


@dataclass
class Task:
    name: str
    add: list[tuple]
    delete: list[tuple]


def plan(facts: list[tuple], seed: int = SEED) -> list[Task]:
    rng = random.Random(seed)
    tasks = [Task(INITIAL, facts, [])]
    for n in SIZES:
        gone = rng.sample(facts, min(n, len(facts)))
        tasks += [Task(f"delete {n:,}", [], gone), Task(f"re-insert {n:,}", gone, [])]
    return tasks


def run_system(arg: dict) -> dict:
    """Child entry: one system through every task; wall seconds and digests of J."""
    facts = people(arg["people"])
    program = parse_program(PROGRAM, "<people>")
    if arg["equality"] == "off":
        program = axiomatise(program, facts)
    options = EngineOptions(core=arg.get("core", "objects"))
    r = Reasoner(program, arg["algorithm"], equality=arg["equality"], options=options)
    rows: list[dict] = []
    for row, t, report in capped_steps(r, [(t.name, t) for t in plan(facts)], arg["cap"], rows):
        row["recomputed"] = report.details.get("equality_recomputed", 0)
        row["digest"] = digest(r.maintainer.facts())
        if t.name == INITIAL and arg["equality"] == "rewrite":
            row["compact"] = len(r.maintainer.compact)
    return {"rows": rows}


@dataclass
class EqRow:
    system: str
    task: str
    wall: float | None
    check: str
    ratio: float | None = None  # Remat~'s wall time on the task / this one


def run_equality(
    cap_s: float = CAP, n: int = PEOPLE, core: str = "objects"
) -> tuple[dict, list[EqRow]]:
    """Every system of `core` (CORE_SYSTEMS) through the tasks; Remat~ (objects) is the reference."""
    facts = people(n)
    info = {"workload": "people", "people": n, "explicit_facts": len(facts),
            "equalities": sum(1 for f in facts if f[0] == SAME_AS)}  # fmt: skip
    results = {}
    for label, algorithm, equality, on in CORE_SYSTEMS[core]:
        arg = {"people": n, "algorithm": algorithm, "equality": equality, "cap": cap_s, "core": on}
        results[label] = isolated(run_system, arg, timeout=cap_s * 6 + 60)
    ref = {r["task"]: r.get("digest") for r in results[SYSTEMS[1][0]].get("rows", [])}
    base = {r["task"]: r.get("wall") for r in results[SYSTEMS[1][0]].get("rows", [])}
    rows = []
    for label, res in results.items():
        if "error" in res:
            rows.append(EqRow(label, "initial", None, f"error ({res['error']})"))
            continue
        for r in res["rows"]:
            if "digest" not in r:
                rows.append(EqRow(label, r["task"], None, r.get("check", "no result")))
                continue
            ok = ref.get(r["task"]) is not None and tuple(r["digest"]) == tuple(ref[r["task"]])
            check = "ok" if ok else f"MISMATCH: {r['digest'][0]:,} facts"
            if r.get("recomputed"):
                check += " (recomputed)"
            b = base.get(r["task"])
            rows.append(
                EqRow(
                    label, r["task"], r["wall"], check, b / r["wall"] if b and r["wall"] else None
                )
            )
            if "compact" in r:
                info["materialisation"], info["compact"] = r["digest"][0], r["compact"]
        info.setdefault("peak_rss_mb", {})[label] = res.get("peak_rss_mb")
    return info, rows


def equality_table(rows: list[EqRow], markdown: bool = False) -> str:
    header = ["system", "task", "wall s", "vs Remat~", "check"]
    cells = [
        [r.system, r.task, f"{r.wall:.4f}" if r.wall is not None else "-",
         f"{r.ratio:.1f}x" if r.ratio else "-", r.check]
        for r in rows
    ]  # fmt: skip
    return render_table(header, cells, {2, 3}, markdown)


if (
    __name__ == "__main__"
):  # python -m tests.benchmarks.equality [PEOPLE] [--core objects|arrays|both]
    import argparse

    ap = argparse.ArgumentParser(description="the equality benchmark (see the module docstring)")
    ap.add_argument("people", nargs="?", type=int, default=PEOPLE)
    ap.add_argument("--core", choices=list(CORE_SYSTEMS), default="objects")
    ap.add_argument(
        "--cap", type=float, default=CAP, help="seconds per task before a system is stopped"
    )
    args = ap.parse_args()
    info, rows = run_equality(args.cap, args.people, args.core)
    print(info)
    print(equality_table(rows, markdown=True))
