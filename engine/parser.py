"""The parser (stage 1): program text -> `engine.syntax.Program`.

A recursive-descent parser over the tokens of engine.lexer. It knows nothing
about safety, arities or stratification (that is `engine.analysis`); it only
checks that text is well formed and builds the AST, giving every node the
position of its first token.
Every mistake is a `ParseError` naming file, line and column, what was expected
and what was found (`end of input` at the end).

Public API:

- `parse_program(text, source)` -> `Program` (rules, ground facts, prefixes);
- `parse_facts(text, source, prefixes)` -> `list[Atom]` for a facts file;
- `fact_from_json(item, prefixes, where)` -> `Atom` for a JSON fact
  `["pred", arg, ...]` as decoded by `json.loads` (engine.wire, the one codec of
  facts and JSON; re-exported here).

Decisions worth knowing (the lexical ones are in engine.lexer):

- A predicate name is an identifier, a prefixed name, an IRI or a quoted string
  (`"ed ge"(a)`: any name prints and reads back, see engine.printer).
- Parentheses and unary minus signs nest at most `MAX_NESTING` deep (the parser
  recurses on them); sums and products of any length are loops, and later
  stages walk terms without recursion.
- A prefixed name with an undeclared prefix is an error as a constant, but as a
  predicate name it is kept verbatim (`p:hasParent`), because RDFox rule files
  (e.g. the Illich-Glimm `family.dlog`) use prefixes they never declare and
  their update streams name predicates the same way.
"""

from __future__ import annotations

import json
import re

from fluxmat.engine.datatypes import FUNCTIONS
from fluxmat.engine.errors import ParseError
from fluxmat.engine.lexer import (
    ANON_LIKE,
    ARITH_OPS,
    CMP_OPS,
    PRED_KINDS,
    Token,
    describe,
    tokenize,
)
from fluxmat.engine.syntax import (
    MAX_NESTING,
    Atom,
    BinOp,
    Call,
    Comparison,
    Const,
    Iri,
    Negation,
    Pos,
    Program,
    Rule,
    Var,
    literal,
)
from fluxmat.engine.wire import fact_from_json  # the one codec of facts and JSON

__all__ = ["parse_program", "parse_facts", "fact_from_json", "MAX_NESTING"]


_ESCAPE = re.compile(r"\\(.)")
_JSON_ESCAPES = frozenset('"\\/bfnrtu')


# --------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, text: str, source: str, prefixes: dict[str, str] | None = None):
        self.text = text
        self.source = source
        self._next_token = tokenize(text).__next__
        self._ahead: Token | None = None  # the token after `tok`, once peeked at
        self.tok = self._next_token()
        self.prefixes: dict[str, str] = dict(prefixes or {})
        self.declared: dict[str, str] = {}
        self._line, self._line_start, self._line_at = 1, 0, 0  # see pos()
        self._taken: set[str] | None = None  # names a fresh `_N` must avoid (fresh_var)
        self._anon = 0
        self._depth = 0  # open parentheses and unary minus signs in the current term
        if self.tok[0] == "err":
            self._lex_error()

    # ---- helpers

    def pos(self, offset: int) -> Pos:
        """The line and column of `offset`, counting newlines since the last call.

        Positions are mostly asked in text order, so this costs the distance from
        the previous one (no table of line starts is kept).
        """
        text, at = self.text, self._line_at
        if offset >= at:
            newlines = text.count("\n", at, offset)
            if newlines:
                self._line += newlines
                self._line_start = text.rfind("\n", at, offset) + 1
        else:
            self._line -= text.count("\n", offset, at)
            self._line_start = text.rfind("\n", 0, offset) + 1
        self._line_at = offset
        return Pos(self.source, self._line, offset - self._line_start + 1)

    def error(self, message: str, tok: Token | None = None) -> ParseError:
        tok = tok or self.tok
        return ParseError(message, self.pos(tok[2]))

    def expected(self, what: str) -> ParseError:
        return self.error(f"expected {what}, found {describe(self.tok)}")

    def _lex_error(self) -> None:
        raise self.error(self.tok[1])

    def advance(self) -> Token:
        tok = self.tok
        if self._ahead is None:
            self.tok = self._next_token()
        else:
            self.tok, self._ahead = self._ahead, None
        if self.tok[0] == "err":
            self._lex_error()
        return tok

    def peek_kind(self) -> str:
        if self._ahead is None:
            self._ahead = self._next_token()
        return self._ahead[0]

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
        if self.tok[0] not in PRED_KINDS:
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
        elif kind == "str":
            pred = self.string_value(self.tok)
        elif kind == "pname":
            prefix, _, local = val.partition(":")
            base = self.prefixes.get(prefix)
            pred = val if base is None else base + local
        else:
            raise self.expected("a predicate name")
        self.advance()
        return pred

    def atom(self, head: bool = False, arg_toks: list[Token] | None = None) -> Atom:
        where = self.pos(self.tok[2])
        pred = self.pred_name()
        kind = self.tok[0]
        if kind != "(" and kind != "[":
            return Atom(pred, (), where)
        close = ")" if kind == "(" else "]"
        self.advance()
        args = []
        if self.tok[0] == close:
            self.advance()
            return Atom(pred, (), where, close == "]")
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
                return Atom(pred, tuple(args), where, close == "]")
            else:
                raise self.expected(f"',' or '{close}' in the argument list")

    def body_arg(self):
        start = self.tok
        if start[0] == "(":
            raise self.expected("a variable or a constant")
        term = self.simple_term("a variable or a constant")
        if self.tok[0] in ARITH_OPS:
            raise self.error(
                "expected a variable or a constant, found an arithmetic expression "
                "(bind it with '=' in the body)",
                start,
            )
        return term

    def literal(self):
        tok = self.tok
        kind = tok[0]
        where = self.pos(tok[2])
        if kind == "not" or kind == "!":
            self.advance()
            if self.tok[0] not in PRED_KINDS:
                raise self.expected(f"an atom after '{tok[1]}'")
            return Negation(self.atom(), where)
        if kind in PRED_KINDS:
            nxt = self.peek_kind()
            if nxt == "(" or nxt == "[" or (nxt not in CMP_OPS and nxt not in ARITH_OPS):
                return self.atom()
        left = self.expr()
        op = self.tok[0]
        if op not in CMP_OPS:
            raise self.expected("a comparison operator (=, !=, <, <=, >, >=, :=)")
        if op == ":=" and not isinstance(left, Var):
            raise self.error("expected a variable before ':='", tok)
        self.advance()
        right = self.expr()
        return Comparison(op, left, right, where)

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
        if kind == "(" or (kind == "-" and self.peek_kind() != "int"):
            return self.nested(kind)
        if kind == "id" and self.peek_kind() == "(":
            return self.call()
        return self.simple_term("a term")

    def call(self) -> Call:
        """`fn(term, ...)`, a built-in function (engine.datatypes.FUNCTIONS) with its arity."""
        tok = self.advance()
        if tok[1] not in FUNCTIONS:
            known = ", ".join(sorted(FUNCTIONS))
            raise self.error(f"unknown function '{tok[1]}' (the built-in functions are {known})", tok)
        self.nested_enter()
        self.advance()  # (
        args = [self.expr()]
        while self.tok[0] == ",":
            self.advance()
            args.append(self.expr())
        if self.tok[0] != ")":
            raise self.expected(f"',' or ')' in the arguments of {tok[1]}")
        self.advance()
        self._depth -= 1
        arity = FUNCTIONS[tok[1]][0]
        if len(args) != arity:
            raise self.error(f"{tok[1]} takes {arity} argument{'s' if arity > 1 else ''}, not {len(args)}", tok)
        return Call(tok[1], tuple(args))

    def nested_enter(self) -> None:
        if self._depth >= MAX_NESTING:
            raise self.error(f"expression nested deeper than {MAX_NESTING} levels")
        self._depth += 1

    def nested(self, kind: str):
        """`( expr )` or `- unary`: the parser recurses, so nesting is limited."""
        self.nested_enter()
        self.advance()
        if kind == "-":
            term = BinOp("-", Const(0), self.unary())
        else:
            term = self.expr()
            if self.tok[0] != ")":
                raise self.expected("')' to close the parenthesised expression")
            self.advance()
        self._depth -= 1
        return term

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
        """`_N` for an anonymous variable: an N no variable of the text is named after."""
        if self._taken is None:
            self._taken = set(ANON_LIKE.findall(self.text))
        while True:
            self._anon += 1
            name = f"_{self._anon}"
            if name not in self._taken:
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
            if isinstance(term, BinOp | Call):
                raise self.error("expected a constant in a fact, found an expression", tok)
        return head


def parse_program(text: str, source: str = "<input>", prefixes: dict[str, str] | None = None) -> Program:
    """Parse a program: prefix declarations, rules and ground facts, in any order.

    `prefixes` are declared before the text (a program change's text gets the program's);
    the program's own `prefixes` are those the text declares.
    """
    p = _Parser(text, source, prefixes)
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
