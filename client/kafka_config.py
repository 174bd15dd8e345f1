"""Kafka client security settings, written the way Kafka users write them.

A settings file is a Java-style properties file (`key=value` or `key: value`,
`#` / `!` comments) of the librdkafka / Java client names::

    security.protocol=SASL_SSL
    ssl.ca.location=/etc/fluxmat/ca.pem
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=fluxmat
    sasl.password=${KAFKA_PASSWORD}

`load(path)` turns it into the keyword arguments of kafka-python's clients
(`KafkaSettings.args`). Secrets are never written in plain text anywhere else:

* `${NAME}` in a value is replaced by the environment variable NAME (an error
  naming the file, line and variable when it is not set);
* `<key>.file=PATH` reads a secret key's value from a file (its content, one
  trailing newline dropped), e.g. `sasl.password.file=/run/secrets/kafka`;
* `KafkaSettings` shows secrets as `***` (repr, `describe()`), and every error
  names the key, never the value of a secret.

The file is read again where a client is made (the job's executors get its
path, not its content), so secrets never travel in Spark's options or plans.
Only the standard library is imported here: the job, the client library and
`fluxmat follow` all use this one module.

Errors (unknown or unsupported key, bad value, missing file or variable) are
`KafkaConfigError`, one line naming `file:line`.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path

ENV = "FLUXMAT_KAFKA_CONFIG"  # the settings file when --kafka-config is not given
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SECRETS = {"sasl.password", "ssl.key.password", "sasl.jaas.config"}
MASK = "***"
# settings name -> kafka-python keyword (values are strings unless converted below)
_DIRECT = {
    "security.protocol": "security_protocol",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
    "ssl.cipher.suites": "ssl_ciphers",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",  # librdkafka's spelling
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "client.id": "client_id",
}
# kafka-python keyword -> librdkafka name (`KafkaSettings.librdkafka`; sasl.mechanisms is an alias there)
_RDKAFKA = {arg: key for key, arg in _DIRECT.items() if key != "sasl.mechanisms"}
_FILES = {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.crl.location"}
_UNSUPPORTED = {
    "ssl.truststore.location": "a Java keystore; convert it to PEM and use ssl.ca.location",
    "ssl.keystore.location": "a Java keystore; convert it to PEM and use ssl.certificate.location "
                             "and ssl.key.location",
    "enable.ssl.certificate.verification": "certificate verification cannot be turned off; "
                                           "give the CA with ssl.ca.location",
    "sasl.oauthbearer.config": "OAUTHBEARER needs a token provider (the client library's "
                               "sasl_oauth_token_provider), not a settings file",
    "sasl.kerberos.service.name": "GSSAPI (Kerberos) is not supported",
}
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_JAAS = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
_CLIENT_KEYS = set(_DIRECT) | {"ssl.endpoint.identification.algorithm", "sasl.jaas.config"}


class KafkaConfigError(ValueError):
    """A Kafka settings file cannot be used; the message names file and line."""


@dataclass(frozen=True)
class KafkaSettings:
    """kafka-python keyword arguments from a settings file; secrets masked when shown.

    Attributes:
        path: The settings file (None: no settings, a plaintext connection).
        args: Keyword arguments for KafkaConsumer / KafkaProducer / KafkaAdminClient.
    """

    path: str | None = None
    args: dict = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"KafkaSettings({self.describe()})"

    @property
    def tls(self) -> bool:
        return self.args.get("security_protocol", "PLAINTEXT") in ("SSL", "SASL_SSL")

    def librdkafka(self) -> dict:
        """The same settings in librdkafka's names (confluent-kafka's clients: connectors.kafka_records)."""
        out = {_RDKAFKA[k]: v for k, v in self.args.items() if k in _RDKAFKA}
        if "ssl_check_hostname" in self.args:
            out["ssl.endpoint.identification.algorithm"] = "https" if self.args["ssl_check_hostname"] else "none"
        return out

    def describe(self) -> str:
        """The settings in one line, secrets as `***` (for logs)."""
        shown = {k: (MASK if k in ("sasl_plain_password", "ssl_password") else v)
                 for k, v in sorted(self.args.items())}  # fmt: skip
        where = f"{self.path}: " if self.path else ""
        return where + (", ".join(f"{k}={v}" for k, v in shown.items()) or "PLAINTEXT")


NONE = KafkaSettings()


def load(path: str | os.PathLike | None, environ: dict | None = None) -> KafkaSettings:
    """The settings of `path` (None: of $FLUXMAT_KAFKA_CONFIG, or none at all).

    Raises:
        KafkaConfigError: unreadable file, unknown or unsupported key, bad value.
    """
    env = os.environ if environ is None else environ
    if path in (None, ""):
        path = env.get(ENV) or None
    if path is None:
        return NONE
    name = str(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaConfigError(f"{name}: cannot read the Kafka settings file: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None  # fmt: skip
    values: dict[str, tuple[str, int]] = {}
    for number, key, value in _properties(name, text):
        key, value = _indirect(name, number, key, _expand(name, number, value, env))
        values[key] = (value, number)
    return KafkaSettings(name, _mapping(name, values))


def _properties(name: str, text: str):
    """(line number, key, value) of each setting of a properties file."""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        at = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if at <= 0:
            raise KafkaConfigError(f"{name}:{number}: expected key=value, got {_shown(line)!r}")
        yield number, line[:at].strip(), line[at + 1:].strip()


def _shown(line: str) -> str:
    """A line for an error message: cut, and nothing after a secret key."""
    key = re.split(r"[=:]", line, maxsplit=1)[0].strip()
    return key + "=" + MASK if key in SECRETS else line[:60]


def _expand(name: str, number: int, value: str, env) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in env:
            raise KafkaConfigError(f"{name}:{number}: environment variable {m.group(1)} is not set")
        return env[m.group(1)]

    return _ENV_REF.sub(sub, value)


def _indirect(name: str, number: int, key: str, value: str) -> tuple[str, str]:
    """`<secret>.file=PATH` as `<secret>=<content of PATH>`."""
    if not key.endswith(".file"):
        return key, value
    base = key[: -len(".file")]
    if base not in SECRETS:
        raise KafkaConfigError(f"{name}:{number}: {key}: only secrets ({', '.join(sorted(SECRETS))}) "
                               "may be read from a file")  # fmt: skip
    try:
        content = Path(value).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaConfigError(f"{name}:{number}: {key}: cannot read {value}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None  # fmt: skip
    return base, content[:-1] if content.endswith("\n") else content


def _mapping(name: str, values: dict[str, tuple[str, int]]) -> dict:
    """kafka-python keyword arguments of the settings, checked."""
    args: dict = {}
    for key, (value, number) in values.items():
        where = f"{name}:{number}: {key}"
        if key in _UNSUPPORTED:
            raise KafkaConfigError(f"{where}: not supported: {_UNSUPPORTED[key]}")
        if key not in _CLIENT_KEYS:
            raise KafkaConfigError(f"{where}: unknown setting (known: {', '.join(sorted(_CLIENT_KEYS))})")
        if key in _FILES and not Path(value).is_file():
            raise KafkaConfigError(f"{where}: no such file: {value}")
        if key == "ssl.endpoint.identification.algorithm":
            if value.lower() not in ("https", "", "none"):
                raise KafkaConfigError(f"{where}: expected https or none, got {value!r}")
            args["ssl_check_hostname"] = value.lower() == "https"
        elif key == "sasl.jaas.config":
            args.update(_jaas(where, value))
        else:
            args[_DIRECT[key]] = value
    _check(name, values, args)
    return args


def _jaas(where: str, value: str) -> dict:
    """The username and password of a Java `sasl.jaas.config` (Plain or Scram login module)."""
    if "PlainLoginModule" not in value and "ScramLoginModule" not in value:
        raise KafkaConfigError(f"{where}: only PlainLoginModule and ScramLoginModule are supported")
    found = {k: v.replace('\\"', '"') for k, v in _JAAS.findall(value)}
    if set(found) != {"username", "password"}:
        raise KafkaConfigError(f'{where}: expected username="..." password="..."')
    return {"sasl_plain_username": found["username"], "sasl_plain_password": found["password"]}


def _check(name: str, values: dict, args: dict) -> None:
    """Settings that do not fit together."""
    def line(*keys: str) -> str:
        return next((f"{name}:{values[k][1]}" for k in keys if k in values), name)

    protocol = args.setdefault("security_protocol", "PLAINTEXT").upper()
    args["security_protocol"] = protocol
    if protocol not in PROTOCOLS:
        raise KafkaConfigError(f"{line('security.protocol')}: security.protocol: expected one of "
                               f"{', '.join(PROTOCOLS)}, got {protocol!r}")  # fmt: skip
    sasl = protocol.startswith("SASL_")
    mechanism = args.get("sasl_mechanism")
    if sasl and mechanism is None:
        raise KafkaConfigError(f"{line('security.protocol')}: security.protocol={protocol} needs sasl.mechanism "
                               f"({', '.join(MECHANISMS)})")  # fmt: skip
    if mechanism is not None:
        where = line("sasl.mechanism", "sasl.mechanisms")
        if not sasl:
            raise KafkaConfigError(f"{where}: sasl.mechanism is set but security.protocol is {protocol} "
                                   "(SASL_SSL or SASL_PLAINTEXT expected)")  # fmt: skip
        if mechanism.upper() not in MECHANISMS:
            raise KafkaConfigError(f"{where}: sasl.mechanism: expected one of {', '.join(MECHANISMS)}, "
                                   f"got {mechanism!r}")  # fmt: skip
        args["sasl_mechanism"] = mechanism.upper()
        missing = [k for k, a in (("sasl.username", "sasl_plain_username"),
                                  ("sasl.password", "sasl_plain_password")) if a not in args]  # fmt: skip
        if missing:
            raise KafkaConfigError(f"{where}: sasl.mechanism={mechanism} needs {' and '.join(missing)}")
    tls_keys = sorted(k for k in values if k.startswith("ssl."))
    if tls_keys and protocol not in ("SSL", "SASL_SSL"):
        raise KafkaConfigError(f"{line(*tls_keys)}: {tls_keys[0]} is set but security.protocol is {protocol} "
                               "(SSL or SASL_SSL expected): the connection would not use TLS")  # fmt: skip


def tls_problem(bootstrap: str, settings: KafkaSettings, timeout: float = 5.0) -> str | None:
    """Why a TLS handshake with the first bootstrap server fails, or None.

    kafka-python only logs a failed handshake and reports no broker; this
    repeats the handshake with the same CA, certificate and hostname check, so
    the error can say what is wrong (an untrusted certificate, a wrong host
    name, a server that does not speak TLS).
    """
    if not settings.tls:
        return None
    args = settings.args
    host, _, port = bootstrap.split(",")[0].strip().rpartition(":")
    try:
        context = ssl.create_default_context(cafile=args.get("ssl_cafile"))
        context.check_hostname = args.get("ssl_check_hostname", True)
        if args.get("ssl_certfile"):
            context.load_cert_chain(args["ssl_certfile"], args.get("ssl_keyfile"), args.get("ssl_password"))
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock, \
                context.wrap_socket(sock, server_hostname=host.strip("[]")):
            return None
    except ssl.SSLCertVerificationError as exc:
        ca = args.get("ssl_cafile") or "the system's CAs"
        return (f"TLS certificate of {host}:{port} not trusted (certificate verify failed: {exc.verify_message}) "
                f"(ssl.ca.location: {ca})")
    except (ssl.SSLError, OSError, ValueError) as exc:
        return f"TLS handshake with {host}:{port} failed: {exc}"
