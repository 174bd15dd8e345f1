"""Analysis: generalised hypertree decompositions of cyclic rule bodies (Zhang et al. 2023).

The hypergraph of a rule has the body's variables as vertices and one edge per
positive atom. A rule is *cyclic* when that hypergraph is not alpha-acyclic
(it has no join tree). Only cyclic rules get a decomposition: this is the
paper's "combined" mode, in which simple rules keep the ordinary join plans.

A decomposition partitions the positive atoms into bags (lambda) whose variable
sets (chi: the atoms' variables, plus the targets of the assignments evaluated
in the bag) form a join tree: every variable's bags are connected. Every negated
atom and built-in is evaluated in one bag that binds all its variables. The
width is the largest number of atoms in a bag; we search set partitions
exhaustively (rule bodies have a handful of atoms) for the smallest width, then
the smallest largest bag (variables), the smallest total, the most bags; we give up above `MAX_ATOMS` atoms (the rule then keeps its
ordinary plans). A decomposition with a bag that binds every variable (the
triangle's best) would only repeat the ordinary plan, so none is kept.

Nothing here evaluates rules; engine.hypertree compiles plans over the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fluxmat.engine.rules import AnalysedRule, Assign, Builtin, Filter, term_vars

MAX_ATOMS = 8


@dataclass(frozen=True)
class Bag:
    """One node of a decomposition.

    Positive literals `lits`, negated literals `negs` (literal numbers of the rule,
    negated ones counted after the positives), `builtins`, and chi (`vars`).
    """

    lits: tuple[int, ...]
    negs: tuple[int, ...]
    builtins: tuple[Builtin, ...]
    vars: tuple[str, ...]

    def __str__(self) -> str:
        return "{" + ", ".join(self.vars) + "}: " + " ".join(f"L{i}" for i in self.lits + self.negs)


@dataclass(frozen=True)
class Decomposition:
    """A join tree over bags: `edges` are unordered pairs of bag numbers."""

    bags: tuple[Bag, ...]
    edges: tuple[tuple[int, int], ...]

    @property
    def width(self) -> int:
        return max(len(b.lits) for b in self.bags)

    def bag_of(self, lit: int) -> int:
        """The bag evaluating literal `lit` (positive or negated)."""
        return next(i for i, b in enumerate(self.bags) if lit in b.lits or lit in b.negs)

    def __str__(self) -> str:
        bags = "; ".join(f"bag {i} {b}" for i, b in enumerate(self.bags))
        edges = ", ".join(f"{a}-{b}" for a, b in self.edges)
        return f"width {self.width}: {bags}" + (f" (tree {edges})" if edges else "")


def _atom_vars(atom) -> set[str]:
    return {v for a in atom.args for v in term_vars(a)}


def _builtin_vars(b: Builtin) -> set[str]:
    if isinstance(b, Filter):
        return set(term_vars(b.left)) | set(term_vars(b.right))
    return set(term_vars(b.expr)) | {b.var}


def join_tree(edges: list[set[str]]) -> list[tuple[int, int]] | None:
    """A join tree (forest) over hyperedges `edges`, or None when they are cyclic.

    A hypergraph is alpha-acyclic iff a maximum-weight spanning tree of its
    intersection graph (weights: shared variables) has the running-intersection
    property; we build one (Kruskal) and check that property.
    """
    n = len(edges)
    pairs = sorted(
        ((len(edges[i] & edges[j]), i, j) for i in range(n) for j in range(i + 1, n)),
        key=lambda t: -t[0],
    )
    root = list(range(n))

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    tree: list[tuple[int, int]] = []
    for _w, i, j in pairs:
        a, b = find(i), find(j)
        if a != b:
            root[a] = b
            tree.append((i, j))
    adj: dict[int, list[int]] = {i: [] for i in range(n)}
    for i, j in tree:
        adj[i].append(j)
        adj[j].append(i)
    for v in set().union(*edges) if edges else ():
        holders = {i for i in range(n) if v in edges[i]}
        start = next(iter(holders))
        seen, todo = {start}, [start]
        while todo:
            for k in adj[todo.pop()]:
                if k in holders and k not in seen:
                    seen.add(k)
                    todo.append(k)
        if seen != holders:
            return None
    return tree


def is_cyclic(rule: AnalysedRule) -> bool:
    return join_tree([_atom_vars(a) for a in rule.positives]) is None


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first], *part]
        for k in range(len(part)):
            yield [*part[:k], [first, *part[k]], *part[k + 1 :]]


def _bags(rule: AnalysedRule, groups: list[list[int]]) -> list[Bag] | None:
    """Place the rule's negations and built-ins in the bags of `groups` (None if impossible)."""
    npos = len(rule.positives)
    chi = [set().union(*(_atom_vars(rule.positives[i]) for i in g)) for g in groups]
    placed: list[list] = [[] for _ in groups]
    todo = list(rule.builtins)
    progress = True
    while progress:  # assignments extend chi; place them first, to a fixpoint
        progress = False
        for b in list(todo):
            if isinstance(b, Assign):
                need = set(term_vars(b.expr))
                k = next((k for k, c in enumerate(chi) if need <= c), None)
                if k is not None:
                    placed[k].append(b)
                    chi[k].add(b.var)
                    todo.remove(b)
                    progress = True
    for b in todo:
        k = next((k for k, c in enumerate(chi) if _builtin_vars(b) <= c), None)
        if k is None:
            return None
        placed[k].append(b)
    negs: list[list[int]] = [[] for _ in groups]
    for j, atom in enumerate(rule.negatives):
        k = next((k for k, c in enumerate(chi) if _atom_vars(atom) <= c), None)
        if k is None:
            return None
        negs[k].append(npos + j)
    order = {b: n for n, b in enumerate(rule.builtins)}
    return [
        Bag(tuple(g), tuple(negs[k]), tuple(sorted(placed[k], key=order.__getitem__)),
            tuple(sorted(chi[k])))
        for k, g in enumerate(groups)
    ]  # fmt: skip


def decompose(rule: AnalysedRule) -> Decomposition | None:
    """The decomposition of a cyclic rule body, or None (acyclic, or too large)."""
    n = len(rule.positives)
    if n > MAX_ATOMS or not is_cyclic(rule):
        return None
    atom_vars = [_atom_vars(a) for a in rule.positives]

    def cost(groups: list[list[int]]):
        chi = [len(set().union(*(atom_vars[i] for i in g))) for g in groups]
        return (max(map(len, groups)), max(chi), sum(chi), -len(groups))

    everything = len(set().union(*atom_vars))
    candidates = sorted(_partitions(list(range(n))), key=cost)
    for groups in candidates:
        if cost(groups)[1] == everything:
            return None  # a bag binding every variable is the ordinary plan (the triangle)
        bags = _bags(rule, groups)
        if bags is None:
            continue
        tree = join_tree([set(b.vars) for b in bags])
        if tree is not None:
            return Decomposition(tuple(bags), tuple(tree))
    return None


def decompositions(rules) -> dict[int, Decomposition]:
    """Rule id -> decomposition, for the cyclic rules that have a useful one."""
    out = {}
    for r in rules:
        d = decompose(r)
        if d is not None:
            out[r.id] = d
    return out
