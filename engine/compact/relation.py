"""One relation of the arrays core: columns, counters and hash tables in numpy arrays.

Not here: rules, plans, maintenance (engine.compact.core).
"""

from __future__ import annotations

import numpy as np

from fluxmat.engine.compact import kernels as K

# An insert of at least max(DEFER_MIN, rows // 2) keys into a deferring relation stops maintaining its
# indexes until they are next needed (`flush`): one pass over all rows then costs less than maintaining
# them key by key and rebuilding them at every growth.
DEFER_MIN = 1024


def _pow2(n: int) -> int:
    return 1 << max(4, (n - 1).bit_length())


def _imask(masks: list[tuple[int, ...]], arity: int) -> np.ndarray:
    """Per index, which columns it keys on."""
    return np.array([[j in m for j in range(arity)] for m in masks], np.bool_).reshape(
        len(masks), arity
    )


class Rel:
    """Rows of int64 term ids with per-row state; see engine.compact.kernels for the tables."""

    def __init__(self, pred: str, arity: int, masks: list[tuple[int, ...]]):
        self.pred, self.arity = pred, arity
        self.masks = list(masks)
        self.full = np.ones(arity, np.bool_)
        self.imask = _imask(self.masks, arity)
        self.n = 0
        self.defer = False  # whether a large insert may leave the indexes stale (`insert`, `flush`)
        self.stale = False  # the indexes are not maintained: `flush` before reading them
        self._alloc(16)
        self.maxid = 0  # 1 + the largest term id in cols
        self.seen = np.zeros(0, np.int32)  # per term id, for searches over nodes (closure modules)
        self.node_stamp = 0

    def ensure_nodes(self, n: int) -> None:
        if len(self.seen) < n:
            grown = np.zeros(max(n, 2 * len(self.seen)), np.int32)
            grown[: len(self.seen)] = self.seen
            self.seen = grown

    def index_of(self, mask: tuple[int, ...]) -> int:
        return self.masks.index(mask) if mask in self.masks else -1

    def _alloc(self, cap: int) -> None:
        old = self.__dict__.get("cols")
        n = self.n
        self.cap = cap
        grown = {}
        for name, dt, fill in (("cols", np.int64, 0), ("cnt", np.int32, 0), ("alive", np.uint8, 0),
                               ("flip", np.int32, 0), ("stamp", np.int32, 0), ("dmark", np.int32, 0),
                               ("expl", np.uint8, 0), ("base", np.uint8, 0)):  # fmt: skip
            shape = (cap, self.arity) if name == "cols" else (cap,)
            a = np.full(shape, fill, dt)
            if old is not None:
                a[:n] = getattr(self, name)[:n]
            grown[name] = a
        self.__dict__.update(grown)
        k = len(self.masks)
        tcap = _pow2(2 * cap)
        self.slots = np.full(tcap, -1, np.int32)
        shapes = ((max(k, 1), tcap if k else 1), (max(k, 1), cap if k else 1))
        if self.stale:  # `flush` fills them
            self.islots, self.inext = (np.empty(shape, np.int32) for shape in shapes)
        else:
            self.islots, self.inext = (np.full(shape, -1, np.int32) for shape in shapes)
        if n and K.fill_distinct(self.cols, n, self.slots, self.full) >= 0:
            raise ValueError(f"relation {self.pred} holds a fact twice")
        if n and not self.stale:
            K.fill_indexes(self.cols, n, self.islots[:k], self.inext[:k], self.imask)

    def flush(self) -> None:
        """Make stale indexes current again (one pass over the rows); nothing when they are current."""
        if self.stale:
            self.stale = False
            k = len(self.masks)
            self.islots.fill(-1)
            K.fill_indexes(self.cols, self.n, self.islots[:k], self.inext[:k], self.imask)

    def add_masks(self, masks: list[tuple[int, ...]]) -> None:
        """Index these column sets too (a program change's new plans probe them); the tables are rebuilt."""
        new = [m for m in dict.fromkeys(masks) if m not in self.masks]
        if new:
            self.masks += new
            self.imask = _imask(self.masks, self.arity)
            self._alloc(self.cap)

    def ensure(self, m: int) -> None:
        if self.n + m > self.cap:
            self._alloc(max(2 * self.cap, self.n + m))

    def insert(self, keys: np.ndarray) -> np.ndarray:
        """Each key's row, new rows for new keys (dead, counter 0)."""
        k = self._room_for(keys)
        rows, self.n = K.lookup_or_insert(keys, self.cols, self.n, self.slots, self.islots[:k], self.inext[:k],
                                          self.imask, self.full)  # fmt: skip
        return rows

    def add_new(self, keys: np.ndarray) -> np.ndarray:
        """New rows (dead, counter 0) for distinct keys that no row holds: the caller knows, nothing is looked up."""
        k, n = self._room_for(keys), self.n
        self.n = K.append_new(keys, self.cols, n, self.slots, self.islots[:k], self.inext[:k], self.imask,
                              self.full)  # fmt: skip
        return np.arange(n, self.n, dtype=np.int64)

    def _room_for(self, keys: np.ndarray) -> int:
        """Room and `maxid` for inserting `keys`; how many indexes to maintain (0 once a large insert defers them)."""
        if self.defer and self.masks and len(keys) >= max(DEFER_MIN, self.n // 2, 1):
            self.stale = True
        self.ensure(len(keys))
        if len(keys) and keys.size:
            self.maxid = max(self.maxid, int(keys.max()) + 1)
        return 0 if self.stale else len(self.masks)

    def load_rows(self, keys: np.ndarray) -> np.ndarray:
        """Append distinct keys none of which is here yet (a restore); their rows.

        The tables are filled in one pass over all rows; a repeated key raises `ValueError`.
        """
        m = len(keys)
        self.ensure(m)
        self.cols[self.n : self.n + m] = keys
        if m and keys.size:
            self.maxid = max(self.maxid, int(keys.max()) + 1)
        rows = np.arange(self.n, self.n + m, dtype=np.int64)
        self.n += m
        self.slots.fill(-1)
        if K.fill_distinct(self.cols, self.n, self.slots, self.full) >= 0:
            self.n -= m
            self._alloc(self.cap)
            raise ValueError(f"relation {self.pred} is given a fact twice")
        self.islots.fill(-1)
        k = len(self.masks)
        K.fill_indexes(self.cols, self.n, self.islots[:k], self.inext[:k], self.imask)
        return rows

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if not len(keys):
            return np.empty(0, np.int64)
        return K.lookup(keys, self.cols, self.slots, self.full)

    def count(self, rows: np.ndarray, w: np.ndarray, epoch: int) -> np.ndarray:
        """Add `w` to the rows' counters; the rows touched for the first time this epoch."""
        touched = np.empty(len(rows), np.int64)
        t = K.add_counts(rows, w, self.cnt, touched, self.stamp, epoch)
        return touched[:t]

    def present(self) -> np.ndarray:
        """The present rows' columns."""
        return self.cols[: self.n][self.alive[: self.n] != 0]

    def explicit(self) -> np.ndarray:
        """The explicit rows' columns."""
        return self.cols[: self.n][self.expl[: self.n] != 0]

    def size(self) -> int:
        """How many rows are present."""
        return int(np.count_nonzero(self.alive[: self.n]))

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.cols, self.cnt, self.alive, self.flip, self.stamp, self.dmark,
                                      self.expl, self.base, self.seen, self.slots, self.islots, self.inext,
                                      self.imask))  # fmt: skip
