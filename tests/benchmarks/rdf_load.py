"""RDF parsers and OWL 2 RL materialisation on LUBM: fluxmat against owlrl and owlrl-turbo.

    python -m tests.benchmarks.rdf_load [--universities 1 5] [--cap 600] [--out DIR]

Data: `tests.benchmarks.lubm_gen` (seed 20240611) written as N-Triples, Turtle
and RDF/XML (cached in ~/.cache/fluxmat/lubm-rdf); ontology: the corpus
`univ-bench.owl`. Every measurement runs in its own spawned child process
(`isolate.isolated`), so its peak RSS is its own; each is capped at `--cap`
seconds (a capped run is reported as such, not dropped).

1. Parsers (the choice of the default path): pyoxigraph (`parse`, iterating
   every quad), rdflib (`Graph.parse`), and fluxmat's reader
   (`connectors.rdf.read_rdf`: pyoxigraph plus the mapping to facts).
   Triples per second and peak RSS.
2. Load and materialise, on the same files: fluxmat (read_rdf, `owl2rl`'s rules
   for univ-bench, `remat`), owlrl (rdflib parse,
   `DeductiveClosure(OWLRL_Semantics).expand`) and owlrl-turbo (native parse,
   `expand(inference="owlrl")`). Parse time, materialisation time, and the
   number of instance-level triples in univ-bench's vocabulary afterwards (a
   check: owlrl's count is fluxmat's plus the Employee facts explained in
   tests/connectors/test_owl2rl.py, when both finish).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tests.benchmarks.isolate import isolated
from tests.support.shared import UNIV_BENCH

ROOT = Path(__file__).resolve().parent.parent.parent
ONTOLOGY = UNIV_BENCH
CACHE = Path.home() / ".cache" / "fluxmat" / "lubm-rdf"
UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"
TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
FORMATS = {"ntriples": ".nt", "turtle": ".ttl", "rdfxml": ".rdf"}
RDFLIB = {"ntriples": "nt", "turtle": "turtle", "rdfxml": "xml"}


def data_file(universities: int, fmt: str) -> Path:
    path = CACHE / f"lubm-u{universities}{FORMATS[fmt]}"
    if not path.exists():
        from tests.benchmarks.lubm_gen import generate, write_rdf

        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        write_rdf(generate(universities), str(tmp), fmt)
        tmp.rename(path)
    return path


def _vocab_count(triples) -> int:
    """Instance-level triples in univ-bench's vocabulary: (s, p, o) IRIs/strings."""
    n = 0
    for s, p, o in triples:
        if s.startswith(UB):
            continue
        if p.startswith(UB) or (p == TYPE and o.startswith(UB)):
            n += 1
    return n


# ---------------------------------------------------------------- children


def parse_pyoxigraph(arg: dict) -> dict:
    import pyoxigraph as ox

    from fluxmat.connectors.rdf import FORMATS as OX

    start = time.perf_counter()
    with open(arg["path"], "rb") as fh:
        n = sum(1 for _ in ox.parse(fh, OX[arg["fmt"]].ox, base_iri=Path(arg["path"]).as_uri()))
    return {"seconds": time.perf_counter() - start, "triples": n}


def parse_rdflib(arg: dict) -> dict:
    import rdflib

    start = time.perf_counter()
    g = rdflib.Graph()
    g.parse(arg["path"], format=RDFLIB[arg["fmt"]])
    return {"seconds": time.perf_counter() - start, "triples": len(g)}


def parse_fluxmat(arg: dict) -> dict:
    from fluxmat.connectors.rdf import read_rdf

    start = time.perf_counter()
    facts = read_rdf(arg["path"], arg["fmt"])
    return {"seconds": time.perf_counter() - start, "triples": len(facts)}


def materialise_fluxmat(arg: dict) -> dict:
    from fluxmat.connectors.programs import load_program
    from fluxmat.connectors.rdf import Triples, read_rdf
    from fluxmat.engine import Reasoner

    start = time.perf_counter()
    facts = read_rdf(arg["path"], arg["fmt"])
    parsed = time.perf_counter()
    program, _ = load_program(None, [str(ONTOLOGY)])
    r = Reasoner(program, "remat")
    r.load(facts)
    done = time.perf_counter()
    conv = Triples()
    triples = []
    for f in r.facts():
        t = conv.triple(f)
        if t is not None:
            obj = t.object.value if hasattr(t.object, "value") else str(t.object)
            triples.append((t.subject.value, t.predicate.value, obj))
    return {"parse": parsed - start, "materialise": done - parsed, "triples": len(facts),
            "derived": len(r.facts()), "vocab": _vocab_count(triples)}  # fmt: skip


def _rdflib_vocab(g) -> int:
    import rdflib

    triples = g.quads() if hasattr(g, "quads") else g  # owlrl-turbo answers a Dataset
    return _vocab_count({(str(t[0]), str(t[1]), str(t[2])) for t in triples
                         if not isinstance(t[0], rdflib.BNode | rdflib.Literal)})  # fmt: skip


def materialise_owlrl(arg: dict) -> dict:
    import owlrl
    import rdflib

    from tests.benchmarks.isolate import cap

    start = time.perf_counter()
    g = rdflib.Graph()
    g.parse(str(ONTOLOGY), format="xml")
    g.parse(arg["path"], format=RDFLIB[arg["fmt"]])
    parsed = time.perf_counter()
    n = len(g)
    with cap(arg["cap"]):
        owlrl.DeductiveClosure(owlrl.OWLRL_Semantics).expand(g)
    done = time.perf_counter()
    return {"parse": parsed - start, "materialise": done - parsed, "triples": n, "derived": len(g),
            "vocab": _rdflib_vocab(g)}  # fmt: skip


def materialise_owlrl_turbo(arg: dict) -> dict:
    from owlrl_turbo import expand
    from rdflib_turbo import Dataset

    start = time.perf_counter()
    ds = Dataset()
    ds.parse(str(ONTOLOGY), format="xml")
    ds.parse(arg["path"], format=RDFLIB[arg["fmt"]])
    parsed = time.perf_counter()
    n = len(ds)
    out = expand(ds, inference="owlrl")
    done = time.perf_counter()
    g = out.to_rdflib()
    return {"parse": parsed - start, "materialise": done - parsed, "triples": n, "derived": len(g),
            "vocab": _rdflib_vocab(g)}  # fmt: skip


PARSERS = {"pyoxigraph": parse_pyoxigraph, "rdflib": parse_rdflib, "fluxmat read_rdf": parse_fluxmat}
SYSTEMS = {"fluxmat": materialise_fluxmat, "owlrl": materialise_owlrl,
           "owlrl-turbo": materialise_owlrl_turbo}  # fmt: skip


# ---------------------------------------------------------------- driver


def _cell(r: dict, key: str) -> str:
    if "error" in r:
        return "n/a"
    v = r.get(key)
    return "-" if v is None else (f"{v:.2f} s" if isinstance(v, float) else f"{v:,}")


def run(universities: list[int], cap: float, fmts: list[str], systems: list[str] | None = None) -> dict:
    results: dict = {"parsers": [], "systems": []}
    for u in universities:
        for fmt in fmts:
            path = str(data_file(u, fmt))
            for name, fn in PARSERS.items():
                r = isolated(fn, {"path": path, "fmt": fmt}, cap)
                r.update(universities=u, format=fmt, parser=name)
                results["parsers"].append(r)
                print(json.dumps(r), flush=True)
    capped: dict[tuple[str, str], int] = {}  # (system, format) -> the size it was capped at
    for u in universities:
        for fmt in ("rdfxml", "turtle"):
            path = str(data_file(u, fmt))
            for name, fn in SYSTEMS.items():
                if systems is not None and name not in systems:
                    continue
                if (name, fmt) in capped:  # a larger size cannot finish either: say so, do not wait
                    r = {"error": f"not run: capped at {cap:g} s on {capped[name, fmt]} universities"}
                else:
                    r = isolated(fn, {"path": path, "fmt": fmt, "cap": cap}, cap + 120)
                    if "error" in r and ("Capped" in r["error"] or "timeout" in r["error"]):
                        capped[name, fmt] = u
                r.update(universities=u, format=fmt, system=name)
                results["systems"].append(r)
                print(json.dumps(r), flush=True)
    return results


def markdown(results: dict) -> str:
    out = ["| universities | format | parser | triples | seconds | triples/s | peak RSS MiB |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results["parsers"]:
        rate = f"{r['triples'] / r['seconds']:,.0f}" if "error" not in r else f"n/a ({r['error'][:40]})"
        out.append(f"| {r['universities']} | {r['format']} | {r['parser']} | {_cell(r, 'triples')} | "
                   f"{_cell(r, 'seconds')} | {rate} | {r.get('peak_rss_mb')} |")  # fmt: skip
    out += ["", "| universities | format | system | triples in | parse | materialise | parse triples/s "
            "| ub: instance triples after | peak RSS MiB |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results["systems"]:
        if "error" in r:
            out.append(f"| {r['universities']} | {r['format']} | {r['system']} | | | "
                       f"{r['error'][:60]} | | | {r.get('peak_rss_mb')} |")  # fmt: skip
            continue
        rate = f"{r['triples'] / r['parse']:,.0f}"
        out.append(f"| {r['universities']} | {r['format']} | {r['system']} | {r['triples']:,} | "
                   f"{r['parse']:.2f} s | {r['materialise']:.2f} s | {rate} | {r['vocab']:,} | "
                   f"{r.get('peak_rss_mb')} |")  # fmt: skip
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.benchmarks.rdf_load", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--universities", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS),
                    help="formats for the parser measurement")  # fmt: skip
    ap.add_argument("--cap", type=float, default=600.0, help="seconds per measurement")
    ap.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=None,
                    help="only these systems in part 2 (default: all)")
    ap.add_argument("--no-parsers", action="store_true", help="skip part 1")
    ap.add_argument("--out", default=str(ROOT / "tests" / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    results = run(args.universities, args.cap, [] if args.no_parsers else args.formats, args.systems)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "rdf.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
