"""Engines and states for the state-store tests: a maintainer per algorithm, decoded stored states."""

from __future__ import annotations

import json

from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.engine.wire import value_from_json

POOL = [("edge", x, y) for x in "abcd" for y in "abcd"] + [("node", x) for x in "abcd"]


def maintainer_for(alg):
    """The objects core's fully dynamic engine (its snapshot module, engine.fd.snapshot, is what is tested)."""
    return Reasoner.from_text(PROGRAM, alg, options=EngineOptions(core="objects")).maintainer


PROGRAM = (
    "path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), path(Y, Z).\n"
    "lonely(X) :- node(X), not path(X, _).\n"
)


def decoded(tables) -> dict[str, dict]:
    """The stored tables with every text decoded through the stored terms (independently of the engine)."""
    terms = {tid: json.loads(t) for tid, t in tables["terms"].items()}

    def fact(text):
        p, *args = text.split(",")
        return (terms[p][0], *(value_from_json(terms[a]) for a in args))

    def args(texts):  # body facts' arguments (the rule fixes their relations)
        return tuple(tuple(value_from_json(terms[a]) for a in t.split(",") if a) for t in texts)

    out = {
        "explicit": {fact(t): v for t, v in tables["explicit"].items()},
        "facts": {fact(t): v for t, v in tables["facts"].items()},
        "log": {},
    }
    for k, v in tables["log"].items():
        rid, *pos = k.split(";")
        head, *neg = v.split(";")
        out["log"][int(rid), args(pos)] = (fact(head), args(neg))
    for name in ("explicit", "facts", "log"):  # no fact has two texts
        assert len(out[name]) == len(tables[name]), name
    return out


class FlakyStore(MemoryStateStore):
    """A memory store whose commit of batch `fail_at` fails once, as a crash before the commit would."""

    def __init__(self, fail_at: int | None = None):
        super().__init__()
        self.fail_at = fail_at

    def commit(self, batch, changes, output):
        if batch == self.fail_at:
            self.fail_at = None
            raise ConnectionError("redis lost")
        super().commit(batch, changes, output)
