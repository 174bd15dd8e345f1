"""Reading a topic back from a broker whose storage answers slowly.

tansu with object storage (`s3://`) answers a fetch from its store: it lists
the partition's batches and reads them, one request each. When that takes
longer than the fetch's `max_wait_ms`, the fetch comes back empty, and a
reader that asks again with the same short wait never gets past that offset:
`read_deltas` asked with 100 ms and stalled below the high watermark whenever
the store took longer than that per request (a loaded machine, a distant
store). Here the S3 endpoint (moto's server) answers every request 150 ms late.
"""

from __future__ import annotations

import threading
import time

import pytest

from fluxmat.connectors import kafka_source
from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
from fluxmat.connectors.kafka_sink import read_deltas
from tests.support.keyed_job import produce

pytestmark = pytest.mark.integration
moto_server = pytest.importorskip("moto.server", reason="the S3 endpoint for tansu's storage is moto[server]")
LATENCY = 0.15  # seconds added to every request to the object store


class SlowS3:
    """moto's S3 server on a loopback port, answering each request `latency` seconds late."""

    def __init__(self, latency: float):
        self.latency = latency
        app = moto_server.DomainDispatcherApplication(moto_server.create_backend_app)

        def slow(environ, start_response):
            time.sleep(self.latency)
            return app(environ, start_response)

        from werkzeug.serving import make_server

        self.server = make_server("127.0.0.1", 0, slow, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SlowS3:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.thread.join(timeout=10)

    def env(self) -> dict[str, str]:
        """What tansu needs to keep its topics in this endpoint's bucket `tansu`."""
        import boto3

        boto3.client("s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="fluxmat",
                     aws_secret_access_key="fluxmat").create_bucket(Bucket="tansu")  # fmt: skip
        return {"AWS_ENDPOINT": self.url, "AWS_ALLOW_HTTP": "true", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "fluxmat", "AWS_SECRET_ACCESS_KEY": "fluxmat"}  # fmt: skip


def test_a_topic_is_read_to_its_end_from_a_slow_object_store(tmp_path):
    records = [(None, {"n": i}) for i in range(8)]
    with SlowS3(LATENCY) as s3:
        env = s3.env()
        with EmbeddedBroker(log_path=tmp_path / "tansu.log", storage="s3://tansu/", env=env) as broker:
            ensure_topics(broker.bootstrap, {"slow": 1})
            for record in records:  # one batch each: a request to the store per batch read
                produce(broker.bootstrap, "slow", [record])
            assert read_deltas(broker.bootstrap, "slow", timeout=60) == [r for _, r in records]


def test_the_source_reads_a_range_from_a_slow_object_store(tmp_path):
    """The job's source asks the broker to wait for nothing (its records are there); when a fetch comes
    back empty below the range's end, it asks again with a longer wait, which the slow store needs."""
    pytest.importorskip("pyspark")
    from fluxmat.connectors.kafka_source import KafkaInputPartition, KafkaStreamReader

    records = [(None, {"n": i}) for i in range(8)]
    with SlowS3(LATENCY) as s3:
        env = s3.env()
        with EmbeddedBroker(log_path=tmp_path / "tansu.log", storage="s3://tansu/", env=env) as broker:
            ensure_topics(broker.bootstrap, {"slow": 1})
            for record in records:
                produce(broker.bootstrap, "slow", [record])
            reader = KafkaStreamReader({"bootstrap": broker.bootstrap, "topic": "slow", "stallTimeoutSeconds": "30"})
            try:
                batches = list(reader.read(KafkaInputPartition("slow", 0, 0, 8)))
                assert [row for b in batches for row in b.column("offset").to_pylist()] == list(range(8))
            finally:
                kafka_source.close_readers()
