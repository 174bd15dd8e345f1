"""Kafka settings files -> kafka-python arguments (client.kafka_config), and the SASL mapping.

tansu offers no SASL mechanism, so SASL is tested here as settings only; TLS
runs end to end in tests/connectors/test_kafka_tls.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fluxmat.client.kafka_config import NONE, KafkaConfigError, load

ROOT = Path(__file__).resolve().parent.parent.parent


def _write(tmp_path: Path, text: str, name: str = "kafka.properties") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_sasl_ssl_scram_with_secret_from_environment(tmp_path):
    ca = _write(tmp_path, "pem", "ca.pem")
    path = _write(tmp_path, f"# managed Kafka\n\nsecurity.protocol = SASL_SSL\nssl.ca.location: {ca}\n"
                            "sasl.mechanism=scram-sha-512\nsasl.username=fluxmat\n"
                            "sasl.password=${KAFKA_PASSWORD}\n! comment\n")  # fmt: skip
    settings = load(path, environ={"KAFKA_PASSWORD": "s3cret=x"})
    assert settings.args == {"security_protocol": "SASL_SSL", "ssl_cafile": str(ca),
                             "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "fluxmat",
                             "sasl_plain_password": "s3cret=x"}  # fmt: skip
    assert "s3cret" not in repr(settings) and "s3cret" not in settings.describe()
    assert "sasl_plain_password=***" in settings.describe()


def test_sasl_plain_password_from_a_file_and_jaas(tmp_path):
    secret = _write(tmp_path, "from-file\n", "password")
    path = _write(tmp_path, f"security.protocol=SASL_PLAINTEXT\nsasl.mechanisms=PLAIN\nsasl.username=u\n"
                            f"sasl.password.file={secret}\n")  # fmt: skip
    assert load(path, environ={}).args["sasl_plain_password"] == "from-file"
    jaas = _write(tmp_path, 'security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n'
                            'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule '
                            'required username="alice" password="p\\"w";\n', "jaas.properties")  # fmt: skip
    args = load(jaas, environ={}).args
    assert (args["sasl_plain_username"], args["sasl_plain_password"]) == ("alice", 'p"w')


def test_none_and_environment_variable(tmp_path):
    assert load(None, environ={}) is NONE and NONE.args == {}
    path = _write(tmp_path, "security.protocol=PLAINTEXT\nclient.id=job\n")
    assert load(None, environ={"FLUXMAT_KAFKA_CONFIG": str(path)}).args == {
        "security_protocol": "PLAINTEXT", "client_id": "job"}


@pytest.mark.parametrize(("text", "fragment"), [
    ("security.protocol=SSL\nbootstrap.servers=x\n", ":2: bootstrap.servers: unknown setting"),
    ("security.protocol=SSL\nssl.truststore.location=/x.jks\n", ":2: ssl.truststore.location: not supported"),
    ("security.protocol=TLS\n", ":1: security.protocol: expected one of PLAINTEXT, SSL"),
    ("security.protocol=SASL_SSL\n", ":1: security.protocol=SASL_SSL needs sasl.mechanism"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.username=u\nsasl.password=p\n",
     ":2: sasl.mechanism: expected one of PLAIN"),
    ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\n", "needs sasl.password"),
    ("sasl.mechanism=PLAIN\nsasl.username=u\nsasl.password=p\n", ":1: sasl.mechanism is set but security.protocol is PLAINTEXT"),
    ("ssl.ca.location=/nonexistent/ca.pem\nsecurity.protocol=SSL\n", ":1: ssl.ca.location: no such file"),
    ("security.protocol=SASL_SSL\nsasl.password=${NOPE}\n", ":2: environment variable NOPE is not set"),
    ("just a line\n", ":1: expected key=value"),
    ("security.protocol=SSL\nsasl.username.file=/x\n", ":2: sasl.username.file: only secrets"),
    ("security.protocol=SSL\nssl.key.password.file=/nonexistent\n", ":2: ssl.key.password.file: cannot read"),
])  # fmt: skip
def test_errors_name_file_and_line(tmp_path, text, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(KafkaConfigError) as err:
        load(path, environ={})
    assert str(err.value).startswith(str(path)) and fragment in str(err.value), str(err.value)


def test_tls_settings_without_tls_are_refused(tmp_path):
    ca = _write(tmp_path, "pem", "ca.pem")
    path = _write(tmp_path, f"ssl.ca.location={ca}\n")
    with pytest.raises(KafkaConfigError, match=":1: ssl.ca.location is set but security.protocol is PLAINTEXT"):
        load(path, environ={})


def test_secret_never_in_an_error(tmp_path):
    path = _write(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.password: hunter2\n")
    with pytest.raises(KafkaConfigError) as err:
        load(path, environ={})
    assert "hunter2" not in str(err.value) and "needs sasl.username" in str(err.value)


def test_run_refuses_a_bad_settings_file_in_one_line(tmp_path):
    program = _write(tmp_path, "p(X) :- q(X).\n", "p.dl")
    bad = _write(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=u\n"
                           "sasl.password=hunter2\nssl.keystore.location=/k.jks\n")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "fluxmat.ops.cli", "run", str(program), "--bootstrap-servers", "127.0.0.1:1",
         "--updates-topic", "u", "--deltas-topic", "d", "--redis", "memory://", "--checkpoint",
         str(tmp_path / "cp"), "--kafka-config", str(bad)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert f"fluxmat: error: --kafka-config: {bad}:5: ssl.keystore.location: not supported" in out.stderr
    assert "hunter2" not in out.stderr + out.stdout
