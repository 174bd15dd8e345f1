"""Comparisons and arithmetic on the arrays core: built-ins evaluated over a whole batch of bindings.

A rule's built-ins (engine.rules: `Filter`, `Assign`) and the expressions in
its head become steps of its plans (engine.compact.plans), placed as soon as
their variables are bound. A step works on the plan's binding block `B` (one
row per binding, one int64 term id per variable slot) and its weights `W`:

* a filter keeps the rows whose comparison holds;
* an assignment writes the term id of the computed value into the variable's
  slot (values are encoded in bulk: each distinct new value is interned once
  through the dictionary), dropping rows where the value is undefined; when
  the variable is already bound (a plan that starts at the head: DRed^c's
  rederivation) it keeps the rows where the bound term is the value.

The semantics are exactly the objects core's (engine.arith, engine.plans):
`=` and `!=` between two variables or constants compare term ids; every
other comparison and all arithmetic work on values, an `RdfLiteral` by its
key; comparing values of different types is false (`!=`: true); arithmetic
on a non-integer (other than `+` on two strings), division or remainder by
zero, and results beyond the integer limit are undefined (the binding
derives nothing).

Vectorised where it is cheap to be exact: `Values` caches per term id whether
its value is an integer of magnitude below 2**62 and that integer, so
integer arithmetic and comparisons run as numpy operations; a row with any
other operand (strings, IRIs, big integers, a result out of that range,
built-in function calls) is computed by engine.arith's own functions, once
per distinct combination of its term ids.

Not here: where steps go in a plan (engine.compact.plans), running plans (engine.compact.core).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from fluxmat.engine.arith import ARITH, COMPARE, RUNTIME
from fluxmat.engine.datatypes import FUNCTIONS
from fluxmat.engine.rules import AnalysedRule, Assign, Filter
from fluxmat.engine.storage import Dictionary
from fluxmat.engine.syntax import BinOp, Call, Const, RdfLiteral, Term, Var, format_term, postorder

SAFE = (
    1 << 62
)  # integers below this in magnitude compute in int64 (sums and differences stay in range)
_MUL_SAFE = 1 << 31  # factors below this multiply in int64
_NP_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
               "=": np.equal, "!=": np.not_equal}  # fmt: skip

# A term as a postfix program: ("leaf", slot, id) (slot -1: the constant term id),
# ("op", op) on the two values below it, ("call", fn, nargs).
Code = tuple[tuple, ...]


class Values:
    """Per term id of a dictionary: whether its value computes as an integer below SAFE, and that integer."""

    def __init__(self, dictionary: Dictionary):
        self.dictionary = dictionary
        self.n = 0
        self.small = np.zeros(64, np.bool_)
        self.num = np.zeros(64, np.int64)

    def refresh(self) -> None:
        """Cover the term ids interned since the last call."""
        values = self.dictionary.values
        if len(values) == self.n:
            return
        new = [v.key if type(v) is RdfLiteral else v for v in values[self.n :]]
        end = self.n + len(new)
        if end > len(self.small):
            cap = max(end, 2 * len(self.small))
            self.small = np.concatenate([self.small, np.zeros(cap - len(self.small), np.bool_)])
            self.num = np.concatenate([self.num, np.zeros(cap - len(self.num), np.int64)])
        small = [type(v) is int and -SAFE < v < SAFE for v in new]
        self.small[self.n : end] = small
        self.num[self.n : end] = [v if s else 0 for v, s in zip(new, small, strict=True)]
        self.n = end


class Runtime:
    """What built-in steps share: the dictionary (interning, values) and its `Values` cache."""

    def __init__(self, term_id: Callable[[object], int]):
        dictionary = getattr(term_id, "__self__", None)
        if not isinstance(dictionary, Dictionary):
            raise TypeError("plans with built-ins need a Dictionary's intern method as term_id")
        self.dictionary, self.intern = dictionary, term_id
        self.values = Values(dictionary)

    def encode(self, values: list, intern: bool) -> np.ndarray:
        """Term ids of Python values (None: -1); without `intern` a value never seen is -1 too."""
        d = self.dictionary
        get = self.intern if intern else d.lookup
        ids = [-1 if v is None else get(v) for v in values]
        return np.array([-1 if i is None else i for i in ids], np.int64)

    def encode_ints(self, nums: np.ndarray, intern: bool) -> np.ndarray:
        """Term ids of int64 values (as Python ints), each distinct value encoded once."""
        if not len(nums):
            return np.empty(0, np.int64)
        uniq, inverse = np.unique(nums, return_inverse=True)
        return self.encode(uniq.tolist(), intern)[inverse.reshape(-1)]


# ---------------------------------------------------------------- specifications


@dataclass(frozen=True, eq=False, repr=False)
class Spec:
    """A built-in before placement: a filter (`var` None) or an assignment to `var` of `left`.

    Compared by identity and written by `__str__`: the generated `__eq__`, `__hash__` and
    `__repr__` would recurse once per level of a term (a sum of thousands of terms).
    """

    op: str  # a comparison operator, or ":=" for an assignment
    left: Term
    right: Term | None = None
    var: str | None = None

    @cached_property
    def shapes(self) -> tuple[tuple, tuple]:
        """Its terms in postfix, each walked once (`_shape`); a plan places a spec per start."""
        return _shape(self.left), _shape(self.right) if self.right is not None else ()

    @cached_property
    def _inputs(self) -> frozenset[str]:
        return frozenset(x[1] for shape in self.shapes for x in shape if x[0] == "var")

    def inputs(self) -> frozenset[str]:
        """The variables of its terms."""
        return self._inputs

    def __str__(self) -> str:
        if self.var is None:
            assert self.right is not None
            return f"{format_term(self.left)} {self.op} {format_term(self.right)}"
        return f"{self.var} := {format_term(self.left)}"


def head_var(j: int) -> str:
    """The hidden variable holding head column j when it is an expression (no program can name it)."""
    return f"#h{j}"


def specs(rule: AnalysedRule) -> list[Spec]:
    """The rule's built-ins in the analysis's order, then one assignment per expression in the head."""
    out = []
    for b in rule.builtins:
        if isinstance(b, Filter):
            out.append(Spec(b.op, b.left, b.right))
        else:
            assert isinstance(b, Assign) and not b.check, (
                "the analysis makes only plain assignments"
            )
            out.append(Spec(":=", b.expr, var=b.var))
    for j, t in enumerate(rule.head.args):
        if isinstance(t, BinOp | Call):
            out.append(Spec(":=", t, var=head_var(j)))
    return out


def _shape(term: Term) -> tuple:
    """A term in postfix: ("var", name), ("const", value), ("op", op), ("call", fn, nargs)."""
    out = []
    for node in postorder(term):
        if isinstance(node, Var):
            out.append(("var", node.name))
        elif isinstance(node, Const):
            out.append(("const", node.value))
        elif isinstance(node, BinOp):
            out.append(("op", node.op))
        else:
            assert isinstance(node, Call)
            out.append(("call", node.fn, len(node.args)))
    return tuple(out)


def _code(shape: tuple, slots: dict[str, int], intern: Callable) -> Code:
    """A shape's `Code` given the variables' slots."""
    out = []
    for x in shape:
        if x[0] == "var":
            out.append(("leaf", slots[x[1]], 0))
        elif x[0] == "const":
            out.append(("leaf", -1, intern(x[1])))
        else:
            out.append(x)
    return tuple(out)


def step(spec: Spec, slots: dict[str, int], rt: Runtime) -> BuiltinStep:
    """The step of a spec whose inputs are bound in `slots`; an assignment to an unbound variable binds it."""
    left, right = (_code(shape, slots, rt.intern) for shape in spec.shapes)
    if spec.var is None:
        return BuiltinStep(rt, spec.op, left, right, -1, False, spec)
    check = spec.var in slots
    if not check:
        slots[spec.var] = len(slots)
    return BuiltinStep(rt, ":=", left, (), slots[spec.var], check, spec)


# ---------------------------------------------------------------- evaluation


def _leaf_ids(leaf: tuple, B: np.ndarray) -> np.ndarray:
    _, slot, tid = leaf
    return B[:, slot] if slot >= 0 else np.full(len(B), tid, np.int64)


def _int_op(op: str, a, b, ok):
    """(ok, value, undefined) of `a op b` where both are exact int64 values (rows `ok`)."""
    none = np.zeros(len(a), np.bool_)
    if op in "+-":
        r = a + b if op == "+" else a - b
        ok = ok & (np.abs(r) < SAFE)
    elif op == "*":
        ok = ok & (np.abs(a) < _MUL_SAFE) & (np.abs(b) < _MUL_SAFE)
        r = np.where(ok, a, 0) * np.where(ok, b, 0)
    else:  # "/" and "%": truncating division; by zero undefined
        none = ok & (b == 0)
        ok = ok & ~none
        d = np.where(ok, b, 1)
        q = np.abs(a) // np.abs(d)
        q = np.where((a >= 0) == (d >= 0), q, -q)
        r = q if op == "/" else a - d * q
    return ok, np.where(ok, r, 0), none


def vector(code: Code, B: np.ndarray, vals: Values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ok, value, undefined) per row: rows neither ok nor undefined need `python`."""
    stack = []
    n = len(B)
    for ins in code:
        if ins[0] == "leaf":
            ids = _leaf_ids(ins, B)
            stack.append((vals.small[ids], vals.num[ids], np.zeros(n, np.bool_)))
        elif ins[0] == "op":
            (rok, rv, rnone), (lok, lv, lnone) = stack.pop(), stack.pop()
            ok, value, none = _int_op(ins[1], lv, rv, lok & rok)
            stack.append((ok, value, none | lnone | rnone))
        else:
            del stack[len(stack) - ins[2] :]
            stack.append((np.zeros(n, np.bool_), np.zeros(n, np.int64), np.zeros(n, np.bool_)))
    return stack[0]


def python(code: Code, ids: tuple, values: list):
    """The value of a term for one binding (`ids` its leaves' term ids, in order), None when undefined."""
    stack, k = [], 0
    for ins in code:
        if ins[0] == "leaf":
            stack.append(values[ids[k]])
            k += 1
        elif ins[0] == "op":
            right, left = stack.pop(), stack.pop()
            stack.append(RUNTIME[ARITH[ins[1]]](left, right))
        else:
            args = stack[len(stack) - ins[2] :]
            del stack[len(stack) - ins[2] :]
            stack.append(FUNCTIONS[ins[1]][2](*args))
    return stack[0]


def _leaves(code: Code, B: np.ndarray) -> np.ndarray:
    """The leaves' term ids per row (one column per leaf)."""
    cols = [_leaf_ids(ins, B) for ins in code if ins[0] == "leaf"]
    return np.stack(cols, axis=1) if cols else np.zeros((len(B), 0), np.int64)


def python_rows(codes: tuple[Code, ...], B: np.ndarray, fn: Callable, values: list) -> list:
    """`fn(*term values)` per row of B, computed once per distinct combination of leaf ids."""
    leaves = [_leaves(c, B) for c in codes]
    keys = np.concatenate(leaves, axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    widths = np.cumsum([0] + [x.shape[1] for x in leaves])
    out = []
    for row in uniq.tolist():
        args = [python(c, row[widths[i] : widths[i + 1]], values) for i, c in enumerate(codes)]
        out.append(fn(*args))
    return [out[i] for i in inverse.reshape(-1).tolist()]


def _simple(code: Code) -> bool:
    return len(code) == 1


ROW_AT_A_TIME = 8  # blocks up to this many rows compute an assignment in Python (`python`), row by row


@dataclass
class BuiltinStep:
    """One placed built-in (see the module docstring); `apply` runs it over a binding block."""

    rt: Runtime
    op: str  # comparison, or ":=" (assignment)
    left: Code
    right: Code
    slot: int  # an assignment's variable
    check: bool  # the assignment's variable is bound already: keep rows where it equals the value
    spec: Spec

    @property
    def text(self) -> str:
        """The built-in in program syntax (written when asked: a long sum is long to write)."""
        return str(self.spec)

    def apply(self, B: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not len(B):
            return B, W
        self.rt.values.refresh()
        if self.op != ":=":
            keep = self._compare(B)
            return B[keep], W[keep]
        ids = self._assigned(B)
        if self.check:
            keep = ids == B[:, self.slot]
            return B[keep], W[keep]
        keep = ids >= 0
        B, W = B[keep], W[keep]
        B[:, self.slot] = ids[keep]
        return B, W

    def _compare(self, B: np.ndarray) -> np.ndarray:
        if self.op in ("=", "!=") and _simple(self.left) and _simple(self.right):
            a, b = _leaf_ids(self.left[0], B), _leaf_ids(self.right[0], B)
            return a == b if self.op == "=" else a != b
        vals = self.rt.values
        lok, lv, lnone = vector(self.left, B, vals)
        rok, rv, rnone = vector(self.right, B, vals)
        both = lok & rok
        keep = both & _NP_COMPARE[self.op](lv, rv)
        slow = np.flatnonzero(~both & ~lnone & ~rnone)
        if len(slow):
            fn = RUNTIME[COMPARE[self.op]]
            got = python_rows((self.left, self.right), B[slow], fn, self.rt.dictionary.values)
            keep[slow] = np.array(got, np.bool_)
        return keep

    def _assigned(self, B: np.ndarray) -> np.ndarray:
        """The value's term id per row; -1 when undefined (or, for a check, never encoded)."""
        if _simple(self.left):
            return _leaf_ids(self.left[0], B).copy()
        intern = not self.check
        if len(B) <= ROW_AT_A_TIME:  # a few rows: numpy's per-call cost is more than the work
            values = self.rt.dictionary.values
            return self.rt.encode([python(self.left, row, values) for row in _leaves(self.left, B).tolist()],
                                  intern)  # fmt: skip
        ok, value, none = vector(self.left, B, self.rt.values)
        ids = np.full(len(B), -1, np.int64)
        fast = np.flatnonzero(ok)
        ids[fast] = self.rt.encode_ints(value[fast], intern)
        slow = np.flatnonzero(~ok & ~none)
        if len(slow):
            got = python_rows((self.left,), B[slow], _same, self.rt.dictionary.values)
            ids[slow] = self.rt.encode(got, intern)
        return ids


def _same(x):
    return x
