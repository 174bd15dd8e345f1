"""File readers: facts files and JSONL update streams.

* Facts files are in program syntax (`edge(a, b).`), or JSON Lines (one
  `["pred", arg, ...]` array per line) when the name ends in `.jsonl`/`.ndjson`.
* Update files are JSON Lines, one update per line:
  `{"add": [[pred, arg, ...], ...], "del": [...], "id": optional}`. Blank lines
  are skipped. Any other key, a non-list `add`/`del`, or a malformed fact is a
  `ParseError` naming file, line (and column for invalid JSON).

Nothing is lost on bad input: readers raise before anything is applied.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine import atom_to_fact, fact_from_json, parse_facts, read_source
from engine.errors import ParseError
from engine.syntax import Pos


@dataclass(frozen=True)
class Update:
    """One update of a stream: facts to add and to delete, with an optional id."""

    add: tuple[tuple, ...]
    delete: tuple[tuple, ...]
    id: object = None
    where: str = ""


def _read(path: str | Path) -> str:
    return read_source(path)


def _json_line(text: str, path, lineno: int):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg}", Pos(str(path), lineno, exc.colno)) from None


def read_facts(path: str | Path, prefixes: dict[str, str]) -> list[tuple]:
    """Facts from a file in program syntax or JSON Lines."""
    text = _read(path)
    if str(path).endswith((".jsonl", ".ndjson")):
        out = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                item = _json_line(line, path, lineno)
                out.append(atom_to_fact(fact_from_json(item, prefixes, f"{path}:{lineno}")))
        return out
    return [atom_to_fact(a) for a in parse_facts(text, str(path), prefixes)]


def parse_update(item: object, prefixes: dict[str, str], where: str) -> Update:
    """Validate one decoded JSON update."""
    if not isinstance(item, dict):
        raise ParseError(f"{where}: expected an update object {{\"add\": [...], \"del\": [...]}}")
    unknown = sorted(set(item) - {"add", "del", "id"})
    if unknown:
        raise ParseError(
            f"{where}: unknown key '{unknown[0]}' in update (expected 'add', 'del' or 'id')"
        )
    lists = {}
    for key in ("add", "del"):
        facts = item.get(key, [])
        if not isinstance(facts, list):
            raise ParseError(f"{where}: '{key}' must be a list of facts")
        lists[key] = tuple(
            atom_to_fact(fact_from_json(f, prefixes, f"{where}: {key}[{i}]"))
            for i, f in enumerate(facts)
        )
    return Update(lists["add"], lists["del"], item.get("id"), where)


def read_updates(path: str | Path, prefixes: dict[str, str]) -> Iterator[Update]:
    """Updates of a JSONL file, validated line by line."""
    text = _read(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            item = _json_line(line, path, lineno)
            yield parse_update(item, prefixes, f"{path}:{lineno}")
