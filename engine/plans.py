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

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from fluxmat.engine.arith import ARITH, COMPARE, RUNTIME
from fluxmat.engine.datatypes import FUNCTIONS
from fluxmat.engine.rules import AnalysedRule, Assign, Filter, term_vars
from fluxmat.engine.storage import Dictionary
from fluxmat.engine.syntax import BinOp, Call, Const, Iri, RdfLiteral, Term, Var, postorder

__all__ = ["RUNTIME", "AnyOf", "Compiler", "Need", "Plan", "compile_plan", "place_body", "pyvar"]


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


_MAX_CALL_NESTING = 32


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


# Python refuses a function with more than 20 nested loops ("too many statically nested
# blocks") or about 100 levels of indentation. A plan nests one or two loops per positive
# literal and one `if` per test, so a long body is cut into stages (see `Compiler.room`).
MAX_LOOPS = 16
MAX_DEPTH = 60


class Emitter:
    """Lines of generated Python at a nesting depth, with fresh local names.

    `stages` holds the bodies of the finished stages of a long plan (see `Compiler.room`);
    `lines` is the stage being written, the last one becomes the plan function's body.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.stages: list[list[str]] = []
        self.depth = 1
        self.loops = 0  # loops open around the next line
        self.n = 0

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def open(self, line: str) -> None:
        """Emit an `if` (or other block header) and nest under it."""
        self.emit(line)
        self.depth += 1

    def open_loop(self, line: str) -> None:
        """Emit a `for` header and nest under it."""
        self.open(line)
        self.loops += 1

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

    def __init__(self, rule: AnalysedRule, dictionary: Dictionary, args: str = "D, V, vals, intern"):
        self.rule = rule
        self.dictionary = dictionary
        self.consts: list[object] = []
        self.e = Emitter()
        self.bound: set[str] = set()
        self.order: list[str] = []
        self.needs: list[Need] = []
        self.tvars: dict[int, str] = {}
        self.count_work = False  # backward plans count the facts they read in W[0]
        self.args = args  # what every stage of the generated code is called with
        self.carry_also: list[str] = []  # locals besides variables and facts a stage hands on
        self.needed: set[str] = set()  # rule variables used after the body (head, bag row)
        self.keep_facts = False  # whether the facts matched (`tvars`) are used after the body
        self.later: Callable[[], set[str]] = set  # variables the rest of the body uses
        self.packed: str | None = None  # the tuple of facts an earlier stage handed on
        self.packed_at: dict[int, int] = {}  # literal -> its fact's position in `packed`

    # -- stages
    def room(self, loops: int) -> None:
        """Make room for a step that nests `loops` more loops and a few levels of `if`.

        When the current stage is too deep, it ends by yielding what the rest needs (the bound
        variables used later, the facts matched so far when `keep_facts`, `carry_also`) and a
        new stage starts with a loop over what the previous one yields. Stages are generators
        chained at run time, so a body of any length compiles without one block per atom and
        runs lazily in the same order; rules that fit in one stage compile as before.
        """
        e = self.e
        if e.loops + loops + 1 <= MAX_LOOPS and e.depth + 4 <= MAX_DEPTH:
            return
        live = self.needed | self.later()
        names = [pyvar(v) for v in sorted(self.bound & live)] + self.carry_also
        if self.keep_facts:
            names.append(self._pack_facts())
        carry = "(" + "".join(n + ", " for n in names) + ")"
        e.emit(f"yield {carry}")
        e.stages.append(e.lines)
        e.lines, e.depth, e.loops = [], 1, 0
        e.open_loop(f"for {carry if names else '_'} in src:")
        self.order.append("|")

    def _pack_facts(self) -> str:
        """Gather the facts matched so far into one tuple `F<n>`; return its name.

        It is the previous stage's tuple plus this stage's facts, so a stage hands on one name,
        not one per literal.
        """
        new = [i for i in sorted(self.tvars) if i not in self.packed_at]
        name = self.e.fresh("F")
        self.e.emit(f"{name} = {self.packed or '()'} + ({''.join(self.tvars[i] + ', ' for i in new)})")
        for i in new:
            self.packed_at[i] = len(self.packed_at)
        self.packed = name
        for i, j in self.packed_at.items():
            self.tvars[i] = f"{name}[{j}]"
        return name

    def source(self, signature: str, preamble: tuple[str, ...] = ()) -> str:
        """The generated module's source.

        One generator per finished stage, then `def <signature>:` whose body is `preamble`,
        the chain of stages and the last stage.
        """
        out: list[str] = []
        chain = ["    src = None"] if self.e.stages else []
        for k, body in enumerate(self.e.stages):
            out.append(f"def stage{k}({self.args}, src):")
            out += body
            chain.append(f"    src = stage{k}({self.args}, src)")
        return "\n".join([*out, f"def {signature}:", *preamble, *chain, *self.e.lines]) + "\n"

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
            if isinstance(node, Call):
                args = out[len(out) - len(node.args) :]
                del out[len(out) - len(node.args) :]
                text = f"{FUNCTIONS[node.fn][1]}({', '.join(a for a, _ in args)})"
                depth = max((d for _, d in args), default=0) + 1
            elif not isinstance(node, BinOp):
                out.append((self.leaf_value(node), 0))
                continue
            else:
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
        self.e.open_loop(f"for {t} in D:")
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
            self.e.open(f"if {f}:")
            self.needs.append(Need(lit, None))
            self.order.append(f"L{lit} member")
            self.tvars[lit] = t
            return
        self.e.open_loop(f"for {c}, {x} in V[{lit}]:")
        if cols:
            keys = [self.id_expr(args[p]) for p in cols]
            key = keys[0] if len(keys) == 1 else "(" + ", ".join(keys) + ")"
            self.e.open_loop(f"for {t} in {c}.get({key}, ()):")
            self.needs.append(Need(lit, cols))
            self.order.append(f"L{lit} probe{list(cols)}")
        else:
            self.e.open_loop(f"for {t} in {c}:")
            self.needs.append(Need(lit, None))
            self.order.append(f"L{lit} scan")
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
        self.e.open(f"if not {f}:")
        self.needs.append(Need(lit, None))
        self.order.append(f"not L{lit}")
        self.tvars[lit] = t

    def builtin(self, b) -> None:
        if isinstance(b, Filter):
            left, right = self.id_expr(b.left), self.id_expr(b.right)
            if b.op in ("=", "!=") and left is not None and right is not None:
                self.e.open(f"if {left} {'==' if b.op == '=' else '!='} {right}:")
            else:
                lv, rv = self.value_expr(b.left), self.value_expr(b.right)
                self.e.open(f"if {COMPARE[b.op]}({lv}, {rv}):")
            self.order.append(f"{b.left} {b.op} {b.right}")
            return
        assert isinstance(b, Assign)
        val = self.e.fresh("a")
        self.e.emit(f"{val} = {self.value_expr(b.expr)}")
        target = pyvar(b.var)
        if b.var in self.bound:
            self.e.open(f"if {val} is not None and vals[{target}] == {val}:")
        else:
            self.e.open(f"if {val} is not None:")
            self.e.emit(f"{target} = intern({val})")
            self.bound.add(b.var)
        self.order.append(f"{b.var} := {b.expr}")


def _ready_builtin(b, bound: set[str]) -> bool:
    if isinstance(b, Filter):
        return set(term_vars(b.left)) | set(term_vars(b.right)) <= bound
    return set(term_vars(b.expr)) <= bound


def _builtin_vars(b) -> set[str]:
    if isinstance(b, Filter):
        return set(term_vars(b.left)) | set(term_vars(b.right))
    return set(term_vars(b.expr)) | {b.var}


class _JoinOrder:
    """The greedy choice of the next positive literal, kept up to date as variables get bound.

    The next literal is the one with the least key (fully bound first, then one sharing a
    bound variable, more bound arguments, smaller relation, lower index). Keys only fall as
    variables get bound, so a heap with stale entries skipped gives the same choice as a scan
    of every literal at every step, in O(n log n) for a body of n literals.
    """

    def __init__(self, lits, pos: list[int], size: Callable, bound: set[str]):
        self.lits, self.bound = lits, bound
        self.sizes = {i: size(lits[i].pred) for i in pos}
        self.occurs: dict[str, list[int]] = {}
        self.nbound = {}
        for i in pos:
            args = lits[i].args
            self.nbound[i] = sum(1 for a in args if isinstance(a, Const))
            for a in args:
                if isinstance(a, Var):
                    self.occurs.setdefault(a.name, []).append(i)
        self.seen: set[str] = set()
        self.remaining = set(pos)
        self.heap: list = []
        self.update()
        for i in pos:
            heapq.heappush(self.heap, (self.key(i), i))

    def key(self, i: int) -> tuple:
        n = self.nbound[i]
        return (n != len(self.lits[i].args), n == 0, -n, self.sizes[i], i)

    def update(self) -> None:
        """Account for the variables bound since the last call."""
        new = self.bound - self.seen
        self.seen |= new
        for v in new:
            for i in self.occurs.get(v, ()):
                self.nbound[i] += 1
                if i in self.remaining:
                    heapq.heappush(self.heap, (self.key(i), i))

    def best(self) -> int:
        self.update()
        while True:
            k, i = self.heap[0]
            if i in self.remaining and k == self.key(i):
                return i
            heapq.heappop(self.heap)

    def take(self, i: int) -> None:
        self.remaining.discard(i)


def place_body(
    comp: Compiler, lits, pos: list[int], neg: list[int], builtins: list, size: Callable
) -> None:
    """Emit the body of a plan.

    Positive literals `pos` go in a greedy join order, each negated literal of
    `neg` and each built-in as soon as its variables are bound.
    """
    remaining_neg, remaining_bi = list(neg), list(builtins)
    order = _JoinOrder(lits, pos, size, comp.bound)

    lit_vars = {i: {v for a in lits[i].args for v in term_vars(a)} for i in [*pos, *neg]}

    def later() -> set[str]:
        out = set().union(*(lit_vars[i] for i in [*order.remaining, *remaining_neg]))
        return out.union(*(_builtin_vars(b) for b in remaining_bi))

    comp.later = later

    def place_ready() -> None:
        progress = True
        while progress:
            progress = False
            for b in list(remaining_bi):
                if _ready_builtin(b, comp.bound):
                    comp.room(0)
                    comp.builtin(b)
                    _drop(remaining_bi, b)
                    progress = True
            for i in list(remaining_neg):
                if lit_vars[i] <= comp.bound:
                    comp.room(1)
                    comp.negative(i, lits[i].args)
                    remaining_neg.remove(i)
                    progress = True

    place_ready()
    while order.remaining:
        best = order.best()
        comp.room(2)
        order.take(best)
        comp.positive(best, lits[best].args)
        place_ready()
    assert not remaining_bi and not remaining_neg, "analysis guarantees every literal is placed"


def _drop(items: list, item) -> None:
    """Remove `item` by identity.

    `list.remove` compares built-ins field by field, which recurses once per level of a term
    (a sum of thousands of terms).
    """
    del items[next(k for k, x in enumerate(items) if x is item)]


def _head_tuple(comp: Compiler, args) -> str:
    """The head's id tuple.

    Expressions are computed first and tested in one flat `if` (an undefined value drops the
    instance), so a head of any width nests one level at most.
    """
    parts, computed = [], []
    for a in args:
        ident = comp.id_expr(a)
        if ident is None:
            v = comp.e.fresh("hv")
            comp.e.emit(f"{v} = {comp.value_expr(a)}")
            computed.append(v)
            ident = f"intern({v})"
        parts.append(ident)
    if computed:
        comp.e.open("if " + " and ".join(f"{v} is not None" for v in computed) + ":")
    return "(" + "".join(p + ", " for p in parts) + ")"


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
    comp.needed = {v for a in rule.head.args for v in term_vars(a)}
    comp.keep_facts = instances or kind == "backward"
    lits = list(rule.positives) + list(rule.negatives)
    npos = len(rule.positives)
    e = comp.e
    head = rule.head

    if kind == "backward":
        comp.count_work = True
        h = "h"
        e.open_loop("for h in D:")
        comp.carry_also.append(h)
        comp.match(h, head.args, {p for p, a in enumerate(head.args) if isinstance(a, BinOp | Call)})
        comp.order.append("head bound")
    elif kind == "delta":
        assert delta is not None
        comp.scan_delta(delta, lits[delta].args)

    place_body(
        comp, lits, [i for i in range(npos) if i != delta],
        [i for i in range(npos, len(lits)) if i != delta], list(rule.builtins), size,
    )  # fmt: skip

    comp.room(0)
    head_tuple = _head_tuple(comp, head.args)
    if kind == "backward":
        if any(not isinstance(a, Var) for a in head.args) or len(
            {a.name for a in head.args if isinstance(a, Var)}
        ) != len(head.args):
            e.open(f"if {head_tuple} == h:")
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

    source = comp.source("run(D, V, out, vals, intern, first=False)", ("    out_append = out.append",))
    namespace: dict = dict(RUNTIME)
    namespace["C"] = comp.consts
    namespace["W"] = [0]
    exec(compile(source, f"<plan rule {rule.id} {kind} {delta}>", "exec"), namespace)
    return Plan(
        rule, kind + ("*" if instances else ""), delta, tuple(comp.order), tuple(comp.needs),
        tuple(a.pred for a in lits), source, namespace["run"], namespace["W"],
    )  # fmt: skip
