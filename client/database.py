"""Deltas kept in a database: SQLite (standard library) or PostgreSQL (psycopg 3).

Layout (created on first use):

* one table per predicate and arity, named after the predicate's local name
  (`edge_2`, `takesCourse_2`; a hash is appended when two predicates would
  share a name), listed in `fluxmat_predicates (predicate, arity, table_name)`.
  Its columns: `fluxmat_key` (the stream key; '' without `--partition-by`),
  `fact` (the arguments as canonical JSON, the row's identity), then for each
  argument position i = 1..arity: `a<i>` (the value as text: the integer's
  digits, the string, the IRI without brackets, the literal's lexical form),
  `a<i>_type` (`integer`, `string`, `iri`, or the literal's datatype IRI),
  `a<i>_lang` (a literal's language tag, else NULL) and `a<i>_int` (the
  integer when it fits 64 bits, else NULL);
* `fluxmat_progress (topic, key, batch, through)`: the last applied batch of
  each key and its `through` (JSON text);
* `fluxmat_offsets (topic, partition, next_offset)`: where the follower reads
  again after a restart;
* with `audit=True` (`fluxmat follow --audit`), `fluxmat_changes (topic, key,
  batch, seq, added, predicate, fact, cause)`: one row per fact each applied
  batch removed (first) or added, `seq` its place in the batch, `added` 1 or 0,
  `fact` as in the predicate tables, `cause` the id of the update that changed
  it as JSON text (NULL: several updates, a key's first batch, or a version-1
  delta).

Each batch is applied in one transaction together with its progress and
offsets rows (and its audit rows), so the database never holds half a batch and a restarted
follower continues exactly after the last committed one. Large additions to a
table (a key's first snapshot) go in bulk: COPY on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

from fluxmat.client.fold import Batch
from fluxmat.client.view import Progress, changes
from fluxmat.client.wire import Iri, Literal, fact_key, literal

__all__ = ["SqlStore", "open_store"]

COPY_ROWS = 500  # added rows of one table from which PostgreSQL gets them by COPY
_INT64 = (-(2**63), 2**63 - 1)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS fluxmat_predicates (predicate TEXT NOT NULL, arity INTEGER NOT NULL, "
    "table_name TEXT NOT NULL UNIQUE, PRIMARY KEY (predicate, arity))",
    "CREATE TABLE IF NOT EXISTS fluxmat_progress (topic TEXT NOT NULL, key TEXT NOT NULL, "
    "batch BIGINT NOT NULL, through TEXT, PRIMARY KEY (topic, key))",
    "CREATE TABLE IF NOT EXISTS fluxmat_offsets (topic TEXT NOT NULL, partition INTEGER NOT NULL, "
    "next_offset BIGINT NOT NULL, PRIMARY KEY (topic, partition))",
)
_AUDIT = ("CREATE TABLE IF NOT EXISTS fluxmat_changes (topic TEXT NOT NULL, key TEXT NOT NULL, "
          "batch BIGINT NOT NULL, seq INTEGER NOT NULL, added INTEGER NOT NULL, predicate TEXT NOT NULL, "
          "fact TEXT NOT NULL, cause TEXT, PRIMARY KEY (topic, key, batch, seq))")  # fmt: skip
_AUDIT_COLUMNS = ["topic", "key", "batch", "seq", "added", "predicate", "fact", "cause"]


def _columns(value) -> tuple:
    """(text, type, lang, int) of one argument."""
    t = type(value)
    if t is int:
        return str(value), "integer", None, value if _INT64[0] <= value <= _INT64[1] else None
    if t is Iri:
        return value.value, "iri", None, None
    if t is Literal:
        return value.lexical, value.datatype, value.lang or None, None
    return value, "string", None, None


def _value(text: str, kind: str, lang: str | None):
    if kind == "integer":
        return int(text)
    if kind == "string":
        return text
    if kind == "iri":
        return Iri(text)
    return literal(text, kind, lang or "")


def _row(key: str, fact: tuple) -> tuple:
    return (key, fact_key(fact), *(c for v in fact[1:] for c in _columns(v)))


class SqlStore:
    """A follower's store in a database (see the module docstring); one follower per database.

    Args:
        conn: an open DB-API connection (sqlite3, or psycopg 3 without autocommit).
        dialect: `sqlite` or `postgresql`.
        audit: also keep every applied change with its cause in `fluxmat_changes`.
    """

    def __init__(self, conn, dialect: str, audit: bool = False) -> None:
        self.conn = conn
        self.dialect = dialect
        self.audit = audit
        self.tables: dict[tuple[str, int], str] = {}

    # ---------------------------------------------------------------- SQL helpers
    def _sql(self, text: str) -> str:
        return text if self.dialect == "sqlite" else text.replace("?", "%s")

    def _begin(self):
        if self.dialect == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")
        return self.conn.cursor()

    def load(self, topic: str) -> Progress:
        """Create the layout if needed; the progress saved for `topic`."""
        cur = self._begin()
        for statement in _SCHEMA + ((_AUDIT,) if self.audit else ()):
            cur.execute(statement)
        cur.execute("SELECT predicate, arity, table_name FROM fluxmat_predicates")
        self.tables = {(p, a): t for p, a, t in cur.fetchall()}
        progress = Progress()
        cur.execute(self._sql("SELECT key, batch, through FROM fluxmat_progress WHERE topic = ?"), (topic,))
        for key, batch, through in cur.fetchall():
            k = None if key == "" else key
            progress.batches[k] = batch
            progress.through[k] = json.loads(through)
        cur.execute(self._sql("SELECT partition, next_offset FROM fluxmat_offsets WHERE topic = ?"), (topic,))
        progress.offsets = dict(cur.fetchall())
        self.conn.commit()
        return progress

    def _table(self, cur, pred: str, arity: int) -> str:
        name = self.tables.get((pred, arity))
        if name is not None:
            return name
        local = re.sub(r"[^A-Za-z0-9]+", "_", re.split(r"[#/:]", pred.rstrip("/#"))[-1])[:40].strip("_")
        name = f"{local or 'p'}_{arity}"
        if name in self.tables.values() or name.startswith("fluxmat_"):
            name = f"{name}_{hashlib.sha256(f'{pred}/{arity}'.encode()).hexdigest()[:8]}"
        cols = "".join(f', a{i} TEXT NOT NULL, a{i}_type TEXT NOT NULL, a{i}_lang TEXT, a{i}_int BIGINT'
                       for i in range(1, arity + 1))  # fmt: skip
        cur.execute(f'CREATE TABLE "{name}" (fluxmat_key TEXT NOT NULL, fact TEXT NOT NULL{cols}, '
                    "PRIMARY KEY (fluxmat_key, fact))")
        cur.execute(self._sql("INSERT INTO fluxmat_predicates (predicate, arity, table_name) VALUES (?, ?, ?)"),
                    (pred, arity, name))
        self.tables[(pred, arity)] = name
        return name

    # ---------------------------------------------------------------- applying
    def apply(self, batch: Batch, topic: str, offsets: dict[int, int]) -> None:
        """Apply one complete batch with its progress and offsets, in one transaction."""
        key = "" if batch.key is None else batch.key
        known = dict(self.tables)
        try:
            cur = self._begin()
            for (pred, arity), facts in _by_table(batch.removed).items():
                name = self._table(cur, pred, arity)
                cur.executemany(self._sql(f'DELETE FROM "{name}" WHERE fluxmat_key = ? AND fact = ?'),
                                [(key, fact_key(f)) for f in facts])
            for (pred, arity), facts in _by_table(batch.added).items():
                self._insert(cur, self._table(cur, pred, arity), arity, [_row(key, f) for f in facts])
            if self.audit:
                self._copy(cur, "fluxmat_changes", _AUDIT_COLUMNS, _audit_rows(topic, key, batch))
            cur.execute(self._sql("INSERT INTO fluxmat_progress (topic, key, batch, through) VALUES (?, ?, ?, ?) "
                                  "ON CONFLICT (topic, key) DO UPDATE SET batch = excluded.batch, "
                                  "through = excluded.through"),
                        (topic, key, batch.batch, json.dumps(batch.through, ensure_ascii=False)))
            cur.executemany(self._sql("INSERT INTO fluxmat_offsets (topic, partition, next_offset) VALUES (?, ?, ?) "
                                      "ON CONFLICT (topic, partition) DO UPDATE SET "
                                      "next_offset = excluded.next_offset"),
                            [(topic, p, o) for p, o in sorted(offsets.items())])
            self.conn.commit()
        except BaseException:
            self.conn.rollback()
            self.tables = known  # tables created in the rolled-back transaction are gone
            raise

    def _insert(self, cur, name: str, arity: int, rows: list[tuple]) -> None:
        cols = ["fluxmat_key", "fact"] + [f"a{i}{s}" for i in range(1, arity + 1)
                                          for s in ("", "_type", "_lang", "_int")]  # fmt: skip
        self._copy(cur, name, cols, rows)

    def _copy(self, cur, name: str, cols: list[str], rows: list[tuple]) -> None:
        """Insert rows: by COPY on PostgreSQL from COPY_ROWS rows, else one prepared insert."""
        if self.dialect == "postgresql" and len(rows) >= COPY_ROWS:
            with cur.copy(f'COPY "{name}" ({", ".join(cols)}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)
            return
        marks = ", ".join("?" * len(cols))
        cur.executemany(self._sql(f'INSERT INTO "{name}" ({", ".join(cols)}) VALUES ({marks})'), rows)

    # ---------------------------------------------------------------- reading
    def facts(self, key: str | None = None) -> set[tuple]:
        """Every fact of `key`'s view, read back from the tables."""
        out = set()
        cur = self.conn.cursor()
        for (pred, arity), name in sorted(self._stored_tables(cur).items()):
            cols = ", ".join(f"a{i}, a{i}_type, a{i}_lang" for i in range(1, arity + 1)) or "fact"
            cur.execute(self._sql(f'SELECT {cols} FROM "{name}" WHERE fluxmat_key = ?'),
                        ("" if key is None else key,))
            for row in cur.fetchall():
                out.add((pred, *(_value(*row[i:i + 3]) for i in range(0, 3 * arity, 3))))
        self.conn.rollback()
        return out

    def _stored_tables(self, cur) -> dict[tuple[str, int], str]:
        """The predicate tables the database holds now (none before the first `load`), whoever made them."""
        exists = ("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'fluxmat_predicates'"
                  if self.dialect == "sqlite" else "SELECT count(*) FROM pg_tables WHERE tablename = 'fluxmat_predicates'")
        cur.execute(exists)
        if not cur.fetchone()[0]:
            return {}
        cur.execute("SELECT predicate, arity, table_name FROM fluxmat_predicates")
        return {(p, a): t for p, a, t in cur.fetchall()}

    def close(self) -> None:
        self.conn.close()


def _audit_rows(topic: str, key: str, batch: Batch) -> list[tuple]:
    """The `fluxmat_changes` rows of a batch (see the module docstring)."""
    return [(topic, key, batch.batch, seq, int(c.added), c.fact[0], fact_key(c.fact),
             None if c.cause is None else json.dumps(c.cause, ensure_ascii=False))
            for seq, c in enumerate(changes(batch))]  # fmt: skip


def _by_table(facts: list[tuple]) -> dict[tuple[str, int], list[tuple]]:
    out: dict[tuple[str, int], list[tuple]] = {}
    for fact in facts:
        out.setdefault((fact[0], len(fact) - 1), []).append(fact)
    return out


def open_store(url: str, audit: bool = False) -> SqlStore:
    """A store for `sqlite:///relative.db`, `sqlite:////absolute.db` or `postgresql://...`.

    With `audit`, every applied change is also kept with its cause (`fluxmat_changes`).

    Raises:
        ValueError: an unknown scheme, or PostgreSQL without psycopg installed.
    """
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):])
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")  # a commit survives a crash of the process
        return SqlStore(conn, "sqlite", audit)
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg
        except ImportError:
            raise ValueError("PostgreSQL needs psycopg: pip install 'fluxmat[postgres]'") from None
        return SqlStore(psycopg.connect(url), "postgresql", audit)
    raise ValueError(f"unknown database URL {url!r} (expected sqlite:///FILE or postgresql://...)")
