"""`fluxmat follow` and DeltaFollower against a real tansu broker, into SQLite and a real PostgreSQL.

Deltas are published by the job's own sink (connectors.kafka_sink.KafkaPublisher:
split into parts, lz4-compressed by default, keyed, N-Triples as an option),
with replays (a batch published again, as the job does after a crash). The
follower is a real `fluxmat follow` process, SIGKILLed mid-stream and started
again: its tables must equal the expected views exactly, and no batch may be
applied twice (each applied batch prints one line; a second application of a
batch would also fail on the tables' primary keys).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluxmat.client import DeltaFollower, Iri, Literal, open_store
from fluxmat.client.follower import partition_of
from fluxmat.client.wire import encode_fact
from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.kafka_sink import KafkaPublisher
from fluxmat.connectors.rdf import ntriples_lines
from fluxmat.engine import syntax as es
from tests.support.cli import follow

ROOT = Path(__file__).resolve().parent.parent.parent
_n = iter(range(1_000_000))


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])  # starts PostgreSQL
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'view.db'}"
    return request.getfixturevalue("postgres").create_database(f"view{next(_n)}")


def topic(bootstrap: str, partitions: int) -> str:
    name = f"follow{next(_n)}"
    ensure_topics(bootstrap, {name: partitions})
    return name


POOL = [("edge", a, b) for a in "abcd" for b in "abcd"] + [
    ("val", Iri("http://x/a"), 2**70), ("val", "<x>", Literal("05", "http://www.w3.org/2001/XMLSchema#int")),
    ("lab", Iri("http://x/b"), Literal("zoë", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "fr")),
    ("z",)]  # fmt: skip


class Stream:
    """Random batches per key (each key's first batch: its whole view), with replays; the expected views."""

    def __init__(self, pub: KafkaPublisher, keys: list, seed: int) -> None:
        self.pub, self.keys, self.rnd = pub, keys, random.Random(seed)
        self.views = {k: set() for k in keys}
        self.sent: dict = {k: [] for k in keys}
        self.batch = 0

    def publish(self, batches: int) -> None:
        rnd = self.rnd
        for _ in range(batches):
            b, self.batch = self.batch, self.batch + 1
            for k in self.keys:
                view = self.views[k]
                added = [f for f in rnd.sample(POOL, rnd.randint(0, 8)) if f not in view]
                removed = [f for f in rnd.sample(sorted(view, key=repr), min(len(view), rnd.randint(0, 3)))
                           if f not in added]  # fmt: skip
                self.views[k] = (view - set(removed)) | set(added)
                args = (b, f"u{b}", [encode_fact(f) for f in added], [encode_fact(f) for f in removed])
                self.pub.publish_delta(*args, key=k)
                self.sent[k].append(args)
                if rnd.random() < 0.3:  # the job replays a batch after a crash: identical messages again
                    self.pub.publish_delta(*rnd.choice(self.sent[k]), key=k)


def applied_batches(url: str, deltas: str) -> int:
    store = open_store(url)
    try:
        return len(store.load(deltas).batches)
    finally:
        store.close()


def test_follow_sigkilled_and_restarted_folds_every_key_exactly_once(broker, db_url, reap):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap, 3)
    keys = ["k0", "k1", "k2", "tenant/é"]
    with KafkaPublisher(bs, deltas, max_facts_per_message=3) as pub:  # lz4 by default, many parts
        stream = Stream(pub, keys, seed=1)
        stream.publish(3)
        proc = reap(follow(db_url, bs, deltas))
        try:
            deadline = time.monotonic() + 60
            while applied_batches(db_url, deltas) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            stream.publish(3)  # while the follower runs
            proc.send_signal(signal.SIGKILL)
        finally:
            out1 = proc.communicate(timeout=30)[0]
        stream.publish(2)
    proc = reap(follow(db_url, bs, deltas, "--until-caught-up"))
    out2, err2 = proc.communicate(timeout=120)
    assert proc.returncode == 0, err2
    lines = [ln.split(":")[0] for ln in (out1 + out2).splitlines()]
    assert len(lines) == len(set(lines)), "a batch was applied twice"
    store = open_store(db_url)
    progress = store.load(deltas)
    assert progress.batches == dict.fromkeys(keys, 7) and progress.through == dict.fromkeys(keys, "u7")
    for k in keys:
        assert store.facts(k) == stream.views[k], k
    store.close()


def test_one_key_alone_and_a_refused_message(broker, tmp_path, reap):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap, 2)
    with KafkaPublisher(bs, deltas, max_facts_per_message=2, compression="gzip") as pub:
        stream = Stream(pub, ["a", "b"], seed=4)
        stream.publish(3)
        views = stream.views
    url = f"sqlite:///{tmp_path / 'b.db'}"
    proc = reap(follow(url, bs, deltas, "--key", "b", "--until-caught-up", "--quiet", "--group-id", "views"))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    from kafka import KafkaConsumer, TopicPartition


    watcher = KafkaConsumer(bootstrap_servers=bs, group_id="views", enable_auto_commit=False)
    part = partition_of("b", 2)
    saved = open_store(url).load(deltas).offsets
    assert watcher.committed(TopicPartition(deltas, part)) == saved[part] > 0  # the group sees the progress
    watcher.close()
    store = open_store(url)
    store.load(deltas)
    assert store.facts("b") == views["b"] and store.facts("a") == set()
    store.close()
    # a delta from an older fluxmat (no "v"), then a valid later batch: refused, nothing of it applied
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bs)
    old = b'{"key":"b","batch":3,"through":"u3","part":0,"parts":1,"added":[["edge","x","y"]],"removed":[]}'

    producer.send(deltas, key=b"b", value=old, partition=partition_of("b", 2)).get(timeout=30)
    producer.close()
    proc = reap(follow(url, bs, deltas, "--key", "b", "--until-caught-up"))
    _, err = proc.communicate(timeout=120)
    lines = [ln for ln in err.splitlines() if ln.startswith("fluxmat: error:")]
    assert proc.returncode == 1 and "Traceback" not in err and len(lines) == 1, err
    assert "older than format version 1" in lines[0] and "nothing of its batch was applied" in lines[0]
    store = open_store(url)
    assert store.load(deltas).batches == {"b": 2} and store.facts("b") == views["b"]
    store.close()


def test_ntriples_deltas_with_facts_that_are_not_triples(broker, db_url):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap, 1)
    ex = "http://example.org/"
    facts = [(f"{ex}knows", es.Iri(f"{ex}a"), es.Iri(f"{ex}b")), (f"{ex}Person", es.Iri(f"{ex}a")),
             (f"{ex}name", es.Iri(f"{ex}a"), es.literal("Zoë", lang="fr")), ("edge", "a", 5),
             (f"{ex}n", es.Iri("urn:fluxmat:bnode:b1"), 7)]  # fmt: skip
    lines, others = ntriples_lines(facts)
    wire_others = [encode_fact(f) for f in others]
    with KafkaPublisher(bs, deltas, delta_format="ntriples", max_facts_per_message=2) as pub:
        pub.publish_delta(-1, None, [*lines, *wire_others], [])
        pub.publish_delta(0, "u0", [], [lines[0], *wire_others])
    with DeltaFollower(bs, deltas, open_store(db_url)) as follower:
        while not (follower.caught_up() and follower.through() == "u0"):
            follower.poll(0.5)
        got = follower.view()
    expected = {(f"{ex}Person", Iri(f"{ex}a")), (f"{ex}name", Iri(f"{ex}a"), Literal("Zoë", es.RDF_LANG_STRING, "fr")),
                (f"{ex}n", Iri("urn:fluxmat:bnode:b1"), 7)}  # fmt: skip
    assert got == expected


def test_a_large_first_snapshot_goes_in_bulk_and_reads_back(db_url):
    from fluxmat.client import Folder
    from fluxmat.client.database import COPY_ROWS

    facts = [("takes", Iri(f"http://x/s{i}"), f"Course {i} é", i * 7) for i in range(COPY_ROWS * 3)]
    store = open_store(db_url)
    folder = Folder(store.load("t").batches)
    body = {"v": 1, "batch": -1, "through": None, "part": 0, "parts": 1,
            "added": [encode_fact(f) for f in facts], "removed": []}  # fmt: skip
    import json

    store.apply(folder.offer(json.dumps(body).encode()), "t", folder.resume())
    assert store.facts() == set(facts)
    store.close()
    reader = open_store(db_url)  # another connection that never loaded: it reads what the database holds
    assert reader.facts() == set(facts) and reader.facts("other") == set()
    reader.close()


def test_a_new_database_holds_no_facts(tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'empty.db'}")
    assert store.facts() == set()
    store.close()


def test_update_producer_messages_are_what_the_job_reads(broker):
    import pyoxigraph as ox

    from fluxmat.client import UpdateProducer
    from fluxmat.connectors.files import parse_update
    from fluxmat.connectors.kafka_sink import read_deltas as read_topic
    from tests.support.messages import check_message

    bs, updates = broker.bootstrap, topic(broker.bootstrap, 1)
    program = "@prefix ex: <http://example.org/> .\npath(X, Y) :- edge(X, Y).\nex:age[?X, ?A] :- person(?X, ?A).\n"
    triple = ox.Triple(ox.NamedNode("http://example.org/a"), ox.NamedNode("http://example.org/age"),
                       ox.Literal("42", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#int")))  # fmt: skip
    with UpdateProducer(bs, updates, program=program, max_facts=3) as producer:
        with pytest.raises(ValueError, match="has arity 3; the program uses edge with arity 2"):
            producer.send(add=[("edge", "a", "b", "c")])
        with pytest.raises(ValueError, match="an argument is an int, str, Iri or Literal"):
            producer.add(("edge", "a", 1.5))
        producer.send(add=[("edge", "a", Iri("http://x/b")), triple], delete=[("edge", "<x>", 2**70)], id="u1")
        producer.add(*[("edge", f"n{i}", f"n{i + 1}") for i in range(4)], key="k")  # 3: sent at once, 1 pending
        producer.send_rdf(add="<http://x/a> <http://x/p> <http://x/b> .\n", id=2)
        producer.flush()
    messages = read_topic(bs, updates)
    assert len(messages) == 4
    for i, message in enumerate(messages):
        check_message(message, "update")
        parse_update(message, {"ex": "http://example.org/"}, f"message {i}")  # the job's own reader accepts it
    first = parse_update(messages[0], {}, "first")
    assert first.add[1] == ("http://example.org/age", es.Iri("http://example.org/a"),
                            es.literal("42", "http://www.w3.org/2001/XMLSchema#int"))  # fmt: skip
    assert first.delete == (("edge", "<x>", 2**70),) and first.id == "u1"


@pytest.mark.parametrize("to,fragment", [
    ("mysql://x/y", "unknown database URL 'mysql://x/y'"),
    ("sqlite:///{tmp}/v.db", "cannot reach Kafka broker at 127.0.0.1:{port}"),
    ("postgresql://nobody@127.0.0.1:{port}/x", "cannot open postgresql://nobody@127.0.0.1:{port}/x"),
])  # fmt: skip
def test_follow_refuses_bad_places_with_one_error_line(tmp_path, to, fragment):
    from tests.support.servers import free_port

    port = free_port()
    to, fragment = (x.format(tmp=tmp_path, port=port) for x in (to, fragment))
    r = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "follow", "--deltas-topic", "d",
                        "--bootstrap-servers", f"127.0.0.1:{port}", "--to", to],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("fluxmat: error:")]
    assert r.returncode == 1 and "Traceback" not in r.stderr and len(lines) == 1, r.stderr
    assert fragment in lines[0], lines[0]
