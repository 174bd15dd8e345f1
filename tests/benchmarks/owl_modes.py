"""`--owl-rules axioms` vs `--owl-rules rdf` vs owlrl on generated LUBM data with univ-bench.owl.

    python -m tests.benchmarks.owl_modes [--universities 1 5] [--owlrl-cap 900] [--cap 1800] [--systems ...] [--dump DIR]

For each size: the data (tests.benchmarks.lubm_gen, N-Triples), then one child
process per system (tests.benchmarks.isolate: peak RSS of that run alone):
fluxmat `remat` in each mode (CPU and wall time to load and materialise; instance triples on
univ-bench's vocabulary), and owlrl (rdflib graph, OWL 2 RL closure) up to
`--owlrl-cap` seconds. Prints one table row per run and the load average; rdf
mode and owlrl must agree on the instance triples (checked when both finish).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from tests.benchmarks.isolate import isolated

ONTOLOGY = Path(__file__).resolve().parent.parent / "data" / "ontologies" / "univ-bench.owl"
UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"
TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _instance(triples) -> set[tuple[str, str, str]]:
    """(s, p, o) strings of the triples on univ-bench's vocabulary about individuals."""
    out = set()
    for s, p, o in triples:
        if s.startswith(UB) or s.startswith("_:") or s.startswith("urn:fluxmat:bnode:"):
            continue
        if p.startswith(UB) or (p == TYPE and o.startswith(UB)):
            out.add((s, p, o))
    return out


def _digest(triples: set, dump: str | None = None) -> str:
    """The triples' digest; with `dump`, also written there, one sorted line each (to diff two systems)."""
    import hashlib

    text = "\n".join(sorted(" ".join(t) for t in triples))
    if dump:
        Path(dump).write_text(text + "\n", encoding="utf-8")
    return hashlib.sha256(text.encode()).hexdigest()


def run_fluxmat(arg: dict) -> dict:
    from fluxmat.connectors.programs import load_program
    from fluxmat.connectors.rdf import read_rdf, triple_of
    from fluxmat.engine import Reasoner

    start, cpu = time.perf_counter(), time.process_time()
    program, _ = load_program(None, [str(ONTOLOGY)], arg["mode"])
    reasoner = Reasoner(program, "remat")
    reasoner.load(read_rdf(arg["data"], "ntriples"))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    triples = [t for t in map(triple_of, reasoner.facts()) if t is not None]
    inst = _instance((t.subject.value, t.predicate.value, str(t.object.value)) for t in triples)
    return {"seconds": seconds, "cpu": cpu, "facts": reasoner.sizes()["facts"], "instance": len(inst),
            "digest": _digest(inst, arg.get("dump"))}  # fmt: skip


def run_owlrl(arg: dict) -> dict:
    import owlrl
    import rdflib

    start, cpu = time.perf_counter(), time.process_time()
    g = rdflib.Graph()
    g.parse(str(ONTOLOGY), format="xml")
    g.parse(arg["data"], format="nt")
    owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    inst = _instance((str(s), str(p), str(o)) for s, p, o in g if not isinstance(s, rdflib.Literal))
    return {"seconds": seconds, "cpu": cpu, "facts": len(g), "instance": len(inst),
            "digest": _digest(inst, arg.get("dump"))}  # fmt: skip


SYSTEMS = {"fluxmat axioms": (run_fluxmat, {"mode": "axioms"}), "fluxmat rdf": (run_fluxmat, {"mode": "rdf"}),
           "owlrl": (run_owlrl, {})}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--universities", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--departments", type=int, default=None,
                    help="departments per university (default: 15-25, as LUBM)")
    ap.add_argument("--cap", type=float, default=1800, help="seconds per fluxmat run")
    ap.add_argument("--owlrl-cap", type=float, default=900, help="seconds per owlrl run")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(SYSTEMS))
    ap.add_argument("--dump", metavar="DIR", help="write each run's instance triples to DIR/<data>-<system>.txt")
    ns = ap.parse_args(argv)
    from tests.benchmarks.lubm_gen import generate, write_rdf

    print("| data | triples | system | CPU s | wall s | peak RSS MB | instance triples | load avg |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for n in ns.universities:
        label = f"LUBM-{n}" if ns.departments is None else f"LUBM-{n}x{ns.departments}d"
        path = Path(tempfile.mkdtemp(prefix="fluxmat-owl-")) / f"lubm{n}.nt"
        facts = generate(n, ns.departments)
        write_rdf(facts, str(path), "ntriples")
        digests = {}
        for name in ns.systems:
            fn, arg = SYSTEMS[name]
            dump = str(Path(ns.dump) / f"{label}-{name.replace(' ', '-')}.txt") if ns.dump else None
            r = isolated(fn, {**arg, "data": str(path), "dump": dump}, ns.owlrl_cap if name == "owlrl" else ns.cap)
            load = " ".join(f"{x:.1f}" for x in os.getloadavg())
            if "error" in r:
                print(f"| {label} | {len(facts):,} | {name} | {r['error']} | | | | {load} |", flush=True)
                continue
            digests[name] = r["digest"]
            print(f"| {label} | {len(facts):,} | {name} | {r['cpu']:.1f} | {r['seconds']:.1f} | {r['peak_rss_mb']:.0f} | "
                  f"{r['instance']:,} | {load} |", flush=True)  # fmt: skip
        if "fluxmat rdf" in digests and "owlrl" in digests:
            same = digests["fluxmat rdf"] == digests["owlrl"]
            print(f"{label}: rdf mode and owlrl instance triples {'identical' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
