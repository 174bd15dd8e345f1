"""Each fact's cause, from the engine to the consumer: delta messages name the update that changed each fact.

A real BatchProcessor (the job's per-batch logic) publishes through the job's
own sink (connectors.kafka_sink.KafkaPublisher) to a real tansu broker, in
every delta format (JSON, N-Triples with facts that are not triples, Debezium
change events), compressed or not, split into many parts; a real DeltaFollower
(and `fluxmat follow --audit` into SQLite and PostgreSQL) reads it back. The
causes the consumer receives must equal the engine's (BatchOutcome.causes), and
each named cause must be the one update that changed the fact when the batch's
updates are applied one at a time (the oracle of tests/test_delta_causes.py).
Every message read validates against the delta schema (tests/messages.py).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from fluxmat.client import DeltaFollower, MemoryView, MessageError, check_delta, open_store
from fluxmat.client.fold import Folder, cause_runs
from fluxmat.client.wire import decode_fact, fact_key, ntriples_facts
from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.debezium import topic_for
from fluxmat.connectors.delta_codec import DeltaCodec
from fluxmat.connectors.kafka_sink import KafkaPublisher
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import Reasoner
from fluxmat.stream.batch import BatchProcessor
from tests.support.cli import ROOT
from tests.support.messages import check_message, read_deltas, read_events

# IRIs, so that with N-Triples most facts are triples (ex:edge, ex:path) and some are not (node, cut)
PROGRAM = """\
@prefix ex: <http://x/> .
ex:path[?X, ?Y] :- ex:edge[?X, ?Y].
ex:path[?X, ?Z] :- ex:path[?X, ?Y], ex:edge[?Y, ?Z].
cut(?X) :- node(?X), not ex:path[?X, ?X].
"""
NODES = [f"<http://x/{c}>" for c in "abcde"]
POOL = [["ex:edge", a, b] for a in NODES for b in NODES] + [["node", a] for a in NODES]
_n = iter(range(1_000_000))


def _mat(explicit: set) -> set:
    r = Reasoner.from_text(PROGRAM, "remat")
    r.load(sorted(explicit, key=repr))
    return r.facts()


def _facts(items: list, prefixes) -> set:
    from fluxmat.connectors.files import parse_update

    return set(parse_update({"add": items}, prefixes, "pool").add)


class Run:
    """A BatchProcessor publishing random batches of updates; the engine's causes and the oracle's."""

    def __init__(self, publisher, seed: int, delta_format: str, batches: int = 6, key: str | None = None):
        self.rnd = rnd = random.Random(seed)
        reasoner = Reasoner.from_text(PROGRAM, "fd-counting")
        self.prefixes = reasoner.prefixes
        self.codec = DeltaCodec(reasoner.program.prefixes, "ntriples" if delta_format == "ntriples" else "json")
        self.json = DeltaCodec(reasoner.program.prefixes)  # facts in updates
        self.p = BatchProcessor(reasoner, MemoryStateStore(), publisher, delta_format=delta_format, key=key)
        initial = rnd.sample(POOL, 8)
        self.explicit = _facts(initial, self.prefixes)
        self.engine: dict = {}  # (batch, added, client fact) -> the engine's cause
        self.oracle: dict = {}  # (batch, client fact) -> ids of the updates that changed it, one at a time
        if key is None:
            self.p.start(sorted(self.explicit, key=repr))
            for item in self.p.initial.output["added"]:
                self.engine[(-1, True, self.client(item))] = None
        else:
            self.p.begin(sorted(self.explicit, key=repr))
        self.offset, self.batches, self.last = 0, batches, None
        for b in range(batches):
            self.batch(b)

    def client(self, item) -> tuple:
        """A delta item (JSON array or N-Triples line) as the client decodes it."""
        return ntriples_facts(item + "\n")[0] if isinstance(item, str) else decode_fact(item)

    def batch(self, b: int) -> None:
        rnd, rows, before = self.rnd, [], _mat(self.explicit)
        for _ in range(rnd.randint(1, 4)):
            add = rnd.sample(POOL, 3)
            have = sorted(self.explicit, key=repr)
            delete = [self.json.encode(f) for f in rnd.sample(have, min(2, len(have)))]
            update = {"add": add, "del": [d for d in delete if d not in add]}
            uid = f"u{self.offset}" if rnd.random() < 0.8 else None  # no id: the cause is partition:offset
            if uid is not None:
                update["id"] = uid
            value = json.dumps(update)
            rows.append((0, self.offset, None, value, None, True, len(value)))
            name = uid or f"0:{self.offset}"
            self.offset += 1
            self.explicit = (self.explicit - _facts(update["del"], self.prefixes)) | _facts(add, self.prefixes)
            after = _mat(self.explicit)
            for f in before ^ after:
                self.oracle.setdefault((b, self.client(self.codec.encode(f))), []).append(name)
            before, self.last = after, name
        out = self.p.process(b, rows)
        first = not out.causes  # a key's first batch: its whole materialisation, no causes
        for side in () if first else ("added", "removed"):  # each cause's facts together: one run each
            causes = [json.dumps(r[0]) for r in cause_runs(out.causes[side])]
            assert len(causes) == len(set(causes)), (side, out.causes[side])
        for side in ("added", "removed"):
            causes = [None] * len(out.output[side]) if first else out.causes[side]
            for item, cause in zip(out.output[side], causes, strict=True):
                self.engine[(b, side == "added", self.client(item))] = cause
        if rnd.random() < 0.4:  # a replay of an earlier batch (as after a crash): the same output again
            assert self.p.process(rnd.randrange(b + 1), rows).replayed


def received(bootstrap: str, topic: str, last, key: str | None = None) -> dict:
    """(batch, added, fact) -> cause, as a DeltaFollower's `on_change` is told them."""
    got: dict = {}

    def on_change(c) -> None:
        assert (c.batch, c.added, c.fact) not in got, "a change told twice"
        got[(c.batch, c.added, c.fact)] = c.cause

    with DeltaFollower(bootstrap, topic, MemoryView(), key=key, on_change=on_change) as follower:
        while not (follower.caught_up() and follower.through() == last):
            follower.poll(0.5)
    return got


def check_against_oracle(run: Run, got: dict) -> None:
    named = 0
    for (batch, _added, fact), cause in got.items():
        if cause is not None:
            named += 1
            assert run.oracle[(batch, fact)] == [cause], (batch, fact, cause, run.oracle[(batch, fact)])
    assert named >= len(got) / 4  # most changes have a single cause; not all hidden behind "several"


def topic(bootstrap: str) -> str:
    name = f"causes{next(_n)}"
    ensure_topics(bootstrap, {name: 1})
    return name


@pytest.mark.parametrize("delta_format,compression", [("json", "lz4"), ("json", "none"), ("ntriples", "gzip"),
                                                      ("ntriples", "lz4")])  # fmt: skip
def test_the_follower_receives_the_engine_s_cause_of_every_fact(broker, delta_format, compression):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap)
    with KafkaPublisher(bs, deltas, delta_format=delta_format, compression=compression,
                        max_facts_per_message=3) as pub:  # fmt: skip
        run = Run(pub, seed=len(delta_format) + len(compression), delta_format=delta_format)
    got = received(bs, deltas, run.last)
    assert got == run.engine
    check_against_oracle(run, got)
    messages = read_deltas(bs, deltas)  # each checked against the delta schema
    assert {m["v"] for m in messages} == {2}
    assert not any("causes" in m for m in messages if m["batch"] == -1)  # the initial materialisation
    assert max(m["parts"] for m in messages) > 3 and sum("causes" in m for m in messages) > 3
    if delta_format == "ntriples":
        assert any(m["added"] and m.get("not_triples", {}).get("added") and "causes" in m for m in messages)


def test_a_keys_first_batch_has_no_causes_and_the_next_ones_do(broker):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap)
    with KafkaPublisher(bs, deltas, max_facts_per_message=4) as pub:
        run = Run(pub, seed=5, delta_format="json", batches=3, key="tenant-1")
    got = received(bs, deltas, run.last, key="tenant-1")
    assert got == run.engine
    assert {cause for (batch, _, _), cause in got.items() if batch == 0} == {None}
    check_against_oracle(run, {k: c for k, c in got.items() if k[0] > 0})  # the first batch has none by design
    messages = read_deltas(bs, deltas)
    assert not any("causes" in m for m in messages if m["batch"] == 0)
    assert any("causes" in m for m in messages if m["batch"] > 0)


def test_debezium_events_carry_each_fact_s_cause(broker):
    bs, deltas = broker.bootstrap, f"dbzcauses{next(_n)}"
    with KafkaPublisher(bs, deltas, delta_format="debezium") as pub:
        run = Run(pub, seed=11, delta_format="debezium", batches=5)
    got: dict = {}
    for predicate in ("ex:edge", "ex:path", "node", "cut"):
        for _, value in read_events(bs, topic_for(deltas, predicate)):
            if value is None:
                continue
            p = json.loads(value)["payload"]
            row = p["after"] or p["before"]
            cause = p["source"]["cause"]
            fact = decode_fact([predicate, *row.values()])
            got[(p["source"]["batch"], p["op"] != "d", fact)] = None if cause is None else json.loads(cause)
    assert got == run.engine
    check_against_oracle(run, got)


def test_an_older_message_without_causes_is_accepted_and_a_wrong_one_refused(broker):
    from kafka import KafkaProducer

    bs, deltas = broker.bootstrap, topic(broker.bootstrap)
    old = {"v": 1, "batch": 0, "through": "u0", "part": 0, "parts": 1, "added": [["edge", "a", "b"]], "removed": []}
    new = {"v": 2, "batch": 1, "through": "u1", "part": 0, "parts": 1, "added": [["edge", "b", "c"], ["edge", "c", "d"]],
           "removed": [["edge", "a", "b"]], "causes": [["u1", 1, 2]]}  # fmt: skip
    producer = KafkaProducer(bootstrap_servers=bs)
    for m in (old, new):
        producer.send(deltas, value=json.dumps(check_message(m)).encode(), partition=0).get(timeout=30)
    producer.close()
    got = received(bs, deltas, "u1")
    assert got == {(0, True, ("edge", "a", "b")): None, (1, True, ("edge", "b", "c")): None,
                   (1, True, ("edge", "c", "d")): "u1", (1, False, ("edge", "a", "b")): "u1"}  # fmt: skip
    for bad, fragment in (({**old, "causes": [["u1", 0, 1]]}, "unknown field 'causes' in a version-1 delta"),
                          ({**new, "causes": [["u1", 2, 2]]}, "past the 3 facts"),
                          ({**new, "causes": [["u1", 0, 2], ["u2", 1, 1]]}, "overlap"),
                          ({**new, "causes": [["u1", 0]]}, "[update id, first index, count]"),
                          ({**new, "v": 3}, "format version 3")):  # fmt: skip
        with pytest.raises(MessageError, match=fragment.replace("[", r"\[")):
            Folder().offer(json.dumps(bad).encode())
        if "past" not in fragment and "overlap" not in fragment:  # the schema cannot count facts
            with pytest.raises(AssertionError, match="does not match its schema"):
                check_message(bad)
    check_delta(new)


def _audit(url: str, topic_name: str) -> dict:
    store = open_store(url)
    cur = store.conn.cursor()
    cur.execute(f"SELECT batch, added, predicate, fact, cause FROM fluxmat_changes WHERE topic = '{topic_name}'")
    rows = {(b, bool(a), p, f): None if c is None else json.loads(c) for b, a, p, f, c in cur.fetchall()}
    store.close()
    return rows


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_follow_audit_keeps_each_change_with_its_cause(broker, database, tmp_path, request):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap)
    with KafkaPublisher(bs, deltas, max_facts_per_message=5) as pub:
        run = Run(pub, seed=21, delta_format="json", batches=4)
    if database == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
    else:
        url = request.getfixturevalue("postgres").create_database(f"audit{next(_n)}")
    proc = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "follow", "--deltas-topic", deltas,
                           "--bootstrap-servers", bs, "--to", url, "--audit", "--until-caught-up", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    expected = {(b, added, f[0], fact_key(f)): cause for (b, added, f), cause in run.engine.items()}
    assert _audit(url, deltas) == expected


def test_an_audit_row_that_fails_rolls_its_whole_batch_back(broker, tmp_path):
    bs, deltas = broker.bootstrap, topic(broker.bootstrap)
    with KafkaPublisher(bs, deltas) as pub:
        pub.publish_delta(-1, None, [["edge", "a", "b"]], [])
        pub.publish_delta(0, "u1", [["edge", "b", "c"]], [["edge", "a", "b"]], causes=[["u1", 0, 2]])
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    store = open_store(url, audit=True)
    store.load(deltas)
    store.conn.execute("INSERT INTO fluxmat_changes VALUES (?, '', 0, 1, 1, 'x', '[]', NULL)", (deltas,))
    with DeltaFollower(bs, deltas, store) as follower, pytest.raises(Exception, match="UNIQUE"):
        for _ in range(240):  # batch -1 applies; batch 0's audit rows clash with the row above
            follower.poll(0.5)
    store = open_store(url, audit=True)
    progress = store.load(deltas)
    assert progress.batches == {None: -1} and store.facts() == {("edge", "a", "b")}  # nothing of batch 0
    store.close()
