"""The values plans compute with: arithmetic and comparisons over constants, None when undefined.

Generated plan code (engine.plans, engine.hypertree) calls these by the names in `ARITH` and
`COMPARE`; `RUNTIME` is the namespace they run in. An `RdfLiteral` computes and compares as its
key (the integer value of an `xsd:integer` literal and its subtypes, else its lexical form).
"""

from __future__ import annotations

from fluxmat.engine.datatypes import FUNCTIONS
from fluxmat.engine.syntax import INT_SAFE_BITS, RdfLiteral, int_in_range


def _plain(x):
    """What a value computes and compares as: an `RdfLiteral` by its key, the rest as is."""
    return x.key if type(x) is RdfLiteral else x


def _num(a, b):
    return type(a) is int and type(b) is int


def _add(a, b):
    a, b = _plain(a), _plain(b)
    if _num(a, b):
        r = a + b
        return r if r.bit_length() <= INT_SAFE_BITS or int_in_range(r) else None
    if type(a) is str and type(b) is str:
        return a + b
    return None


def _sub(a, b):
    a, b = _plain(a), _plain(b)
    if _num(a, b):
        r = a - b
        return r if r.bit_length() <= INT_SAFE_BITS or int_in_range(r) else None
    return None


def _mul(a, b):
    a, b = _plain(a), _plain(b)
    if _num(a, b):
        r = a * b
        return r if r.bit_length() <= INT_SAFE_BITS or int_in_range(r) else None
    return None


def _div(a, b):
    a, b = _plain(a), _plain(b)
    if not _num(a, b) or b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a, b):
    a, b = _plain(a), _plain(b)
    if not _num(a, b) or b == 0:
        return None
    return a - b * _div(a, b)


def _comparable(a, b) -> bool:
    """Ordering is defined between two integers or two strings only (IRIs, blank nodes: false)."""
    return type(a) is type(b) and type(a) in (int, str)


def _lt(a, b):
    a, b = _plain(a), _plain(b)
    return _comparable(a, b) and a < b


def _le(a, b):
    a, b = _plain(a), _plain(b)
    return _comparable(a, b) and a <= b


def _gt(a, b):
    a, b = _plain(a), _plain(b)
    return _comparable(a, b) and a > b


def _ge(a, b):
    a, b = _plain(a), _plain(b)
    return _comparable(a, b) and a >= b


def _eq(a, b):
    a, b = _plain(a), _plain(b)
    return a is not None and a == b


def _ne(a, b):
    a, b = _plain(a), _plain(b)
    return a is not None and b is not None and a != b


ARITH = {"+": "_add", "-": "_sub", "*": "_mul", "/": "_div", "%": "_mod"}
COMPARE = {"<": "_lt", "<=": "_le", ">": "_gt", ">=": "_ge", "=": "_eq", "!=": "_ne"}
RUNTIME = {
    **{name: fn for _, name, fn in FUNCTIONS.values()},
    "_add": _add, "_sub": _sub, "_mul": _mul, "_div": _div, "_mod": _mod,
    "_lt": _lt, "_le": _le, "_gt": _gt, "_ge": _ge, "_eq": _eq, "_ne": _ne,
}  # fmt: skip
