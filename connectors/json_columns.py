"""Decoded JSON updates into columns (engine.update_columns): a batch's facts without a tuple each.

`ColumnsBuilder` collects the updates of a micro-batch in order. `plain(item)`
takes a *plain* update -- `{"add": [...], "del": [...], "id": ...}` whose facts
are JSON arrays of a predicate string and string or integer arguments, what
`connectors.files.parse_update` reads through `JsonFacts`' fast path -- and
returns False for anything else (a literal argument, an RDF or program
update, a bad fact), which the caller validates with `parse_update` and hands
over as an `Update` (`update`) or not at all (a dead letter). Predicates are
read as `JsonFacts` reads them (prefixes expanded, once per name); each
distinct argument's value is computed once and coded by value, so
`UpdateColumns.values` holds each value once.

`columns(keys)` gives the `UpdateColumns` of the updates taken, in the order
they were taken, each with the caller's key.

Not here: which messages are dead letters (stream.batch_decode), validating
facts against the program (the engine: engine.compact.fed_columns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import orjson

from fluxmat.engine import FactColumns, JsonFacts, UpdateColumns
from fluxmat.engine.syntax import int_in_range
from fluxmat.engine.wire import value_from_json

_PLAIN_KEYS = frozenset(("add", "del", "id"))
_SPACED_KEY = re.compile(r'"\s+:')  # a key with white space before its colon


@dataclass
class ColumnsBuilder:
    """A micro-batch's updates as columns (module docstring)."""

    json_facts: JsonFacts
    preds: dict[str, str]  # predicate as written -> as read (kept by the caller across batches)
    ids: list = field(default_factory=list)
    values: list = field(default_factory=list)
    codes: dict = field(default_factory=dict)  # an argument as written -> its code
    value_codes: dict[tuple, int] = field(default_factory=dict)  # (type, value) -> its code
    groups: dict[tuple[str, int], tuple[list, list, list, list]] = field(default_factory=dict)
    pos: int = 0
    last: tuple = (None, 0, 0)  # the last plain update taken: its id, facts added and deleted

    def plain_text(self, text: str) -> bool:
        """Take the update JSON `text` holds when it is plain; False: not taken (decode it strictly).

        What connectors.files.decode_json would return, without its general check:
        a plain update has no float and no object but itself, so its keys are
        distinct when the text has as many `":` as it has entries.
        """
        try:
            item = orjson.loads(text)
        except orjson.JSONDecodeError:
            return False
        if type(item) is not dict or len(item) != text.count('":') or _SPACED_KEY.search(text):
            return False
        uid = item.get("id")
        if (
            uid is not None
            and type(uid) is not str
            and (type(uid) is not int or not int_in_range(uid))
        ):
            return False
        return self.plain(item)

    def plain(self, item: object) -> bool:
        """Take `item` when it is a plain update (module docstring); False: not taken."""
        if type(item) is not dict or not item.keys() <= _PLAIN_KEYS:
            return False
        adds, dels = item.get("add", ()), item.get("del", ())
        if (type(adds) is not list and adds != ()) or (type(dels) is not list and dels != ()):
            return False
        read, facts = self._fact, []
        for add, items in ((True, adds), (False, dels)):
            for fact in items:
                got = read(fact)
                if got is None:
                    return False
                facts.append((add, got))
        self._take(facts, item.get("id"))
        self.last = (item.get("id"), len(adds), len(dels))
        return True

    def update(self, add, delete, uid: object) -> None:
        """Take an update validated elsewhere (`parse_update`): its Python facts `(pred, *values)`."""
        facts = [(a, (f[0], [self._code_of_value(v) for v in f[1:]])) for a, fs in ((True, add), (False, delete))
                 for f in fs]  # fmt: skip
        self._take(facts, uid)

    def __len__(self) -> int:
        return len(self.ids)

    def columns(self, keys: list) -> UpdateColumns:
        facts = {}
        for group, (update, add, pos, codes) in self.groups.items():
            k = len(update)
            facts[group] = FactColumns(np.array(update, np.int64), np.array(add, np.bool_),
                                       np.array(pos, np.int64),
                                       np.array(codes, np.int64).reshape(k, group[1]))  # fmt: skip
        return UpdateColumns(list(keys), self.ids, self.values, facts)

    def _fact(self, fact) -> tuple[str, list] | None:
        """A plain JSON fact's predicate (as read) and its arguments' codes; None: not plain."""
        if type(fact) is not list or not fact:
            return None
        name = fact[0]
        if type(name) is not str or not name:
            return None
        pred = self.preds.get(name)
        if pred is None:
            try:
                pred = self.json_facts.fact([name])[0]
            except Exception:
                return None
            self.preds[name] = pred
        args = fact[1:]
        for arg in args:
            t = type(arg)
            if t is not str and (t is not int or not int_in_range(arg)):
                return None
        codes = self.codes
        out = [codes.get(arg) for arg in args]
        if None in out:
            out = [self._code(arg) for arg in args]
        return pred, out

    def _take(self, facts: list, uid: object) -> None:
        """Add an update's `(add, (pred, codes))` facts to their groups, in order."""
        index, pos, groups = len(self.ids), self.pos, self.groups
        self.ids.append(uid)
        for add, (pred, codes) in facts:
            key = (pred, len(codes))
            group = groups.get(key)
            if group is None:
                group = groups[key] = ([], [], [], [])
            group[0].append(index)
            group[1].append(add)
            group[2].append(pos)
            group[3].extend(codes)
            pos += 1
        self.pos = pos

    def _code(self, arg) -> int:
        found = self.codes.get(arg)
        if found is None:
            found = self.codes[arg] = self._code_of_value(
                value_from_json(arg) if type(arg) is str else arg
            )
        return found

    def _code_of_value(self, value) -> int:
        key = (type(value), value)
        found = self.value_codes.get(key)
        if found is None:
            found = self.value_codes[key] = len(self.values)
            self.values.append(value)
        return found
