"""The local snapshot file: the engine's state as integer columns (engine.fd.columns) in Arrow IPC.

A cache beside the Spark checkpoint that can be deleted at any time: the state
store (Redis) stays the record of truth. Layout, all integers little-endian:

    MAGIC | u64 n | header (n bytes of JSON) | sections | u64 length | u32 crc32c | END

The header holds `version` (`VERSION`), the batch id, the program fingerprint,
the namespace, the engine's state metadata, the next term id and where each
section lies (offset and length from the start of the file). A section is one
Arrow IPC stream (a table of int columns `c0..`, plus `born` for facts; the
terms as `id`, `json`), lz4-compressed. The trailer's length is the file's size
without the trailer and the CRC-32C covers those bytes, so a truncated or
corrupted file is recognised before anything in it is used.

`write` is atomic: a temporary file in the same directory, fsynced, renamed
over the old one (and the directory fsynced), so a crash leaves the old file
or the new one, never a mix. `read_header` reads the header alone (the cheap
checks come first); `read` checks the trailer and returns the columns.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import crc32c
import numpy as np
import pyarrow as pa

from fluxmat.engine import StateColumns

MAGIC = b"FLUXMAT-SNAPSHOT\n"
END = b"\nEND"
VERSION = 1  # of this file's layout and of engine.fd.columns' StateColumns
_U64 = struct.Struct("<Q")
_TRAILER = struct.Struct("<QI")
COMPRESSION = "lz4"  # Arrow IPC buffer compression (None: plain)


class SnapshotUnusable(Exception):
    """A snapshot file that cannot be used; the message says why (one line)."""


def file_name(namespace: str) -> str:
    """The snapshot file of a namespace (characters outside `A-Za-z0-9._-` become `_`)."""
    safe = "".join(c if c.isalnum() and c.isascii() or c in "._-" else "_" for c in namespace)
    return f"{safe}.fluxmat-snapshot"


def write(path: Path, cols: StateColumns, batch: int, namespace: str) -> int:
    """Write `cols` (the state at `batch`) to `path` atomically; returns the file's size in bytes."""
    sections, blobs = [], []
    for kind, key, table in _tables(cols):
        blobs.append(ipc_bytes(table))
        sections.append({"kind": kind, "key": key, "length": len(blobs[-1])})
    header = {"version": VERSION, "batch": batch, "namespace": namespace,
              "fingerprint": cols.meta.get("fingerprint"), "meta": cols.meta, "next_term": cols.next_term,
              "sections": sections}  # fmt: skip
    head = json.dumps(header).encode("utf-8")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    crc, size = 0, 0
    try:
        with open(tmp, "wb") as out:
            for part in (MAGIC, _U64.pack(len(head)), head, *blobs):
                out.write(part)
                crc = crc32c.crc32c(part, crc)
                size += len(part)
            out.write(_TRAILER.pack(size, crc) + END)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return size + _TRAILER.size + len(END)


def read_header(path: Path) -> dict:
    """The header of the snapshot at `path` (`SnapshotUnusable` if there is none to read)."""
    try:
        with open(path, "rb") as f:
            start = f.read(len(MAGIC) + _U64.size)
            if len(start) < len(MAGIC) + _U64.size or not start.startswith(MAGIC):
                raise SnapshotUnusable(f"{path} is not a fluxmat snapshot (or is cut short)")
            (n,) = _U64.unpack(start[len(MAGIC) :])
            head = f.read(n)
    except OSError as exc:
        raise SnapshotUnusable(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        header = json.loads(head)
        if not isinstance(header, dict):
            raise ValueError("not an object")
    except ValueError:
        raise SnapshotUnusable(f"{path} has a damaged header (truncated or corrupted)") from None
    header["_data_offset"] = len(MAGIC) + _U64.size + n
    return header


def read(path: Path, header: dict) -> StateColumns:
    """The columns of the snapshot whose `read_header` is `header`; `SnapshotUnusable` unless intact."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotUnusable(f"cannot read {path}: {exc.strerror or exc}") from None
    tail = len(data) - _TRAILER.size - len(END)
    if tail < 0 or not data.endswith(END):
        raise SnapshotUnusable(f"{path} is truncated (no trailer; {len(data):,} bytes)")
    size, crc = _TRAILER.unpack_from(data, tail)
    if size != tail:
        raise SnapshotUnusable(f"{path} is truncated or extended ({tail:,} bytes before the trailer, "
                               f"{size:,} written)")  # fmt: skip
    if crc32c.crc32c(memoryview(data)[:tail]) != crc:
        raise SnapshotUnusable(f"{path} is corrupted (CRC-32C mismatch)")
    try:
        return _columns(memoryview(data), header)
    except (KeyError, ValueError, TypeError, pa.ArrowException) as exc:
        raise SnapshotUnusable(f"{path} cannot be decoded ({type(exc).__name__}: {exc})") from None


def _tables(cols: StateColumns):
    """(kind, key, Arrow table) of every section."""
    texts = [t.encode("utf-8") for t in cols.terms.values()]
    ids = np.fromiter(cols.terms, np.int64, len(cols.terms))
    yield "terms", None, arrow_table({"id": int_array(ids), "json": string_array(texts)})
    for pred, m in cols.explicit.items():
        yield "explicit", pred, int_table(m)
    for pred, (m, born) in cols.facts.items():
        yield "facts", pred, int_table(m, born=int_array(born))
    for rid, m in cols.log.items():
        yield "log", rid, int_table(m)


READ_POOL = pa.system_memory_pool()
# Arrays are built from and read into buffers directly: pa.array / to_numpy would import pandas (seconds).
# Public: connectors.bulk_state frames its chunks with them too.
def int_array(a: np.ndarray) -> pa.Array:
    a = np.ascontiguousarray(a)
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def string_array(texts: list[bytes]) -> pa.Array:
    offsets = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, texts), np.int64, len(texts)), out=offsets[1:])
    return pa.Array.from_buffers(
        pa.large_string(), len(texts), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(texts))]
    )


def arrow_table(columns: dict[str, pa.Array]) -> pa.Table:
    return pa.Table.from_arrays(list(columns.values()), names=list(columns))


def int_table(m: np.ndarray, **extra: pa.Array) -> pa.Table:
    """An (n, w) matrix as columns c0..c(w-1) (int32 when the ids fit), plus `extra` columns."""
    narrow = m.dtype if m.size and m.max() >= 2**31 else np.int32
    columns = {f"c{i}": int_array(m[:, i].astype(narrow)) for i in range(m.shape[1])}
    columns.update(extra)
    if not columns:  # a relation of arity 0 without stamps: only its length
        columns["n"] = pa.nulls(len(m))
    return arrow_table(columns)


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=COMPRESSION)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_ipc(data) -> pa.Table:
    """The table of one Arrow IPC stream (`ipc_bytes`), in one chunk.

    Decompressed into the system allocator's memory (`READ_POOL`): Arrow's
    default pool (mimalloc) keeps the pages of freed buffers for reuse, ~45 MB
    of a LUBM-5 restart's peak RSS that the engine's arrays could use.
    """
    return pa.ipc.open_stream(pa.py_buffer(data), memory_pool=READ_POOL).read_all().combine_chunks(READ_POOL)


def _columns(data: memoryview, header: dict) -> StateColumns:
    cols = StateColumns(dict(header["meta"]), {}, int(header["next_term"]))
    at = int(header["_data_offset"])
    for section in header["sections"]:
        n = int(section["length"])
        table = read_ipc(data[at : at + n])
        at += n
        kind, key = section["kind"], section["key"]
        if kind == "terms":
            cols.terms = dict(zip(int_column(table, "id").tolist(), text_column(table, "json"), strict=True))
        elif kind == "explicit":
            cols.explicit[key] = matrix(table)
        elif kind == "facts":
            cols.facts[key] = (matrix(table), int_column(table, "born"))
        elif kind == "log":
            cols.log[int(key)] = matrix(table)
        else:
            raise ValueError(f"unknown section kind {kind!r}")
    return cols


def int_column(table: pa.Table, name: str) -> np.ndarray:
    """An int column (one chunk, no nulls) as a numpy array over its buffer."""
    chunks = table.column(name).chunks
    if not chunks:
        return np.zeros(0, np.int64)
    (chunk,) = chunks
    values = np.frombuffer(chunk.buffers()[1], chunk.type.to_pandas_dtype())
    return values[chunk.offset : chunk.offset + len(chunk)]


def text_column(table: pa.Table, name: str) -> list[str]:
    chunks = table.column(name).chunks
    if not chunks:
        return []
    (chunk,) = chunks
    _, offsets, data = chunk.buffers()
    at = np.frombuffer(offsets, np.int64)[chunk.offset : chunk.offset + len(chunk) + 1].tolist()
    raw = data.to_pybytes()
    return [raw[a:b].decode("utf-8") for a, b in zip(at, at[1:], strict=False)]


def matrix(table: pa.Table) -> np.ndarray:
    names = [c for c in table.column_names if c[0] == "c" and c[1:].isdigit()]
    if not names:
        return np.zeros((table.num_rows, 0), np.int64)
    return np.column_stack([int_column(table, c).astype(np.int64) for c in names])


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
