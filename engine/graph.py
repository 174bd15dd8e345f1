"""Strongly connected components (Tarjan's, iterative) and reachability, any nodes.

Used by the analysis (predicate dependency graph) and by the ltc module and its
upkeep (the data graph of a base relation); `depth_first` drives the recursive
provability checks of B/F and B/F~ without Python recursion.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def components(roots: Iterable[N], edges: Mapping[N, Sequence[N]]) -> list[list[N]]:
    """The components of the nodes reachable from `roots`, sinks first.

    Every edge leaves a component for one listed earlier (or stays inside it).
    """
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    out: list[list[N]] = []
    for root in roots:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, ()))))
                    break
                if nxt in on_stack and index[nxt] < low[node]:
                    low[node] = index[nxt]
            else:
                work.pop()
                if work and low[node] < low[work[-1][0]]:
                    low[work[-1][0]] = low[node]
                if low[node] == index[node]:
                    comp = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        comp.append(m)
                        if m == node:
                            break
                    out.append(comp)
    return out


def search(edges: Mapping[N, Collection[N]], starts: Iterable[N]) -> set[N]:
    """The nodes reachable from `starts` (included)."""
    seen = set(starts)
    stack = list(seen)
    while stack:
        for w in edges.get(stack.pop(), ()):
            if w not in seen:
                seen.add(w)
                stack.append(w)
    return seen


def depth_first(start: N, visit: Callable[[N], Iterator[N]]) -> None:
    """Run a recursive procedure on an explicit stack.

    `visit(node)` is a generator: every node it yields is visited to completion
    before it resumes, as if it had called itself, so deep chains cannot
    overflow Python's call stack.
    """
    stack = [visit(start)]
    while stack:
        try:
            stack.append(visit(next(stack[-1])))
        except StopIteration:
            stack.pop()
