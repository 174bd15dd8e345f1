"""The built-in functions of rule bodies (`?d = datatype(?x)`): RDF literals' datatypes and values.

A rule calls them on the right of an assignment or in a comparison; each
returns a constant, or None when it is undefined for its arguments (the rule
then derives nothing for that binding, as for arithmetic). `FUNCTIONS` maps a
name to its arity and the name the generated plan code calls (`RUNTIME`).

* `datatype(x)`: the datatype IRI of a literal (`xsd:string` for a plain
  string, `xsd:integer` for an integer, `rdf:langString` for a tagged string);
  None for an IRI or a blank node.
* `dt_value(x)`: the literal's data value as one constant, equal for two
  literals exactly when their data values are equal (XML Schema 1.1 as OWL 2
  uses it: `"01"^^xsd:integer`, `"1"^^xsd:int` and `"1.0"^^xsd:decimal` are the
  number 1; `"a"^^xsd:token` is the string `"a"`); None for a non-literal or an
  ill-typed literal (`"x"^^xsd:integer`).
* `dt_member(x, dt)`: 1 when the data value of literal `x` is in the value
  space of the datatype `dt`, 0 when it is not (or `x` is ill-typed for its own
  datatype), None when `x` is not a literal or `dt` is not one of `VALUE_SPACES`.

Nothing here knows rules or OWL; connectors/owl2rl_rules.dl uses them for the
W3C datatype rules (dt-type2, dt-eq, dt-diff, dt-not-type).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from fluxmat.engine.syntax import RDF_LANG_STRING, XSD, XSD_INTEGER, XSD_STRING, Iri, RdfLiteral

RDF_PLAIN = "http://www.w3.org/1999/02/22-rdf-syntax-ns#PlainLiteral"
RDFS_LITERAL = "http://www.w3.org/2000/01/rdf-schema#Literal"
OWL_REAL = "http://www.w3.org/2002/07/owl#real"
_NO = 1 << 4000  # no bound
INTEGER_RANGES = {  # the integer datatypes: inclusive bounds of their value spaces
    "integer": (-_NO, _NO), "nonNegativeInteger": (0, _NO), "positiveInteger": (1, _NO),
    "nonPositiveInteger": (-_NO, 0), "negativeInteger": (-_NO, -1),
    "long": (-(2**63), 2**63 - 1), "int": (-(2**31), 2**31 - 1), "short": (-(2**15), 2**15 - 1),
    "byte": (-128, 127), "unsignedLong": (0, 2**64 - 1), "unsignedInt": (0, 2**32 - 1),
    "unsignedShort": (0, 65535), "unsignedByte": (0, 255),
}  # fmt: skip
_NAME_START = r"A-Za-z_:\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D\u2070-\uFFFD"
_NAME_CHAR = _NAME_START + r"\-.0-9\u00B7\u0300-\u036F\u203F-\u2040"
STRING_PATTERNS = {  # the string datatypes: which strings their value spaces hold
    "string": re.compile(r"(?s).*"),
    "normalizedString": re.compile(r"[^\r\n\t]*"),
    "token": re.compile(r"(?:[^\s]+(?: [^\s]+)*)?"),
    "language": re.compile(r"[a-zA-Z]{1,8}(?:-[a-zA-Z0-9]{1,8})*"),
    "NMTOKEN": re.compile(f"[{_NAME_CHAR}]+"),
    "Name": re.compile(f"[{_NAME_START}][{_NAME_CHAR}]*"),
    "NCName": re.compile(f"[{_NAME_START.replace(':', '')}][{_NAME_CHAR.replace(':', '')}]*"),
}
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)\Z")
_FLOAT = re.compile(r"(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?INF|NaN)\Z")
_BOOLEAN = {"true": "true", "1": "true", "false": "false", "0": "false"}


def _kind(x) -> tuple[str, str] | None:
    """(datatype IRI, lexical form) of a literal; None for an IRI or blank node."""
    t = type(x)
    if t is str:
        return XSD_STRING, x
    if t is int:
        return XSD_INTEGER, str(x)
    if t is RdfLiteral:
        return x.datatype, x.lexical
    return None


def _number(datatype: str, lexical: str):
    """The number of a numeric literal (int or Decimal, or float for xsd:float/double); None if ill-typed."""
    local = datatype[len(XSD) :] if datatype.startswith(XSD) else ""
    text = lexical.strip()
    if local in INTEGER_RANGES:
        if not re.fullmatch(r"[+-]?[0-9]+", text):
            return None
        value = int(text)
        low, high = INTEGER_RANGES[local]
        return value if low <= value <= high else None
    if local == "decimal" and _DECIMAL.match(text):
        try:
            d = Decimal(text)
        except InvalidOperation:
            return None
        return int(d) if d == d.to_integral_value() else d.normalize()
    if local in ("double", "float") and _FLOAT.match(text):
        return float(text.replace("INF", "inf"))
    return None


def _value(x):
    """(value space, canonical value) of a literal; None for a non-literal or an ill-typed literal."""
    kind = _kind(x)
    if kind is None:
        return None
    datatype, lexical = kind
    local = datatype[len(XSD) :] if datatype.startswith(XSD) else None
    if datatype == RDF_LANG_STRING:
        return "lang", (lexical, x.lang.lower())
    if datatype == RDF_PLAIN:  # "text@lang" or "text@"
        text, at, lang = lexical.rpartition("@")
        return ("lang", (text, lang.lower())) if at and lang else ("string", text) if at else None
    if local in STRING_PATTERNS:
        return ("string", lexical) if STRING_PATTERNS[local].fullmatch(lexical) else None
    if local == "boolean":
        b = _BOOLEAN.get(lexical.strip())
        return None if b is None else ("boolean", b)
    if local in INTEGER_RANGES or local == "decimal":
        n = _number(datatype, lexical)
        return None if n is None else ("real", n)
    if local in ("double", "float"):
        n = _number(datatype, lexical)
        return None if n is None else (local, repr(n) if n == n else "NaN")
    return "other:" + datatype, lexical  # a datatype fluxmat does not interpret: its lexical form


def dt_value(x):
    """The data value of a literal as a constant (see the module docstring), None if it has none."""
    v = _value(x)
    if v is None:
        return None
    space, value = v
    if space == "string":
        return value
    if space == "real":
        return value if type(value) is int else RdfLiteral(format(value, "f"), XSD + "decimal")
    if space == "lang":
        return RdfLiteral(value[0], RDF_LANG_STRING, value[1])
    if space.startswith("other:"):
        return RdfLiteral(value, space[len("other:") :])
    return RdfLiteral(value, XSD + space)


def datatype(x):
    kind = _kind(x)
    return None if kind is None else Iri(kind[0])


def _in_space(space: str, value, dt: str) -> bool:
    local = dt[len(XSD) :] if dt.startswith(XSD) else None
    if dt in (RDFS_LITERAL,):
        return True
    if dt == RDF_PLAIN:
        return space in ("string", "lang")
    if dt == RDF_LANG_STRING:
        return space == "lang"
    if local in STRING_PATTERNS:
        return space == "string" and STRING_PATTERNS[local].fullmatch(value) is not None
    if local in INTEGER_RANGES:
        low, high = INTEGER_RANGES[local]
        return space == "real" and type(value) is int and low <= value <= high
    if local == "decimal" or dt == OWL_REAL:
        return space == "real"
    return space == local  # boolean, double, float


def dt_member(x, dt):
    """1 or 0: whether literal `x`'s data value is in `dt`'s value space; None if undefined."""
    if type(dt) is not Iri or dt.value not in VALUE_SPACES or _kind(x) is None:
        return None
    v = _value(x)
    if v is None:  # ill-typed: no data value, so in no value space
        return 0
    return 1 if _in_space(v[0], v[1], dt.value) else 0


VALUE_SPACES = frozenset(
    [XSD + t for t in (*INTEGER_RANGES, *STRING_PATTERNS, "decimal", "boolean", "double", "float")]
    + [RDF_PLAIN, RDF_LANG_STRING, RDFS_LITERAL, OWL_REAL]
)
FUNCTIONS: dict[str, tuple[int, str, Callable]] = {  # name -> (arity, runtime name, function)
    "datatype": (1, "_fn_datatype", datatype),
    "dt_value": (1, "_fn_dt_value", dt_value),
    "dt_member": (2, "_fn_dt_member", dt_member),
}
