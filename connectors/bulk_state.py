"""The bulk layout of a state in Redis: packed columns in bounded chunks, plus a change log compacted into them.

Used for the arrays core's state, whose changes come as integer columns of
term ids (engine.fd.change_columns): a batch's commit writes its changes as
one or a few packed values, O(changes), and a restart reads a few large
values instead of one hash field per fact. The per-field layout
(connectors.state: hashes `E`, `I`, `T`) is still read; a state in it is
rewritten in this layout by the next full export (the arrays core asks for
one after restoring from texts).

Keys, after the state's prefix (so all of them share its Redis Cluster hash tag):

    meta          the hash of connectors.state, plus `layout` = "bulk" and
                  `bulk`, the manifest (JSON): generation `gen`, `base` base
                  chunks of `base_bytes`, `log` log chunks of `log_bytes`,
                  `rows` (fact and explicit rows stored) and `next_term`
    C:<gen>:b<i>  base chunk i of the generation: the whole state when the generation began
    C:<gen>:l<i>  log chunk i: changes as absolute values (a fact's value 0:
                  gone; an explicit row's 0: not explicit), in commit order

A chunk is `MAGIC | u32 CRC-32C of the body | u64 body length | body`, the
body `u32 n | n bytes of JSON header | sections`: the header names the
chunk's generation and name and each section's kind (`terms`, `facts`,
`explicit`), relation and length; a section is one Arrow IPC stream
(connectors.snapshot_file's tables: columns `c0..` of term ids and `v` of
values; the terms as `id`, `json`), lz4-compressed. A chunk holds sections up
to about `CHUNK_BYTES`, a section at most `SECTION_ROWS` rows. A missing,
truncated, corrupted or misplaced chunk is refused with `StateDamaged`, in one line.

Exactly once: a batch's chunks, the manifest and the batch id are written in
the store's one MULTI/EXEC. When the log outgrows `COMPACT_FRACTION` of the
base (and `COMPACT_MIN_BYTES`), or holds `MAX_LOG_CHUNKS` chunks, that
transaction instead writes a new generation (base + log + the batch, merged)
and deletes the old one's keys, so the log costs at most a fraction of the
state to read. A reader takes the manifest, then the chunks it names; a chunk
that vanished meanwhile (compacted away) makes it start again from the manifest.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable

import crc32c
import numpy as np
import pyarrow as pa

from fluxmat.connectors.snapshot_file import (
    arrow_table,
    int_array,
    int_column,
    int_table,
    ipc_bytes,
    matrix,
    read_ipc,
    string_array,
    text_column,
)
from fluxmat.engine import ChangeColumns, StateChanges, StateColumns, StateDamaged

LAYOUT = "bulk"  # meta `layout` of a state in this layout
MAGIC = b"FXC1"
_HEAD = struct.Struct("<4sIQ")  # magic, CRC-32C of the body, body length
_U32 = struct.Struct("<I")
CHUNK_BYTES = 4 << 20  # a chunk is closed once it holds this many bytes of sections
SECTION_ROWS = (
    1 << 18
)  # rows of one section (a relation's rows are split into sections of at most this)
COMPACT_FRACTION = (
    0.5  # the log is merged into a new base once it outgrows this fraction of the base
)
COMPACT_MIN_BYTES = 1 << 20  # ... and this many bytes
MAX_LOG_CHUNKS = 64  # ... or holds this many chunks (a small state, e.g. a key's, reads few values)
READ_GROUP = 8  # chunks per pipelined read
READ_ATTEMPTS = 5  # reads started again when chunks vanish meanwhile (compactions)
PER_FIELD_KEYS = ("E", "I", "log", "T")  # the per-field layout's hashes (connectors.state)

Part = tuple[str, str, np.ndarray, object]  # (kind, relation, ids or term ids, values or texts)


class ChunkMissing(Exception):
    """A chunk the manifest names is not in Redis (compacted away while read): read again."""


class BulkLayout:
    """A state's chunks in Redis under `prefix` (the store's client; `decode_responses` as it likes)."""

    def __init__(self, client, prefix: str):
        self.client = client
        self.prefix = prefix

    def _k(self, name: str) -> str:
        return self.prefix + name

    # ------------------------------------------------------------ read
    def manifest(self) -> dict | None:
        """The stored manifest (None: the state is not in this layout, or there is none)."""
        raw = self.client.hget(self._k("meta"), "bulk")
        return None if raw is None else json.loads(raw)

    def read(self, meta: dict, read_meta: Callable[[], dict]) -> StateColumns:
        """The state `meta` (decoded, with its manifest) describes; `read_meta` reads it again after a compaction.

        A chunk missing while the manifest stays the same is damage (`StateDamaged`).
        """
        for _ in range(READ_ATTEMPTS):
            try:
                base, log = self._parts(meta["bulk"])
                return merge(base, log, meta, int(meta["bulk"]["next_term"]))
            except ChunkMissing as gone:
                again = read_meta()
                if again.get("bulk") == meta["bulk"]:
                    raise StateDamaged(f"the stored state is damaged: Redis key {gone} is missing; "
                                       "restore the Redis data or reset the state") from None  # fmt: skip
                meta = again
        raise StateDamaged(f"the stored state at {self.prefix}* kept changing while it was read "
                           f"({READ_ATTEMPTS} compactions); stop the job or read it again")  # fmt: skip

    def _parts(self, manifest: dict) -> tuple[list[Part], list[Part]]:
        """The base's and the log's parts, in order (`ChunkMissing` when a chunk is gone)."""
        gen = int(manifest["gen"])
        return self._chunks(gen, _names(gen, "b", manifest["base"])), self._chunks(
            gen, _names(gen, "l", manifest["log"])
        )

    def _chunks(self, gen: int, names: list[str]) -> list[Part]:
        parts: list[Part] = []
        for i in range(0, len(names), READ_GROUP):
            group = names[i : i + READ_GROUP]
            for name, raw in zip(group, self._fetch(group), strict=True):
                parts.extend(unframe(raw, gen, name, self._k(name)))
        return parts

    def _fetch(self, names: list[str]) -> list[bytes | None]:
        from redis.client import NEVER_DECODE

        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.execute_command("GET", self._k(name), **{NEVER_DECODE: []})
        return pipe.execute()

    def keys(self, manifest: dict | None) -> list[str]:
        """The chunk keys `manifest` names."""
        if not manifest:
            return []
        gen = int(manifest["gen"])
        return [
            self._k(n)
            for n in (*_names(gen, "b", manifest["base"]), *_names(gen, "l", manifest["log"]))
        ]

    # ------------------------------------------------------------ write
    def write(self, pipe, changes: StateChanges, manifest: dict | None) -> dict[str, str]:
        """Queue the writes of `changes` (columns) on the transaction `pipe`; returns the meta fields to set.

        `manifest` is the stored one (None: the state is in the per-field layout, or empty).
        """
        cols = changes.columns
        assert cols is not None
        if changes.full or manifest is None:
            return self._generation(pipe, base_parts(cols), cols.next_term, manifest)
        parts = list(change_parts(cols))
        if not parts:
            return {}
        gen, first = int(manifest["gen"]), int(manifest["log"])
        chunks = pack(parts, gen, "l", first)
        added = sum(len(data) for _n, data in chunks)
        limit = max(COMPACT_MIN_BYTES, COMPACT_FRACTION * int(manifest["base_bytes"]))
        if manifest["log_bytes"] + added > limit or first + len(chunks) > MAX_LOG_CHUNKS:
            base, log = self._parts(manifest)
            state = merge(base, [*log, *parts], {}, cols.next_term)
            return self._generation(pipe, state_parts(state), cols.next_term, manifest)
        for name, data in chunks:
            pipe.set(self._k(name), data)
        rows = sum(len(p[2]) for p in parts if p[0] != "terms")
        manifest = {**manifest, "log": first + len(chunks), "log_bytes": manifest["log_bytes"] + added,
                    "rows": manifest["rows"] + rows, "next_term": cols.next_term}  # fmt: skip
        return _fields(manifest)

    def _generation(
        self, pipe, parts: list[Part], next_term: int, old: dict | None
    ) -> dict[str, str]:
        """A new generation holding `parts` as its base; the old one's keys and the per-field hashes deleted."""
        gen = 0 if old is None else int(old["gen"]) + 1
        chunks = pack(parts, gen, "b", 0)
        pipe.delete(*self.keys(old), *(self._k(k) for k in PER_FIELD_KEYS))
        for name, data in chunks:
            pipe.set(self._k(name), data)
        rows = sum(len(p[2]) for p in parts if p[0] != "terms")
        manifest = {"gen": gen, "base": len(chunks), "base_bytes": sum(len(d) for _n, d in chunks),
                    "log": 0, "log_bytes": 0, "rows": rows, "next_term": next_term}  # fmt: skip
        return _fields(manifest)


def _fields(manifest: dict) -> dict[str, str]:
    return {"layout": json.dumps(LAYOUT), "bulk": json.dumps(manifest)}


def _names(gen: int, part: str, count: int, first: int = 0) -> list[str]:
    return [f"C:{gen}:{part}{i}" for i in range(first, first + int(count))]


# ------------------------------------------------------------ parts: what chunks hold
def base_parts(cols: ChangeColumns) -> list[Part]:
    """A full export's columns as a base: every present fact and explicit row, every term."""
    parts: list[Part] = [_terms_part(cols.terms)]
    parts += [("facts", p, t, v) for p, (t, v) in cols.facts.items() if len(t)]
    parts += [("explicit", p, t, v) for p, (t, v) in cols.explicit.items() if len(t)]
    return parts


def change_parts(cols: ChangeColumns) -> Iterable[Part]:
    """A batch's changes as log parts (nothing when it changed nothing)."""
    if cols.terms:
        yield _terms_part(cols.terms)
    for kind, table in (("facts", cols.facts), ("explicit", cols.explicit)):
        yield from ((kind, p, t, v) for p, (t, v) in table.items() if len(t))


def state_parts(state: StateColumns) -> list[Part]:
    """A merged state (`merge`) as a base again."""
    parts: list[Part] = [_terms_part(state.terms)]
    parts += [("facts", p, t, v) for p, (t, v) in state.facts.items()]
    parts += [("explicit", p, t, np.ones(len(t), np.int64)) for p, t in state.explicit.items()]
    return parts


def _terms_part(terms: dict[int, str]) -> Part:
    return "terms", "", np.fromiter(terms, np.int64, len(terms)), list(terms.values())


def merge(base: list[Part], log: list[Part], meta: dict, next_term: int) -> StateColumns:
    """The state: the base's rows, each overridden by its last log row; rows with value 0 dropped.

    A base holds each fact (and explicit row) once, so only relations the log
    touches are sorted.
    """
    out = StateColumns(meta, {}, next_term)
    tables: dict[tuple[str, str], list[list]] = {}
    for i, parts in enumerate((base, log)):
        for kind, pred, ids, values in parts:
            if kind == "terms":
                out.terms.update(zip(ids.tolist(), values, strict=True))
            else:
                tables.setdefault((kind, pred), [[], []])[i].append((ids, values))
    for (kind, pred), (old, new) in tables.items():
        tids, values = _latest(old, new)
        if not len(tids):
            continue
        if kind == "facts":
            out.facts[pred] = (tids, values)
        else:
            out.explicit[pred] = tids
    return out


def _latest(old: list, new: list) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `old` then `new` pieces, the last of each key kept, those with value 0 dropped."""
    pieces = [*old, *new]
    tids = pieces[0][0] if len(pieces) == 1 else np.concatenate([p[0] for p in pieces])
    values = pieces[0][1] if len(pieces) == 1 else np.concatenate([p[1] for p in pieces])
    if new:
        keep = last_of_each(tids)
        tids, values = tids[keep], values[keep]
    present = values != 0
    return tids[present], values[present]


def last_of_each(keys: np.ndarray) -> np.ndarray:
    """The index of the last row of each distinct row of `keys` (n, width), in key order."""
    n, width = keys.shape
    if n == 0 or width == 0:
        return np.arange(n)[-1:]
    order = np.lexsort(keys.T[::-1])  # stable: equal keys stay in their order
    ordered = keys[order]
    last = np.ones(n, bool)
    last[:-1] = (ordered[1:] != ordered[:-1]).any(axis=1)
    return order[last]


# ------------------------------------------------------------ chunks: how parts are framed
def pack(parts: list[Part], gen: int, kind: str, first: int) -> list[tuple[str, bytes]]:
    """The parts as chunks (name, bytes) named `C:<gen>:<kind><i>` from i = `first`, each about `CHUNK_BYTES`."""
    chunks: list[tuple[str, bytes]] = []
    sections: list[tuple[str, str, bytes]] = []
    size = 0
    for section in _sections(parts):
        sections.append(section)
        size += len(section[2])
        if size >= CHUNK_BYTES:
            name = f"C:{gen}:{kind}{first + len(chunks)}"
            chunks.append((name, frame(gen, name, sections)))
            sections, size = [], 0
    if sections:
        name = f"C:{gen}:{kind}{first + len(chunks)}"
        chunks.append((name, frame(gen, name, sections)))
    return chunks


def _sections(parts: list[Part]) -> Iterable[tuple[str, str, bytes]]:
    for kind, pred, ids, values in parts:
        for at in range(0, max(len(ids), 1), SECTION_ROWS):
            piece = slice(at, at + SECTION_ROWS)
            yield kind, pred, ipc_bytes(_table(kind, ids[piece], values[piece]))


def _table(kind: str, ids: np.ndarray, values) -> pa.Table:
    if kind == "terms":
        return arrow_table(
            {"id": int_array(ids), "json": string_array([t.encode("utf-8") for t in values])}
        )
    narrow = values if values.size and values.max() >= 2**31 else values.astype(np.int32)
    return int_table(ids, v=int_array(narrow))


def frame(gen: int, name: str, sections: list[tuple[str, str, bytes]]) -> bytes:
    """One chunk: the magic, the body's CRC-32C and length, the body (header JSON and sections)."""
    header = json.dumps(
        {"gen": gen, "name": name, "sections": [[k, p, len(b)] for k, p, b in sections]}
    )
    head = header.encode("utf-8")
    body = b"".join([_U32.pack(len(head)), head, *(b for _k, _p, b in sections)])
    return _HEAD.pack(MAGIC, crc32c.crc32c(body), len(body)) + body


def unframe(raw: bytes | None, gen: int, name: str, key: str) -> list[Part]:
    """The parts of chunk `name` of generation `gen` stored at `key` (`StateDamaged` unless intact)."""
    if raw is None:
        raise ChunkMissing(key)
    why = _damage(raw, gen, name)
    if why is None:
        try:
            return _parts_of(memoryview(raw))
        except (KeyError, ValueError, TypeError, IndexError, pa.ArrowException) as exc:
            why = f"cannot be decoded ({type(exc).__name__}: {exc})"
    raise StateDamaged(
        f"the stored state is damaged: Redis key {key} {why}; restore the Redis data or reset the state"
    )


def _damage(raw: bytes, gen: int, name: str) -> str | None:
    """Why `raw` is not chunk `name` of `gen` (None: it is)."""
    if len(raw) < _HEAD.size or raw[:4] != MAGIC:
        return f"is not a fluxmat state chunk ({len(raw):,} bytes)"
    _magic, crc, size = _HEAD.unpack_from(raw)
    if len(raw) - _HEAD.size != size:
        return (
            f"is truncated or extended ({len(raw) - _HEAD.size:,} bytes of body, {size:,} written)"
        )
    body = memoryview(raw)[_HEAD.size :]
    if crc32c.crc32c(body) != crc:
        return "is corrupted (CRC-32C mismatch)"
    (n,) = _U32.unpack_from(body)
    try:
        header = json.loads(bytes(body[4 : 4 + n]))
    except ValueError:
        return "has a damaged header"
    if not isinstance(header, dict):
        return "has a damaged header"
    if header.get("gen") != gen or header.get("name") != name:
        return f"holds chunk {header.get('name')} of generation {header.get('gen')}, not {name} of {gen}"
    return None


def _parts_of(raw: memoryview) -> list[Part]:
    body = raw[_HEAD.size :]
    (n,) = _U32.unpack_from(body)
    header = json.loads(bytes(body[4 : 4 + n]))
    at, parts = 4 + n, []
    for kind, pred, length in header["sections"]:
        table = read_ipc(body[at : at + length])
        at += length
        if kind == "terms":
            parts.append(
                (kind, pred, int_column(table, "id").astype(np.int64), text_column(table, "json"))
            )
        elif kind in ("facts", "explicit"):
            parts.append((kind, pred, matrix(table), int_column(table, "v").astype(np.int64)))
        else:
            raise ValueError(f"unknown section kind {kind!r}")
    if at != len(body):
        raise ValueError(f"{len(body) - at} bytes after the last section")
    return parts
