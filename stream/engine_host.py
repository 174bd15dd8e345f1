"""Engine hosts: one long-lived process per (job, task partition) on each executor host.

Spark hands a task to whichever of its idle Python workers comes first, so a
key's engine cached in one worker process is found again only about 1 / N of
the time with N workers (measured: 41-65% on local[2]); every other
batch would rebuild it from Redis. The keyed operator (stream.keyed) therefore
keeps its engines in an *engine host*: a process of its own, one per job and
task partition index on each host, started by the first task that needs it and
reached over a Unix socket. A key always hashes to the same partition, so on
one host it always meets its engine; a task that lands on another host (a
standalone cluster) starts a host there and rebuilds from Redis (validated as
before: stream.keyed).

The task only relays: it sends `(cfg, batch, rows by key)` and gets the keys'
summaries back. An engine host processes one request at a time (a retried
task waits for its earlier attempt), exits after `IDLE_SECONDS` without a
request (or when the job stops: `stop_hosts`), and any error it meets is sent back and raised in the task (which
Spark then retries); if it dies, the task fails the same way and its retry
starts a new one. Sockets live in a directory only this user may enter.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pickle
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

IDLE_SECONDS = 300.0
START_SECONDS = 60.0  # for a new host to answer
_HEADER = struct.Struct("!Q")


def socket_dir() -> Path:
    """The directory of this user's engine sockets; refused unless only this user may enter it.

    (Requests and replies are pickles: a directory another user controls could
    hand us their socket.)
    """
    path = Path(tempfile.gettempdir()) / f"fluxmat-engines-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise RuntimeError(f"{path} must be a directory of user {os.getuid()} that no one else may enter "
                           f"(mode 700); remove it and retry")  # fmt: skip
    return path


def address(cfg, partition: int) -> Path:
    """The socket of the engine host of `cfg`'s job and task partition `partition`."""
    job = hashlib.sha256(repr(cfg).encode("utf-8")).hexdigest()[:16]
    return socket_dir() / f"{job}-{partition}.sock"


def _send(conn: socket.socket, payload: bytes) -> None:
    conn.sendall(_HEADER.pack(len(payload)) + payload)


def _recv(conn: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = conn.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("the engine host closed the connection (did it die?)")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (size,) = _HEADER.unpack(exactly(_HEADER.size))
    return exactly(size)


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None


def _start(path: Path) -> None:
    """Start the host of `path` unless one answers (one starter at a time: a lock file)."""
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _connect(path)
        if conn is not None:
            conn.close()
            return
        path.unlink(missing_ok=True)  # a dead host's socket
        with open(path.with_suffix(".log"), "ab") as log:
            subprocess.Popen([sys.executable, "-m", "fluxmat.stream.engine_host", str(path)], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, start_new_session=True, close_fds=True)  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while not path.exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"the engine host {path} did not start in {START_SECONDS:g} s "
                                   f"(see {path.with_suffix('.log')})")  # fmt: skip
            time.sleep(0.02)


def call(cfg, partition: int, batch: int, groups: dict[str, list], program: dict | None = None) -> list[dict]:
    """Have the engine host of `partition` process `groups` (rows by key) of `batch`; the summaries.

    `program`: the namespace's program in force (stream.key_engines.process_groups).
    """
    path = address(cfg, partition)
    conn = _connect(path)
    if conn is None:
        _start(path)
        deadline = time.monotonic() + START_SECONDS
        while (conn := _connect(path)) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot reach the engine host {path}")
            time.sleep(0.02)
    with conn:
        _send(conn, pickle.dumps((cfg, batch, groups, program), protocol=pickle.HIGHEST_PROTOCOL))
        status, value = pickle.loads(_recv(conn))
    if status != "ok":
        raise RuntimeError(f"engine host {path.name}: {value}")
    return value


def stop_hosts(cfg) -> int:
    """Ask this host's engine hosts of `cfg`'s job to exit (when the job stops); how many did."""
    stopped = 0
    for path in socket_dir().glob(address(cfg, 0).name.rsplit("-", 1)[0] + "-*.sock"):
        conn = _connect(path)
        if conn is None:
            continue
        with conn:
            try:
                _send(conn, pickle.dumps("stop"))
                _recv(conn)
                stopped += 1
            except OSError:
                continue
        deadline = time.monotonic() + 5.0  # it removes its socket as it exits
        while path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return stopped


def serve(path: Path, idle: float = IDLE_SECONDS) -> None:
    """Answer requests on `path` one at a time until `idle` seconds pass without one."""
    from fluxmat.stream.key_engines import process_groups

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    server.bind(str(tmp))
    os.chmod(tmp, 0o600)
    server.listen(8)
    os.replace(tmp, path)  # visible only once it accepts
    inode = os.stat(path).st_ino
    server.settimeout(idle)
    try:
        while True:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                return
            with conn:
                try:
                    request = pickle.loads(_recv(conn))
                    if request == "stop":
                        _send(conn, pickle.dumps(("ok", None)))
                        return
                    cfg, batch, groups, program = request
                    reply = ("ok", process_groups(cfg, batch, groups, program))
                except BaseException as exc:  # sent to the task, which fails and is retried
                    reply = ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}")
                try:
                    _send(conn, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
                except OSError:
                    pass  # the task went away (killed); its retry asks again
    finally:
        server.close()
        try:
            if os.stat(path).st_ino == inode:  # not a successor's socket
                os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
