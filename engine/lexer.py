"""The lexer (stage 1, first half): program text -> tokens, for engine.parser.

One compiled master regex, matched token by token; tokens are produced as the
parser asks for them, so lexing needs memory for the current token only, and
every repeat in the regexes is possessive (no backtracking state per character:
a 10 MB string literal costs its own size, not hundreds of bytes per byte).
`read_source` reads a program or facts file as UTF-8, naming the position of
the first byte that is not.

Lexical decisions worth knowing:

- Comments run from `//` or `%` to the end of the line. `%` is the modulo
  operator only right after a variable, an integer or a parenthesised
  expression (`X % 2`, `(X + 1) % 2`), or after any constant inside
  parentheses (`p(a % 2)`); anywhere else, e.g. after an atom's `)`, it starts
  a comment.
- `<` starts an IRI where a term may start and is less-than after a term.
- `PREFIX p: <iri>` / `@prefix p: <iri>` (trailing `.` optional). RDFox files
  sometimes write the IRI bare (`PREFIX owl: http://...#`); that is accepted
  in declarations only.
- Integers have at most `MAX_INT_DIGITS` digits (engine.syntax).
- RDF literals: a string followed by a language tag (`"chat"@fr`, token
  `lang`) or by `^^` and a datatype (`"05"^^xsd:int`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from fluxmat.engine.errors import ParseError
from fluxmat.engine.syntax import IRI_CHAR, MAX_INT_DIGITS, Pos

_LOCAL = r"(?:[A-Za-z0-9_](?:[A-Za-z0-9_\-.]*[A-Za-z0-9_\-])?)"
_PREFIX_NAME = r"(?:[A-Za-z](?:[A-Za-z0-9_\-]*[A-Za-z0-9_])?)"
# An empty local part must not be followed by `-` or `=`: `a:-b` is `a :- b`.
_PNAME = _PREFIX_NAME + r"?:(?:" + _LOCAL + r"|(?![-=]))"

_MASTER = re.compile(
    r"""
    (?P<pdecl>(?:@prefix|PREFIX)(?![A-Za-z0-9_:\-]))
  | (?P<not>(?:not|NOT)(?![A-Za-z0-9_:]))
  | (?P<pname>"""
    + _PNAME
    + r""")
  | (?P<var>[A-Z_][A-Za-z0-9_]*)
  | (?P<qvar>\?[A-Za-z0-9_]+)
  | (?P<id>[a-z][A-Za-z0-9_]*)
  | (?P<float>[0-9]+\.[0-9]+)
  | (?P<int>[0-9]+)
  | (?P<str>"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+")
  | (?P<op>:-|:=|<=|>=|!=|<>|\^\^|[(),.\[\]=<>!+\-*/%])
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_IRI = re.compile("<(" + IRI_CHAR + "*+)>")
IRI_FULL = re.compile("<" + IRI_CHAR + "*>\\Z")
# Possessive repeats (`*+`, `++`): the regex engine keeps no backtracking state per
# character or per line, so lexing a long string, comment run or blank area needs
# no memory beyond the token itself.
_SKIP = re.compile(r"(?:\s++|//[^\n]*+)++")
_SKIP_PCT = re.compile(r"(?:\s++|//[^\n]*+|%[^\n]*+)++")
# The rest of a prefix declaration after the keyword: name, then <iri> or a bare IRI.
_PDECL = re.compile(
    r"\s+(" + _PREFIX_NAME + r"?:)\s*(?:<([^\s<>\"]*)>|([A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"]*))"
)
_PDECL_NAME = re.compile(r"\s+(" + _PREFIX_NAME + r"?:)")
# Every `_N` in the text (variables `_N` / `?_N`, and some that are not variables):
# the names fresh anonymous variables avoid.
ANON_LIKE = re.compile(r"(?<![A-Za-z0-9_])_[0-9]+(?![A-Za-z0-9_])")
PNAME_FULL = re.compile(r"(" + _PREFIX_NAME + r"?):(" + _LOCAL + r"?)\Z")

# After these token kinds `<` is less-than (operator position), else it opens an IRI.
_TERM_END = frozenset({"id", "var", "int", "str", "lang", "iri", "pname", ")", "]"})
_LANG = re.compile(r"@[A-Za-z]++(?:-[A-Za-z0-9]++)*+")  # a language tag after a string
_VALUE_KINDS = frozenset({"id", "pname"})
CMP_OPS = frozenset({"=", "!=", "<", "<=", ">", ">=", ":="})
ARITH_OPS = frozenset({"+", "-", "*", "/", "%"})
# Token kinds that can be a predicate name; a `(` after one opens an argument list.
PRED_KINDS = frozenset({"id", "pname", "iri", "str"})

# A token is (kind, value, start, end). kind is a category name ("id", "var", ...)
# or the operator text itself ("(", ":-", ...); "<>" becomes "!=".
Token = tuple[str, str, int, int]


def tokenize(text: str) -> Iterator[Token]:
    """Yield the tokens of `text`, then ("eof", ...) forever.

    A lexical error becomes an ("err", message, ...) token followed by end of
    input, so it is raised only when the parser reaches it (errors are reported in
    text order). Tokens are produced as the parser asks for them, so lexing needs
    memory for the current token only (and the stack of open parentheses).
    """
    n = len(text)
    pos = 0
    last = 0  # end of the previous token
    prev = ""  # kind of the previous token
    mod_ok = False  # whether `%` here is the modulo operator
    parens: list[bool] = []  # for each open '(': is it an atom's argument list?
    master = _MASTER.match
    while True:
        m = (_SKIP_PCT if not mod_ok else _SKIP).match(text, pos)
        if m:
            pos = m.end()
        if pos >= n:
            break
        c = text[pos]
        if c == "@" and prev == "str":  # a language tag: "chat"@fr
            m = _LANG.match(text, pos)
            if m is None:
                yield ("err", "expected a language tag such as @en after '\"...\"@'", pos, pos + 1)
                last = pos + 1
                break
            yield ("lang", m.group()[1:], pos, m.end())
            pos = last = m.end()
            prev = "lang"
            mod_ok = bool(parens)
            continue
        if c == "<" and prev not in _TERM_END:
            m = _IRI.match(text, pos)
            if m is None:
                yield ("err", "unterminated IRI", pos, pos + 1)
                last = pos + 1
                break
            yield ("iri", m.group(1), pos, m.end())
            pos = last = m.end()
            prev = "iri"
            mod_ok = bool(parens)
            continue
        m = master(text, pos)
        kind = m.lastgroup
        end = m.end()
        val = m.group()
        if kind == "op":
            kind = "!=" if val == "<>" else val
            if kind == "(":
                parens.append(prev in PRED_KINDS)
                mod_ok = False
            elif kind == ")":
                mod_ok = not parens.pop() if parens else False
            else:
                mod_ok = False
        elif kind == "var" or (kind == "int" and end - pos <= MAX_INT_DIGITS):
            mod_ok = True
        elif kind in _VALUE_KINDS:
            mod_ok = bool(parens)
        elif kind == "qvar":
            kind = "var"
            val = val[1:]
            mod_ok = True
        elif kind == "str":
            mod_ok = bool(parens)
        elif kind == "pdecl":
            yield ("pdecl", val, pos, end)
            last = pos = end
            d = _PDECL.match(text, end)
            if d is not None:
                yield ("pns", d.group(1), d.start(1), d.end(1))
                if d.group(2) is not None:
                    yield ("iri", d.group(2), d.start(2) - 1, d.end())
                else:
                    yield ("iri", d.group(3), d.start(3), d.end())
                last = pos = d.end()
            else:
                d = _PDECL_NAME.match(text, end)
                if d is not None:
                    yield ("pns", d.group(1), d.start(1), d.end(1))
                    last = pos = d.end()
            prev = "pdecl_end"
            mod_ok = False
            continue
        elif kind == "bad":
            if c == '"':
                yield ("err", "unterminated string", pos, pos + 1)
            else:
                yield ("err", f"unexpected character {c!r}", pos, pos + 1)
            last = pos + 1
            break
        elif kind == "int" and end - pos > MAX_INT_DIGITS:
            yield ("err", f"integer with {end - pos} digits: at most {MAX_INT_DIGITS} are supported", pos, end)
            last = end
            break
        elif kind == "float":
            yield ("err", f"floating-point numbers are not supported, found '{val}'", pos, end)
            last = end
            break
        else:
            mod_ok = False
        yield (kind, val, pos, end)
        pos = last = end
        prev = kind
    while True:
        yield ("eof", "", last, last)


def describe(tok: Token) -> str:
    kind = tok[0]
    if kind == "eof":
        return "end of input"
    if kind == "var" and tok[1] != "_" and not (tok[1][:1].isupper() or tok[1][:1] == "_"):
        text = "?" + tok[1]
    elif kind == "iri":
        text = f"<{tok[1]}>"
    else:
        text = tok[1]
    if len(text) > 60:
        text = text[:57] + "..."
    return f"'{text}'"


def read_source(path: str | Path) -> str:
    """The text of a program or facts file; every problem is a ParseError naming the file.

    Bytes that are not UTF-8 are reported at their line and column.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ParseError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ParseError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise ParseError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, start) + 1
        col = len(data[start : exc.start].decode("utf-8", errors="replace")) + 1
        raise ParseError(
            f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded", Pos(str(path), line, col)
        ) from None
