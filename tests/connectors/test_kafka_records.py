"""The source's record read with confluent-kafka (connectors.kafka_records), against a real broker."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("pyspark")
confluent_kafka = pytest.importorskip("confluent_kafka")

from fluxmat.client.kafka_config import load  # noqa: E402
from fluxmat.connectors import kafka_source  # noqa: E402
from fluxmat.connectors.broker import ensure_topics  # noqa: E402
from fluxmat.connectors.kafka_source import KafkaInputPartition, KafkaSourceError, KafkaStreamReader  # noqa: E402
from tests.support.pipeline import produce  # noqa: E402

_topics = itertools.count()


def _topic(bs: str) -> str:
    name = f"records{next(_topics)}"
    ensure_topics(bs, {name: 1})
    return name


def _rows(reader: KafkaStreamReader, topic: str, lo: int, hi: int) -> list[tuple]:
    table = reader.read_table([KafkaInputPartition(topic, 0, lo, hi)])
    return list(zip(*(table.column(c).to_pylist() for c in ("offset", "key", "value", "utf8", "size")), strict=True))


def test_values_are_cut_decoded_and_checked_as_before(broker):
    """Cut at maxValueBytes (its validity that of the whole value), invalid UTF-8 replaced and flagged."""
    bs = broker.bootstrap
    topic = _topic(bs)
    values = [b"short", b"ab\xffcd", b"0123456789abcdef", b"0123456789\xff", None, "é".encode() * 6]
    produce(bs, topic, [(0, v) for v in values])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic, "maxValueBytes": "10"})
    try:
        rows = _rows(reader, topic, 0, len(values))
    finally:
        kafka_source.close_readers()
    assert rows == [
        (0, None, "short", True, 5),
        (1, None, "ab\ufffdcd", False, 5),
        (2, None, "0123456789", True, 16),  # cut: size tells the whole length
        (3, None, "0123456789", False, 11),  # the invalid byte is past the cut: still not UTF-8
        (4, "tombstone", None, True, None),
        (5, None, "ééééé", True, 12),
    ]


def test_records_are_read_by_librdkafka_and_the_reader_kept(broker):
    bs = broker.bootstrap
    topic = _topic(bs)
    produce(bs, topic, [(0, f"v{i}".encode()) for i in range(6)])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    key = (bs, topic, 0)
    try:
        assert [r[2] for r in _rows(reader, topic, 0, 3)] == ["v0", "v1", "v2"]
        kept = kafka_source._READERS[key]
        assert isinstance(kept.client, confluent_kafka.Consumer)
        assert kept.idle and kept.client.assignment() == []  # between reads: no fetch every few ms at the log's end
        assert [r[2] for r in _rows(reader, topic, 3, 6)] == ["v3", "v4", "v5"]
        assert kafka_source._READERS[key] is kept and kept.at == 6 and kept.idle
        produce(bs, topic, [(0, b"v6"), (0, b"v7")])  # arrive while it is idle
        assert [r[2] for r in _rows(reader, topic, 6, 8)] == ["v6", "v7"]
        assert [r[2] for r in _rows(reader, topic, 1, 3)] == ["v1", "v2"]  # a replay assigns again
    finally:
        kafka_source.close_readers()


def test_a_range_the_broker_does_not_have_is_an_error_not_a_jump(broker):
    """A range past the log's end fails after the stall timeout, naming the broker's end, and is never
    silently replaced by another (librdkafka's auto.offset.reset=error); the next read starts afresh."""
    bs = broker.bootstrap
    topic = _topic(bs)
    produce(bs, topic, [(0, f"v{i}".encode()) for i in range(3)])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic, "stallTimeoutSeconds": "2"})
    try:
        with pytest.raises(KafkaSourceError, match=r"no progress .*\[0\] at offset 10 .*high watermark 3\)"):
            _rows(reader, topic, 10, 12)
        assert [r[2] for r in _rows(reader, topic, 1, 3)] == ["v1", "v2"]  # a failed read leaves nothing behind
    finally:
        kafka_source.close_readers()


def test_security_settings_in_librdkafka_names(tmp_path):
    ca, cert, key = (tmp_path / n for n in ("ca.pem", "cert.pem", "key.pem"))
    for f in (ca, cert, key):
        f.write_text("pem")
    path = tmp_path / "kafka.properties"
    path.write_text(f"security.protocol=SASL_SSL\nssl.ca.location={ca}\nssl.certificate.location={cert}\n"
                    f"ssl.key.location={key}\nssl.key.password=${{KEY_PASS}}\n"
                    "ssl.endpoint.identification.algorithm=none\nsasl.mechanisms=SCRAM-SHA-256\n"
                    "sasl.username=u\nsasl.password=p\nclient.id=job\n")  # fmt: skip
    assert load(path, environ={"KEY_PASS": "k"}).librdkafka() == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": str(ca), "ssl.certificate.location": str(cert),
        "ssl.key.location": str(key), "ssl.key.password": "k", "ssl.endpoint.identification.algorithm": "none",
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u", "sasl.password": "p", "client.id": "job",
    }  # fmt: skip
    plain = tmp_path / "plain.properties"
    plain.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n")
    settings = load(plain, environ={}).librdkafka()
    confluent_kafka.Consumer({**settings, "bootstrap.servers": "127.0.0.1:1", "group.id": "g"}).close()  # names known


def test_a_long_range_comes_in_bounded_batches(broker, monkeypatch):
    """One `consume` hands over at most `_CONSUME_MAX` messages (librdkafka refuses more than 1,000,000)."""
    from fluxmat.connectors import kafka_records

    monkeypatch.setattr(kafka_records, "_CONSUME_MAX", 3)
    bs = broker.bootstrap
    topic = _topic(bs)
    produce(bs, topic, [(0, f"v{i}".encode()) for i in range(7)])
    reader = KafkaStreamReader({"bootstrap": bs, "topic": topic})
    try:
        batches = list(reader.read(KafkaInputPartition(topic, 0, 0, 7)))
    finally:
        kafka_source.close_readers()
    assert max(b.num_rows for b in batches) <= 3
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(7))
