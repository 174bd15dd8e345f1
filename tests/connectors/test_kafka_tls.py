"""Kafka over TLS, end to end: a real stunnel in front of a real tansu broker.

The broker advertises the stunnel port, so every client (the job's driver and
executors, the publisher, the topic admin, the test's reader) connects through
TLS with certificate verification; stunnel also requires a client certificate,
whose key is encrypted with a password the settings take from the environment.
The secret must not show in the job's stderr, its /api/status or its checkpoint.
A wrong CA is refused with one clear line. (tansu offers no SASL mechanism, so
SASL is tested only as settings: tests/client/test_kafka_config.py.)
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaProducer

from fluxmat.client.kafka_config import load
from fluxmat.connectors.broker import EmbeddedBroker, ensure_topics, stop_process
from fluxmat.connectors.kafka_sink import read_deltas
from tests.support.pipeline import (
    INITIAL,
    Proc,
    assert_refused,
    encode,
    final_explicit,
    job_env,
    make_setup,
    random_updates,
    rebuild,
    remat,
    wait_for_log,
)
from tests.support.servers import free_port
from tests.support.tls_certs import make_pki

SECRET = "key-pass-5f3a9c"  # the client key's password: must never be shown

STUNNEL = shutil.which("stunnel4") or shutil.which("stunnel")
pytestmark = pytest.mark.skipif(STUNNEL is None, reason="stunnel4 is not installed (apt-get install stunnel4)")


def _wait_port(port: int, proc: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"stunnel did not listen on {port}: {log.read_text(errors='replace')}") from None
            time.sleep(0.1)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """(bootstrap through TLS, PKI files, the stunnel process); the broker advertises stunnel's port."""
    d = tmp_path_factory.mktemp("tls")
    pki = make_pki(d / "pki", SECRET)
    tls_port, broker_port = free_port(), free_port()
    conf = d / "stunnel.conf"
    conf.write_text(
        f"foreground = yes\npid =\noutput = {d / 'stunnel.log'}\ndebug = 5\n"
        f"[kafka]\naccept = 127.0.0.1:{tls_port}\nconnect = 127.0.0.1:{broker_port}\n"
        f"cert = {pki['server.pem']}\nkey = {pki['server.key']}\n"
        f"CAfile = {pki['ca.pem']}\nverifyChain = yes\nrequireCert = yes\n", encoding="utf-8")  # fmt: skip
    proc = subprocess.Popen([STUNNEL, str(conf)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)  # fmt: skip
    broker = EmbeddedBroker(port=broker_port, log_path=d / "tansu.log", advertised=f"127.0.0.1:{tls_port}")
    try:
        _wait_port(tls_port, proc, d / "stunnel.log")
        broker.start()
        yield f"127.0.0.1:{tls_port}", pki, d
    finally:
        broker.stop()
        stop_process(proc, 5)


def _settings(path: Path, pki: dict, ca: str = "ca.pem") -> Path:
    path.write_text(
        "# TLS with a client certificate\n"
        "security.protocol=SSL\n"
        f"ssl.ca.location={pki[ca]}\n"
        "ssl.endpoint.identification.algorithm=https\n"
        f"ssl.certificate.location={pki['client.pem']}\n"
        f"ssl.key.location={pki['client.key']}\n"
        "ssl.key.password=${KAFKA_KEY_PASSWORD}\n", encoding="utf-8")  # fmt: skip
    return path


class _Broker:
    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap


def _produce(bootstrap: str, topic: str, values: list[bytes], kafka) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kafka.args)
    try:
        for v in values:
            producer.send(topic, value=v, partition=0).get(timeout=30)
    finally:
        producer.close()


def test_job_through_tls(tls, redis_server, tmp_path, monkeypatch):
    bootstrap, pki, _ = tls
    monkeypatch.setenv("KAFKA_KEY_PASSWORD", SECRET)
    conf = _settings(tmp_path / "kafka.properties", pki)
    kafka = load(conf)
    assert kafka.tls and SECRET not in repr(kafka) and SECRET not in kafka.describe()
    with pytest.raises(ConnectionError, match="cannot reach Kafka broker"):
        ensure_topics(bootstrap, {"plain": 1}, timeout=3)  # no TLS: not through
    s = make_setup(_Broker(bootstrap), redis_server, tmp_path / "job", kafka)
    updates = random_updates(random.Random(7), 12, "t") + [{"add": [["edge", "f", "a"]], "id": "last"}]
    dashboard = free_port()
    job = Proc(s.args("--kafka-config", str(conf), "--dashboard-port", str(dashboard)), s.logs, "tls",
               job_env({"KAFKA_KEY_PASSWORD": SECRET}))  # fmt: skip
    try:
        wait_for_log(job, "reading ", timeout=600)  # Spark starts slowly on a loaded machine
        _produce(bootstrap, s.updates, [encode(u) for u in updates], kafka)
        deadline = time.monotonic() + 600
        while not any(m["through"] == "last" for m in read_deltas(bootstrap, s.deltas, 20, kafka=kafka)):
            assert job.returncode is None and time.monotonic() < deadline, job.tail()
            time.sleep(0.5)
        status = urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/api/status", timeout=10).read().decode()
        assert job.terminate() == 0, job.tail()
    finally:
        job.cleanup()
    msgs = read_deltas(bootstrap, s.deltas, kafka=kafka)
    assert rebuild(msgs) == remat(final_explicit(INITIAL, updates))
    assert "kafka settings" in job.stderr() and "ssl_password=***" in job.stderr(), job.tail()
    assert SECRET not in job.stderr() + job.stdout(), "the key password is shown"
    assert SECRET not in status
    stored = [p for p in s.checkpoint.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert stored == [], f"the key password is in the checkpoint: {stored}"


def test_wrong_ca_is_refused(tls, redis_server, tmp_path):
    bootstrap, pki, _ = tls
    conf = _settings(tmp_path / "kafka.properties", pki, ca="wrong-ca.pem")
    directory = tmp_path / "job"
    directory.mkdir()
    (directory / "p.dl").write_text("path(X, Y) :- edge(X, Y).\n", encoding="utf-8")
    args = ["-m", "fluxmat.ops.cli", "run", str(directory / "p.dl"), "--bootstrap-servers", bootstrap,
            "--updates-topic", "u", "--deltas-topic", "d", "--redis", "memory://",
            "--checkpoint", str(directory / "cp"), "--kafka-config", str(conf)]  # fmt: skip
    job = Proc([sys.executable, *args], directory, "wrong-ca", job_env({"KAFKA_KEY_PASSWORD": SECRET}))
    line = assert_refused(job, "not trusted")
    assert f"cannot reach Kafka broker at {bootstrap}" in line and "certificate verify failed" in line, line
    assert str(pki["wrong-ca.pem"]) in line, line
    assert SECRET not in job.stderr()


def test_client_library_and_follow_through_tls(tls, tmp_path, monkeypatch):
    """UpdateProducer, DeltaFollower and `fluxmat follow` take the same settings file as the job."""
    from fluxmat.client import DeltaFollower, UpdateProducer
    from fluxmat.connectors.kafka_sink import KafkaPublisher

    bootstrap, pki, _ = tls
    monkeypatch.setenv("KAFKA_KEY_PASSWORD", SECRET)
    conf = _settings(tmp_path / "kafka.properties", pki)
    kafka = load(conf)
    ensure_topics(bootstrap, {"c-updates": 1, "c-deltas": 1}, kafka=kafka)
    producer = UpdateProducer(bootstrap, "c-updates", kafka_config=str(conf))
    producer.send(add=[("edge", "a", "b")], id="u1")
    producer.flush()
    producer.close()
    sent = _read_values(bootstrap, "c-updates", kafka)
    assert len(sent) == 1 and b'"u1"' in sent[0]
    publisher = KafkaPublisher(bootstrap, "c-deltas", kafka=kafka)
    publisher.publish_delta(0, "u1", [["edge", "a", "b"], ["path", "a", "b"]], [])
    publisher.close()
    follower = DeltaFollower(bootstrap, "c-deltas", kafka_config=str(conf))
    try:
        deadline = time.monotonic() + 60
        while not follower.view() and time.monotonic() < deadline:
            follower.poll(0.5)
        assert follower.view() == {("edge", "a", "b"), ("path", "a", "b")}
    finally:
        follower.close()
    with pytest.raises(ConnectionError):  # without the settings the TLS port cannot be read
        DeltaFollower(bootstrap, "c-deltas", timeout=3).close()
    out = subprocess.run([sys.executable, "-m", "fluxmat.ops.cli", "follow", "--deltas-topic", "c-deltas",
                          "--bootstrap-servers", bootstrap, "--to", f"sqlite:///{tmp_path / 'v.db'}",
                          "--kafka-config", str(conf), "--until-caught-up", "--quiet"],
                         capture_output=True, text=True, timeout=180)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stderr + out.stdout


def _read_values(bootstrap: str, topic: str, kafka) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000, **kafka.args)  # fmt: skip
    try:
        return [m.value for m in consumer]
    finally:
        consumer.close()
