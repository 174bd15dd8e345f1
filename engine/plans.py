"""Stage 3: compiled plans (analysed rule -> Python function), built once and cached.

A plan evaluates one rule body left to right in a join order chosen from index
availability and relation sizes, and is specialised to how it is entered:

  * ``full``      -- no delta literal: all instances over the views;
  * ``delta i``   -- literal i (positive or negated) ranges over a delta set, so
                     the plan enumerates exactly the instances that use it;
  * ``backward``  -- the head is bound to given facts (DRed's one-step
                     rederivation and B/F's backward chaining).

Literals are numbered positives first, then negated atoms; ``literal_preds``
gives their predicates. At run time each literal gets a *view*: for a positive
literal a list of sources ``(container, excluded)`` (the union of each container
minus its excluded set, or None), for a negated literal a pair ``(sources,
extra)`` where ``extra`` is a set of facts that also count as present. Which
container a literal wants (a hash index on some columns, or the fact set) is
given by ``Plan.needs``. The caller (engine.evaluate) builds views; plans know
nothing of algorithms.

Generated code is plain Python over int tuples: no per-fact string handling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fluxmat.engine.rules import AnalysedRule, Assign, Filter, term_vars
from fluxmat.engine.storage import Dictionary
from fluxmat.engine.syntax import (
    INT_SAFE_BITS,
    BinOp,
    Const,
    Iri,
    RdfLiteral,
    Term,
    Var,
    int_in_range,
    postorder,
)


@dataclass(frozen=True)
class Need:
    """What container literal ``lit`` needs: ``cols`` for an index, None for the fact set."""

    lit: int
    cols: tuple[int, ...] | None


class AnyOf:
    """Membership in any of several sets (an exclusion made of more than one set)."""

    __slots__ = ("sets",)

    def __init__(self, sets):
        self.sets = sets

    def __contains__(self, fact) -> bool:
        return any(fact in s for s in self.sets)


# ---------------------------------------------------------------- arithmetic


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
    return type(a) is type(b) and a is not None


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


_MAX_CALL_NESTING = 32
ARITH = {"+": "_add", "-": "_sub", "*": "_mul", "/": "_div", "%": "_mod"}
COMPARE = {"<": "_lt", "<=": "_le", ">": "_gt", ">=": "_ge", "=": "_eq", "!=": "_ne"}
RUNTIME = {
    "_add": _add, "_sub": _sub, "_mul": _mul, "_div": _div, "_mod": _mod,
    "_lt": _lt, "_le": _le, "_gt": _gt, "_ge": _ge, "_eq": _eq, "_ne": _ne,
}  # fmt: skip


# ---------------------------------------------------------------- plans


@dataclass
class Plan:
    rule: AnalysedRule
    kind: str  # "full" | "delta" | "backward"
    delta: int | None
    order: tuple[str, ...]
    needs: tuple[Need, ...]
    literal_preds: tuple[str, ...]
    source: str
    run: Callable
    work: list[int]  # facts read so far (backward plans only)

    def describe(self) -> str:
        what = self.kind if self.delta is None else f"delta on literal {self.delta}"
        return f"rule {self.rule.id} [{what}]: " + " -> ".join(self.order)


class Emitter:
    """Lines of generated Python at a nesting depth, with fresh local names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.n = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"


def pyvar(name: str) -> str:
    """The Python local that holds rule variable `name` in generated code."""
    return "v_" + "".join(ch if ch.isalnum() or ch == "_" else f"x{ord(ch)}" for ch in name)


class Compiler:
    """Generates one rule's join as Python source: matches, probes, built-ins.

    Public for engine.hypertree, which compiles decomposition bags with it.
    """

    def __init__(self, rule: AnalysedRule, dictionary: Dictionary):
        self.rule = rule
        self.dictionary = dictionary
        self.consts: list[object] = []
        self.e = Emitter()
        self.bound: set[str] = set()
        self.order: list[str] = []
        self.needs: list[Need] = []
        self.tvars: dict[int, str] = {}
        self.count_work = False  # backward plans count the facts they read in W[0]

    # -- terms
    def const_id(self, value) -> int:
        return self.dictionary.intern(value)

    def leaf_value(self, term: Var | Const) -> str:
        if isinstance(term, Var):
            return f"vals[{pyvar(term.name)}]"
        if isinstance(term.value, Iri | RdfLiteral):  # passed in C
            self.consts.append(term.value)
            return f"C[{len(self.consts) - 1}]"
        return repr(term.value)

    def value_expr(self, term: Term) -> str:
        """Python expression for the *value* of a term (None when undefined).

        Calls nest at most `_MAX_CALL_NESTING` deep: a deeper subterm is computed
        into a temporary on a line of its own first (Python's compiler refuses
        about 200 nested calls). The arithmetic functions return None for an
        undefined operand, so computing a subterm early gives the same value.
        """
        out: list[tuple[str, int]] = []  # (expression, call nesting)
        for node in postorder(term):
            if not isinstance(node, BinOp):
                out.append((self.leaf_value(node), 0))
                continue
            (right, dr), (left, dl) = out.pop(), out.pop()
            text, depth = f"{ARITH[node.op]}({left}, {right})", max(dl, dr) + 1
            if depth >= _MAX_CALL_NESTING:
                temp = self.e.fresh("e")
                self.e.emit(f"{temp} = {text}")
                text, depth = temp, 0
            out.append((text, depth))
        return out[0][0]

    def id_expr(self, term: Term) -> str | None:
        """Python expression for the id of a simple term, None for expressions."""
        if isinstance(term, Var):
            return pyvar(term.name)
        if isinstance(term, Const):
            return str(self.const_id(term.value))
        return None

    # -- matching a fact against an atom
    def match(self, tvar: str, args: tuple[Term, ...], skip: set[int]) -> None:
        """Check constants / bound vars (except positions in `skip`) and bind new vars."""
        firsts: dict[str, int] = {}
        for p, a in enumerate(args):
            if p in skip:
                continue
            if isinstance(a, Const):
                self.e.emit(f"if {tvar}[{p}] != {self.const_id(a.value)}: continue")
            elif isinstance(a, Var):
                if a.name in self.bound:
                    self.e.emit(f"if {tvar}[{p}] != {pyvar(a.name)}: continue")
                elif a.name in firsts:
                    self.e.emit(f"if {tvar}[{p}] != {tvar}[{firsts[a.name]}]: continue")
                else:
                    firsts[a.name] = p
        for name, p in firsts.items():
            self.e.emit(f"{pyvar(name)} = {tvar}[{p}]")
            self.bound.add(name)

    # -- steps
    def scan_delta(self, lit: int, args) -> None:
        t = self.e.fresh("t")
        self.e.emit(f"for {t} in D:")
        self.e.depth += 1
        self.match(t, args, set())
        self.tvars[lit] = t
        self.order.append(f"delta L{lit}")

    def positive(self, lit: int, args) -> None:
        cols = tuple(
            p for p, a in enumerate(args)
            if isinstance(a, Const) or (isinstance(a, Var) and a.name in self.bound)
        )  # fmt: skip
        t, c, x = self.e.fresh("t"), self.e.fresh("c"), self.e.fresh("x")
        if len(cols) == len(args):
            f = self.e.fresh("f")
            self.e.emit(f"{t} = ({''.join(self.id_expr(a) + ', ' for a in args)})")
            self.e.emit(f"{f} = False")
            self.e.emit(f"for {c}, {x} in V[{lit}]:")
            if self.count_work:
                self.e.emit("    W[0] += 1")
            self.e.emit(f"    if {t} in {c} and ({x} is None or {t} not in {x}):")
            self.e.emit(f"        {f} = True")
            self.e.emit("        break")
            self.e.emit(f"if {f}:")
            self.e.depth += 1
            self.needs.append(Need(lit, None))
            self.order.append(f"L{lit} member")
            self.tvars[lit] = t
            return
        self.e.emit(f"for {c}, {x} in V[{lit}]:")
        self.e.depth += 1
        if cols:
            keys = [self.id_expr(args[p]) for p in cols]
            key = keys[0] if len(keys) == 1 else "(" + ", ".join(keys) + ")"
            self.e.emit(f"for {t} in {c}.get({key}, ()):")
            self.needs.append(Need(lit, cols))
            self.order.append(f"L{lit} probe{list(cols)}")
        else:
            self.e.emit(f"for {t} in {c}:")
            self.needs.append(Need(lit, None))
            self.order.append(f"L{lit} scan")
        self.e.depth += 1
        if self.count_work:
            self.e.emit("W[0] += 1")
        self.e.emit(f"if {x} is not None and {t} in {x}: continue")
        self.match(t, args, set(cols))
        self.tvars[lit] = t

    def negative(self, lit: int, args) -> None:
        t, c, x, f = (self.e.fresh(s) for s in "tcxf")
        self.e.emit(f"{t} = ({''.join(self.id_expr(a) + ', ' for a in args)})")
        self.e.emit(f"{f} = {t} in V[{lit}][1]")
        self.e.emit(f"if not {f}:")
        self.e.emit(f"    for {c}, {x} in V[{lit}][0]:")
        self.e.emit(f"        if {t} in {c} and ({x} is None or {t} not in {x}):")
        self.e.emit(f"            {f} = True")
        self.e.emit("            break")
        self.e.emit(f"if not {f}:")
        self.e.depth += 1
        self.needs.append(Need(lit, None))
        self.order.append(f"not L{lit}")
        self.tvars[lit] = t

    def builtin(self, b) -> None:
        if isinstance(b, Filter):
            left, right = self.id_expr(b.left), self.id_expr(b.right)
            if b.op in ("=", "!=") and left is not None and right is not None:
                self.e.emit(f"if {left} {'==' if b.op == '=' else '!='} {right}:")
            else:
                lv, rv = self.value_expr(b.left), self.value_expr(b.right)
                self.e.emit(f"if {COMPARE[b.op]}({lv}, {rv}):")
            self.e.depth += 1
            self.order.append(f"{b.left} {b.op} {b.right}")
            return
        assert isinstance(b, Assign)
        val = self.e.fresh("a")
        self.e.emit(f"{val} = {self.value_expr(b.expr)}")
        self.e.emit(f"if {val} is not None:")
        self.e.depth += 1
        target = pyvar(b.var)
        if b.var in self.bound:
            self.e.emit(f"if vals[{target}] == {val}:")
            self.e.depth += 1
        else:
            self.e.emit(f"{target} = intern({val})")
            self.bound.add(b.var)
        self.order.append(f"{b.var} := {b.expr}")


def _ready_builtin(b, bound: set[str]) -> bool:
    if isinstance(b, Filter):
        return set(term_vars(b.left)) | set(term_vars(b.right)) <= bound
    return set(term_vars(b.expr)) <= bound


def place_body(
    comp: Compiler, lits, pos: list[int], neg: list[int], builtins: list, size: Callable
) -> None:
    """Emit the body of a plan.

    Positive literals `pos` go in a greedy join order, each negated literal of
    `neg` and each built-in as soon as its variables are bound.
    """
    remaining_pos, remaining_neg, remaining_bi = list(pos), list(neg), list(builtins)

    def place_ready() -> None:
        progress = True
        while progress:
            progress = False
            for b in list(remaining_bi):
                if _ready_builtin(b, comp.bound):
                    comp.builtin(b)
                    remaining_bi.remove(b)
                    progress = True
            for i in list(remaining_neg):
                if {v for a in lits[i].args for v in term_vars(a)} <= comp.bound:
                    comp.negative(i, lits[i].args)
                    remaining_neg.remove(i)
                    progress = True

    place_ready()
    while remaining_pos:
        def score(i: int):
            args = lits[i].args
            nbound = sum(
                1 for a in args if isinstance(a, Const) or (isinstance(a, Var) and a.name in comp.bound)
            )
            full = nbound == len(args)
            return (not full, nbound == 0, -nbound, size(lits[i].pred), i)

        best = min(remaining_pos, key=score)
        remaining_pos.remove(best)
        comp.positive(best, lits[best].args)
        place_ready()
    assert not remaining_bi and not remaining_neg, "analysis guarantees every literal is placed"


def compile_plan(
    rule: AnalysedRule,
    kind: str,
    delta: int | None,
    dictionary: Dictionary,
    size: Callable[[str], int],
    instances: bool = False,
    count: bool = False,
) -> Plan:
    """Compile `rule` entered as `kind` ("full", "delta", "backward").

    Plans emit head tuples; with `instances` a full or delta plan emits whole rule
    instances `(head, positive facts, negated facts)` instead (the fully dynamic
    algorithms log them). With `count` every plan counts the facts it reads in
    `Plan.work` (backward plans always do).
    """
    comp = Compiler(rule, dictionary)
    comp.count_work = count
    lits = list(rule.positives) + list(rule.negatives)
    npos = len(rule.positives)
    e = comp.e
    head = rule.head

    if kind == "backward":
        comp.count_work = True
        h = "h"
        e.emit("for h in D:")
        e.depth += 1
        comp.match(h, head.args, {p for p, a in enumerate(head.args) if isinstance(a, BinOp)})
        comp.order.append("head bound")
    elif kind == "delta":
        assert delta is not None
        comp.scan_delta(delta, lits[delta].args)

    place_body(
        comp, lits, [i for i in range(npos) if i != delta],
        [i for i in range(npos, len(lits)) if i != delta], list(rule.builtins), size,
    )  # fmt: skip

    # head
    parts = []
    for a in head.args:
        ident = comp.id_expr(a)
        if ident is None:
            v = e.fresh("hv")
            e.emit(f"{v} = {comp.value_expr(a)}")
            e.emit(f"if {v} is not None:")
            e.depth += 1
            ident = f"intern({v})"
        parts.append(ident)
    head_tuple = "(" + "".join(p + ", " for p in parts) + ")"
    if kind == "backward":
        if any(not isinstance(a, Var) for a in head.args) or len(
            {a.name for a in head.args if isinstance(a, Var)}
        ) != len(head.args):
            e.emit(f"if {head_tuple} == h:")
            e.depth += 1
        body = ", ".join(comp.tvars.get(i, "None") for i in range(npos))
        e.emit(f"out_append((h, ({body}{',' if npos == 1 else ''})))")
        e.emit("if first:")
        e.emit("    return")
    elif instances:
        pos = "".join(comp.tvars[i] + ", " for i in range(npos))
        neg = "".join(comp.tvars[i] + ", " for i in range(npos, len(lits)))
        e.emit(f"out_append(({head_tuple}, ({pos}), ({neg})))")
    else:
        e.emit(f"out_append({head_tuple})")

    header = [
        "def run(D, V, out, vals, intern, first=False):",
        "    out_append = out.append",
    ]
    source = "\n".join(header + e.lines) + "\n"
    namespace: dict = dict(RUNTIME)
    namespace["C"] = comp.consts
    namespace["W"] = [0]
    exec(compile(source, f"<plan rule {rule.id} {kind} {delta}>", "exec"), namespace)
    return Plan(
        rule, kind + ("*" if instances else ""), delta, tuple(comp.order), tuple(comp.needs),
        tuple(a.pred for a in lits), source, namespace["run"], namespace["W"],
    )  # fmt: skip
