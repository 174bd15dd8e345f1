"""Program changes on LUBM against stopping and rebuilding (arrays core).

The corpus program `lubm.dlog` over `lubm_gen.generate(1, 2)` (LUBM-1, as the
bake-off's), materialised on the arrays core. Then, one at a time: one rule
added, that rule removed again, and two of the program's rules removed and
added back (one feeding a recursive stratum). Each
is timed as a program change (`Reasoner.change_program`) and as a rebuild (a
new reasoner over the new program, loaded with the same explicit facts); the
change's report gives the facts it added and removed and the rule instances
it evaluated. Every change's result is checked against its rebuild.

The target: a change that affects k facts costs time proportional to k (and
to the rule instances it evaluates), not to the materialisation. The table
gives k (facts added plus removed), the change's microseconds per fact
touched and per rule instance, and the change's time as a fraction of the
rebuild's.

    nice -n 10 python -m tests.benchmarks.program_change [--universities N]
"""

from __future__ import annotations

import argparse
import time

from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.lexer import read_source
from tests.benchmarks.bakeoff.workload import lubm_program_path
from tests.benchmarks.lubm_gen import generate

OPTIONS = EngineOptions(algorithm="counting", core="arrays")
PREFIX = "PREFIX a1: <http://swat.cse.lehigh.edu/onto/univ-bench.owl#>\n"
ADDED = "a1:coTeaches[?X, ?Y] :- a1:teacherOf[?X, ?C], a1:teacherOf[?Y, ?C] ."
SMALL = "a1:advisor_takesCourse[?X0,?X2] :- a1:advisor[?X1,?X0], a1:takesCourse[?X1,?X2] ."
LARGE = "a1:connectedCourses[?X0,?X2] :- a1:takesCourse[?X1,?X0], a1:takesCourse[?X1,?X2] ."
CHANGES = (  # (label, change_program's arguments), applied one after the other
    ("add coTeaches (a new relation)", {"add": PREFIX + ADDED}),
    ("remove coTeaches again", {"delete": PREFIX + ADDED}),
    ("remove advisor_takesCourse's rule", {"delete": PREFIX + SMALL}),
    ("add it back", {"add": PREFIX + SMALL}),
    ("remove connectedCourses's base rule (recursive stratum)", {"delete": PREFIX + LARGE}),
    ("add it back", {"add": PREFIX + LARGE}),
)


def _rebuild(text: str, explicit: set) -> tuple[float, Reasoner]:
    start = time.perf_counter()
    r = Reasoner.from_text(text, options=OPTIONS)
    r.load(explicit)
    return time.perf_counter() - start, r


def _per(seconds: float, n: int) -> str:
    """Microseconds per item (`-` for none)."""
    return f"{seconds / n * 1e6:,.1f}" if n else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, default=1)
    args = ap.parse_args(argv)
    text = read_source(lubm_program_path())
    r = Reasoner.from_text(text, options=OPTIONS)
    data = generate(
        args.universities, 2 if args.universities == 1 else None, prefixes=dict(r.program.prefixes)
    )
    r.load(data)
    explicit = r.explicit()
    print(f"# lubm.dlog over LUBM-{args.universities}: {len(explicit):,} explicit, {len(r.facts()):,} facts, "
          f"{len(r.analysis.rules)} rules")  # fmt: skip
    print("| change | change (s) | facts added | facts removed | rule instances | µs / fact touched "
          "| µs / instance | rebuild (s) | change / rebuild |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, kwargs in CHANGES:
        start = time.perf_counter()
        report = r.change_program(**kwargs)
        seconds = time.perf_counter() - start
        rebuilt, fresh = _rebuild(r.program_text(), explicit)
        assert fresh.facts() == r.facts(), f"{label}: the change and the rebuild differ"
        touched, instances = report.added + report.removed, report.total_applications
        print(f"| {label} | {seconds:.3f} | {report.added:,} | {report.removed:,} | {instances:,} | "
              f"{_per(seconds, touched)} | {_per(seconds, instances)} | {rebuilt:.3f} | "
              f"{seconds / rebuilt:.3g} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
