"""The one codec between facts and JSON: update messages, deltas, facts files and stored state.

A fact `(pred, arg, ...)` is the JSON array `[pred, arg, ...]`, and every path
uses the same rule for its constants (`json_value` / `value_from_json`):

* an integer is a JSON integer (at most `MAX_INT_DIGITS` digits);
* an IRI is the string `"<iri>"` (when `iri` is a well-formed IRI, as in
  program text);
* any other string is the JSON string itself -- unless it would read back as
  an IRI (`"<x>"`): such a string is the JSON-LD value object
  `{"@value": "<x>"}`, so that a string is never mistaken for an IRI after a
  round trip (through Kafka, or through Redis and a restart);
* an RDF literal other than a plain string or a canonical integer
  (engine.syntax.RdfLiteral) is a JSON-LD value object with its datatype or
  language tag: `{"@value": "05", "@type": "http://www.w3.org/2001/XMLSchema#int"}`,
  `{"@value": "chat", "@language": "fr"}`.

The predicate is a string: on input `<iri>` is unwrapped and a prefixed name
whose prefix is declared is expanded (`fact_from_json`); on output it is
compacted with the program's prefixes where it reads back the same
(`fact_json(fact, printer)`, the stream's deltas) or kept as it is (the stored
state). `fact_text` and
`fact_from_text` are the stored state's form: JSON text, which is also the key
of the fact's entry.

Input is validated and every error names `where` (a file:line, a message);
stored state is trusted (`fact_from_text` does not re-validate). Program text
is the other form of a fact: engine.printer writes it, engine.parser reads it.

Not here: decoding JSON text within bounds (connectors.files.decode_json), the
shapes of update and delta messages (connectors, stream).
"""

from __future__ import annotations

import json

from fluxmat.engine.errors import ParseError
from fluxmat.engine.lexer import IRI_FULL, PNAME_FULL
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import (
    MAX_INT_DIGITS,
    XSD_STRING,
    Atom,
    Const,
    Iri,
    PyFact,
    RdfLiteral,
    Value,
    int_in_range,
    literal,
)

__all__ = ["fact_from_json", "fact_from_text", "fact_json", "fact_text", "is_json_literal", "json_value",
           "pred_json", "value_from_json"]  # fmt: skip


def json_value(value: Value):
    """A constant as JSON (see the module docstring)."""
    if isinstance(value, Iri):
        return f"<{value.value}>"
    if isinstance(value, RdfLiteral):
        if value.lang:
            return {"@value": value.lexical, "@language": value.lang}
        return {"@value": value.lexical, "@type": value.datatype}
    if isinstance(value, str) and value[:1] == "<" and IRI_FULL.match(value):
        return {"@value": value}
    return value


def value_from_json(item) -> Value:
    """The constant of a JSON value that `json_value` wrote (trusted: no validation)."""
    if isinstance(item, str):
        return Iri(item[1:-1]) if item[:1] == "<" and IRI_FULL.match(item) else item
    if isinstance(item, dict):
        if "@language" in item:
            return literal(item["@value"], lang=item["@language"])
        return literal(item["@value"], item.get("@type", XSD_STRING))
    return item


def is_json_literal(item: dict) -> bool:
    """Whether `item` is a JSON-LD value object: `{"@value": str}`, with `"@type"` or `"@language"`."""
    if set(item) not in ({"@value"}, {"@value", "@type"}, {"@value", "@language"}):
        return False
    return all(isinstance(v, str) for v in item.values()) and (len(item) == 1 or any(
        item.get(k) for k in ("@type", "@language")))  # fmt: skip


def fact_json(fact: PyFact, printer: FactPrinter | None = None) -> list:
    """`[pred, arg, ...]` for a Python fact; with `printer`, the predicate is compacted (`pred_json`)."""
    return [fact[0] if printer is None else pred_json(fact[0], printer), *map(json_value, fact[1:])]


def pred_json(pred: str, printer: FactPrinter) -> str:
    """A predicate as `fact_from_json` reads it back with the printer's prefixes.

    `name:local` under a declared prefix; `<pred>` when the name itself would be
    read as something else (`<...>` is unwrapped, `p:x` with a declared `p` is
    expanded); else the name itself.
    """
    compact = printer.compact(pred)
    if compact is not None:
        return compact
    if len(pred) >= 2 and pred[0] == "<" and pred[-1] == ">":
        return f"<{pred}>"
    m = PNAME_FULL.match(pred)
    if m is not None and m.group(1) in printer.names:
        return f"<{pred}>"
    return pred


_dumps = json.JSONEncoder(ensure_ascii=False).encode  # = json.dumps(x, ensure_ascii=False), built once


def fact_text(fact: PyFact) -> str:
    """A fact as JSON text (the stored state's form and key; its spacing is part of the key)."""
    return _dumps(fact_json(fact))


def fact_from_text(text: str) -> PyFact:
    """The fact `fact_text` wrote."""
    item = json.loads(text)
    return (item[0], *map(value_from_json, item[1:]))


def fact_from_json(item: object, prefixes: dict[str, str], where: str = "") -> Atom:
    """A JSON fact `["pred", arg, ...]` (as decoded by `json.loads`), validated, as an AST atom.

    The predicate is a string: `<iri>` is unwrapped and a prefixed name whose
    prefix is in `prefixes` is expanded (other names are kept verbatim, as in
    programs). Arguments: a JSON integer is an int constant, a string `<...>`
    an `Iri` (when `...` is a well-formed IRI, as in program text), any other
    string a str constant, `{"@value": "..."}` the string it holds, and a
    JSON-LD value object with `"@type"` or `"@language"` an RDF literal
    (engine.syntax.literal). `where` (e.g. "updates.jsonl:3") starts every
    error message.
    """

    def fail(message: str) -> ParseError:
        return ParseError(f"{where}: {message}" if where else message)

    if not isinstance(item, list) or not item:
        found = "an empty array" if isinstance(item, list) else _json_kind(item)
        if isinstance(item, str):
            found = f"string {_json_text(item)}"
        raise fail(f"expected a fact as a JSON array [predicate, arg, ...], found {found}")
    pred = item[0]
    if not isinstance(pred, str) or not pred:
        found = "an empty string" if pred == "" else _json_kind(pred)
        raise fail(f"expected a predicate name string as the first element, found {found}")
    if len(pred) >= 2 and pred[0] == "<" and pred[-1] == ">":
        pred = pred[1:-1]
    else:
        m = PNAME_FULL.match(pred)
        if m is not None and m.group(1) in prefixes:
            pred = prefixes[m.group(1)] + m.group(2)
    args = []
    for k, arg in enumerate(item[1:], start=1):
        if isinstance(arg, dict) and is_json_literal(arg):
            args.append(Const(value_from_json(arg)))
            continue
        if isinstance(arg, bool) or not isinstance(arg, int | str):
            hint = ' (a literal is {"@value": ..., "@type" or "@language": ...})'
            raise fail(
                f"expected an integer or a string as argument {k} of {_json_text(item[0])}, "
                f"found {_json_kind(arg)}{hint if isinstance(arg, dict) and arg else ''}"
            )
        if isinstance(arg, int) and not int_in_range(arg):
            raise fail(f"argument {k} of {_json_text(item[0])} is an integer with more than "
                       f"{MAX_INT_DIGITS} digits")  # fmt: skip
        args.append(Const(value_from_json(arg)))
    return Atom(pred, tuple(args))



class JsonFacts:
    """`fact_from_json` for many facts under one program's `prefixes`, each predicate and string read once.

    The facts of a stream repeat their predicates and constants. A fact whose
    parts are all plain -- a predicate string, string arguments, integer
    arguments within `MAX_INT_DIGITS` -- is built from the values kept for its
    parts, without an AST atom; any other (a literal, a bad part) goes through
    `fact_from_json`, which gives its value or its error, so `fact` returns
    what `atom_to_fact(fact_from_json(item, prefixes, where))` returns, or
    raises what it raises. At most `limit` kept strings (then it starts afresh).
    """

    __slots__ = ("prefixes", "limit", "preds", "args")

    def __init__(self, prefixes: dict[str, str], limit: int = 1 << 20):
        self.prefixes, self.limit = prefixes, limit
        self.preds: dict[str, str] = {}
        self.args: dict[str, object] = {}

    def of(self, prefixes: dict[str, str]) -> JsonFacts:
        """This reader when `prefixes` are its own (the same object), else a new one for them."""
        return self if prefixes is self.prefixes else JsonFacts(prefixes)

    def fact(self, item: object, where: str = "") -> tuple:
        """The Python fact `(pred, *values)` of a JSON fact (`where` starts its error)."""
        if type(item) is list and item and type(item[0]) is str:
            pred = self.preds.get(item[0])
            if pred is None and item[0]:
                pred = self._pred(item[0])
            args, out = self.args, [pred]
            for arg in item[1:]:
                t = type(arg)
                if t is str:
                    value = args.get(arg)
                    if value is None:
                        value = self._arg(arg)
                elif t is int and int_in_range(arg):
                    value = arg
                else:
                    break
                out.append(value)
            else:
                if pred is not None:
                    return tuple(out)
        atom = fact_from_json(item, self.prefixes, where)
        return (atom.pred, *(a.value for a in atom.args))  # type: ignore[union-attr]

    def _pred(self, name: str) -> str:
        if len(self.preds) >= self.limit:
            self.preds.clear()
        pred = self.preds[name] = fact_from_json([name], self.prefixes).pred
        return pred

    def _arg(self, text: str) -> object:
        if len(self.args) >= self.limit:
            self.args.clear()
        value = self.args[text] = value_from_json(text)
        return value


def _json_text(value: object) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return f"boolean {_json_text(value)}"
    if isinstance(value, float):
        return f"number {_json_text(value)}"
    if isinstance(value, list):
        return f"array {_json_text(value)}"
    if isinstance(value, dict):
        return f"object {_json_text(value)}"
    if value is None:
        return "null"
    if isinstance(value, int):
        return f"number {value}"
    return f"{type(value).__name__} {_json_text(value)}"
