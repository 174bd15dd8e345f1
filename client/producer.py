"""UpdateProducer: builds update messages and sends them to the job's updates topic.

An update is `{"add": [fact, ...], "del": [fact, ...], "id": optional}`
(client/schemas/update.schema.json), or RDF text with `"format"`. Facts are
tuples `(pred, arg, ...)` whose arguments are integers, strings,
`client.Iri` and `client.Literal` values, or pyoxigraph triples (mapped as the
job maps RDF: `s rdf:type C` is `C[s]`, `s p o` is `p[s, o]`). With a program
(its text, or the arity of each predicate), a fact whose predicate is used
with another arity is refused before anything is sent.

`add`/`delete` gather facts into the pending update of a key; `send` sends one
update at once; `flush` sends what is pending and waits until the broker
acknowledged every message (raising otherwise). The Kafka producer batches the
records it sends (`linger_ms`), so many small updates cost few requests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from fluxmat.client.wire import BNODE, RDF_TYPE, Iri, Literal, encode_fact, literal

__all__ = ["UpdateProducer", "arities_of"]

_ATOM = re.compile(r"([A-Za-z_?:][\w\-.:]*|\x00\d+\x00)\s*([(\[])")
_PREFIX = re.compile(r"\s*(?:@prefix|PREFIX)\s+([A-Za-z][\w\-]*|):\s*<([^>]*)>")
_TOKEN = re.compile(r"[(\[)\]]|[A-Za-z_][\w\-]*(?::[\w\-.]*)?(?P<call>\s*[(\[])?")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|<[^\s<>"]*>')


def arities_of(program: str) -> dict[str, set[int]]:
    """The arities each predicate is used with in a program's text (a light scan: atoms `p(...)`, `p[...]`).

    IRIs `<...>` and strings are set aside first, `//` and `%` comments (outside
    parentheses) dropped; an atom's arity is its number of top-level arguments.
    A predicate written `<iri>` or `pre:local` (with `@prefix pre: <...>`) is
    listed both as written and expanded.
    """
    kept: list[str] = []

    def hide(m: re.Match) -> str:
        kept.append(m.group())
        return f"\x00{len(kept) - 1}\x00"

    lines, prefixes = [], {}
    for line in program.splitlines():
        decl = _PREFIX.match(line)
        if decl is not None:
            prefixes[decl.group(1)] = decl.group(2)
            continue
        line, depth, out = _STRING.sub(hide, line), 0, []
        for i, c in enumerate(line):
            depth += 1 if c in "([" else -1 if c in ")]" else 0
            if line.startswith("//", i) or (c == "%" and depth <= 0):
                break
            out.append(c)
        lines.append("".join(out))
    text = "\n".join(lines)
    found: dict[str, set[int]] = {}
    for m in _ATOM.finditer(text):
        name = m.group(1)
        if name.startswith("\x00"):
            name = kept[int(name.strip("\x00"))]
        if name[0] in "?" or name[0].isupper() or name in ("not",):
            continue
        arity = _count_args(text, m.end())
        found.setdefault(name, set()).add(arity)
        pre, _, local = name.partition(":")
        full = name[1:-1] if name[0] == "<" else prefixes[pre] + local if local and pre in prefixes else None
        if full is not None:  # also under the expanded name (the job's)
            found.setdefault(full, set()).add(arity)
    for name in _zero_arity(text):
        found.setdefault(name, set()).add(0)
    return found


def _zero_arity(text: str) -> list[str]:
    """Names outside any parentheses that no `(`/`[` follows: atoms without arguments (`raining.`)."""
    out, depth = [], 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in "([" or m.group("call"):
            depth += 1
        elif tok in ")]":
            depth -= 1
        elif depth == 0 and tok[0].islower() and tok != "not":
            out.append(tok)
    return out


def _count_args(text: str, start: int) -> int:
    depth, commas, empty = 1, 0, True
    for c in text[start:]:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
            if depth == 0:
                break
        elif c == "," and depth == 1:
            commas += 1
        if not c.isspace() and depth >= 1:
            empty = False
    return 0 if empty else commas + 1


def _fact(item) -> tuple:
    """A fact tuple of a tuple or a pyoxigraph triple, checked."""
    if type(item).__name__ == "Triple" and hasattr(item, "predicate"):
        return _triple_fact(item)
    if not isinstance(item, tuple | list) or not item or not isinstance(item[0], str) or not item[0]:
        raise ValueError(f"a fact is a tuple (predicate, arg, ...), got {item!r}")
    for arg in item[1:]:
        if isinstance(arg, bool) or not isinstance(arg, int | str | Iri | Literal):
            raise ValueError(f"fact {item!r}: an argument is an int, str, Iri or Literal, got {arg!r}")
    return tuple(item)


def _triple_fact(triple) -> tuple:
    def value(term):
        kind = type(term).__name__
        if kind == "NamedNode":
            return Iri(term.value)
        if kind == "BlankNode":
            return Iri(BNODE + term.value)
        if kind == "Literal":
            return literal(term.value, term.datatype.value, term.language or "")
        raise ValueError(f"unsupported RDF term {term}")

    obj = triple.object
    if triple.predicate.value == RDF_TYPE and type(obj).__name__ != "Literal":
        cls = value(obj).value
        return (f"<{cls}>", value(triple.subject))
    return (f"<{triple.predicate.value}>", value(triple.subject), value(obj))


class UpdateProducer:
    """Sends updates to a topic (see the module docstring).

    Args:
        bootstrap: Kafka bootstrap servers.
        topic: the job's updates topic.
        program: the program's text or a path to it: facts are checked against its arities.
        arities: predicate -> arity (or set of arities), instead of or besides `program`.
        max_facts: pending facts of one key from which `add`/`delete` send the update.
        producer_config: extra kafka-python KafkaProducer settings.
        kafka_config: a Kafka client settings file (TLS, SASL: client.kafka_config), as
            `fluxmat run --kafka-config` takes it.
    """

    def __init__(self, bootstrap: str, topic: str, program: str | Path | None = None,
                 arities: Mapping[str, int | set[int]] | None = None, max_facts: int = 10_000,
                 producer_config: dict | None = None, kafka_config: str | None = None) -> None:  # fmt: skip
        from kafka import KafkaProducer

        from fluxmat.client.kafka_config import load

        self.topic = topic
        self.arities: dict[str, set[int]] = {}
        if program is not None:
            text = Path(program).read_text(encoding="utf-8") if isinstance(program, Path) or (
                "\n" not in str(program) and Path(program).is_file()) else str(program)  # fmt: skip
            self.arities.update(arities_of(text))
        for name, n in (arities or {}).items():
            self.arities.setdefault(name, set()).update({n} if isinstance(n, int) else n)
        self.max_facts = max_facts
        self.pending: dict[str | None, dict[str, list]] = {}
        self.futures: list = []
        config = {"acks": "all", "linger_ms": 5, "max_in_flight_requests_per_connection": 1,
                  **load(kafka_config).args, **(producer_config or {})}  # fmt: skip
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, **config)

    def check(self, item) -> list:
        """A fact as its wire array, checked against the program's arities.

        Raises:
            ValueError: not a fact, or an arity the program does not use.
        """
        fact = _fact(item)
        if self.arities:
            name = fact[0]
            bare = name[1:-1] if name[:1] == "<" and name[-1:] == ">" else name
            known = self.arities.get(name) or self.arities.get(bare) or self.arities.get(f"<{bare}>")
            if known is not None and len(fact) - 1 not in known:
                raise ValueError(f"fact {item!r} has arity {len(fact) - 1}; the program uses {name} "
                                 f"with arity {' or '.join(map(str, sorted(known)))}")  # fmt: skip
        return encode_fact(fact)

    def send(self, add: Iterable = (), delete: Iterable = (), id=None, key: str | None = None):
        """Send one update now (asynchronously; `flush` waits); returns its future."""
        message = {"add": [self.check(f) for f in add], "del": [self.check(f) for f in delete]}
        if id is not None:
            message["id"] = id
        return self._send(message, key)

    def send_rdf(self, add: str = "", delete: str = "", fmt: str = "ntriples", id=None, key: str | None = None):
        """Send one update of RDF text (`ntriples` or `nquads`); returns its future."""
        if fmt not in ("ntriples", "nquads"):
            raise ValueError(f"fmt must be ntriples or nquads, got {fmt!r}")
        message = {"format": fmt, "add": add, "del": delete}
        if id is not None:
            message["id"] = id
        return self._send(message, key)

    def send_program(self, add: str = "", delete: str = "", whole: str | None = None, id=None,
                     key: str | None = None):  # fmt: skip
        """Send one program change: rules to add and delete, or the whole new program; returns its future."""
        body = {"whole": whole} if whole is not None else {"add": add, "del": delete}
        message: dict = {"program": body}
        if id is not None:
            message["id"] = id
        return self._send(message, key)

    def _send(self, message: dict, key: str | None):
        import json

        value = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        future = self.producer.send(self.topic, key=None if key is None else key.encode("utf-8"), value=value)
        self.futures.append(future)
        return future

    def add(self, *facts, key: str | None = None) -> None:
        """Add facts to the pending update of `key` (sent by `flush`, or when it grows large)."""
        self._gather("add", facts, key)

    def delete(self, *facts, key: str | None = None) -> None:
        """Delete facts in the pending update of `key`."""
        self._gather("del", facts, key)

    def _gather(self, kind: str, facts, key) -> None:
        update = self.pending.setdefault(key, {"add": [], "del": []})
        update[kind].extend(self.check(f) for f in facts)
        if len(update["add"]) + len(update["del"]) >= self.max_facts:
            self._send(self.pending.pop(key), key)

    def flush(self, timeout: float = 30.0) -> None:
        """Send the pending updates and wait until every message sent so far is acknowledged.

        Raises:
            kafka.errors.KafkaError: a message was not delivered.
        """
        for key in list(self.pending):
            self._send(self.pending.pop(key), key)
        self.producer.flush(timeout=timeout)
        futures, self.futures = self.futures, []
        for future in futures:
            future.get(timeout=timeout)

    def close(self) -> None:
        self.flush()
        self.producer.close()

    def __enter__(self) -> UpdateProducer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
