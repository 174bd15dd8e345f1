"""SPARQL 1.1 over a materialisation's triples, read-only and bounded (pyoxigraph).

`TripleStore(facts)` loads the facts that are triples (connectors.rdf mapping;
the others are counted in `skipped`) into an in-memory pyoxigraph store;
`answer(query, fmt, limits)` evaluates SELECT, ASK, CONSTRUCT or DESCRIBE:

* read-only: only queries run (an update is a syntax error), and SERVICE
  (federated queries, which would reach other machines) is refused;
* bounded: at most `limits.results` solutions or triples are returned
  (`truncated` says when more existed), the evaluation runs in a forked child
  process that is killed after `limits.timeout` seconds, and an answer larger
  than `limits.max_bytes` is cut off with an error. Without `os.fork` (not
  POSIX) the query runs in process with the result limit only;
* literals as read: pyoxigraph stores numbers by value (`"05"^^xsd:int` as
  `"5"^^xsd:integer`), so comparisons and joins in SPARQL use values; answers
  give each literal back as it was read (connectors.rdf) unless two literals
  of the materialisation have the same value (then the canonical form);
* results in the standard formats: SELECT and ASK as SPARQL 1.1 Query Results
  JSON (`application/sparql-results+json`) or CSV (`text/csv`; ASK as Jena
  writes it, a `_askResult` column), CONSTRUCT and DESCRIBE as N-Triples or
  Turtle.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import select
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

import pyoxigraph as ox

from fluxmat.connectors.rdf import Triples
from fluxmat.engine.errors import FluxmatError

DEFAULT_LIMIT = 1000
MAX_LIMIT = 10_000
DEFAULT_TIMEOUT = 10.0
MAX_BYTES = 16 << 20
TABLE_FORMATS = {"json": "application/sparql-results+json", "csv": "text/csv; charset=utf-8"}
GRAPH_FORMATS = {"ntriples": "application/n-triples", "turtle": "text/turtle; charset=utf-8"}
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
_SERVICE = re.compile(r"(?<![\w:?$])SERVICE(?![\w:-])", re.IGNORECASE)
_STRIP = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|<[^<>"\s]*>|#[^\n]*')


MAX_NESTING = 256  # brackets nested in a query; a few thousand overflow the parser's stack


class SparqlError(FluxmatError):
    """A query that cannot be answered: syntax, SERVICE, a limit exceeded."""


@dataclass(frozen=True)
class Limits:
    """How much one question may cost."""

    results: int = DEFAULT_LIMIT
    timeout: float = DEFAULT_TIMEOUT
    max_bytes: int = MAX_BYTES

    def __post_init__(self) -> None:
        if not 1 <= self.results <= MAX_LIMIT:
            raise SparqlError(f"the result limit must be between 1 and {MAX_LIMIT:,}, got {self.results}")
        if not 0 < self.timeout <= 300:
            raise SparqlError(f"the timeout must be between 0 and 300 seconds, got {self.timeout:g}")


@dataclass(frozen=True)
class Answer:
    body: bytes
    content_type: str
    count: int  # solutions or triples returned (ASK: 1)
    truncated: bool  # more existed beyond the limit


class TripleStore:
    """The triples of a set of facts, in an in-memory pyoxigraph store."""

    def __init__(self, facts: Iterable[tuple]):
        conv = Triples()
        self.skipped = 0
        self.store = ox.Store()
        quads = []
        for fact in facts:
            t = conv.triple(fact)
            if t is None:
                self.skipped += 1
            else:
                quads.append(ox.Quad(t.subject, t.predicate, t.object))
        self.store.bulk_extend(quads)
        self.size = len(quads)
        self.originals = _originals(q.object for q in quads)

    def restore(self, term):
        """A literal as read, where the store keeps it in canonical form (see `_originals`)."""
        if isinstance(term, ox.Literal) and self.originals:
            return self.originals.get(str(term)) or term
        return term

    def answer(self, query: str, fmt: str | None = None, limits: Limits = Limits(),
               source: str = "<query>") -> Answer:  # fmt: skip
        """Evaluate `query` within `limits`; `fmt` json|csv (SELECT, ASK), ntriples|turtle (graphs).

        Errors are `SparqlError`s; a syntax error names `source`:line:column.
        """
        _check_nesting(query, source)
        if _SERVICE.search(_STRIP.sub(" ", query)):
            raise SparqlError("SERVICE (a federated query) is not allowed: questions are answered "
                              "from the materialisation only")  # fmt: skip
        if not hasattr(os, "fork"):  # pragma: no cover - not POSIX
            return _evaluate(self, query, fmt, limits, source)
        return _in_child(lambda: _evaluate(self, query, fmt, limits, source), limits)


def _check_nesting(query: str, source: str) -> None:
    """Refuse brackets (`{ ( [`) nested deeper than MAX_NESTING, at the first one too deep.

    Strings, IRIs and comments do not count. The query parser recurses per level: a query
    nested 5,000 deep killed the evaluating process with a stack overflow.
    """
    code = _STRIP.sub(lambda m: " " * len(m.group()), query)
    if sum(code.count(c) for c in "{([") <= MAX_NESTING:
        return
    depth = 0
    for i, c in enumerate(code):
        if c in "{([":
            depth += 1
            if depth > MAX_NESTING:
                line, col = query.count("\n", 0, i) + 1, i - (query.rfind("\n", 0, i) + 1) + 1
                raise SparqlError(f"{source}:{line}:{col}: brackets nested more than {MAX_NESTING} deep")
        elif c in "})]":
            depth -= 1


def _in_child(work, limits: Limits) -> Answer:
    """Run `work` in a forked child, killed at the timeout; its answer comes back over a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read)
            try:
                a = work()
                msg = json.dumps({"type": a.content_type, "count": a.count, "truncated": a.truncated,
                                  "size": len(a.body)}).encode() + b"\n" + a.body  # fmt: skip
            except FluxmatError as exc:
                msg = json.dumps({"error": str(exc)}).encode() + b"\n"
            with os.fdopen(write, "wb") as out:
                out.write(msg)
        except BaseException:  # noqa: BLE001 - a child must never unwind into the parent's code
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    deadline = time.monotonic() + limits.timeout
    chunks: list[bytes] = []
    size, ended = 0, False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SparqlError(f"the query ran longer than the {limits.timeout:g} s limit "
                                  "(narrow it, or raise --timeout)")  # fmt: skip
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                continue
            chunk = os.read(read, 1 << 16)
            if not chunk:
                ended = True  # the child closed its end: it has exited (or crashed)
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limits.max_bytes + 4096:
                raise SparqlError(f"the answer is larger than {limits.max_bytes:,} bytes (lower the limit)")
    finally:
        os.close(read)
        status = _reap(pid, wait=ended)
    data = b"".join(chunks)
    head, _, body = data.partition(b"\n")
    try:
        meta = json.loads(head)
    except ValueError:
        how = f": killed by {signal.Signals(-status).name}" if status is not None and status < 0 else ""
        raise SparqlError(f"the query failed (the evaluating process ended without an answer{how})") from None
    if "error" in meta:
        raise SparqlError(meta["error"])
    return Answer(body, meta["type"], meta["count"], meta["truncated"])


def _reap(pid: int, wait: bool = False) -> int | None:
    """End the child (killed unless `wait`: it has exited); its exit code, negative for a signal.

    None when it was killed here.
    """
    try:
        done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
    except ChildProcessError:  # pragma: no cover - already reaped
        return None
    return os.waitstatus_to_exitcode(status)


_AT = re.compile(r"^error at (\d+):(\d+): ")


def _originals(terms) -> dict[str, ox.Literal | None]:
    """Canonical form -> literal as read, for the typed literals the store rewrites.

    pyoxigraph's store keeps numbers by value: `"05"^^xsd:int` is stored (and
    answered) as `"5"^^xsd:integer`. Answers give the literal as read instead,
    unless several literals share a canonical form (the store has merged them;
    the value None then keeps the canonical form).
    """
    typed = {t for t in terms if isinstance(t, ox.Literal) and not t.language
             and t.datatype.value != _XSD_STRING}  # fmt: skip
    if not typed:
        return {}
    scratch = ox.Store()
    scratch.bulk_extend(ox.Quad(ox.NamedNode(f"urn:t:{i}"), ox.NamedNode("urn:t:v"), t)
                        for i, t in enumerate(typed))  # fmt: skip
    out: dict[str, ox.Literal | None] = {}
    order = list(typed)
    for q in scratch:
        original = order[int(q.subject.value[len("urn:t:"):])]
        if q.object != original:
            key = str(q.object)
            out[key] = original if key not in out else None
    return out


def _position(query: str, at: re.Match) -> tuple[int, int]:
    """The parser's line and column; at the end of the input, just after the last token."""
    line, col = int(at.group(1)), int(at.group(2))
    lines = query.split("\n")
    if line - 1 < len(lines) and not query[sum(len(x) + 1 for x in lines[: line - 1]) + col - 1 :].strip():
        rest = query.rstrip()
        line = rest.count("\n") + 1
        col = len(rest) - (rest.rfind("\n") + 1) + 1
    return line, col


def _evaluate(ts: TripleStore, query: str, fmt: str | None, limits: Limits, source: str) -> Answer:
    try:
        result = ts.store.query(query)
    except SyntaxError as exc:
        text = str(exc.msg if exc.msg else exc)
        at = _AT.match(text)
        where = f"{source}:{':'.join(map(str, _position(query, at)))}: " if at else f"{source}: "
        raise SparqlError(f"{where}invalid SPARQL: {text[at.end():] if at else text}") from None
    except (OSError, ValueError) as exc:
        raise SparqlError(f"the query failed: {exc}") from None
    try:
        if isinstance(result, ox.QueryBoolean):
            return _boolean(bool(result), fmt or "json")
        if isinstance(result, ox.QuerySolutions):
            return _table(result, fmt or "json", limits, ts.restore)
        return _graph(result, fmt or "ntriples", limits, ts.restore)
    except (OSError, ValueError) as exc:
        raise SparqlError(f"the query failed: {exc}") from None


def _check(fmt: str, allowed: dict, what: str) -> None:
    if fmt not in allowed:
        raise SparqlError(f"{what} gives {'a table' if allowed is TABLE_FORMATS else 'triples'}: "
                          f"format {' or '.join(allowed)}, not {fmt}")  # fmt: skip


def _boolean(value: bool, fmt: str) -> Answer:
    _check(fmt, TABLE_FORMATS, "ASK")
    if fmt == "json":
        body = json.dumps({"head": {}, "boolean": value}).encode()
    else:
        body = f"_askResult\r\n{'true' if value else 'false'}\r\n".encode()
    return Answer(body, TABLE_FORMATS[fmt], 1, False)


def _json_term(term) -> dict:
    if isinstance(term, ox.NamedNode):
        return {"type": "uri", "value": term.value}
    if isinstance(term, ox.BlankNode):
        return {"type": "bnode", "value": term.value}
    if isinstance(term, ox.Literal):
        out = {"type": "literal", "value": term.value}
        if term.language:
            out["xml:lang"] = term.language
        elif term.datatype.value != _XSD_STRING:
            out["datatype"] = term.datatype.value
        return out
    return {"type": "triple", "value": str(term)}  # RDF-star, never produced from facts


def _csv_term(term) -> str:
    if isinstance(term, ox.BlankNode):
        return f"_:{term.value}"
    return term.value if isinstance(term, ox.NamedNode | ox.Literal) else str(term)


def _table(solutions: ox.QuerySolutions, fmt: str, limits: Limits, restore) -> Answer:
    _check(fmt, TABLE_FORMATS, "SELECT")
    names = [v.value for v in solutions.variables]
    rows = []
    truncated = False
    for solution in solutions:
        if len(rows) == limits.results:
            truncated = True
            break
        rows.append([restore(solution[name]) for name in names])
    if fmt == "json":
        bindings = [{n: _json_term(t) for n, t in zip(names, row, strict=True) if t is not None}
                    for row in rows]  # fmt: skip
        body = json.dumps({"head": {"vars": names}, "results": {"bindings": bindings}},
                          ensure_ascii=False).encode("utf-8")  # fmt: skip
    else:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow(names)
        writer.writerows([["" if t is None else _csv_term(t) for t in row] for row in rows])
        body = out.getvalue().encode("utf-8")
    return Answer(body, TABLE_FORMATS[fmt], len(rows), truncated)


def _graph(triples, fmt: str, limits: Limits, restore) -> Answer:
    _check(fmt, GRAPH_FORMATS, "CONSTRUCT")
    out: list[ox.Triple] = []
    truncated = False
    for t in triples:
        if len(out) == limits.results:
            truncated = True
            break
        out.append(ox.Triple(t.subject, t.predicate, restore(t.object)))
    if fmt == "ntriples":
        body = "".join(sorted(f"{t} .\n" for t in out)).encode("utf-8")
    else:
        body = ox.serialize(sorted(out, key=str), format=ox.RdfFormat.TURTLE)
    return Answer(body, GRAPH_FORMATS[fmt], len(out), truncated)
