"""The parser (stage 1): program text -> `engine.syntax.Program`.

A hand-written lexer (one compiled master regex, matched token by token) and a
recursive-descent parser. It knows nothing about safety, arities or
stratification (that is `engine.analysis`); it only checks that text is well
formed and builds the AST, giving every node the position of its first token.
Every mistake is a `ParseError` naming file, line and column, what was expected
and what was found (`end of input` at the end).

Public API:

- `parse_program(text, source)` -> `Program` (rules, ground facts, prefixes);
- `parse_facts(text, source, prefixes)` -> `list[Atom]` for a facts file;
- `fact_from_json(item, prefixes, where)` -> `Atom` for a JSON fact
  `["pred", arg, ...]` as decoded by `json.loads`.

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
- A prefixed name with an undeclared prefix is an error as a constant, but as a
  predicate name it is kept verbatim (`p:hasParent`), because RDFox rule files
  (e.g. the Illich-Glimm `family.dlog`) use prefixes they never declare and
  their update streams name predicates the same way.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right

from engine.errors import ParseError
from engine.syntax import (
    Atom,
    BinOp,
    Comparison,
    Const,
    Iri,
    Negation,
    Pos,
    Program,
    Rule,
    Var,
    is_json_literal,
    literal,
    value_from_json,
)  # fmt: skip

__all__ = ["parse_program", "parse_facts", "fact_from_json"]

# --------------------------------------------------------------------------- lexer

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
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<op>:-|:=|<=|>=|!=|<>|\^\^|[(),.\[\]=<>!+\-*/%])
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_IRI = re.compile(r'<([^\s<>"]*)>')
_LANG = re.compile(r"@[A-Za-z]+(?:-[A-Za-z0-9]+)*")
_IRI_FULL = re.compile(r'<[^\s<>"]*>\Z')
_SKIP = re.compile(r"(?:\s+|//[^\n]*)+")
_SKIP_PCT = re.compile(r"(?:\s+|//[^\n]*|%[^\n]*)+")
# The rest of a prefix declaration after the keyword: name, then <iri> or a bare IRI.
_PDECL = re.compile(
    r"\s+(" + _PREFIX_NAME + r"?:)\s*(?:<([^\s<>\"]*)>|([A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"]*))"
)
_PDECL_NAME = re.compile(r"\s+(" + _PREFIX_NAME + r"?:)")
_PNAME_FULL = re.compile(r"(" + _PREFIX_NAME + r"?):(" + _LOCAL + r"?)\Z")

# After these token kinds `<` is less-than (operator position), else it opens an IRI.
_TERM_END = frozenset({"id", "var", "int", "str", "lang", "iri", "pname", ")", "]"})
_VALUE_KINDS = frozenset({"id", "pname"})
_CMP_OPS = frozenset({"=", "!=", "<", "<=", ">", ">=", ":="})
_ARITH_OPS = frozenset({"+", "-", "*", "/", "%"})
_PRED_KINDS = frozenset({"id", "pname", "iri"})

# A token is (kind, value, start, end). kind is a category name ("id", "var", ...)
# or the operator text itself ("(", ":-", ...); "<>" becomes "!=".
Token = tuple[str, str, int, int]


def _tokenize(text: str) -> list[Token]:
    """Split `text` into tokens.

    A lexical error becomes an ("err", message, ...) token followed by end of
    input, so it is raised only when the parser reaches it (errors are reported in
    text order).
    """
    toks: list[Token] = []
    append = toks.append
    n = len(text)
    pos = 0
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
                append(("err", "expected a language tag such as @en after '\"...\"@'", pos, pos + 1))
                break
            append(("lang", m.group()[1:], pos, m.end()))
            pos = m.end()
            prev = "lang"
            mod_ok = bool(parens)
            continue
        if c == "<" and prev not in _TERM_END:
            m = _IRI.match(text, pos)
            if m is None:
                append(("err", "unterminated IRI", pos, pos + 1))
                break
            append(("iri", m.group(1), pos, m.end()))
            pos = m.end()
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
                parens.append(prev in _PRED_KINDS)
                mod_ok = False
            elif kind == ")":
                mod_ok = not parens.pop() if parens else False
            else:
                mod_ok = False
        elif kind == "var" or kind == "int":
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
            append(("pdecl", val, pos, end))
            d = _PDECL.match(text, end)
            if d is not None:
                append(("pns", d.group(1), d.start(1), d.end(1)))
                if d.group(2) is not None:
                    append(("iri", d.group(2), d.start(2) - 1, d.end()))
                else:
                    append(("iri", d.group(3), d.start(3), d.end()))
                pos = d.end()
            else:
                d = _PDECL_NAME.match(text, end)
                if d is not None:
                    append(("pns", d.group(1), d.start(1), d.end(1)))
                    pos = d.end()
                else:
                    pos = end
            prev = "pdecl_end"
            mod_ok = False
            continue
        elif kind == "bad":
            if c == '"':
                append(("err", "unterminated string", pos, pos + 1))
            else:
                append(("err", f"unexpected character {c!r}", pos, pos + 1))
            break
        elif kind == "float":
            append(("err", f"floating-point numbers are not supported, found '{val}'", pos, end))
            break
        else:
            mod_ok = False
        append((kind, val, pos, end))
        pos = end
        prev = kind
    end_at = toks[-1][3] if toks else 0
    append(("eof", "", end_at, end_at))
    return toks


def _describe(tok: Token) -> str:
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


_ESCAPE = re.compile(r"\\(.)")
_JSON_ESCAPES = frozenset('"\\/bfnrtu')


# --------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str, source: str, prefixes: dict[str, str] | None = None):
        self.text = text
        self.source = source
        self.toks = _tokenize(text)
        self.i = 0
        self.tok = self.toks[0]
        self.prefixes: dict[str, str] = dict(prefixes or {})
        self.declared: dict[str, str] = {}
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        # Names of all named variables, so fresh names for `_` never clash.
        self._named_vars = {t[1] for t in self.toks if t[0] == "var" and t[1] != "_"}
        self._anon = 0
        if self.tok[0] == "err":
            self._lex_error()

    # ---- helpers

    def pos(self, offset: int) -> Pos:
        line = bisect_right(self._line_starts, offset)
        return Pos(self.source, line, offset - self._line_starts[line - 1] + 1)

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        return ParseError(message, self.pos(tok[2]))

    def expected(self, what: str) -> ParseError:
        return self.error(f"expected {what}, found {_describe(self.tok)}")

    def _lex_error(self) -> None:
        raise self.error(self.tok[1])

    def advance(self) -> Token:
        tok = self.tok
        self.i += 1
        self.tok = self.toks[self.i]
        if self.tok[0] == "err":
            self._lex_error()
        return tok

    def peek_kind(self) -> str:
        return self.toks[self.i + 1][0]

    # ---- top level

    def clauses(self, allow_rules: bool):
        """Yield (head, body, head argument tokens) per clause, handling declarations."""
        while self.tok[0] != "eof":
            if self.tok[0] == "pdecl":
                self.prefix_decl()
                continue
            yield self.clause(allow_rules)

    def prefix_decl(self) -> None:
        keyword = self.advance()[1]
        if self.tok[0] != "pns":
            raise self.expected(f"a prefix name such as 'p:' after '{keyword}'")
        name = self.advance()[1][:-1]
        if self.tok[0] != "iri":
            raise self.expected(f"an IRI such as <http://example.org/> after '{name}:'")
        iri = self.advance()[1]
        self.prefixes[name] = iri
        self.declared[name] = iri
        if self.tok[0] == ".":
            self.advance()

    def clause(self, allow_rules: bool) -> tuple[Atom, tuple, list]:
        self._anon = 0
        if self.tok[0] not in _PRED_KINDS:
            raise self.expected("a predicate name at the start of a rule or fact")
        arg_toks: list[Token] = []
        head = self.atom(head=True, arg_toks=arg_toks)
        kind = self.tok[0]
        if kind == ".":
            self.advance()
            return head, (), arg_toks
        if kind != ":-" or not allow_rules:
            if not allow_rules:
                raise self.expected("'.' after a fact (a facts file holds no rules)")
            raise self.expected("':-' or '.' after the rule head")
        self.advance()
        if self.tok[0] == ".":
            raise self.expected("a body literal after ':-'")
        body = [self.literal()]
        while True:
            kind = self.tok[0]
            if kind == ",":
                self.advance()
                body.append(self.literal())
            elif kind == ".":
                self.advance()
                return head, tuple(body), arg_toks
            else:
                raise self.expected("',' or '.' after a body literal")

    # ---- atoms and literals

    def pred_name(self) -> str:
        kind, val, _, _ = self.tok
        if kind == "id":
            pred = val
        elif kind == "iri":
            pred = val
        elif kind == "pname":
            prefix, _, local = val.partition(":")
            base = self.prefixes.get(prefix)
            pred = val if base is None else base + local
        else:
            raise self.expected("a predicate name")
        self.advance()
        return pred

    def atom(self, head: bool = False, arg_toks: list[Token] | None = None) -> Atom:
        start = self.tok
        pred = self.pred_name()
        kind = self.tok[0]
        if kind != "(" and kind != "[":
            return Atom(pred, (), self.pos(start[2]))
        close = ")" if kind == "(" else "]"
        self.advance()
        args = []
        if self.tok[0] == close:
            self.advance()
            return Atom(pred, (), self.pos(start[2]), close == "]")
        while True:
            if head:
                if arg_toks is not None:
                    arg_toks.append(self.tok)
                args.append(self.expr())
            else:
                args.append(self.body_arg())
            kind = self.tok[0]
            if kind == ",":
                self.advance()
            elif kind == close:
                self.advance()
                return Atom(pred, tuple(args), self.pos(start[2]), close == "]")
            else:
                raise self.expected(f"',' or '{close}' in the argument list")

    def body_arg(self):
        start = self.tok
        if start[0] == "(":
            raise self.expected("a variable or a constant")
        term = self.simple_term("a variable or a constant")
        if self.tok[0] in _ARITH_OPS:
            raise self.error(
                "expected a variable or a constant, found an arithmetic expression "
                "(bind it with '=' in the body)",
                start,
            )
        return term

    def literal(self):
        tok = self.tok
        kind = tok[0]
        if kind == "not" or kind == "!":
            self.advance()
            if self.tok[0] not in _PRED_KINDS:
                raise self.expected(f"an atom after '{tok[1]}'")
            return Negation(self.atom(), self.pos(tok[2]))
        if kind in _PRED_KINDS:
            nxt = self.peek_kind()
            if nxt == "(" or nxt == "[" or (nxt not in _CMP_OPS and nxt not in _ARITH_OPS):
                return self.atom()
        left = self.expr()
        op = self.tok[0]
        if op not in _CMP_OPS:
            raise self.expected("a comparison operator (=, !=, <, <=, >, >=, :=)")
        if op == ":=" and not isinstance(left, Var):
            raise self.error("expected a variable before ':='", tok)
        self.advance()
        right = self.expr()
        return Comparison(op, left, right, self.pos(tok[2]))

    # ---- terms

    def expr(self):
        left = self.mul()
        while self.tok[0] == "+" or self.tok[0] == "-":
            op = self.advance()[0]
            left = BinOp(op, left, self.mul())
        return left

    def mul(self):
        left = self.unary()
        while self.tok[0] in ("*", "/", "%"):
            op = self.advance()[0]
            left = BinOp(op, left, self.unary())
        return left

    def unary(self):
        kind = self.tok[0]
        if kind == "(":
            self.advance()
            inner = self.expr()
            if self.tok[0] != ")":
                raise self.expected("')' to close the parenthesised expression")
            self.advance()
            return inner
        if kind == "-" and self.peek_kind() != "int":
            self.advance()
            return BinOp("-", Const(0), self.unary())
        return self.simple_term("a term")

    def simple_term(self, what: str):
        tok = self.tok
        kind, val = tok[0], tok[1]
        if kind == "var":
            self.advance()
            if val == "_":
                return self.fresh_var()
            return Var(val)
        if kind == "id":
            self.advance()
            return Const(val)
        if kind == "int":
            self.advance()
            return Const(int(val))
        if kind == "-" and self.peek_kind() == "int":
            self.advance()
            return Const(-int(self.advance()[1]))
        if kind == "str":
            self.advance()
            lexical = self.string_value(tok)
            if self.tok[0] == "lang":
                return Const(literal(lexical, lang=self.advance()[1]))
            if self.tok[0] == "^^":
                self.advance()
                return Const(literal(lexical, self.datatype()))
            return Const(lexical)
        if kind == "iri":
            self.advance()
            return Const(Iri(val))
        if kind == "pname":
            prefix, _, local = val.partition(":")
            base = self.prefixes.get(prefix)
            if base is None:
                raise self.error(f"unknown prefix '{prefix}'")
            self.advance()
            return Const(Iri(base + local))
        raise self.expected(what)

    def datatype(self) -> str:
        """The datatype IRI after `^^` (`<iri>` or a prefixed name with a declared prefix)."""
        kind, val = self.tok[0], self.tok[1]
        if kind == "iri":
            self.advance()
            return val
        if kind == "pname":
            prefix, _, local = val.partition(":")
            if prefix not in self.prefixes:
                raise self.error(f"unknown prefix '{prefix}'")
            self.advance()
            return self.prefixes[prefix] + local
        raise self.expected("a datatype IRI after '^^'")

    def fresh_var(self) -> Var:
        while True:
            self._anon += 1
            name = f"_{self._anon}"
            if name not in self._named_vars:
                return Var(name)

    def string_value(self, tok: Token) -> str:
        raw = tok[1]
        if "\\" not in raw:
            return raw[1:-1]
        for m in _ESCAPE.finditer(raw):
            ch = m.group(1)
            ok = ch in _JSON_ESCAPES
            if ch == "u":
                ok = re.match(r"[0-9a-fA-F]{4}", raw[m.end() : m.end() + 4]) is not None
            if not ok:
                raise ParseError(f"invalid escape '\\{ch}' in string", self.pos(tok[2] + m.start()))
        return json.loads(raw, strict=False)

    # ---- facts

    def ground(self, head: Atom, arg_toks: list[Token]) -> Atom:
        for term, tok in zip(head.args, arg_toks, strict=True):
            if isinstance(term, Var):
                raise self.error(f"unsafe fact: variable {tok[1]} in a fact", tok)
            if isinstance(term, BinOp):
                raise self.error("expected a constant in a fact, found an expression", tok)
        return head


def parse_program(text: str, source: str = "<input>") -> Program:
    """Parse a program: prefix declarations, rules and ground facts, in any order."""
    p = _Parser(text, source)
    rules: list[Rule] = []
    facts: list[Atom] = []
    for head, body, arg_toks in p.clauses(allow_rules=True):
        if body:
            rules.append(Rule(head, body, head.pos))
        else:
            facts.append(p.ground(head, arg_toks))
    return Program(tuple(rules), tuple(facts), tuple(p.declared.items()), source)


def parse_facts(
    text: str, source: str = "<input>", prefixes: dict[str, str] | None = None
) -> list[Atom]:
    """Parse a facts file (`edge(a, b).` per fact, prefix declarations allowed).

    `prefixes` are known in advance (e.g. the program's); declarations in the
    file add to them. Rules and variables are errors.
    """
    p = _Parser(text, source, prefixes)
    return [p.ground(head, arg_toks) for head, _, arg_toks in p.clauses(allow_rules=False)]


def parse_pattern(text: str, prefixes: dict[str, str] | None = None, source: str = "<pattern>") -> Atom:
    """Parse one atom whose arguments may be variables, e.g. `path(a, ?X)` (a query).

    A trailing `.` is optional; `_` matches anything. Errors carry the column.
    """
    body = text.rstrip()
    p = _Parser(body if body.endswith(".") else body + ".", source, prefixes)
    clauses = list(p.clauses(allow_rules=False))
    if len(clauses) != 1:
        raise ParseError(f"expected one atom, found {len(clauses)}", Pos(source, 1, 1))
    return clauses[0][0]


# --------------------------------------------------------------------------- JSON facts


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


def fact_from_json(item: object, prefixes: dict[str, str], where: str = "") -> Atom:
    """Convert a JSON fact `["pred", arg, ...]` (as decoded by `json.loads`).

    The predicate is a string: `<iri>` is unwrapped and a prefixed name whose
    prefix is in `prefixes` is expanded (other names are kept verbatim, as in
    programs). Arguments: a JSON integer is an int constant, a string `<...>`
    an `Iri` (when `...` is a well-formed IRI, as in program text), any other
    string a str constant, and a JSON-LD value object (`{"@value": "05",
    "@type": "http://www.w3.org/2001/XMLSchema#int"}`, `{"@value": "chat",
    "@language": "fr"}`) an RDF literal (engine.syntax.literal). `where` (e.g. "updates.jsonl:3")
    starts every error message.
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
        m = _PNAME_FULL.match(pred)
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
        if isinstance(arg, str) and arg[:1] == "<" and _IRI_FULL.match(arg):
            args.append(Const(Iri(arg[1:-1])))
        else:
            args.append(Const(arg))
    return Atom(pred, tuple(args))
