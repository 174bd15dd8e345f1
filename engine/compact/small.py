"""Small updates of the arrays core in one compiled call; larger ones set-at-a-time.

`SmallPath.update` is the arrays core's update (engine.compact.maintainer
calls it): an update with at most `THRESHOLD` explicit changes runs as one
call of the compiled interpreter (engine.compact.small_run.cascade), which
does the whole cascade fact-at-a-time; a larger one takes the set-at-a-time
path (engine.compact.core), whose numba calls cost more to dispatch than to
run when an update is small. Both leave the same state and report the same
rows. The threshold was measured on LUBM-1 (docs/performance/compact-core-hybrid.md).

Compiling the interpreter costs a minute or two of CPU when numba's cache is empty,
so it is compiled only when a small update (not a load) first needs it, in a
separate process that writes numba's on-disk cache (`Compiler`); until that
is done every update takes the set-at-a-time path, and afterwards the
interpreter loads from the cache in about a second. The compile goes on after
the process that started it ends, so the next process finds it cached. `prepare(wait=True)` compiles (or
loads) it in this process instead (warm-up, tests).

`Store` is the interpreter's view of the relations (engine.compact.small_rel):
four typed lists of flat views of the `Rel` objects' own buffers, no copy; what a call changed
(row counts, grown buffers) is handed back after it (`sync_back`), and the
store re-reads the relations after a set-at-a-time update (`refresh`).
Limits on work are checked after the call (a small update runs to its end).
"""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
from numba import njit
from numba.typed import List

from fluxmat.engine.compact.plans import has_builtins
from fluxmat.engine.compact.recompute import large_reach, reaches_large
from fluxmat.engine.compact.small_program import encode
from fluxmat.engine.compact.small_rel import GROWN, GROWN_KINDS, I32, LISTS, SEEN, SEEN_GROWN
from fluxmat.engine.compact.small_run import cascade

# explicit changes up to which an update runs in one call (measured: see the module docstring)
THRESHOLD = 256
NOT_CACHED = 3  # the compile process's exit status when numba's cache could not be written
log = logging.getLogger("fluxmat.small_updates")


# Typed lists are built and changed only through these cached functions: done from Python, every
# typed-list operation compiles numba's list methods afresh in each process (~5 s CPU at start).
@njit(cache=True)
def _new_list(first):
    out = List()
    out.append(first)
    return out


@njit(cache=True)
def _append(lst, a):
    lst.append(a)


@njit(cache=True)
def _set(lst, i, a):
    lst[i] = a


@njit(cache=True)
def _get(lst, i):
    return lst[i]


class Store:
    """The relations as the interpreter reads them: flat views of the `Rel` objects' own buffers.

    Four typed lists, one per element type (engine.compact.small_rel.LISTS
    says which array sits where), and int64 arrays per relation. `held`
    remembers which array of a `Rel` each list entry is a view of, so that
    `refresh` replaces exactly the entries whose arrays the set-at-a-time
    path replaced.
    """

    def __init__(self, rels: list) -> None:
        self.rels = rels
        self.held: dict[tuple[str, int], np.ndarray] = {}
        lists = []
        for names in LISTS.values():
            views = [self._view(name, i) for name in names for i in range(len(rels))]
            lst = _new_list(views[0])
            for v in views[1:]:
                _append(lst, v)
            lists.append(lst)
        r = len(rels)
        self.ns, self.caps, self.maxids, self.nstamps, self.dirty, self.arity, self.nidx = (
            np.zeros(r, np.int64) for _ in range(7))  # fmt: skip
        self.lists = lists
        self.st = (*lists, self.ns, self.caps, self.maxids, self.nstamps, self.dirty, self.arity,
                   self.nidx)  # fmt: skip
        self._counts()

    def _view(self, name: str, i: int) -> np.ndarray:
        """Relation i's array `name`, flat (a view: the interpreter writes into the `Rel`'s buffer)."""
        a = getattr(self.rels[i], name)
        if not a.flags.c_contiguous:
            raise ValueError(f"{self.rels[i].pred}.{name} is not contiguous")
        self.held[(name, i)] = a
        return a.reshape(-1)

    def _counts(self) -> None:
        for i, rel in enumerate(self.rels):
            self.ns[i], self.caps[i], self.maxids[i] = rel.n, rel.cap, rel.maxid
            self.nstamps[i], self.arity[i], self.nidx[i] = rel.node_stamp, rel.arity, len(rel.imask)

    def refresh(self) -> None:
        """Re-read the relations after the set-at-a-time path changed them (and replaced arrays)."""
        r = len(self.rels)
        for lst, names in zip(self.lists, LISTS.values(), strict=True):
            for kind, name in enumerate(names):
                for i, rel in enumerate(self.rels):
                    if getattr(rel, name) is not self.held[(name, i)]:
                        _set(lst, kind * r + i, self._view(name, i))
        self._counts()

    def sync_back(self) -> None:
        """Hand what the call changed (row counts, grown buffers) back to the `Rel` objects."""
        r = len(self.rels)
        for i in np.flatnonzero(self.dirty).tolist():
            rel, flags = self.rels[i], int(self.dirty[i])
            rel.n, rel.maxid = int(self.ns[i]), int(self.maxids[i])
            rel.node_stamp = int(self.nstamps[i])
            if flags & GROWN:
                rel.cap = int(self.caps[i])
                for lst, kind in GROWN_KINDS:
                    self._take(rel, i, LISTS[lst][kind], _get(self.lists[lst], kind * r + i))
            if flags & SEEN_GROWN:
                self._take(rel, i, "seen", _get(self.lists[I32], SEEN * r + i))
        self.dirty[:] = 0

    def _take(self, rel, i: int, name: str, flat: np.ndarray) -> None:
        """The interpreter's new array `name` of relation i, in the `Rel`'s own shape."""
        a = flat
        if name == "cols":
            a = flat.reshape(rel.cap, rel.arity)
        elif name in ("islots", "inext"):
            a = flat.reshape(max(len(rel.masks), 1), -1)
        setattr(rel, name, a)
        self.held[(name, i)] = a


class Compiler:
    """Whether the interpreter can run in this process: compiled in a separate process on first need."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.state = "cold"  # cold -> compiling -> ready | failed

    def ready(self, start: bool = True) -> bool:
        """True once the interpreter is compiled; the first call (with `start`) starts compiling it."""
        if self.state == "cold" and start:
            cmd = [sys.executable, "-m", "fluxmat.engine.compact.small_warm"]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.state = "compiling"
        elif self.state == "compiling" and self.proc is not None and self.proc.poll() is not None:
            self.state = "ready" if self.proc.returncode == 0 else "failed"
            if self.state == "failed":
                why = "numba's cache could not be written" if self.proc.returncode == NOT_CACHED else (
                    f"the compile process exited with status {self.proc.returncode}")  # fmt: skip
                log.warning("small-update interpreter not available (%s): small updates run "
                            "set-at-a-time in this process", why)  # fmt: skip
        return self.state == "ready"

    def prepare(self) -> None:
        """Compile (or load from numba's cache) the interpreter in this process, now.

        A compile already under way in the background is waited for first (it fills the cache).
        """
        if self.state == "compiling" and self.proc is not None:
            self.proc.wait()
        warm()
        self.state = "ready"


WARM_PROGRAM = """
c(X, Y) :- e(X, Y).
c(X, Z) :- c(X, Y), e(Y, Z).
s(X, Y) :- e(X, Y).
s(X, Y) :- s(Y, X).
s(X, Z) :- s(X, Y), s(Y, Z).
d(X) :- c(X, X), e(X, 1).
g(X) :- e(X, Y), not c(Y, X).
"""


def warm() -> None:
    """Every part of the interpreter once, on a tiny program, every update in one call.

    Counting, a negated atom, a recursive component (DRed^c), a
    symmetric-transitive closure, relations grown inside the call. The
    interpreter's argument types do not depend on the program, so this
    compiles exactly what every later program calls.
    """
    from fluxmat.engine.analysis import analyse
    from fluxmat.engine.compact.core import ArraysCore
    from fluxmat.engine.compact.plans import compile_program
    from fluxmat.engine.parser import parse_program
    from fluxmat.engine.storage import Dictionary

    analysis = analyse(parse_program(WARM_PROGRAM, "<warm>"))
    comps, plans, masks = compile_program(analysis, Dictionary().intern, True)
    core = ArraysCore(comps, plans, masks, dict(analysis.arity), lambda r, n: None, lambda: None)
    path = SmallPath(core, threshold=10**9)
    e = np.array([[i, (i + 1) % 24] for i in range(24)], np.int64)
    path.one_call({"e": e}, {})
    path.one_call({"e": np.array([[30, 30]], np.int64)}, {"e": e[:2]})


COMPILER = Compiler()  # one per process, as numba's compiled code is


def prepare(wait: bool = True) -> None:
    """Make the small-update path available: now, in this process (`wait`), or in the background."""
    if wait:
        COMPILER.prepare()
    else:
        COMPILER.ready()


class SmallPath:
    """An ArraysCore's updates: small ones in one compiled call, larger ones set-at-a-time."""

    def __init__(self, core=None, threshold: int = THRESHOLD) -> None:
        self.threshold = threshold
        self.taken = {"one call": 0, "set": 0}  # updates per path
        self.attach(core)

    def attach(self, core) -> None:
        """Serve `core` (an ArraysCore; a new one after each load) from now on."""
        self.core = core
        self.shape = (-1, -1)  # (relations, components) the program was encoded for
        self.store: Store | None = None
        self.entry = None  # the compiled cascade for these argument types (see `_call`)
        self.gate: tuple = (None, -1, False, {})  # (core, components, has built-ins, large_reach)

    def small(self, add: dict, delete: dict) -> bool:
        """Whether the compiled call serves this update.

        A core without relations has nothing to call on; the interpreter has no
        built-ins (comparisons, arithmetic: engine.compact.builtins), so a
        program with them takes the set path, and it has no recomputing
        fallback for DRed^c, so a deletion that reaches a large recursive
        component takes the set path too. It runs DRed^c, never
        Backward/Forward: with `bf` (engine.compact.bf) every deletion takes the set path.
        """
        n = sum(map(len, add.values())) + sum(map(len, delete.values()))
        core = self.core
        if self.gate[:2] != (core, len(core.comps)):  # once per program (attach, or a new relation)
            self.gate = (core, len(core.comps), has_builtins(core.comps), large_reach(core.comps))
        if n > self.threshold or not core.rels or self.gate[2]:
            return False
        if delete and core.backward_forward:
            return False
        return not (delete and reaches_large(core, delete, self.gate[3]))  # engine.compact.recompute

    def update(self, add: dict, delete: dict, start: bool = True) -> dict[str, np.ndarray]:
        """Apply explicit adds and deletes (ArraysCore.update): the rows that flipped, per predicate.

        `start`: a small update may start compiling the interpreter (a load does not).
        """
        # a program change in progress (engine.compact.program) runs set-at-a-time
        if self.core.change is None and self.small(add, delete) and COMPILER.ready(start):
            self.taken["one call"] += 1
            return self.one_call(add, delete)
        self.taken["set"] += 1
        flipped = self.core.update(add, delete)
        if self.store is not None:
            self.store.refresh()
        return flipped

    def _encoded(self) -> None:
        """Encode the program (again, when the core gained relations) and build the store."""
        core = self.core
        shape = (len(core.rels), len(core.comps))
        if shape != self.shape:
            self.program, self.rules = encode(core)
            self.names = list(core.rels)
            self.ids = {p: i for i, p in enumerate(self.names)}
            self.store = Store(list(core.rels.values()))
            self.shape = shape

    def one_call(self, add: dict, delete: dict) -> dict[str, np.ndarray]:
        """This update in one call of the interpreter (compiled now if it is not yet)."""
        self._encoded()
        core = self.core
        core.epoch += 1
        args = (self.store.st, self.program, *self._pack(add, delete), core.epoch)
        frows, fstart, flen, work = self._call(args)
        self.store.sync_back()
        for pl in np.flatnonzero(work).tolist():
            core.on_work(self.rules[pl], int(work[pl]))
        core.after_component()
        return {self.names[i]: frows[fstart[i] : fstart[i] + flen[i]]
                for i in np.flatnonzero(flen).tolist()}  # fmt: skip

    def _call(self, args: tuple):
        """`cascade(*args)`, after the first call through its compiled entry point directly.

        The dispatcher types every argument on every call, and typing the
        store's typed lists takes it ~200 us (the Python fallback of `typeof`);
        the argument types never change, so the overload is looked up once.
        """
        if self.entry is None:
            out = cascade(*args)
            if not hasattr(cascade, "overloads"):  # NUMBA_DISABLE_JIT=1: plain Python (debugging)
                return out
            sig = tuple(cascade.typeof_pyval(a) for a in args)
            self.entry = cascade.overloads[sig].entry_point
            return out
        return self.entry(*args)

    def _pack(self, add: dict, delete: dict) -> tuple:
        """The explicit changes as (xrel, xsign, xoff, xvals), deletions first.

        `xrel` is each changed fact's relation, `xsign` -1 (delete) or +1 (add),
        `xoff` where each fact's values start in `xvals` (plus the end). All
        four are views of one array (one numpy call: an update is a few facts).
        """
        rel, sign, off, vals = [], [], [0], []
        for s, facts in ((-1, delete), (1, add)):
            for p, keys in facts.items():
                n = len(keys)
                if n:
                    a, end = self.core.rels[p].arity, off[-1]
                    rel += [self.ids[p]] * n
                    sign += [s] * n
                    off += [end + a * j for j in range(1, n + 1)]  # arity 0: all `end`
                    vals += np.ravel(keys).tolist()
        m = len(rel)
        flat = np.array(rel + sign + off + vals, np.int64)
        return flat[:m], flat[m : 2 * m], flat[2 * m : 3 * m + 1], flat[3 * m + 1 :]
