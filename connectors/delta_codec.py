"""How facts travel in delta messages (the job's `--delta-format`), both ways.

`DeltaCodec(prefixes, delta_format)` is what the streaming job's processor
(stream.batch) and `fluxmat demo` share:

* `encode(fact)`: a fact as the processor hands it to the sink
  (connectors.kafka_sink): `[pred, arg, ...]` (engine.wire, the predicate
  compacted with the program's prefixes), or, with `ntriples`, a fact that is a
  triple as its N-Triples line `<s> <p> <o> .` (connectors.rdf);
* `items(message, "added")`: a delta message's added or removed facts, in any
  format (N-Triples text and its `not_triples`, or JSON arrays), as hashable
  items: N-Triples lines and tuples;
* `item(fact)`: `encode(fact)` as such an item, so a consumer that rebuilds the
  materialisation from the deltas can compare it with facts it computed;
* `encode_all(reasoner)` (an initial delta) and `encode_point(point, name)` (a
  batch's delta from the arrays core's rows of term ids, engine `PointRows`):
  each term encoded once, no Python tuple per fact, the same lists as `encode`.

The `debezium` format encodes facts as `json` does (connectors.debezium turns
them into change events).

`grouped(facts, causes)` orders a batch's facts so that those of one cause
(the update that changed them) are together: the deltas then name each cause
once per run of facts (connectors.kafka_sink, `"causes"`), not once per fact.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import repeat

import numpy as np

from fluxmat.connectors.rdf import Triples
from fluxmat.engine import PointRows, paused_gc
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.wire import json_value, pred_json

MAX_PREDS = 1 << 16  # predicates whose wire form is kept


class DeltaCodec:
    """Facts <-> the items of delta messages for one program's prefixes and one delta format."""

    def __init__(self, prefixes, delta_format: str = "json"):
        self.printer = FactPrinter(prefixes)
        self.triples = Triples() if delta_format == "ntriples" else None
        self.preds: dict[str, str] = {}  # predicate -> as the wire writes it (pred_json), once per predicate

    def encode(self, fact: tuple) -> list | str:
        """A fact as on the wire: its N-Triples line (format ntriples, a triple), else its JSON array."""
        if self.triples is not None:
            triple = self.triples.triple(fact)
            if triple is not None:
                return f"{triple} ."
        return [self._pred(fact[0]), *map(json_value, fact[1:])]  # = fact_json(fact, self.printer)

    def encode_all(self, reasoner) -> list:
        """Every fact of `reasoner`'s materialisation encoded (an initial delta), in no particular order.

        From the engine's rows of term ids when it keeps them (`Reasoner.fact_rows`)
        and the format is JSON: each term is encoded once, not once per fact.
        """
        found = None if self.triples is not None else reasoner.fact_rows()
        if found is None:
            return [self.encode(f) for f in reasoner.facts()]
        values, groups = found
        with paused_gc():  # millions of new lists: the collector would rescan them again and again
            return self._encode_rows(values, groups)

    def _encode_rows(self, values: list, groups) -> list:
        wire = np.empty(len(values), dtype=object)
        out: list = []
        for name, rows in groups:
            if not len(rows):
                continue
            if rows.shape[1] == 0:
                out.append([self._pred(name)])
                continue
            ids = np.unique(rows)
            fresh = ids[wire[ids] == None]  # noqa: E711  (elementwise: the terms not encoded yet)
            wire[fresh] = [json_value(values[i]) for i in fresh.tolist()]
            args = [wire[rows[:, j]].tolist() for j in range(rows.shape[1])]
            out.extend(map(list, zip(repeat(self._pred(name)), *args)))
        return out

    def encode_point(self, point: PointRows, name: Callable[[int], object]) -> tuple[list, ...]:
        """A consistency point's delta from its rows of term ids (`Reasoner.poll_rows`), format JSON.

        `(added, their causes, removed, theirs)`: exactly what `grouped` makes of
        the point's facts encoded one by one (`encode`) with their causes
        `name(seq)` -- the same lists in the same order -- with each term encoded
        once and no Python tuple per fact.
        """
        values, parts = point.values, point.parts
        wire = _TermWire(values, [rows for p in parts for rows in (p[1], p[3]) if rows.shape[1]])
        added = self._rows_out(wire, [(p[0], p[1]) for p in parts])
        removed = self._rows_out(wire, [(p[0], p[3]) for p in parts])
        added, added_by = _grouped_seqs(added, _seqs([p[2] for p in parts]), name)
        removed, removed_by = _grouped_seqs(removed, _seqs([p[4] for p in parts]), name)
        return added, added_by, removed, removed_by

    def _rows_out(self, wire: _TermWire, groups: list[tuple[str, np.ndarray]]) -> list:
        """Each group's rows as wire facts `[pred, arg, ...]`, group after group."""
        out: list = []
        for name, rows in groups:
            if not len(rows):
                continue
            pred = self._pred(name)
            if rows.shape[1] == 0:
                out.extend([pred] for _ in range(len(rows)))
                continue
            args = wire.columns(rows)
            out.extend(map(list, zip(repeat(pred), *args)))
        return out

    def _pred(self, pred: str) -> str:
        """The predicate as the wire writes it (pred_json), kept for at most MAX_PREDS predicates."""
        wire = self.preds.get(pred)
        if wire is None:
            if len(self.preds) >= MAX_PREDS:
                self.preds.clear()
            wire = self.preds[pred] = pred_json(pred, self.printer)
        return wire

    def item(self, fact: tuple) -> str | tuple:
        """`encode(fact)`, hashable: a line, or the JSON array as a tuple."""
        wire = self.encode(fact)
        return wire if isinstance(wire, str) else tuple(wire)

    @staticmethod
    def items(message: dict, key: str) -> list[str | tuple]:
        """A delta message's `added` or `removed` facts as items (see `item`)."""
        if isinstance(message[key], str):
            others = message.get("not_triples", {}).get(key, [])
            return message[key].splitlines() + [tuple(f) for f in others]
        return [tuple(f) for f in message[key]]


class _TermWire:
    """The wire form (`json_value`) of each term the given rows hold, each encoded once."""

    def __init__(self, values: list, blocks: list[np.ndarray]):
        ids = np.concatenate([b.ravel() for b in blocks]) if blocks else np.empty(0, np.int64)
        self.ids = np.unique(ids)
        self.wire = np.empty(len(self.ids), dtype=object)
        self.wire[:] = [json_value(values[i]) for i in self.ids.tolist()]

    def columns(self, rows: np.ndarray) -> list[list]:
        """Per column of `rows`, its terms' wire forms."""
        at = np.searchsorted(self.ids, rows)
        return [self.wire[at[:, j]].tolist() for j in range(rows.shape[1])]


def _seqs(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _grouped_seqs(facts: list, seqs: np.ndarray, name: Callable) -> tuple[list, list]:
    """`grouped(facts, [name(s) for s in seqs])`: each distinct seq named once, sorted by array."""
    uniq, first, inverse = np.unique(seqs, return_index=True, return_inverse=True)
    named = np.empty(len(uniq), dtype=object)
    rank: dict = {}
    ranks = np.empty(len(uniq), np.int64)
    for u in np.argsort(first, kind="stable").tolist():  # as the causes first appear
        named[u] = cause = name(int(uniq[u]))
        ranks[u] = rank.setdefault(_cause_key(cause), len(rank))
    inverse = inverse.reshape(-1)
    if len(rank) <= 1:
        return facts, named[inverse].tolist()
    order = np.argsort(ranks[inverse], kind="stable")
    return [facts[i] for i in order.tolist()], named[inverse[order]].tolist()


def _cause_key(cause):
    """A hashable stand-in for an update id (any JSON value); ids of different types stay apart."""
    t = type(cause)
    return (t, cause) if t is str or t is int or cause is None else (t, json.dumps(cause, sort_keys=True))


def grouped(facts: list, causes: list) -> tuple[list, list]:
    """`facts` and their parallel `causes` reordered (stably) so that equal causes are adjacent."""
    rank: dict = {}
    keys = [rank.setdefault(_cause_key(c), len(rank)) for c in causes]
    if len(rank) <= 1:
        return list(facts), list(causes)
    order = sorted(range(len(facts)), key=keys.__getitem__)
    return [facts[i] for i in order], [causes[i] for i in order]
