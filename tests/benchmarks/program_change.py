"""Program changes on LUBM against stopping and rebuilding (arrays core).

The corpus program `lubm.dlog` over `lubm_gen.generate(1, 2)` (LUBM-1, as the
bake-off's), materialised on the arrays core. Then, one at a time: one rule
added, that rule removed again, and one of the program's rules removed. Each
is timed as a program change (`Reasoner.change_program`) and as a rebuild (a
new reasoner over the new program, loaded with the same explicit facts); the
change's report gives the facts it added and removed and the rule instances
it evaluated. Every change's result is checked against its rebuild.

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
ADDED = "a1:Employee[?X] :- a1:advisor[?Y, ?X] ."
REMOVED = "a1:Faculty[?X] :- a1:Professor[?X] ."


def _rebuild(text: str, explicit: set) -> tuple[float, Reasoner]:
    start = time.perf_counter()
    r = Reasoner.from_text(text, options=OPTIONS)
    r.load(explicit)
    return time.perf_counter() - start, r


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
    print("| change | change (s) | facts added | facts removed | rule instances | rebuild (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, kwargs in (("add " + ADDED, {"add": PREFIX + ADDED}), ("remove it again", {"delete": PREFIX + ADDED}),
                          ("remove " + REMOVED, {"delete": PREFIX + REMOVED})):  # fmt: skip
        start = time.perf_counter()
        report = r.change_program(**kwargs)
        seconds = time.perf_counter() - start
        rebuilt, fresh = _rebuild(r.program_text(), explicit)
        assert fresh.facts() == r.facts(), f"{label}: the change and the rebuild differ"
        print(f"| {label} | {seconds:.3f} | {report.added:,} | {report.removed:,} | "
              f"{report.total_applications:,} | {rebuilt:.3f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
