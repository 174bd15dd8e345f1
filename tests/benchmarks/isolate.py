"""Run one benchmark part in a fresh child process; caps; memory measurements.

`isolated(fn, arg, timeout)` starts a *spawned* interpreter (nothing inherited
from the parent's heap), calls `fn(arg)` there and returns its dict result with
`peak_rss_mb` (the child's VmHWM: its peak resident set, so the peak of that
part alone) added. A child that raises returns `{"error": ...}`; one that runs
past `timeout` is killed and returns `{"error": "timeout ..."}`. A missing
optional package therefore becomes an "n/a (reason)" row, never a crash.

`deep_size` measures Python object graphs (sys.getsizeof over containers,
each object once) for the derivation log vs materialisation comparison.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
import traceback
from collections.abc import Callable
from contextlib import contextmanager


class Capped(Exception):
    pass


@contextmanager
def cap(seconds: float):
    """Raise `Capped` in the main thread after `seconds` (checked between bytecodes)."""

    def alarm(_sig, _frame):
        raise Capped(f"capped at {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def status_kb(field: str) -> int | None:
    """A `kB` field of /proc/self/status (VmHWM = peak RSS, VmRSS = current)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def _child(conn, fn: Callable[[dict], dict], arg: dict) -> None:
    try:
        out = fn(arg)
    except BaseException as exc:  # report everything, including Capped / MemoryError
        out = {"error": f"{type(exc).__name__}: {exc}",
               "traceback": traceback.format_exc(limit=5)}  # fmt: skip
    out["peak_rss_mb"] = _mb(status_kb("VmHWM"))
    try:
        conn.send(out)
    finally:
        conn.close()


def isolated(fn: Callable[[dict], dict], arg: dict, timeout: float) -> dict:
    """`fn(arg)` in a spawned child; its result plus `peak_rss_mb`; never raises."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, fn, arg), daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(timeout):
            try:
                return recv.recv()
            except EOFError:
                pass
            proc.join(5)
            return {"error": f"child exited with code {proc.exitcode}"}
        return {"error": f"timeout after {timeout:g} s (child killed)"}
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()  # our own child, by its handle
        proc.join(5)


# ---------------------------------------------------------------- deep sizes

_CONTAINERS = (dict, list, tuple, set, frozenset)


def deep_size(root: object, seen: set[int]) -> int:
    """Bytes of `root` and everything it reaches through containers, each object once.

    Objects already in `seen` (ids) are not counted again, so measuring A and
    then B with the same `seen` gives B's *additional* memory. Objects with
    `__slots__` (e.g. engine.storage.Relation) are followed through their slots;
    functions, classes and modules are not followed.
    """
    total = 0
    stack = [root]
    getsizeof = sys.getsizeof
    while stack:
        obj = stack.pop()
        i = id(obj)
        if i in seen:
            continue
        seen.add(i)
        total += getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, _CONTAINERS):
            stack.extend(obj)
        elif hasattr(type(obj), "__slots__") and not callable(obj):
            for name in type(obj).__slots__:
                if hasattr(obj, name):
                    stack.append(getattr(obj, name))
    return total
