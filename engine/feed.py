"""The fully dynamic driver: updates in, work between them, a consistency point out.

Written once for every caller (`fluxmat replay`, the streaming job's batches):
each update is validated and submitted, then the engine does `budget` units of
work before the next one arrives (`overlap`), or works until quiescent
(sequential: each update alone); after the last update it works until quiescent
(a barrier, before that update's `after_each`), so the caller can `poll` a consistency point equal to mat(P, E).

A caller names each update with a `key` of its own (a file:line, a row of a
batch). An update that fails validation goes to `rejected(key, error)` when the
caller gives one (it stops only itself), else its error is raised, prefixed
with the key. A limit that runs out (engine.limits) is raised as
`LimitExceeded` with `.key` set to the key of the update it was charged to
(None when it was charged to no update of this feed).

Not here: decoding messages or files (connectors), what a batch commits (stream).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.fd.core import FullyDynamic
from fluxmat.engine.limits import LimitExceeded
from fluxmat.engine.storage import paused_gc
from fluxmat.engine.syntax import PyFact


@dataclass
class Fed:
    """One update for `feed`: the caller's `key`, the facts, and the update's id."""

    key: object
    add: Iterable[PyFact] = ()
    delete: Iterable[PyFact] = ()
    id: object = None


@dataclass
class FeedResult:
    """What `feed` did: updates submitted and rejected, the largest backlog of work."""

    submitted: int = 0
    rejected: int = 0
    peak_pending: int = 0
    keys: dict[int, object] = field(default_factory=dict, repr=False)  # engine seq -> key


def feed(
    fd: FullyDynamic,
    updates: Iterable[Fed],
    budget: int,
    overlap: bool = True,
    rejected: Callable[[object, Exception], None] | None = None,
    after_each: Callable[[Fed, int], None] | None = None,
) -> FeedResult:
    """Submit `updates` in order with `budget` units of work between them (module docstring).

    `after_each(update, seq)` is called after each submitted update's work (for
    progress and per-update statistics). Without `overlap` every update runs
    to quiescence before the next one is integrated.
    """
    result = FeedResult()
    with paused_gc():  # the whole feed: the collector would rescan the engine between updates
        _feed(fd, updates, budget, overlap, rejected, after_each, result)
    return result


def _feed(fd, updates, budget, overlap, rejected, after_each, result: FeedResult) -> None:
    try:
        for upd, last in _with_last(updates):
            try:
                plus, minus = fd.encode_update(upd.add, upd.delete)
            except Exception as exc:  # a bad update stops only itself when the caller says so
                if rejected is None:
                    if isinstance(exc, FluxmatError):
                        raise FluxmatError(f"{upd.key}: {exc}") from None
                    raise
                rejected(upd.key, exc)
                result.rejected += 1
                continue
            seq = fd.submit_encoded(plus, minus, id=upd.id)
            result.keys[seq] = upd.key
            result.submitted += 1
            result.peak_pending = max(result.peak_pending, fd.pending)
            if overlap and not last:
                fd.step(budget)
            else:  # sequential, or the last update: work until quiescent
                fd.run()
            if after_each is not None:
                after_each(upd, seq)
        fd.run()
    except LimitExceeded as exc:
        exc.key = result.keys.get(exc.update) if exc.update is not None else None
        raise


def _with_last(items: Iterable[Fed]) -> Iterator[tuple[Fed, bool]]:
    """`(item, is_last)` pairs, one item ahead."""
    it = iter(items)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, False
        prev = item
    yield prev, True
