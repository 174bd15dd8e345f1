r"""A micro-batch's plain JSON updates read at once: one numba pass over the bytes, term strings as spans.

`scan(texts, eligible)` reads every eligible message's text (UTF-8 bytes of
the whole batch, one buffer) in a compiled kernel and gives a `Scan`: for
each message, whether it has the *strict plain shape* and, if so, its facts
(message, added or deleted, predicate, arity, arguments) and its id, with
every string kept as a span of the buffer and a 64-bit hash of its raw bytes
(its value is decoded once per distinct span by the caller).

The strict plain shape is a subset of what connectors.json_columns'
`ColumnsBuilder.plain_text` takes, chosen so that a message of this shape is
taken by it, with the same facts: one JSON object with the keys "add", "del"
(lists of non-empty lists of a non-empty string and strings or integers) and
"id" (a string, an integer or null), each at most once, written without
escapes in the keys and without white space before their colons; integers of
at most 18 digits (no fraction or exponent); no `\u` escape of a surrogate;
no escaped quote followed by a colon, a space or a non-ASCII character (the
text checks of `plain_text` count `":` and look for `"`, white space, `:`).
Anything else is "not of the shape", and the caller reads that message as
before, one by one -- so a dead letter keeps its reason.

Not here: coding the terms and building the columns (connectors.json_columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from fluxmat.engine import choose_cache_dir  # noqa: F401  (importing it chose a writable cache folder)

MAX_DIGITS = 18  # an integer of more digits is left to the one-by-one reader (int64 and beyond)
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


@dataclass
class Scan:
    """The plain messages of a batch (module docstring); arrays over messages, facts, arguments, strings."""

    buf: np.ndarray  # uint8: the batch's texts, UTF-8
    ok: np.ndarray  # (messages,) bool: of the strict plain shape
    adds: np.ndarray  # (messages,) int64: facts listed under "add"
    dels: np.ndarray
    id_kind: (
        np.ndarray
    )  # (messages,) int8: 0 no id (or null), 1 a string (id_val: its string), 2 an integer
    id_val: np.ndarray
    fact_msg: np.ndarray  # (facts,) int64, increasing
    fact_add: np.ndarray  # bool
    fact_pred: np.ndarray  # the predicate's string
    fact_arity: np.ndarray
    fact_arg: np.ndarray  # its first argument
    arg_int: (
        np.ndarray
    )  # (arguments,) bool: an integer (arg_val), else a string (arg_val: its string)
    arg_val: np.ndarray
    str_start: np.ndarray  # (strings,) int64: the span of its raw text, quotes excluded
    str_end: np.ndarray
    str_hash: np.ndarray  # uint64 hash of the raw text


def scan(texts: list, eligible: np.ndarray) -> Scan | None:
    """The strict plain messages among `texts` where `eligible` (module docstring); None: none can be read so."""
    picked = [t if e else "" for t, e in zip(texts, eligible.tolist(), strict=True)]
    try:
        if all(map(str.isascii, picked)):  # a byte per character: the ends without encoding each
            data = "".join(picked).encode("ascii")
            lengths = map(len, picked)
        else:
            parts = [t.encode("utf-8") for t in picked]
            data, lengths = b"".join(parts), map(len, parts)
    except UnicodeEncodeError:  # a lone surrogate: everything one by one
        return None
    ends = np.cumsum(np.fromiter(lengths, np.int64, len(picked)))
    buf = np.frombuffer(data, np.uint8)
    # bounds (a string takes 3 bytes or more with what follows it, an argument 2, a fact 5); np.zeros
    # takes pages from the system as they are written, so only the used part costs memory
    n_str, n_arg, n_fact, n = (
        len(data) // 3 + 2,
        len(data) // 2 + 2,
        len(data) // 5 + 2,
        len(picked),
    )
    msg = np.zeros((4, n), np.int64)
    facts = np.zeros((5, n_fact), np.int64)
    args = np.zeros((2, n_arg), np.int64)
    strs = np.zeros((2, n_str), np.int64)
    hashes = np.zeros(n_str, np.uint64)
    ok = np.zeros(n, np.bool_)
    nf, na, ns = _scan(buf, ends, eligible, ok, msg, facts, args, strs, hashes)
    return Scan(buf, ok, msg[0], msg[1], msg[2].astype(np.int8), msg[3], facts[0, :nf],
                facts[1, :nf].astype(np.bool_), facts[2, :nf], facts[3, :nf], facts[4, :nf],
                args[0, :na].astype(np.bool_), args[1, :na], strs[0, :ns], strs[1, :ns],
                hashes[:ns])  # fmt: skip


def json_array(sc: Scan, picked: np.ndarray) -> bytes:
    """The JSON text of an array of the strings `picked`, as written."""
    size = int((sc.str_end[picked] - sc.str_start[picked]).sum()) + 3 * len(picked) + 2
    out = np.empty(size, np.uint8)
    return out[: _join(sc.buf, sc.str_start, sc.str_end, picked, out)].tobytes()


@njit(cache=True)
def _join(buf, start, end, picked, out):
    out[0] = 91
    at = 1
    for s in picked:
        out[at] = 34
        n = end[s] - start[s]
        out[at + 1 : at + 1 + n] = buf[start[s] : end[s]]
        out[at + 1 + n] = 34
        out[at + 2 + n] = 44
        at += n + 3
    if at == 1:
        at += 1
    out[at - 1] = 93
    return at


def same_bytes(sc: Scan, group: np.ndarray, first: np.ndarray) -> bool:
    """Whether every string has the raw bytes of the first string of its hash group."""
    return _same(sc.buf, sc.str_start, sc.str_end, group, first)


@njit(cache=True)
def _same(buf, start, end, group, first):
    for s in range(len(start)):
        r = first[group[s]]
        if r == s:
            continue
        n = end[s] - start[s]
        if end[r] - start[r] != n:
            return False
        for k in range(n):
            if buf[start[s] + k] != buf[start[r] + k]:
                return False
    return True


@njit(cache=True, inline="always")
def _ws(buf, i, end):
    while i < end and (buf[i] == 32 or buf[i] == 9 or buf[i] == 10 or buf[i] == 13):
        i += 1
    return i


@njit(cache=True)
def _hex4(buf, i):
    v = 0
    for k in range(i, i + 4):
        h = buf[k]
        if 48 <= h <= 57:
            d = h - 48
        elif 97 <= h <= 102:
            d = h - 87
        elif 65 <= h <= 70:
            d = h - 55
        else:
            return -1
        v = v * 16 + d
    return v


@njit(cache=True)
def _string(buf, i, end):
    """(the index after the string opening at buf[i] (a quote), its hash); index -1: not of the shape."""
    i += 1
    h = _FNV_OFFSET
    while i < end:
        c = buf[i]
        if c == 34:
            return i + 1, h
        if c < 32:
            return -1, h
        h = (h ^ np.uint64(c)) * _FNV_PRIME
        if c != 92:
            i += 1
            continue
        if i + 1 >= end:
            return -1, h
        e = buf[i + 1]
        if e == 117:  # \uXXXX, not a surrogate
            if i + 5 >= end:
                return -1, h
            v = _hex4(buf, i + 2)
            if v < 0 or 0xD800 <= v <= 0xDFFF:
                return -1, h
        elif e == 34:  # \" not followed by what plain_text's text checks would see
            if i + 2 < end and (buf[i + 2] == 58 or buf[i + 2] == 32 or buf[i + 2] >= 128):
                return -1, h
        elif not (e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116):
            return -1, h
        h = (h ^ np.uint64(e)) * _FNV_PRIME  # the escaped character is hashed as any other
        i += 2
    return -1, h


@njit(cache=True)
def _int(buf, i, end):
    """(index after, value) of the integer at buf[i]; index -1: not of the shape."""
    neg = buf[i] == 45
    if neg:
        i += 1
    if i >= end or not (48 <= buf[i] <= 57):
        return -1, 0
    v, digits = 0, 0
    if buf[i] == 48:
        i += 1
        digits = 1
    else:
        while i < end and 48 <= buf[i] <= 57:
            v = v * 10 + (buf[i] - 48)
            digits += 1
            i += 1
    if digits > MAX_DIGITS or (
        i < end and (buf[i] == 46 or buf[i] == 101 or buf[i] == 69 or 48 <= buf[i] <= 57)
    ):
        return -1, 0
    return i, -v if neg else v


@njit(cache=True)
def _put_string(buf, i, end, strs, hashes, ns):
    """Read the string at buf[i] as string number ns; the index after it (-1: not of the shape)."""
    j, h = _string(buf, i, end)
    if j < 0:
        return -1
    strs[0, ns], strs[1, ns], hashes[ns] = i + 1, j - 1, h
    return j


@njit(cache=True)
def _key(buf, i, end):
    """(which key: 0 add, 1 del, 2 id, index after its colon); which -1: not of the shape."""
    if (
        i + 5 <= end
        and buf[i + 1] == 105
        and buf[i + 2] == 100
        and buf[i + 3] == 34
        and buf[i + 4] == 58
    ):
        return 2, i + 5
    if i + 6 > end or buf[i + 4] != 34 or buf[i + 5] != 58:
        return -1, 0
    a, b, c = buf[i + 1], buf[i + 2], buf[i + 3]
    if a == 97 and b == 100 and c == 100:
        return 0, i + 6
    if a == 100 and b == 101 and c == 108:
        return 1, i + 6
    return -1, 0


@njit(cache=True)
def _facts(buf, i, end, m, add, facts, args, strs, hashes, cnt):
    """Read the list of facts at buf[i]; (index after, how many); index -1: not of the shape.

    `cnt` holds the counts of facts, arguments and strings so far (updated).
    """
    if buf[i] != 91:
        return -1, 0
    i = _ws(buf, i + 1, end)
    if i < end and buf[i] == 93:
        return i + 1, 0
    k = 0
    while i < end:
        if buf[i] != 91:
            return -1, 0
        i = _ws(buf, i + 1, end)
        if i >= end or buf[i] != 34 or i + 1 >= end or buf[i + 1] == 34:
            return -1, 0
        nf, na, ns = cnt[0], cnt[1], cnt[2]
        i = _put_string(buf, i, end, strs, hashes, ns)
        if i < 0:
            return -1, 0
        facts[0, nf], facts[1, nf], facts[2, nf], facts[4, nf] = m, add, ns, na
        ns += 1
        arity = 0
        i = _ws(buf, i, end)
        while i < end and buf[i] == 44:
            i = _ws(buf, i + 1, end)
            if i >= end:
                return -1, 0
            if buf[i] == 34:
                i = _put_string(buf, i, end, strs, hashes, ns)
                args[0, na], args[1, na] = 0, ns
                ns += 1
            else:
                i, v = _int(buf, i, end)
                args[0, na], args[1, na] = 1, v
            if i < 0:
                return -1, 0
            na += 1
            arity += 1
            i = _ws(buf, i, end)
        if i >= end or buf[i] != 93:
            return -1, 0
        facts[3, nf] = arity
        cnt[0], cnt[1], cnt[2] = nf + 1, na, ns
        k += 1
        i = _ws(buf, i + 1, end)
        if i < end and buf[i] == 93:
            return i + 1, k
        if i >= end or buf[i] != 44:
            return -1, 0
        i = _ws(buf, i + 1, end)
    return -1, 0


@njit(cache=True)
def _id(buf, i, end, m, msg, strs, hashes, cnt):
    """Read the id at buf[i] (a string, an integer or null); the index after it (-1: not of the shape)."""
    c = buf[i]
    if c == 34:
        j = _put_string(buf, i, end, strs, hashes, cnt[2])
        msg[2, m], msg[3, m] = 1, cnt[2]
        cnt[2] += 1
        return j
    if c == 110:
        if i + 4 <= end and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108:
            return i + 4
        return -1
    j, v = _int(buf, i, end)
    msg[2, m], msg[3, m] = 2, v
    return j


@njit(cache=True)
def _message(buf, i, end, m, msg, facts, args, strs, hashes, cnt):
    """Whether message m (buf[i:end]) is of the shape; its facts, arguments and strings added to the counts."""
    i = _ws(buf, i, end)
    if i >= end or buf[i] != 123:
        return False
    i = _ws(buf, i + 1, end)
    if i < end and buf[i] == 125:
        return _ws(buf, i + 1, end) == end
    seen = 0
    while i < end and buf[i] == 34:
        which, i = _key(buf, i, end)
        if which < 0 or seen & (1 << which):
            return False
        seen |= 1 << which
        i = _ws(buf, i, end)
        if i >= end:
            return False
        if which == 2:
            i = _id(buf, i, end, m, msg, strs, hashes, cnt)
        else:
            i, k = _facts(buf, i, end, m, which == 0, facts, args, strs, hashes, cnt)
            msg[which, m] = k
        if i < 0:
            return False
        i = _ws(buf, i, end)
        if i < end and buf[i] == 125:
            return _ws(buf, i + 1, end) == end
        if i >= end or buf[i] != 44:
            return False
        i = _ws(buf, i + 1, end)
    return False


@njit(cache=True)
def _scan(buf, ends, eligible, ok, msg, facts, args, strs, hashes):
    cnt = np.zeros(3, np.int64)
    start = 0
    for m in range(len(ends)):
        end = ends[m]
        if eligible[m]:
            before = cnt.copy()
            if _message(buf, start, end, m, msg, facts, args, strs, hashes, cnt):
                ok[m] = True
            else:
                cnt[:] = before
                msg[:, m] = 0
        start = end
    return cnt[0], cnt[1], cnt[2]
