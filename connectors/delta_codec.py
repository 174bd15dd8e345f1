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
  materialisation from the deltas can compare it with facts it computed.

The `debezium` format encodes facts as `json` does (connectors.debezium turns
them into change events).

`grouped(facts, causes)` orders a batch's facts so that those of one cause
(the update that changed them) are together: the deltas then name each cause
once per run of facts (connectors.kafka_sink, `"causes"`), not once per fact.
"""

from __future__ import annotations

import json
from itertools import repeat

import numpy as np

from fluxmat.connectors.rdf import Triples
from fluxmat.engine import paused_gc
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
