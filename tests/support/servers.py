"""Real local servers for tests: redis-server on a free loopback port, stopped by PID."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def _ephemeral() -> range:
    """The kernel's range for outgoing connections' local ports (and for bind to port 0)."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return range(low, high + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def free_port() -> int:
    """A free loopback port outside the ephemeral range.

    A port from `bind(("127.0.0.1", 0))` is an ephemeral one, which an outgoing
    connection (a Kafka or Redis client) may take before the server that was
    told to use it binds it: an "Address already in use" now and then.
    """
    import random

    ephemeral = _ephemeral()
    for _ in range(500):
        port = random.randint(10000, 65000)
        if port in ephemeral:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """redis-server with AOF persistence in `directory`; restartable on the same port."""

    def __init__(self, directory: Path, port: int | None = None, password: str | None = None):
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.exe = exe
        self.directory = Path(directory)
        self.port = port or free_port()
        self.password = password
        self.proc: subprocess.Popen | None = None
        self.extra: list[str] = []  # more redis-server arguments (RedisCluster's)

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--protected-mode", "yes",
             *(["--requirepass", self.password] if self.password else []), *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )  # fmt: skip
        import redis

        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1, password=self.password).ping()
                return self
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {self.port}") from None
                time.sleep(0.05)

    def stop(self, kill: bool = False) -> None:
        if self.proc is None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:  # Redis 7 on SIGTERM: a primary waits up to shutdown-timeout (10 s) for lagging replicas
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:  # e.g. its replica was failed by the test: nothing more to wait for
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


def _cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    import random

    for _ in range(200):
        port = random.randint(20000, 45000)
        try:
            for p in (port, port + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


class RedisCluster:
    """A real Redis Cluster: `redis-server --cluster-enabled yes` on loopback, AOF on every node.

    Three primaries, and with `replicas=1` one replica each (six nodes): then a
    primary killed (`kill(i)`) is replaced by its replica after
    `node_timeout_ms` and a bit (`wait_promoted`); started again (`revive(i)`)
    it rejoins as a replica. Without replicas a node can be stopped and
    restarted (`restart(i)`) with its data and its slots.
    """

    def __init__(self, directory: Path, nodes: int = 3, replicas: int = 0, node_timeout_ms: int = 2000):
        count = nodes * (1 + replicas)
        self.nodes = [RedisServer(Path(directory) / f"node{i}", port=_cluster_port()) for i in range(count)]
        self.replicas, self.node_timeout_ms = replicas, node_timeout_ms

    @property
    def url(self) -> str:
        """A seed node's URL (what `fluxmat run --redis ... --redis-cluster` takes)."""
        return self.nodes[0].url

    def start(self) -> RedisCluster:
        for node in self.nodes:
            node.extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", str(self.node_timeout_ms)]  # fmt: skip
            node.start()
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed (apt-get install redis-server)")
        addresses = [f"127.0.0.1:{n.port}" for n in self.nodes]
        subprocess.run([cli, "--cluster", "create", *addresses, "--cluster-replicas", str(self.replicas),
                        "--cluster-yes"], check=True, capture_output=True, timeout=60)  # fmt: skip
        self.wait_ok()
        return self

    def _info(self, node: RedisServer) -> dict | None:
        import redis

        try:
            return redis.Redis(port=node.port, socket_timeout=1).cluster("info")
        except redis.RedisError:
            return None

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Until every running node reports `cluster_state:ok` and, with replicas, sees them all."""
        deadline = time.monotonic() + timeout
        while True:
            infos = [self._info(n) for n in self.nodes if n.proc is not None]
            if all(i is not None and i["cluster_state"] == "ok" for i in infos) and self._replicated():
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.1)

    def _replicated(self) -> bool:
        """Every running replica's link to its primary is up (trivially true without replicas)."""
        import redis

        for node in self.nodes:
            if node.proc is None:
                continue
            try:
                info = redis.Redis(port=node.port, socket_timeout=1).info("replication")
            except redis.RedisError:
                return False
            if info["role"] == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def roles(self) -> dict[int, str]:
        """`master` or `slave` per running node, by index."""
        import redis

        out = {}
        for i, node in enumerate(self.nodes):
            if node.proc is not None:
                out[i] = redis.Redis(port=node.port, socket_timeout=1).info("replication")["role"]
        return out

    def primary_of(self, slot_key: str) -> int:
        """The index of the node that serves `slot_key`'s slot now."""
        import redis

        client = redis.Redis(port=self.nodes[0].port, socket_timeout=2)
        slot = client.cluster("keyslot", slot_key)
        for start, end, primary, *_ in client.cluster("slots"):
            if start <= slot <= end:
                return next(i for i, n in enumerate(self.nodes) if n.port == int(primary[1]))
        raise RuntimeError(f"slot {slot} is not served")

    def replicas_of(self, i: int) -> list[int]:
        """The running nodes that replicate node `i` now."""
        import redis

        out = []
        for j, node in enumerate(self.nodes):
            if node.proc is not None and j != i:
                info = redis.Redis(port=node.port, socket_timeout=1).info("replication")
                if info["role"] == "slave" and int(info.get("master_port", 0)) == self.nodes[i].port:
                    out.append(j)
        return out

    def kill(self, i: int) -> list[int]:
        """SIGKILL node `i` by its PID (no shutdown); returns the nodes that replicated it."""
        replicas = self.replicas_of(i)
        self.nodes[i].stop(kill=True)
        return replicas

    def wait_promoted(self, replicas: list[int], timeout: float = 60.0) -> int:
        """After `kill` of a primary: until one of its `replicas` is a primary and the cluster is ok."""
        deadline = time.monotonic() + timeout
        while True:
            promoted = [j for j, role in self.roles().items() if role == "master" and j in replicas]
            if promoted:
                self.wait_ok(max(1.0, deadline - time.monotonic()))
                return promoted[0]
            if time.monotonic() > deadline:
                raise RuntimeError(f"none of the replicas {replicas} was promoted")
            time.sleep(0.1)

    def revive(self, i: int) -> None:
        """Start a killed node again from its AOF and nodes.conf (a replica now); wait until all is ok."""
        self.nodes[i].start()
        self.wait_ok()

    def restart(self, i: int, kill: bool = True) -> None:
        """Stop node `i` (SIGKILL by default) and start it again from its AOF."""
        self.nodes[i].stop(kill=kill)
        self.nodes[i].start()
        self.wait_ok()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class SparkStandalone:
    """A standalone Spark cluster from the pip package: a master and `workers` one-core workers.

    Processes on loopback, each in its own session, stopped by PID (and their
    process groups) in `stop()`.
    """

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        import pyspark

        self.directory = Path(directory)
        self.spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        self.port = free_port()
        self.workers, self.cores, self.memory = workers, cores, memory
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        import os
        import sys

        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
               "SPARK_WORKER_DIR": str(self.directory / f"{name}-work"),
               "SPARK_LOG_DIR": str(self.directory / f"{name}-logs")}  # fmt: skip
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115
        self.procs.append(subprocess.Popen([self.spark_class, *args], env=env, stdout=log, stderr=log,
                                           stdin=subprocess.DEVNULL, start_new_session=True))  # fmt: skip

    def start(self, timeout: float = 90.0) -> SparkStandalone:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(free_port()))  # fmt: skip
        for i in range(self.workers):
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()))  # fmt: skip
        deadline = time.monotonic() + timeout
        while self.registered() < self.workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.registered()} of {self.workers} Spark workers registered; "
                                   f"see {self.directory}/*.log")  # fmt: skip
            time.sleep(0.5)
        return self

    def registered(self) -> int:
        """Workers the master's log says registered."""
        log = self.directory / "master.log"
        return log.read_text(errors="replace").count("Registering worker") if log.exists() else 0

    def stop(self) -> None:
        import os
        import signal

        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
        self.procs.clear()


def postgres_bin() -> Path | None:
    """The directory of Debian's PostgreSQL server binaries (initdb, pg_ctl), newest version; None if absent."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name))
    return found[-1].parent if found else None


class PostgresServer:
    """A throwaway PostgreSQL cluster (initdb, trust auth) on a free loopback port, stopped by PID.

    Run as the `postgres` user when the tests run as root (the server refuses
    root); its data directory is a new directory under /tmp owned by that user.
    """

    def __init__(self) -> None:
        import os
        import tempfile

        self.bin = postgres_bin()
        if self.bin is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql)")
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="fluxmat-pg-"))
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_user:
            shutil.chown(self.directory, "postgres", "postgres")
        self.data = self.directory / "data"
        self.pid: int | None = None

    def _run(self, *args: str) -> None:
        r = subprocess.run([*self.as_user, *args], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {r.stderr.strip() or r.stdout.strip()}")

    def start(self) -> PostgresServer:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")  # fmt: skip
        options = f"-p {self.port} -h 127.0.0.1 -k {self.directory} -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data), "-o", options,
                  "-l", str(self.directory / "server.log"))  # fmt: skip
        self.pid = int((self.data / "postmaster.pid").read_text().split()[0])
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        import os
        import signal

        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGINT)  # fast shutdown
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    os.kill(self.pid, 0)
                    time.sleep(0.1)
            except ProcessLookupError:
                pass
            self.pid = None
        shutil.rmtree(self.directory, ignore_errors=True)
