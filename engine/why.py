"""Questions about a materialisation: which facts match a pattern, and why a fact holds.

Contract: reads a maintainer's state (`I`, `E`, and FD-Counting's derivation log
when there is one) and never changes it -- no indexes are built, nothing is
interned. Callers that share the maintainer with a writer hold its lock.

`Explainer.explain(fact)` returns a `Proof`: a tree whose root is the fact, in
which every derived node carries one rule instance whose positive body facts are
its children, every leaf is an explicit fact, and no fact is its own ancestor.
The proof is well-founded by construction: the backward closure of the fact is
collected first (the rule instances over I that derive it, recursively), then
facts are proved bottom-up from the explicit ones, each by the first instance
all of whose body facts are already proved (so a proof has minimal depth). With
a derivation log the instances come from the log (the instances the engine
actually applied); otherwise rules are evaluated backwards over I.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.rules import AnalysedRule
from fluxmat.engine.syntax import Atom, Const, PyFact, Var

Key = tuple[str, tuple[int, ...]]
ANY = "_\u2063"  # an argument a negated atom leaves open (printed as `_`)


class TooLarge(FluxmatError):
    """The explanation would visit more facts than the configured limit."""


@dataclass
class Proof:
    """Why `fact` holds: explicit, or `rule` applied to the proofs in `body`."""

    fact: PyFact
    explicit: bool
    rule: AnalysedRule | None = None
    rule_text: str = ""  # the rule as the user wrote it, with its source position
    body: list[Proof] = field(default_factory=list)
    negated: list[PyFact] = field(default_factory=list)  # absent facts the instance relied on
    alternatives: int = 0  # other instances deriving the fact (root only)
    repeated: bool = False  # explained earlier in the same proof; children omitted


def _vars_match(atom: Atom, values: tuple) -> bool:
    seen: dict[str, object] = {}
    for term, v in zip(atom.args, values, strict=True):
        if isinstance(term, Var):
            if seen.setdefault(term.name, v) != v:
                return False
    return True


def match(m, pattern: Atom) -> Iterator[PyFact]:
    """The facts of the materialisation matching `pattern` (constants and variables).

    A repeated variable must take the same value; `_` matches anything. Facts are
    visited lazily, through an index the engine already keeps on a bound column
    when there is one, so a consumer that stops early (`islice`) stops the scan;
    it must hold the maintainer's lock until it stops.
    """
    analysis = m.analysis
    rel_name = analysis.relation(pattern.pred, len(pattern.args))
    known = m.arity.get(rel_name)
    if known is None:
        raise FluxmatError(f"unknown predicate {pattern.pred}/{len(pattern.args)}")
    if known != len(pattern.args):
        raise FluxmatError(f"{pattern.pred} has {known} arguments, the pattern has {len(pattern.args)}")
    bound: list[tuple[int, int]] = []
    for i, term in enumerate(pattern.args):
        if isinstance(term, Const):
            ident = m.dictionary.lookup(term.value)
            if ident is None:
                return
            bound.append((i, ident))
        elif not isinstance(term, Var):
            raise FluxmatError(f"pattern argument {term} is neither a constant nor a variable")
    repeated = len({t.name for t in pattern.args if isinstance(t, Var)}) < sum(
        isinstance(t, Var) for t in pattern.args
    )
    compact = getattr(m, "match_bound", None)  # the arrays core (engine.compact) reads its arrays
    for fact in compact(rel_name, bound) if compact else _bound_facts(m, rel_name, bound):
        if not repeated or _vars_match(pattern, fact[1:]):
            yield fact


def _bound_facts(m, rel_name: str, bound: list[tuple[int, int]]) -> Iterator[PyFact]:
    """The facts of relation `rel_name` with term id v in column i for each (i, v) in `bound`."""
    rel = m.I.get(rel_name)
    if rel is None:
        return
    facts = rel.facts
    for i, v in bound:
        index = rel.indexed((i,))
        if index is not None:
            facts = index.get(v, ())
            break
    for f in facts:
        if all(f[i] == v for i, v in bound):
            yield m.decode(rel_name, f)


class Explainer:
    """Builds well-founded proofs over a maintainer's current state.

    `program` is the program as written (before the analysis's rewrites); when
    given, proofs show its rules rather than the rewritten ones.
    """

    def __init__(self, maintainer, max_facts: int = 200_000, program=None):
        self.m = maintainer
        self.max_facts = max_facts
        self.by_head: dict[str, list[AnalysedRule]] = {}
        for r in maintainer.analysis.rules:
            self.by_head.setdefault(r.head.pred, []).append(r)
        self.written = {r.pos: r for r in program.rules} if program is not None else {}

    # ------------------------------------------------------------ lookups
    def key(self, fact: PyFact) -> Key | None:
        """The encoded fact, or None when it cannot be in the materialisation."""
        m = self.m
        rel = m.analysis.relation(fact[0], len(fact) - 1)
        ids = tuple(m.dictionary.lookup(a) for a in fact[1:])
        if None in ids or m.arity.get(rel, len(ids)) != len(ids):
            return None
        return rel, ids

    def present(self, key: Key) -> bool:
        rel = self.m.I.get(key[0])
        return rel is not None and key[1] in rel.facts

    def explicit(self, key: Key) -> bool:
        return key[1] in self.m.E.get(key[0], ())

    def instances(self, key: Key) -> list[tuple[AnalysedRule, tuple[Key, ...], tuple[Key, ...]]]:
        """Rule instances over I deriving `key`: (rule, positive body, negated body)."""
        m = self.m
        rules = m.analysis.rules
        out = []
        log = getattr(m, "log", None)
        by_head = self.by_head.get(key[0], ())
        if log is not None and hasattr(m, "logged"):
            for rid, _head, pos, neg in m.logged(key):
                if all(self.present(k) for k in pos) and not any(self.present(k) for k in neg):
                    out.append((rules[rid], tuple(pos), tuple(neg)))
            # a module's rules are not logged (upkeep modules, engine.fd.core): evaluated backwards
            by_head = [rule for rule in by_head if rule.id in m.module_rules]
        for rule in by_head:
            preds = [a.pred for a in rule.positives]
            for _h, body in m.ev.backward(rule, (key[1],), m.OLD, m.OLD, False):
                pos = tuple(zip(preds, body, strict=True))
                out.append((rule, pos, self._negated(rule, key, pos)))
        return out

    def _negated(self, rule: AnalysedRule, key: Key, pos: tuple[Key, ...]) -> tuple[Key, ...]:
        """The ground negated atoms of an instance found backwards (those fully bound)."""
        env: dict[str, int] = {}
        for atom, (_p, f) in zip((rule.head, *rule.positives), (key, *pos), strict=True):
            for term, v in zip(atom.args, f, strict=True):
                if isinstance(term, Var):
                    env[term.name] = v
        out = []
        for atom in rule.negatives:
            ids = []
            for term in atom.args:
                if isinstance(term, Var):
                    ids.append(env.get(term.name))
                elif isinstance(term, Const):
                    ids.append(self.m.dictionary.lookup(term.value))
                else:
                    ids.append(None)
            if None not in ids:
                out.append((atom.pred, tuple(ids)))
        return tuple(out)

    # ------------------------------------------------------------ proofs
    def explain(self, fact: PyFact) -> Proof | None:
        """A well-founded proof of `fact`, or None when it is not in the materialisation."""
        root = self.key(fact)
        if root is None or not self.present(root):
            return None
        if self.explicit(root):
            return Proof(self.m.decode(*root), True, alternatives=len(self.instances(root)))
        support, seen = self._closure(root)
        chosen = self._prove(support, seen)
        if root not in chosen:
            raise FluxmatError(
                f"{self.m.show_fact(fact)} is in the materialisation but has no well-founded "
                "derivation from the explicit facts: the state is inconsistent"
            )
        proof = self._tree(root, chosen)
        proof.alternatives = len(support[root]) - 1
        return proof

    def _closure(self, root: Key):
        support: dict[Key, list] = {}
        seen = {root}
        stack = [root]
        while stack:
            k = stack.pop()
            if self.explicit(k):
                continue
            insts = support[k] = self.instances(k)
            for _rule, pos, _neg in insts:
                for b in pos:
                    if b not in seen:
                        seen.add(b)
                        stack.append(b)
            if len(seen) > self.max_facts:
                raise TooLarge(
                    f"explaining {self.m.show_fact(self.m.decode(*root))} visits more than "
                    f"{self.max_facts} facts"
                )
        return support, seen

    def _prove(self, support: dict[Key, list], seen: set[Key]) -> dict[Key, tuple | None]:
        """Bottom-up from the explicit facts: each fact's first instance with a proved body."""
        chosen: dict[Key, tuple | None] = {}
        need: list[int] = []
        users: dict[Key, list[int]] = {}
        insts: list[tuple[Key, tuple]] = []
        queue: deque[Key] = deque()
        for head, options in support.items():
            for inst in options:
                i = len(insts)
                insts.append((head, inst))
                body = set(inst[1])
                need.append(len(body))
                for b in body:
                    users.setdefault(b, []).append(i)
                if not body and head not in chosen:
                    chosen[head] = inst
                    queue.append(head)
        for k in seen:
            if self.explicit(k):
                chosen[k] = None
                queue.append(k)
        while queue:
            k = queue.popleft()
            for i in users.get(k, ()):
                need[i] -= 1
                head, inst = insts[i]
                if need[i] == 0 and head not in chosen:
                    chosen[head] = inst
                    queue.append(head)
        return chosen

    def _tree(self, root: Key, chosen: dict[Key, tuple | None]) -> Proof:
        """The proof tree of `root` (iterative: proofs can be thousands of steps deep)."""
        decode = self.m.decode
        shown: set[Key] = set()
        top = Proof(decode(*root), False)
        stack: list[tuple[Key, Proof]] = [(root, top)]
        while stack:
            k, node = stack.pop()
            inst = chosen[k]
            if k in shown and inst is not None:
                node.repeated = True
                continue
            shown.add(k)
            if inst is None:
                node.explicit = True
                continue
            rule, pos, neg = inst
            node.rule = rule
            node.rule_text = self._rule_text(rule)
            node.negated = [self._absent(n) for n in neg]
            node.body = [Proof(decode(*b), self.explicit(b)) for b in pos]
            stack.extend(reversed(list(zip(pos, node.body, strict=True))))
        return top


    def _rule_text(self, rule: AnalysedRule) -> str:
        pos = rule.rule.pos
        where = f"  ({pos})" if pos.line else ""
        return f"{self.written.get(pos, rule.rule)}{where}"

    def _absent(self, key: Key) -> PyFact:
        """A negated fact as written: an internal `__negK(x)` becomes `q(_, x)`."""
        pred, f = key
        values = self.m.dictionary.values
        if pred not in self.m.analysis.internal or pred not in self.by_head:
            return self.m.decode(pred, f)
        aux = self.by_head[pred][0]  # __negK(shared) :- q(args): one rule, one atom
        env = {t.name: values[v] for t, v in zip(aux.head.args, f, strict=True) if isinstance(t, Var)}
        atom = aux.positives[0]
        args = [t.value if isinstance(t, Const) else env.get(getattr(t, "name", None), ANY) for t in atom.args]
        return (self.m.analysis.display.get(atom.pred, atom.pred), *args)


# ---------------------------------------------------------------- rendering
_ANY_SHOWN = json.dumps(ANY, ensure_ascii=False)


def _show_absent(show, fact: PyFact) -> str:
    return show(fact).replace(_ANY_SHOWN, "_")


def _kids(node: Proof) -> list[Proof]:
    return [] if node.repeated or node.explicit else node.body


def proof_size(proof: Proof) -> dict[int, int]:
    """The number of nodes of every subtree (itself included), by `id(node)`; iterative."""
    sizes: dict[int, int] = {}
    stack: list[tuple[Proof, bool]] = [(proof, False)]
    while stack:
        node, done = stack.pop()
        kids = _kids(node)
        if done:
            sizes[id(node)] = 1 + sum(sizes[id(k)] for k in kids)
        else:
            stack.append((node, True))
            stack.extend((k, False) for k in kids)
    return sizes


def is_capped(proof: Proof, max_depth: int | None, max_nodes: int | None) -> bool:
    """Whether `render` / `to_json` with these caps leave part of the proof out."""
    stack, seen = [(proof, 0)], 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        kids = _kids(node)
        if (max_nodes is not None and seen > max_nodes) or (
                kids and max_depth is not None and depth >= max_depth):  # fmt: skip
            return True
        stack.extend((k, depth + 1) for k in kids)
    return False


def _more(n: int) -> str:
    return f"… {n} more"


def render(proof: Proof, show, max_depth: int | None = None, max_nodes: int | None = None) -> list[str]:
    """The proof as indented text lines; `show` formats a Python fact.

    With `max_depth`, a node that deep shows `… N more` instead of its N
    descendants; with `max_nodes`, at most that many nodes are shown and one last
    line `… N more` counts the rest.
    """
    sizes = proof_size(proof) if max_depth is not None or max_nodes is not None else {}
    lines: list[str] = []
    shown = 0
    stack: list[tuple[Proof, str, str, int]] = [(proof, "", "", 0)]
    while stack:
        if max_nodes is not None and shown >= max_nodes:
            lines.append(_more(sum(sizes[id(entry[0])] for entry in stack)))
            break
        node, lead, rest, depth = stack.pop()
        shown += 1
        text = show(node.fact)
        if node.explicit:
            text += "  [explicit]"
        elif node.repeated:
            text += "  [derived, shown above]"
        elif node.rule is not None:
            text += f"  <- {node.rule_text}"
            if node.negated:
                text += "  with absent " + ", ".join(_show_absent(show, n) for n in node.negated)
        if node.alternatives:
            text += f"  ({node.alternatives} other derivation{'s' * (node.alternatives > 1)})"
        lines.append(lead + text)
        kids = _kids(node)
        if kids and max_depth is not None and depth >= max_depth:
            lines.append(rest + "└─ " + _more(sizes[id(node)] - 1))
            continue
        for i in reversed(range(len(kids))):
            last = i == len(kids) - 1
            stack.append((kids[i], rest + ("└─ " if last else "├─ "),
                          rest + ("   " if last else "│  "), depth + 1))  # fmt: skip
    return lines


def to_json(proof: Proof, show, max_depth: int | None = None, max_nodes: int | None = None) -> dict:
    """The proof as a flat list of steps (for the dashboard and `why --json`).

    `{"root": 0, "steps": [{"id", "fact", "explicit", "rule", "negated", "premises"}, ...]}`:
    a derived step's `premises` are the ids of the steps proving its body, in body order; a
    fact proved once and used again is one step, referred to by every user. Nothing nests,
    however deep the proof. Caps as in `render`: a step at `max_depth` gets `"more": N` (its
    N descendants left out) instead of premises; past `max_nodes` steps, the rest is left out
    and counted in its parent's `"more"`.
    """
    sizes = proof_size(proof) if max_depth is not None or max_nodes is not None else {}
    steps: list[dict] = []
    ids: dict = {}  # fact -> id of its step
    stack: list[tuple[Proof, dict | None, int]] = [(proof, None, 0)]
    while stack:
        node, parent, depth = stack.pop()
        if parent is not None and (node.repeated or node.explicit) and node.fact in ids:
            parent["premises"].append(ids[node.fact])
            continue
        if max_nodes is not None and len(steps) >= max_nodes:
            assert parent is not None  # the root is always shown
            parent["more"] = parent.get("more", 0) + sizes[id(node)]
            continue
        out = {"id": len(steps), "fact": show(node.fact), "explicit": node.explicit}
        ids.setdefault(node.fact, out["id"])
        steps.append(out)
        if parent is not None:
            parent["premises"].append(out["id"])
        if node.repeated:
            out["repeated"] = True
        if node.rule is not None and not node.repeated:
            out["rule"] = node.rule_text
            out["negated"] = [_show_absent(show, n) for n in node.negated]
            if max_depth is not None and depth >= max_depth and node.body:
                out["more"] = sizes[id(node)] - 1
            else:
                out["premises"] = []
                stack.extend((k, out, depth + 1) for k in reversed(node.body))
        if node.alternatives:
            out["alternatives"] = node.alternatives
    return {"root": 0, "steps": steps}


def depth_first(proof: Proof) -> Iterator[tuple[Proof, frozenset]]:
    """Every node with the facts of its ancestors (for checks: no fact is its own ancestor)."""
    stack: list[tuple[Proof, frozenset]] = [(proof, frozenset())]
    while stack:
        node, above = stack.pop()
        yield node, above
        below = above | {node.fact}
        stack.extend((b, below) for b in node.body)
