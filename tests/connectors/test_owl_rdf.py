"""`--owl-rules rdf`: the W3C OWL 2 RL/RDF rules over triples (connectors/owl2rl_rules.dl).

The oracle is owlrl, the reference implementation of the OWL 2 RL/RDF rules,
run from scratch on the same triples: on generated LUBM data with
univ-bench.owl (W3C OWL 2 Profiles, section 4.3: scm-svf1, cax-sco and cls-int1
make every ResearchAssistant an Employee, which the axiom translation misses),
and after every step of an update stream in which schema triples are added and
removed like any other triple.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fluxmat.connectors.owl2rl_rdf import rules
from fluxmat.connectors.programs import load_program
from fluxmat.connectors.rdf import parse_rdf_text, read_rdf, write_rdf
from fluxmat.engine import Reasoner
from fluxmat.engine.feed import Fed
from fluxmat.engine.syntax import Iri
from fluxmat.engine.triples import TRIPLE, fact_in, fact_out
from tests.support import profile
from tests.support.lubm_rdf import UNIV_BENCH, lubm1_slice, lubm_department, owlrl_closure_nt
from tests.support.owl import (
    DATA,
    EX,
    OWL,
    ROOT,
    SUB,
    TYPE,
    UB,
    ex_triples,
    instance_triples,
    owlrl_closure,
    turtle_to_nt,
)


def ours(reasoner: Reasoner) -> set[str]:
    body, _ = write_rdf(reasoner.facts(), "ntriples")
    return ex_triples(body)


# ---------------------------------------------------------------- the triple view


def test_triple_view_round_trips_rdf_facts_and_leaves_others():
    """`C[s]` <-> triple(s, rdf:type, C), `p[s, o]` <-> triple(s, p, o); `edge(a, b)` untouched."""
    cls, prop = (EX + "Cat", Iri(EX + "tom")), (EX + "owns", Iri(EX + "ann"), "a string")
    assert fact_in(cls) == (TRIPLE, Iri(EX + "tom"), Iri(TYPE), Iri(EX + "Cat"))
    assert fact_in(prop) == (TRIPLE, Iri(EX + "ann"), Iri(EX + "owns"), "a string")
    for fact in (cls, prop, ("edge", "a", "b"), (TYPE, Iri(EX + "x"), "lit")):
        assert fact_out(fact_in(fact)) == fact
    assert fact_in(("edge", "a", "b")) == ("edge", "a", "b")


def test_the_fixed_program_names_every_rule_of_tables_4_to_9():
    text = (ROOT / "connectors" / "owl2rl_rules.dl").read_text(encoding="utf-8")
    names = ("eq-sym eq-trans eq-rep-s eq-rep-p eq-rep-o eq-diff1 eq-diff2 eq-diff3 prp-ap prp-dom prp-rng "
             "prp-fp prp-ifp prp-irp prp-symp prp-asyp prp-trp prp-spo1 prp-spo2 prp-eqp1 prp-eqp2 prp-pdw "
             "prp-adp prp-inv1 prp-inv2 prp-key prp-npa1 prp-npa2 cls-thing cls-nothing1 cls-nothing2 "
             "cls-int1 cls-int2 cls-uni cls-com cls-svf1 cls-svf2 cls-avf cls-hv1 cls-hv2 cls-maxc1 "
             "cls-maxc2 cls-maxqc1 cls-maxqc2 cls-maxqc3 cls-maxqc4 cls-oo cax-sco cax-eqc1 cax-eqc2 cax-dw "
             "cax-adc dt-type1 dt-type2 dt-eq dt-diff dt-not-type scm-cls scm-sco scm-eqc1 scm-eqc2 scm-op scm-dp scm-spo scm-eqp1 scm-eqp2 "
             "scm-dom1 scm-dom2 scm-rng1 scm-rng2 scm-hv scm-svf1 scm-svf2 scm-avf1 scm-avf2 scm-int scm-uni")  # fmt: skip
    missing = [n for n in names.split() if f"% {n}" not in text and f", {n}" not in text]
    assert not missing
    assert len(rules().rules) >= 85


# ---------------------------------------------------------------- LUBM against owlrl


def test_lubm_rdf_mode_equals_owlrl_on_the_data_vocabulary():
    """One LUBM department with univ-bench.owl: exactly owlrl's instance triples, Employee included."""
    data, closure = lubm_department()
    r = Reasoner(load_program(None, [str(UNIV_BENCH)], "rdf")[0], "remat")
    r.load(read_rdf(data, "ntriples"))
    body, _ = write_rdf(r.facts(), "ntriples")
    got, want = instance_triples(body), instance_triples(closure)
    assert got == want
    ras = {t.split(" ")[0] for t in got if t.endswith(f"<{UB}ResearchAssistant>")}
    assert ras and all(f"{x} <{TYPE}> <{UB}Employee>" in got for x in ras)


# The largest slice of LUBM-1 (its first departments, tests.support.lubm_rdf.lubm1_slice) whose owlrl closure
# keeps this test near a minute; the whole of LUBM-1 is compared by
# `python -m tests.benchmarks.owl_modes --universities 1` (docs/reference/owl-rules.md, Numbers).
# owlrl (pure Python) takes ~50 CPU s for four departments: the fast lane compares two
LUBM1_DEPARTMENTS = profile.pick(ci=4, fast=2)


def test_lubm1_slice_rdf_mode_equals_owlrl(tmp_path):
    """LUBM-1's first departments, people across departments included: owlrl's instance triples exactly."""
    from tests.benchmarks.lubm_gen import write_rdf as write_lubm

    data = tmp_path / "slice.nt"
    write_lubm(lubm1_slice(LUBM1_DEPARTMENTS), str(data), "ntriples")
    r = Reasoner(load_program(None, [str(UNIV_BENCH)], "rdf")[0], "remat")
    r.load(read_rdf(data, "ntriples"))
    body, _ = write_rdf(r.facts(), "ntriples")
    got, want = instance_triples(body), instance_triples(owlrl_closure_nt(data))
    assert got == want and len(got) > 6_000 * LUBM1_DEPARTMENTS


# ---------------------------------------------------------------- schema triples in the stream

ONTOLOGY = f"""@prefix ex: <{EX}> . @prefix owl: <{OWL}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Cat rdfs:subClassOf ex:Animal .
ex:owns rdfs:domain ex:Person .
"""
STEPS = [  # (add, delete) as N-Triples: schema triples, one with a blank-node restriction
    (f"<{EX}Kitten> <{SUB}> <{EX}Cat> .\n", ""),
    (f"<{EX}CatOwner> <{OWL}equivalentClass> _:r .\n_:r <{OWL}onProperty> <{EX}owns> .\n"
     f"_:r <{OWL}someValuesFrom> <{EX}Cat> .\n", ""),
    ("", f"<{EX}Kitten> <{SUB}> <{EX}Cat> .\n"),
    (f"<{EX}rex> <{TYPE}> <{EX}Kitten> .\n", f"<{EX}Cat> <{SUB}> <{EX}Animal> .\n"),
    (f"<{EX}Kitten> <{SUB}> <{EX}Cat> .\n", ""),
]  # fmt: skip


@pytest.mark.parametrize("algorithm", ["dredc", "fd-counting"])
def test_schema_triples_added_and_removed_in_updates_match_owlrl_from_scratch(tmp_path, algorithm):
    """After each update (schema triples included), mat equals owlrl's closure of the explicit triples."""
    onto = tmp_path / "o.ttl"
    onto.write_text(ONTOLOGY, encoding="utf-8")
    r = Reasoner(load_program(None, [str(onto)], "rdf")[0], algorithm)
    r.load(parse_rdf_text(DATA, "ntriples", "data"))
    explicit = set(turtle_to_nt(ONTOLOGY).splitlines()) | set(DATA.splitlines())
    assert ours(r) == owlrl_closure("\n".join(explicit) + "\n")
    for i, (add, delete) in enumerate(STEPS):
        plus, minus = parse_rdf_text(add, "ntriples", "add"), parse_rdf_text(delete, "ntriples", "del")
        if r.fully_dynamic:
            r.feed([Fed(i, plus, minus, id=i)])
            point = r.poll()
            assert point is not None and all(f[0] != TRIPLE for f in point.added + point.removed)
        else:
            r.update(plus, minus)
        explicit = (explicit | set(add.splitlines())) - set(delete.splitlines())
        assert ours(r) == owlrl_closure("\n".join(explicit) + "\n"), f"after step {i + 1}"
    assert f"<{EX}ann> <{TYPE}> <{EX}CatOwner>" in ours(r)


def test_replay_with_schema_updates_matches_owlrl(tmp_path):
    """`fluxmat replay --owl-rules rdf` with N-Triples updates: the final materialisation is owlrl's."""
    onto, data, updates, out = (tmp_path / n for n in ("o.ttl", "d.nt", "u.jsonl", "out.nt"))
    onto.write_text(ONTOLOGY, encoding="utf-8")
    data.write_text(DATA, encoding="utf-8")
    updates.write_text("".join(json.dumps({"format": "ntriples", "add": a, "del": d}) + "\n" for a, d in STEPS[:3]),
                       encoding="utf-8")  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "replay", "--ontology", str(onto), "--owl-rules", "rdf",
                        "--facts", str(data), "--updates", str(updates), "--format", "ntriples",
                        "--output", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    explicit = set(turtle_to_nt(ONTOLOGY).splitlines()) | set(DATA.splitlines())
    for add, delete in STEPS[:3]:
        explicit = (explicit | set(add.splitlines())) - set(delete.splitlines())
    assert ex_triples(out.read_bytes()) == owlrl_closure("\n".join(explicit) + "\n")


# ---------------------------------------------------------------- CLI: program, inconsistencies


def test_owl2rl_prints_the_rdf_program_and_it_reads_back(tmp_path):
    onto, data, prog = tmp_path / "o.ttl", tmp_path / "d.nt", tmp_path / "p.dl"
    onto.write_text(ONTOLOGY + "ex:Kitten rdfs:subClassOf ex:Cat .\n", encoding="utf-8")
    data.write_text(DATA, encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "owl2rl", str(onto), "--owl-rules", "rdf",
                        "--output", str(prog)], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "% cax-sco" in prog.read_text(encoding="utf-8")
    runs = [[str(prog)], ["--ontology", str(onto), "--owl-rules", "rdf"]]
    outs = [subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", *args, "--facts", str(data)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120) for args in runs]  # fmt: skip
    assert all(o.returncode == 0 for o in outs), [o.stderr for o in outs]
    assert outs[0].stdout == outs[1].stdout
    assert "ex:Animal(ex:tom)." in outs[0].stdout


@pytest.mark.parametrize("owl_rules", ["axioms", "rdf"])
def test_inconsistencies_are_warnings_naming_the_facts(tmp_path, owl_rules):
    """cax-dw, prp-irp and cls-nothing2 (W3C table 6, 5, 7): a warning line each, exit 0, no traceback."""
    onto, data = tmp_path / "o.ttl", tmp_path / "d.ttl"
    onto.write_text(f"""@prefix ex: <{EX}> . @prefix owl: <{OWL}> .
        @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
        ex:Cat owl:disjointWith ex:Dog . ex:Kitten rdfs:subClassOf ex:Cat .
        ex:differs a owl:IrreflexiveProperty . ex:Ghost rdfs:subClassOf owl:Nothing .""", encoding="utf-8")
    data.write_text(f"@prefix ex: <{EX}> . ex:tom a ex:Kitten, ex:Dog . ex:q ex:differs ex:q . ex:g a ex:Ghost .",
                    encoding="utf-8")  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", "--ontology", str(onto),
                        "--owl-rules", owl_rules, "--facts", str(data)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "inconsistent ontology and data" in ln]
    assert lines == [
        "fluxmat: warning: inconsistent ontology and data: ex:tom violates cax-dw",
        "fluxmat: warning: inconsistent ontology and data: ex:g violates cls-nothing2",
        "fluxmat: warning: inconsistent ontology and data: ex:q violates prp-irp",
    ], r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- the job: metric, status, health


class _Publisher:
    def __init__(self):
        self.deltas = []

    def publish_delta(self, batch, through, added, removed, causes=None):
        self.deltas.append({"batch": batch, "added": added, "removed": removed})

    def publish_dead_letter(self, *args, **kw):
        pass


def test_job_reports_inconsistencies_as_metric_status_and_health_and_publishes_usual_facts(tmp_path):
    """A schema triple in the stream makes the data inconsistent (cax-dw), another retraction mends it."""
    from fluxmat.connectors.state import MemoryStateStore
    from fluxmat.ops.metrics import JobMetrics
    from fluxmat.stream.batch import BatchProcessor
    from tests.support.shared import metric

    onto = tmp_path / "o.ttl"
    onto.write_text(ONTOLOGY, encoding="utf-8")
    store, pub = MemoryStateStore(), _Publisher()
    proc = BatchProcessor(Reasoner(load_program(None, [str(onto)], "rdf")[0], "fd-counting"), store, pub)
    proc.start(parse_rdf_text(DATA + f"<{EX}tom> <{TYPE}> <{EX}Dog> .\n", "ntriples", "data"))
    m = JobMetrics("o.ttl", "fd-counting", "default", "updates")
    m.on_start(proc, store)
    assert metric(m, "fluxmat_owl_inconsistencies") == 0 and m.health()[0] == "healthy"
    steps = [(f"<{EX}Kitten> <{SUB}> <{EX}Cat> .\n<{EX}Cat> <{OWL}disjointWith> <{EX}Dog> .\n", ""),
             ("", f"<{EX}tom> <{TYPE}> <{EX}Dog> .\n")]  # fmt: skip
    for i, (add, delete) in enumerate(steps):
        msg = json.dumps({"format": "ntriples", "add": add, "del": delete, "id": f"u{i}"})
        m.on_batch(proc.process(i, [(0, i, None, msg, None, True, len(msg))]), proc, store)
        if i == 0:
            assert metric(m, "fluxmat_owl_inconsistencies") == 1
            assert m.status()["now"]["inconsistent"] == ["ex:tom violates cax-dw"]
            state, reason = m.health()
            assert state == "degraded" and "ex:tom violates cax-dw" in reason
            added = pub.deltas[-1]["added"]
            assert ["ex:Cat", f"<{EX}tom>"] in added and not any("triple" in f[0] for f in added)
    assert metric(m, "fluxmat_owl_inconsistencies") == 0 and m.status()["now"]["inconsistencies"] == 0


def test_rdf_mode_refuses_equality_rewrite_with_a_clear_error(tmp_path):
    """owl:sameAs in rdf mode is the eq-* rules over triples; the rewrite is for the axiom rules."""
    onto = tmp_path / "o.ttl"
    onto.write_text(ONTOLOGY, encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", "--ontology", str(onto), "--owl-rules", "rdf",
                        "--equality", "rewrite"], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "--equality rewrite works with --owl-rules axioms only" in r.stderr


def test_list_walking_predicates_stay_out_of_the_output(tmp_path):
    """cls-uni over an rdf:List: the union's member is typed; the list-walking facts are internal."""
    onto, data = tmp_path / "o.ttl", tmp_path / "d.ttl"
    onto.write_text(f"@prefix ex: <{EX}> . @prefix owl: <{OWL}> . ex:Pet owl:unionOf ( ex:Cat ex:Dog ) .",
                    encoding="utf-8")  # fmt: skip
    data.write_text(f"@prefix ex: <{EX}> . ex:rex a ex:Dog .", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "materialise", "--ontology", str(onto), "--owl-rules", "rdf",
                        "--facts", str(data)], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "ex:Pet(ex:rex)." in r.stdout.splitlines() and "owl2rl" not in r.stdout
