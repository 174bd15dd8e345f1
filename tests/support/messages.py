"""The tests' topic reader: every delta and dead letter read is checked against its JSON Schema.

Test modules read delta and dead-letter topics with `read_deltas` from here (not
from connectors.kafka_sink), so every message the job publishes in any test is
validated against client/schemas (fastjsonschema, compiled once).

fastjsonschema implements draft 7, ten times faster than jsonschema's 2020-12
on a large delta; the schemas are 2020-12. `draft7` rewrites the one 2020-12
keyword they use (`prefixItems` with `items` for the rest) into draft 7's
`items` array with `additionalItems`; tests/client/test_client.py checks that both
validators give the same answer on good and bad messages.
"""

from __future__ import annotations

import time

import fastjsonschema
from kafka import KafkaConsumer, TopicPartition

from fluxmat.client import schema
from fluxmat.connectors.kafka_sink import read_deltas as _read_topic


def draft7(node):
    """A 2020-12 schema (as the client's schemas use it) as the equivalent draft-7 schema."""
    if isinstance(node, list):
        return [draft7(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: draft7(v) for k, v in node.items()}
    if "prefixItems" in out:
        out["additionalItems"] = out.pop("items", True)
        out["items"] = out.pop("prefixItems")
    if out.get("$schema", "").endswith("2020-12/schema"):
        out["$schema"] = "http://json-schema.org/draft-07/schema#"
    return out


VALIDATORS = {name: fastjsonschema.compile(draft7(schema(name))) for name in ("update", "delta", "dead-letter")}


def check_message(message: dict, kind: str | None = None) -> dict:
    """`message` if it validates against its schema (a dead letter has "reason"); else AssertionError."""
    kind = kind or ("dead-letter" if "reason" in message else "delta")
    try:
        VALIDATORS[kind](message)
    except fastjsonschema.JsonSchemaValueException as exc:
        shown = repr(message)
        raise AssertionError(f"{kind} message does not match its schema: {exc.message}: "
                             f"{shown[:300]}") from None  # fmt: skip
    return message


def read_deltas(bootstrap: str, topic: str, timeout: float = 10.0) -> list[dict]:
    """connectors.kafka_sink.read_deltas, each message checked against its schema."""
    return [check_message(m) for m in _read_topic(bootstrap, topic, timeout=timeout)]


def read_events(bootstrap: str, topic: str, timeout: float = 20.0) -> list[tuple[bytes, bytes | None]]:
    """(key, value) of every record of partition 0 of `topic`, in order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             fetch_max_wait_ms=100)  # fmt: skip
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list = []
        deadline = time.monotonic() + timeout
        while consumer.highwater(tp) is None or len(out) < consumer.highwater(tp):
            assert time.monotonic() < deadline, f"reading {topic}: {len(out)} of {consumer.highwater(tp)}"
            out += [(r.key, r.value) for r in consumer.poll(timeout_ms=200).get(tp, [])]
        return out
    finally:
        consumer.close()
