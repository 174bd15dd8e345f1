"""A broker restart mid-stream: tansu stopped and started again on the same port while the job runs.

The broker keeps its topics in object storage (tansu's `s3://` storage, served
here by a local S3 endpoint, moto's server), so what was published survives
the broker process, as with any durable Kafka. The keyed job (a Redis Cluster
of three nodes) reads updates and publishes deltas across the restart; per key
the folded deltas must equal `remat`, batch ids only grow and a re-sent delta
is identical (tests.support.keyed_job.check). If the job gives up while the
broker is away, or fails after it (tansu refused a producer id right after its
restart), it is started again, as an operator or an orchestrator would: nothing
may be lost or applied twice either way.
"""

from __future__ import annotations

import time

import pytest

from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics
from fluxmat.connectors.kafka_sink import read_deltas
from tests.support.keyed_job import args, check, first_half, mid_stream, produce, starter, wait_done
from tests.support.pipeline import Proc, job_env
from tests.support.servers import RedisCluster, free_port

pytestmark = pytest.mark.integration
moto_server = pytest.importorskip("moto.server", reason="the S3 endpoint for tansu's storage is moto[server]")
DOWN_SECONDS = 5.0  # how long the broker stays away


@pytest.fixture
def s3_env():
    """A local S3 endpoint with a bucket `tansu`; the environment tansu needs to use it."""
    import boto3

    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = {"AWS_ENDPOINT": f"http://127.0.0.1:{port}", "AWS_ALLOW_HTTP": "true", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "fluxmat", "AWS_SECRET_ACCESS_KEY": "fluxmat"}  # fmt: skip
    try:
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT"], region_name="us-east-1", aws_access_key_id="fluxmat",
                     aws_secret_access_key="fluxmat").create_bucket(Bucket="tansu")  # fmt: skip
        yield env
    finally:
        server.stop()


def test_the_broker_keeps_its_topics_across_a_restart(s3_env, tmp_path):
    with EmbeddedBroker(log_path=tmp_path / "tansu.log", storage="s3://tansu/", env=s3_env) as broker:
        ensure_topics(broker.bootstrap, {"kept": 1})
        produce(broker.bootstrap, "kept", [(None, {"n": i}) for i in range(3)])
        port = broker.port
        broker.stop()
        broker.start()
        assert broker.port == port
        produce(broker.bootstrap, "kept", [(None, {"n": 3})])
        assert read_deltas(broker.bootstrap, "kept", timeout=30) == [{"n": i} for i in range(4)]


def test_keyed_job_rides_through_a_broker_restart(s3_env, tmp_path):
    n = 6
    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log", storage="s3://tansu/", env=s3_env).start()
    cluster = RedisCluster(tmp_path / "redis").start()
    jobs: list[Proc] = []
    try:
        plan, rest = first_half(broker.bootstrap, n, 43)
        cmd = args(broker, cluster, tmp_path, n, "--max-updates-per-batch", "15")
        job = mid_stream(broker.bootstrap, n, starter(cmd, tmp_path, jobs, "job"))
        broker.stop()  # mid-stream
        time.sleep(DOWN_SECONDS)
        broker.start()  # the same port, the same storage
        produce(broker.bootstrap, f"kupdates{n}", rest)
        last = {k: u[-1]["id"] for k, u in plan.items()}
        if job.returncode is not None:  # it gave up while the broker was away: start it again
            jobs.append(Proc(cmd, tmp_path, "after-restart", job_env()))
        again = lambda name: Proc(cmd, tmp_path, name, job_env())  # noqa: E731
        msgs = until_done(broker.bootstrap, f"kdeltas{n}", jobs, last, again)
        assert jobs[-1].terminate() == 0, jobs[-1].tail()
    finally:
        for job in jobs:
            job.cleanup()
        cluster.stop()
        broker.stop()
    check(msgs, plan)
    print(f"the job {'rode through' if len(jobs) == 1 else f'was started {len(jobs) - 1} more time(s)'}")


def until_done(bootstrap: str, topic: str, jobs: list[Proc], last: dict[str, str], start, restarts: int = 3):
    """`wait_done`, starting the job again when it exits (as an orchestrator would), at most `restarts` times.

    After the restart tansu may refuse the job's first producer id (InitProducerId: UnknownError); the
    job then stops with "restarting the job retries it", and it is restarted like any failed job.
    """
    for attempt in range(restarts + 1):
        try:
            return wait_done(bootstrap, topic, jobs[-1], last)
        except pytest.fail.Exception:
            if jobs[-1].returncode is None or attempt == restarts:
                raise
            jobs.append(start(f"restart{attempt}"))
