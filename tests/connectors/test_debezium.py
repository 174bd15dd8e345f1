"""Debezium change events (`--delta-format debezium`) through the sink, against a real tansu broker."""

from __future__ import annotations

import json
import random
import time

from fluxmat.connectors.debezium import topic_for
from fluxmat.connectors.kafka_sink import KafkaPublisher
from tests.support.messages import read_events
from tests.support.pipeline import make_setup


def fold(messages: list[tuple[bytes, bytes | None]], tables: dict) -> dict:
    """What a Kafka Connect JDBC sink makes of the events: {table: rows}, upsert and delete by key."""
    last_table = None
    for raw_key, raw_value in messages:
        key = json.loads(raw_key)
        assert set(key) == {"schema", "payload"}
        if raw_value is None:  # the tombstone after a delete
            assert tuple(key["payload"].values()) not in tables.get(last_table, set())
            continue
        value = json.loads(raw_value)
        assert [f["field"] for f in value["schema"]["fields"]] == ["before", "after", "op", "source", "ts_ms"]
        p = value["payload"]
        last_table = p["source"]["table"]
        row = p["after"] if p["op"] in ("c", "r") else p["before"]
        assert (p["before"] is None) == (p["op"] != "d") and (p["after"] is None) == (p["op"] == "d")
        assert row == key["payload"], "the message key is the row"
        rows = tables.setdefault(last_table, set())
        if p["op"] == "d":
            rows.discard(tuple(row.values()))
        else:
            rows.add(tuple(row.values()))
    return tables


def test_topic_names():
    assert topic_for("deltas", "edge") == "deltas.edge"
    iri = topic_for("deltas", "<http://example.org/p#x>")
    assert iri.startswith("deltas._http___example.org_p_x_-") and len(iri) == len("deltas._http___example.org_p_x_-") + 8
    assert topic_for("d", "a/b") != topic_for("d", "a:b")


def test_events_fold_to_the_materialisation(broker):
    topic = "dbz1"
    with KafkaPublisher(broker.bootstrap, topic, delta_format="debezium") as pub:
        assert pub.publish_delta(-1, None, [["edge", "a", "b"], ["edge", "b", "c"], ["n", 1]], []) == 3
        pub.publish_delta(0, {"0": 3}, [["edge", "c", "d"]], [["edge", "a", "b"], ["n", 1]])
        pub.publish_delta(0, {"0": 3}, [["edge", "c", "d"]], [["edge", "a", "b"], ["n", 1]])  # a replay
        pub.publish_delta(1, "u9", [["edge", "a", "b"]], [])
    edge = read_events(broker.bootstrap, "dbz1.edge")
    n = read_events(broker.bootstrap, "dbz1.n")
    tables = fold(n, fold(edge, {}))
    assert tables == {"edge": {("b", "c"), ("c", "d"), ("a", "b")}, "n": set()}
    first = json.loads(edge[0][1])
    assert first["payload"]["op"] == "r" and first["payload"]["source"]["snapshot"] == "true"
    assert first["payload"]["after"] == {"arg0": "a", "arg1": "b"}
    number = json.loads(n[0][1])
    assert number["schema"]["fields"][1]["fields"] == [{"field": "arg0", "type": "int64", "optional": False}]
    delete = json.loads(edge[2][1])["payload"]
    assert delete["op"] == "d" and delete["source"]["batch"] == 0 and json.loads(delete["source"]["through"]) == {"0": 3}
    assert edge[3][1] is None, "a tombstone follows a delete"
    assert edge[2:5] == edge[5:8], "a replayed batch re-sends identical events"


def test_keyed_events_carry_the_key(broker):
    with KafkaPublisher(broker.bootstrap, "dbz2", delta_format="debezium") as pub, pub.deferred():
        pub.publish_delta(0, "x", [["edge", "a", "b"]], [], key="tenant1")
        pub.publish_delta(0, "x", [["edge", "a", "b"]], [], key="tenant2")
    edge = read_events(broker.bootstrap, "dbz2.edge")
    assert fold(edge, {}) == {"edge": {("tenant1", "a", "b"), ("tenant2", "a", "b")}}
    assert json.loads(edge[0][0])["payload"] == {"key": "tenant1", "arg0": "a", "arg1": "b"}


def test_job_publishes_change_events(broker, redis_server, tmp_path):
    """A real job with --delta-format debezium: the predicate topics fold to the materialisation."""
    from tests.support.pipeline import (
        INITIAL,
        encode,
        final_explicit,
        produce,
        random_updates,
        remat,
        start_job,
        wait_for_log,
    )

    s = make_setup(broker, redis_server, tmp_path)
    updates = random_updates(random.Random(3), 15, "d") + [{"add": [["edge", "q", "r"]], "id": "last"}]
    job = start_job(s, "debezium", None, "--delta-format", "debezium")
    try:
        wait_for_log(job, "reading ", timeout=600)  # Spark starts slowly on a loaded machine
        produce(s.bootstrap, s.updates, [(0, encode(u)) for u in updates])
        deadline = time.monotonic() + 600
        while not any(v is not None and json.loads(v)["payload"]["source"]["through"] == '"last"'
                      for _, v in read_events(s.bootstrap, f"{s.deltas}.edge")):  # fmt: skip
            assert job.returncode is None and time.monotonic() < deadline, job.tail()
            time.sleep(0.5)
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    tables: dict = {}
    for predicate in ("edge", "path", "src"):
        fold(read_events(s.bootstrap, f"{s.deltas}.{predicate}"), tables)
    got = {(p, *row) for p, rows in tables.items() for row in rows}
    assert got == remat(final_explicit(INITIAL, updates))
