"""Printing facts in program syntax, compacting IRIs with the program's prefixes.

Every printed fact reads back (engine.parser, with the same prefixes) as the
same fact: predicates and constants that are not identifiers are written as
IRIs or quoted strings (engine.syntax.format_pred / format_value).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from fluxmat.engine.syntax import Iri, RdfLiteral, format_pred, format_value

_LOCAL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_\-.]*[A-Za-z0-9_\-])?\Z")


class FactPrinter:
    """Formats `(pred, *args)` facts as `pred(a, b).` lines."""

    def __init__(self, prefixes: Iterable[tuple[str, str]] = ()):
        # longest namespace first, so the most specific prefix wins
        self.prefixes = sorted(prefixes, key=lambda p: -len(p[1]))
        self.names = {name for name, _ns in self.prefixes}

    def compact(self, iri: str) -> str | None:
        """`name:local` for an IRI under a declared prefix, else None."""
        for name, ns in self.prefixes:
            if iri.startswith(ns) and len(iri) > len(ns) and _LOCAL.match(iri[len(ns) :]):
                return f"{name}:{iri[len(ns):]}"
        return None

    def pred(self, pred: str) -> str:
        compact = self.compact(pred)
        if compact is not None:
            return compact
        text = format_pred(pred)
        if text[0] not in "<\"" and text.partition(":")[0] in self.names:
            return f"<{pred}>"  # `p:local` kept verbatim would read back expanded
        return text

    def value(self, value) -> str:
        if isinstance(value, Iri):
            return self.compact(value.value) or format_value(value)
        if isinstance(value, RdfLiteral) and not value.lang:
            dt = self.compact(value.datatype)
            if dt is not None:
                return f"{json.dumps(value.lexical, ensure_ascii=False)}^^{dt}"
        return format_value(value)

    def fact(self, fact: tuple) -> str:
        pred, args = fact[0], fact[1:]
        if not args:
            return f"{self.pred(pred)}."
        return f"{self.pred(pred)}({', '.join(self.value(a) for a in args)})."

    def lines(self, facts: Iterable[tuple]) -> list[str]:
        """Sorted output lines, one fact each."""
        return sorted(self.fact(f) for f in facts)
