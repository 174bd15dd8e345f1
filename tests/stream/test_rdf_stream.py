"""The streaming job speaks RDF: N-Triples updates in, N-Triples deltas out (real parts).

A real tansu broker, redis-server and local Spark; `fluxmat run` as a user starts
it: `tests/rdf/people.dlog` plus a small OWL ontology (`--ontology`), the
initial facts in Turtle, `--delta-format ntriples`. Update messages carry
N-Triples text (adds and deletes of literals and blank nodes included), plus one
malformed message. A consumer rebuilds the materialisation from the delta
messages alone -- N-Triples text, and the facts that are not triples from
`not_triples` -- and it must equal `remat` over the final explicit facts; the
malformed message is a dead letter naming the line and column inside it. Then
`fluxmat sparql --redis` and `fluxmat query --redis` answer from the job's state.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pyoxigraph as ox

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.files import parse_update
from fluxmat.connectors.programs import load_program
from fluxmat.connectors.rdf import Triples, read_rdf
from fluxmat.engine import Reasoner
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.wire import json_value
from tests.support.messages import read_deltas
from tests.support.pipeline import (
    ROOT,
    Proc,
    demo_messages_valid,
    job_env,
    produce,
    wait_for_through,
)

RDF_DIR = Path(__file__).parent.parent / "rdf"
EX = "http://example.org/"
FAMILY = "http://example.org/family#"
XSD = "http://www.w3.org/2001/XMLSchema#"
ONTOLOGY = """@prefix ex: <http://example.org/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Teacher rdfs:subClassOf ex:Staff .
ex:parent owl:inverseOf ex:child .
ex:knows a owl:SymmetricProperty .
"""


def nt(*triples: str) -> str:
    return "".join(t + " .\n" for t in triples)


UPDATES = [
    {"id": "u1", "format": "ntriples",
     "add": nt(f"<{EX}dee> <{EX}parent> <{EX}ann>", f'<{EX}dee> <{EX}age> "7"^^<{XSD}short>',
               f"<{EX}dee> <{EX}knows> _:friend")},
    {"id": "u2", "format": "ntriples",
     "del": nt(f'<{EX}cy> <{EX}age> "+70"^^<{XSD}integer>'),
     "add": nt(f'<{EX}cy> <{EX}age> "12"^^<{XSD}int>', f'_:friend <{EX}name> "Fred"@en')},
    {"id": "bad", "format": "ntriples", "add": nt(f"<{EX}a> <{EX}p> <{EX}b>", f"<{EX}a> <p> <{EX}b>")},
    {"id": "u3", "format": "nquads",
     "add": f"<{EX}eve> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{EX}Teacher> <{EX}g> .\n",
     "del": nt(f"<{EX}ann> <{EX}parent> <{EX}bob>")},
    {"id": "u4", "add": [[f"<{EX}parent>", f"<{EX}eve>", f"<{EX}bob>"]]},  # JSON beside RDF
]  # fmt: skip


def expected(program, prefixes: dict) -> tuple[set[str], set[str]]:
    """remat over the final explicit facts: (N-Triples lines, other facts as wire JSON)."""
    explicit = set(read_rdf(RDF_DIR / "people.ttl", "turtle"))
    for u in UPDATES:
        if u["id"] == "bad":
            continue
        upd = parse_update(u, prefixes, "test")
        explicit = (explicit - set(upd.delete)) | set(upd.add)
    r = Reasoner(program, "remat")
    r.load(sorted(explicit, key=repr))
    conv, printer = Triples(), FactPrinter(program.prefixes)
    lines, others = set(), set()
    for f in r.facts():
        t = conv.triple(f)
        if t is not None:
            lines.add(f"{t} .")
        else:
            others.add(json.dumps([printer.pred(f[0]).strip("<>"), *map(json_value, f[1:])]))
    return lines, others


def rebuild(msgs: list[dict]) -> tuple[set[str], set[str]]:
    """A consumer of N-Triples deltas: apply them in log order, each (batch, part) once."""
    triples: set[str] = set()
    others: set[str] = set()
    seen = set()
    for m in msgs:
        if (m["batch"], m["part"]) in seen:
            continue
        seen.add((m["batch"], m["part"]))
        assert m["format"] == "ntriples" and isinstance(m["added"], str), m
        for key, sign in (("removed", -1), ("added", 1)):
            lines = {f"{q.triple} ." for q in ox.parse(m[key].encode(), ox.RdfFormat.N_TRIPLES)}
            extra = {json.dumps(f) for f in m.get("not_triples", {}).get(key, [])}
            if sign < 0:
                assert lines <= triples and extra <= others, f"batch {m['batch']} removes absent facts"
                triples -= lines
                others -= extra
            else:
                assert not lines & triples, f"batch {m['batch']} adds present facts"
                triples |= lines
                others |= extra
    return triples, others


def test_ntriples_updates_in_ntriples_deltas_out(broker, redis_srv, tmp_path):
    onto = tmp_path / "family.ttl"
    onto.write_text(ONTOLOGY, encoding="utf-8")
    program_path = str(RDF_DIR / "people.dlog")
    program, _ = load_program(program_path, [str(onto)])
    updates, deltas, dead = "rdf-updates", "rdf-deltas", "rdf-dead"
    ensure_topics(broker.bootstrap, {updates: 1, deltas: 1, dead: 1})
    args = [sys.executable, "-m", "fluxmat.ops.cli", "run", program_path, "--ontology", str(onto),
            "--facts", str(RDF_DIR / "people.ttl"), "--delta-format", "ntriples",
            "--bootstrap-servers", broker.bootstrap, "--updates-topic", updates,
            "--deltas-topic", deltas, "--dead-letter-topic", dead, "--redis", redis_srv.url,
            "--namespace", "rdf", "--checkpoint", str(tmp_path / "checkpoint"),
            "--trigger-interval", "200ms"]  # fmt: skip
    job = Proc(args, tmp_path, "rdf-job", job_env())
    try:
        produce(broker.bootstrap, updates, [(0, json.dumps(u).encode()) for u in UPDATES])
        wait_for_through(SimpleNamespace(bootstrap=broker.bootstrap, deltas=deltas), job, "u4")
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    msgs = read_deltas(broker.bootstrap, deltas)
    triples, others = rebuild(msgs)
    want_triples, want_others = expected(program, dict(program.prefixes))
    assert triples == want_triples
    assert others == want_others and others  # older/3 facts are not triples: reported, not dropped
    assert f"<{EX}eve> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <{EX}Staff> ." in triples
    assert f"<{EX}ann> <{EX}child> <{EX}dee> ." in triples  # the ontology's inverseOf
    assert any(t.startswith("_:friend ") for t in triples)  # a message's blank node, kept
    (letter,) = read_deltas(broker.bootstrap, dead)
    assert "add: line 2, column 24: " in letter["reason"], letter  # the relative IRI <p>

    def cli(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", *extra, "--redis", redis_srv.url,
                               "--namespace", "rdf", "--ontology", str(onto)],
                              cwd=ROOT, capture_output=True, timeout=120)  # fmt: skip

    r = cli("sparql", program_path, f"SELECT ?x WHERE {{ ?x a <{EX}Staff> }} ORDER BY ?x", "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().split("\r\n")[1:] == [f"{EX}bob", f"{EX}eve", ""]
    r = cli("query", program_path, f"<{EX}ancestor>(<{EX}dee>, ?Y)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().splitlines() == ["ex:ancestor(ex:dee, ex:ann)."]


def test_demo_rdf(tmp_path):
    """`fluxmat demo --rdf`: the README's streaming example runs as printed and checks itself."""
    dump = tmp_path / "messages.jsonl"
    demo = Proc([sys.executable, "-m", "fluxmat.ops.cli", "demo", "--rdf"], tmp_path, "demo-rdf",
                job_env({"FLUXMAT_DEMO_MESSAGES": str(dump)}))  # fmt: skip
    try:
        code = demo.wait(240)
    finally:
        demo.cleanup()
    lines = demo.stdout().strip().splitlines()
    assert code == 0, demo.tail()
    assert demo_messages_valid(dump) > 1
    assert "(equals a from-scratch evaluation)" in lines[-1], demo.tail()
    assert any(re.search(rf"through u\d: \+\[<{FAMILY}\w+> <", ln) for ln in lines), demo.tail()  # N-Triples
