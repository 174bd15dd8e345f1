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

`take_scanned(scanned, a, b)` takes messages a..b-1 of a batch read at once
(connectors.json_scan; `Scanned` decodes each distinct string once and reads
the predicates) with the same codes, order and positions `plain` would give.

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
    # (pred, arity) -> its pieces in order: [update, add, pos, codes] lists, or such arrays (`take_scanned`)
    groups: dict[tuple[str, int], list] = field(default_factory=dict)
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
        for group, pieces in self.groups.items():
            parts = [(np.array(u, np.int64), np.array(a, np.bool_), np.array(p, np.int64),
                      np.array(c, np.int64).reshape(len(u), group[1])) for u, a, p, c in pieces]  # fmt: skip
            facts[group] = FactColumns(
                *(np.concatenate(c) if len(c) > 1 else c[0] for c in zip(*parts, strict=True))
            )
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
            pred = self.pred(name)
            if pred is None:
                return None
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

    def pred(self, name: str) -> str | None:
        """The predicate written `name` as read (kept in `preds`); None: not a predicate."""
        pred = self.preds.get(name)
        if pred is None:
            try:
                pred = self.json_facts.fact([name])[0]
            except Exception:
                return None
            self.preds[name] = pred
        return pred

    def take_scanned(self, sd: Scanned, a: int, b: int) -> None:
        """Take the scanned messages a..b-1, all of the plain shape (`Scanned.runs`), as `plain` takes them."""
        sc = sd.sc
        f0, f1 = np.searchsorted(sc.fact_msg, (a, b)).tolist()
        msg, add = sc.fact_msg[f0:f1], sc.fact_add[f0:f1]
        # an update's additions, then its deletions, whichever key the message wrote first
        order = np.argsort(msg * 2 + ~add, kind="stable")
        msg, add, arity = msg[order], add[order], sc.fact_arity[f0:f1][order]
        first = np.cumsum(arity) - arity  # each fact's first argument in `codes`
        codes = self._arg_codes(
            sd, np.repeat(sc.fact_arg[f0:f1][order] - first, arity) + np.arange(int(arity.sum()))
        )
        pred = sd.pred_of[sd.group[sc.fact_pred[f0:f1][order]]]
        width = int(arity.max(initial=0)) + 1
        kinds, at, inverse = np.unique(pred * width + arity, return_index=True, return_inverse=True)
        index, pos = len(self.ids), self.pos
        for g in np.argsort(at, kind="stable").tolist():
            sel = np.flatnonzero(inverse.reshape(-1) == g)
            k = int(kinds[g] % width)
            piece = (msg[sel] - a + index, add[sel], sel + pos,
                     codes[first[sel][:, None] + np.arange(k)[None, :]])  # fmt: skip
            self.groups.setdefault((sd.preds[int(kinds[g] // width)], k), []).append(piece)
        self.ids.extend(sd.uids(a, b))
        self.pos = pos + (f1 - f0)

    def _arg_codes(self, sd: Scanned, picked: np.ndarray) -> np.ndarray:
        """The codes of the scanned arguments `picked`, coded in that order as `_fact` codes them."""
        sc = sd.sc
        is_int, val = sc.arg_int[picked], sc.arg_val[picked]
        ints = np.unique(val[is_int])
        n_str = len(sd.texts)
        key = np.empty(len(val), np.int64)
        key[is_int] = n_str + np.searchsorted(ints, val[is_int])
        key[~is_int] = sd.group[val[~is_int]]
        keys, at, inverse = np.unique(key, return_index=True, return_inverse=True)
        codes, texts = self.codes, sd.texts
        out = np.empty(len(keys), np.int64)
        for u in np.argsort(at, kind="stable").tolist():
            kk = int(keys[u])
            arg = texts[kk] if kk < n_str else int(ints[kk - n_str])
            code = codes.get(arg)
            out[u] = code if code is not None else self._code(arg)
        return out[inverse.reshape(-1)]

    def _take(self, facts: list, uid: object) -> None:
        """Add an update's `(add, (pred, codes))` facts to their groups, in order."""
        index, pos, groups = len(self.ids), self.pos, self.groups
        self.ids.append(uid)
        for add, (pred, codes) in facts:
            key = (pred, len(codes))
            pieces = groups.get(key)
            if pieces is None:
                pieces = groups[key] = []
            if not pieces or type(pieces[-1]) is not list:
                pieces.append([[], [], [], []])
            group = pieces[-1]
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


class Scanned:
    """A batch's scan (connectors.json_scan) with its strings decoded and its predicates read, for a builder.

    Each distinct raw string is decoded once (one `orjson.loads`); a message
    with a predicate `JsonFacts` cannot read is dropped from the scan (`ok`),
    so it is read one by one, as `ColumnsBuilder.plain` would refuse it.
    """

    def __init__(self, build: ColumnsBuilder, sc):  # sc: connectors.json_scan.Scan (numba: imported when scanned)
        from fluxmat.connectors.json_scan import json_array, same_bytes

        self.sc = sc
        _, first, group = np.unique(sc.str_hash, return_index=True, return_inverse=True)
        if not same_bytes(sc, group, first):
            raise ValueError("two strings share a hash")  # the caller reads the batch one by one
        self.group = group.reshape(-1)
        self.texts = orjson.loads(json_array(sc, first))
        self.pred_of = self._preds(build)

    def _preds(self, build: ColumnsBuilder) -> np.ndarray:
        """Per distinct string used as a predicate: the index of its predicate as read in `self.preds`."""
        sc, out = self.sc, np.full(len(self.texts), -1, np.int64)
        used = np.unique(self.group[sc.fact_pred])
        read: dict[str, int] = {}
        bad = []
        for g in used.tolist():
            pred = build.pred(self.texts[g])
            if pred is None:
                bad.append(g)
            else:
                out[g] = read.setdefault(pred, len(read))
        self.preds = list(read)
        if bad:
            sc.ok[sc.fact_msg[np.isin(self.group[sc.fact_pred], bad)]] = False
        return out

    def runs(self) -> list[tuple[int, int, bool]]:
        """The batch as runs `(start, stop, of the shape)` of consecutive messages."""
        ok = self.sc.ok
        if not len(ok):
            return []
        cuts = np.flatnonzero(ok[1:] != ok[:-1]) + 1
        starts = np.concatenate([[0], cuts]).tolist()
        stops = np.concatenate([cuts, [len(ok)]]).tolist()
        return [(a, b, bool(ok[a])) for a, b in zip(starts, stops, strict=True)]

    def uids(self, a: int, b: int) -> list:
        kind, val = self.sc.id_kind[a:b], self.sc.id_val[a:b]
        if not kind.any():
            return [None] * (b - a)
        texts, group = self.texts, self.group
        return [None if k == 0 else texts[group[v]] if k == 1 else v
                for k, v in zip(kind.tolist(), val.tolist(), strict=True)]  # fmt: skip
