"""The streaming job in `--owl-rules rdf` mode: a schema triple through the updates topic (real parts).

A real tansu broker, redis-server and local Spark; `fluxmat run --ontology o.ttl
--owl-rules rdf --delta-format ntriples` as a user starts it. The update
stream adds the ontology triple `ex:Kitten rdfs:subClassOf ex:Cat` and later
removes it. After each, the deltas the job published for that update are
exactly the difference between owlrl's OWL 2 RL closures (from scratch) of
the explicit triples before and after it, on the example vocabulary (W3C OWL 2
Profiles, section 4.3: cax-sco types tom a Cat and an Animal, cls-svf1 makes
ann a CatOwner; removing the triple retracts all three). No internal fact
(the triple relation, the list-walking and datatype helpers) is published.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pyoxigraph as ox

from fluxmat.connectors.broker import ensure_topics
from tests.support.owl import (
    DATA,
    EX,
    OWL,
    SUB,
    TYPE,
    ex_triples,
    owlrl_closure,
    turtle_to_nt,
)
from tests.support.pipeline import Proc, job_env, produce, wait_for_through
from tests.support.servers import RedisServer

ONTOLOGY = f"""@prefix ex: <{EX}> . @prefix owl: <{OWL}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Cat rdfs:subClassOf ex:Animal .
ex:owns rdfs:domain ex:Person .
ex:CatOwner owl:equivalentClass [ owl:onProperty ex:owns ; owl:someValuesFrom ex:Cat ] .
"""
SCHEMA = f"<{EX}Kitten> <{SUB}> <{EX}Cat> .\n"
# seconds: a bound on Spark's first batch on a loaded 2-core machine (not a measurement)
FIRST_BATCH = 600.0
STEPS = [("u1", {"add": SCHEMA}), ("u2", {"del": SCHEMA})]


def _lines(text: str) -> bytes:
    """N-Triples text as canonical lines (what ex_triples reads)."""
    return "".join(
        f"{q.triple} .\n" for q in ox.parse(text.encode(), ox.RdfFormat.N_TRIPLES)
    ).encode()


def published(msgs: list[dict], through: str) -> tuple[set[str], set[str], str]:
    """(added, removed) on the example vocabulary of the deltas through `through`, and all their text."""
    added, removed, text = set(), set(), ""
    seen = set()
    for m in msgs:
        if m["through"] != through or (m["batch"], m["part"]) in seen:
            continue
        seen.add((m["batch"], m["part"]))
        assert m["format"] == "ntriples", m
        added |= ex_triples(_lines(m["added"]))
        removed |= ex_triples(_lines(m["removed"]))
        text += m["added"] + m["removed"] + json.dumps(m.get("not_triples", {}))
    return added, removed, text


def test_schema_triple_added_and_removed_through_the_stream_publishes_owlrls_differences(
    broker, tmp_path
):
    onto, data = tmp_path / "o.ttl", tmp_path / "d.nt"
    onto.write_text(ONTOLOGY, encoding="utf-8")
    data.write_text(DATA, encoding="utf-8")
    updates, deltas = "owl-rdf-updates", "owl-rdf-deltas"
    ensure_topics(broker.bootstrap, {updates: 1, deltas: 1})
    redis = RedisServer(tmp_path / "redis").start()
    args = [sys.executable, "-m", "fluxmat.ops.cli", "run", "--ontology", str(onto), "--owl-rules", "rdf",
            "--facts", str(data), "--delta-format", "ntriples", "--bootstrap-servers", broker.bootstrap,
            "--updates-topic", updates, "--deltas-topic", deltas, "--redis", redis.url,
            "--namespace", "owlrdf", "--checkpoint", str(tmp_path / "checkpoint"),
            "--trigger-interval", "200ms"]  # fmt: skip
    job = Proc(args, tmp_path, "owl-rdf-job", job_env())
    explicit = set(turtle_to_nt(ONTOLOGY).splitlines()) | set(DATA.splitlines())
    try:
        for uid, change in STEPS:
            before = owlrl_closure("\n".join(explicit) + "\n")
            explicit = (explicit | set(change.get("add", "").splitlines())) - set(
                change.get("del", "").splitlines()
            )
            after = owlrl_closure("\n".join(explicit) + "\n")
            produce(
                broker.bootstrap,
                updates,
                [(0, json.dumps({"id": uid, "format": "ntriples", **change}).encode())],
            )
            msgs = wait_for_through(
                SimpleNamespace(bootstrap=broker.bootstrap, deltas=deltas), job, uid, FIRST_BATCH
            )
            added, removed, text = published(msgs, uid)
            assert (added, removed) == (after - before, before - after), uid
            assert "triple" not in text and "__owl2rl" not in text, text
        catowner = f"<{EX}ann> <{TYPE}> <{EX}CatOwner>"
        assert catowner in published(msgs, "u1")[0] and catowner in published(msgs, "u2")[1]
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
        redis.stop()
