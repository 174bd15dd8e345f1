"""File readers: facts files and JSONL update streams.

* Facts files are in program syntax (`edge(a, b).`), or JSON Lines (one
  `["pred", arg, ...]` array per line) when the name ends in `.jsonl`/`.ndjson`.
* RDF files (N-Triples, N-Quads, Turtle, TriG, RDF/XML, also gzip-compressed)
  by extension, read by connectors.rdf; `fmt` overrides the extension.
* Update files are JSON Lines, one update per line:
  `{"add": [[pred, arg, ...], ...], "del": [...], "id": optional}`, or with
  RDF text `{"format": "ntriples" | "nquads", "add": "<s> <p> <o> .",
  "del": "...", "id": optional}` (connectors.rdf.rdf_update). Blank lines
  are skipped. Any other key, a duplicate key, a non-list `add`/`del`, or a
  malformed fact is a `ParseError` naming file, line (and column for invalid JSON).
* JSON is decoded by `decode_json` only (files here, and the streaming job's
  messages): nesting deeper than `MAX_JSON_DEPTH` and integers longer than
  `MAX_JSON_DIGITS` digits are errors found without recursion or conversion,
  as are duplicate object keys (which `json.loads` would silently resolve to
  the last value). orjson decodes first; its value is returned only when it is
  provably what the strict decoder (json with hooks) returns -- no float (a
  huge integer reads as one), no deeper nesting than the limit, and as many
  object entries as the text has keys (so no key was a duplicate) -- and
  anything else, invalid JSON included, goes through the strict decoder, so
  results and error messages are exactly the strict decoder's.

Nothing is lost on bad input: readers raise before anything is applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson

from fluxmat.connectors.rdf import FORMATS, format_of, rdf_update, read_rdf
from fluxmat.engine import (
    JsonFacts,
    atom_to_fact,
    fact_from_json,
    parse_facts,
    parse_program,
    read_source,
)
from fluxmat.engine.errors import InputMemoryError, ParseError
from fluxmat.engine.syntax import MAX_INT_DIGITS, Pos

FACTS_FORMATS = ("facts", "jsonl", *FORMATS)  # what --facts-format may name (read_facts)


@dataclass(frozen=True)
class ProgramChange:
    """Rules (and the program's facts) to add and delete, or a whole new program (`whole`)."""

    add: str = ""
    delete: str = ""
    whole: str | None = None


@dataclass(frozen=True)
class Update:
    """One update of a stream: facts to add and to delete, with an optional id; or a program change."""

    add: tuple[tuple, ...]
    delete: tuple[tuple, ...]
    id: object = None
    where: str = ""
    program: ProgramChange | None = None


def _read(path: str | Path) -> str:
    return read_source(path)


MAX_JSON_DEPTH = 64  # an update is 3 levels deep ({"add": [[...]]})
MAX_JSON_DIGITS = MAX_INT_DIGITS  # as in programs: every integer fluxmat holds can be printed
_SPECIAL = re.compile(r'["\\\[\]{}]')  # what delimits strings and nesting


class _Rejected(ValueError):
    """Valid JSON that fluxmat refuses (duplicate keys, huge integers)."""


def _object(pairs: list[tuple[str, object]]) -> dict:
    out: dict = {}
    for key, value in pairs:
        if key in out:
            raise _Rejected(f"duplicate key {json.dumps(key, ensure_ascii=False)} in an object")
        out[key] = value
    return out


def _integer(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_JSON_DIGITS:
        raise _Rejected(f"an integer with more than {MAX_JSON_DIGITS} digits ({digits:,})")
    return int(text)


def _too_deep(text: str) -> bool:
    """Whether `text` nests arrays/objects deeper than MAX_JSON_DEPTH (brackets in strings ignored).

    Linear in the number of quotes, backslashes and brackets. On any prefix that
    `json.loads` accepts, its tokens are the same as ours, so json never recurses
    deeper than this finds, even in text that turns out to be invalid.
    """
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return False
    level, in_string, escaped = 0, False, -1
    for m in _SPECIAL.finditer(text):
        c, at = m.group(), m.start()
        if in_string:
            if at == escaped:
                continue
            if c == "\\":
                escaped = at + 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            level += 1
            if level > MAX_JSON_DEPTH:
                return True
        elif c in "]}":
            level -= 1
    return False


_SPACED_KEY = re.compile(r'"\s+:')  # a key with white space before its colon


def _as_strict(value: object, text: str) -> bool:
    """Whether orjson's `value` of `text` is what the strict decoder returns (see the module docstring).

    Every key of `text` is followed by `":` (no `_SPACED_KEY`), so `text.count('":')`
    is at least its number of keys; each duplicate key makes an object one entry
    smaller, so object entries equal to that count prove that no key repeats.
    """
    entries = 0
    todo = [(value, 1)] if type(value) in (list, dict) else []
    if type(value) is float:
        return False
    while todo:
        item, level = todo.pop()
        if level > MAX_JSON_DEPTH:
            return False
        if type(item) is dict:
            entries += len(item)
            item = item.values()
        for x in item:
            t = type(x)
            if t is list or t is dict:
                todo.append((x, level + 1))
            elif t is float:
                return False
    return entries == text.count('":') and (entries == 0 or _SPACED_KEY.search(text) is None)


def decode_json(text: str, path: str | Path | None = None, lineno: int = 0) -> object:
    """One JSON value, decoded within fluxmat's bounds (see the module docstring).

    Raises:
        ParseError: invalid or refused JSON; at `path:lineno:column` when `path`
            is given, else with json's own "line L column C" in the message.
    """

    def fail(message: str, col: int = 1) -> ParseError:
        return ParseError(message, Pos(str(path), lineno, col) if path is not None else None)

    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        pass  # the strict decoder says why
    else:
        if _as_strict(value, text):
            return value
    if _too_deep(text):
        raise fail(f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, object_pairs_hook=_object, parse_int=_integer)
    except json.JSONDecodeError as exc:
        raise fail(f"invalid JSON: {exc.msg if path is not None else exc}", exc.colno) from None
    except _Rejected as exc:
        raise fail(f"invalid JSON: {exc}") from None


def read_facts(path: str | Path, prefixes: dict[str, str], fmt: str | None = None) -> list[tuple]:
    """Facts from a file in program syntax, JSON Lines or RDF (connectors.rdf).

    `fmt` (`facts`, `jsonl` or an RDF format name) overrides the file's extension.

    Raises:
        InputMemoryError: memory ran out while reading (names the file, and the
            line when known).
    """
    rdf_format = format_of(path, fmt)
    if rdf_format is not None:
        return read_rdf(path, rdf_format)
    try:
        text = _read(path)
        if fmt == "jsonl" or (fmt is None and str(path).endswith((".jsonl", ".ndjson"))):
            return _jsonl_facts(text, path, prefixes)
        return [atom_to_fact(a) for a in parse_facts(text, str(path), prefixes)]
    except InputMemoryError:
        raise
    except MemoryError:
        raise InputMemoryError(str(path)) from None


def _jsonl_facts(text: str, path: str | Path, prefixes: dict[str, str]) -> list[tuple]:
    out = []
    lineno = 0
    try:
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                item = decode_json(line, path, lineno)
                out.append(atom_to_fact(fact_from_json(item, prefixes, f"{path}:{lineno}")))
    except MemoryError:
        raise InputMemoryError(str(path), lineno or None) from None
    return out


_UPDATE_KEYS = frozenset(("add", "del", "id"))


def parse_update(item: object, prefixes: dict[str, str], where: str, facts: JsonFacts | None = None) -> Update:
    """Validate one decoded JSON update.

    `facts`: a `JsonFacts` kept across updates (a stream's), so that their
    predicates and constants are read once; it is used for `prefixes` only.
    """
    if not isinstance(item, dict):
        raise ParseError(f"{where}: expected an update object {{\"add\": [...], \"del\": [...]}}")
    if "format" in item:
        add, delete = rdf_update(item, where)
        return Update(add, delete, item.get("id"), where)
    if "program" in item:
        return Update((), (), item.get("id"), where, program_change(item, where))
    if not item.keys() <= _UPDATE_KEYS:
        unknown = sorted(set(item) - _UPDATE_KEYS)
        raise ParseError(
            f"{where}: unknown key '{unknown[0]}' in update (expected 'add', 'del', 'id' or 'program')"
        )
    reader = JsonFacts(prefixes) if facts is None else facts.of(prefixes)
    lists = {}
    for key in ("add", "del"):
        items = item.get(key, [])
        if not isinstance(items, list):
            raise ParseError(f"{where}: '{key}' must be a list of facts")
        try:
            lists[key] = tuple(map(reader.fact, items))
        except ParseError:  # again, to say where
            lists[key] = tuple(reader.fact(f, f"{where}: {key}[{i}]") for i, f in enumerate(items))
    return Update(lists["add"], lists["del"], item.get("id"), where)


def program_change(item: dict, where: str) -> ProgramChange:
    """The program change of an update `{"program": {"add": TEXT, "del": TEXT} | {"whole": TEXT} | TEXT}`.

    Its texts are parsed here, so a syntax error is found before anything is applied.
    """
    unknown = sorted(set(item) - {"program", "id"})
    if unknown:
        raise ParseError(f"{where}: unknown key '{unknown[0]}' in a program change (expected 'program' or 'id')")
    body = item["program"]
    if isinstance(body, str):
        body = {"whole": body}
    if not isinstance(body, dict) or not body or set(body) - {"add", "del", "whole"}:
        raise ParseError(f'{where}: "program" must be {{"add": TEXT, "del": TEXT}}, {{"whole": TEXT}} or TEXT')
    if not all(isinstance(v, str) for v in body.values()):
        raise ParseError(f'{where}: the texts of "program" must be strings')
    if "whole" in body and len(body) > 1:
        raise ParseError(f'{where}: "program" has a whole program or "add"/"del", not both')
    for key, text in body.items():
        parse_program(text, f"{where}: program.{key}")
    return ProgramChange(body.get("add", ""), body.get("del", ""), body.get("whole"))


def read_updates(path: str | Path, prefixes: dict[str, str]) -> Iterator[Update]:
    """Updates of a JSONL file, validated line by line."""
    text = _read(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            item = decode_json(line, path, lineno)
            yield parse_update(item, prefixes, f"{path}:{lineno}")
