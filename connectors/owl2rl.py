"""OWL 2 RL ontology -> fluxmat rules (`fluxmat owl2rl`, `--ontology`).

The TBox of an ontology (read by connectors.owl) becomes Datalog rules over
RDFox-style atoms (`C[?X]` for a class, `p[?X, ?Y]` for a property: the facts
connectors.rdf makes of RDF data), one group of rules per axiom, each rule
named after the rule of the W3C OWL 2 Profiles recommendation (section 4.3,
tables 4-9) it implements and placed at the axiom's line in the ontology:

* class axioms (table 7): subClassOf (cax-sco), equivalentClass (cax-eqc1/2),
  disjointWith and AllDisjointClasses (cax-dw, cax-adc); a named class with
  intersectionOf / unionOf / oneOf / complementOf is an equivalence;
* class expressions (table 6) in subclass position: intersectionOf (cls-int1),
  unionOf (cls-uni), someValuesFrom (cls-svf1/2), hasValue (cls-hv2), oneOf
  (as facts, cls-oo); in superclass position: intersectionOf (cls-int2),
  complementOf and owl:Nothing (cls-com, cls-nothing2), allValuesFrom
  (cls-avf), hasValue (cls-hv1), max(Qualified)Cardinality 0 and 1
  (cls-maxc1/2, cls-maxqc1-4);
* properties (table 5): domain, range, subPropertyOf, equivalentProperty,
  inverseOf, propertyChainAxiom, symmetric, transitive (a rule the tc module
  picks up), functional and inverse-functional (deriving owl:sameAs: run with
  `--equality rewrite`), hasKey, irreflexive, asymmetric, propertyDisjointWith,
  AllDisjointProperties, NegativePropertyAssertion;
* equality (table 4): the ontology's sameAs / differentFrom / AllDifferent
  become facts; eq-diff1-3 become rules; replacement (eq-rep-*) is the engine's
  `--equality rewrite`;
* table 9 (schema reasoning) needs no rules of its own: chaining the rules
  above gives its instance-level consequences. Table 8 (datatypes): dt-not-type
  for a data property's ill-typed literals and for values outside its
  rdfs:range datatype (the functions of engine.datatypes); literals are not
  typed with facts (that, dt-eq and dt-diff are `--owl-rules rdf`).

Inconsistencies are facts `fluxmat:inconsistent[x, "rule"]` (the reserved
predicate <urn:fluxmat:inconsistent>). The ontology's assertions about
individuals (ABox) become facts. Everything else that is OWL or RDFS
vocabulary and has no rule here (superclass someValuesFrom, minCardinality,
reflexive properties, data ranges in class expressions, owl:imports, ...) is a warning naming
file:line:column of the axiom; nothing is dropped in silence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations, product
from pathlib import Path

import pyoxigraph as ox

from fluxmat.connectors.owl import (
    OWL,
    RDF,
    RDFS,
    STANDARD_PREFIXES,
    XSD,
    Graph,
    is_bnode,
    read_graph,
)
from fluxmat.connectors.owl_vocab import (
    ANNOTATIONS,
    DATATYPES,
    DECLARATIONS,
    DIFFERENT,
    FLUXMAT,
    INCONSISTENT,
    NOTHING,
    PARTS,
    SAME_AS,
    THING,
    TYPE,
)
from fluxmat.connectors.rdf import Terms, file_tag
from fluxmat.engine import VALUE_SPACES
from fluxmat.engine.printer import FactPrinter
from fluxmat.engine.syntax import (
    Atom,
    Call,
    Comparison,
    Const,
    Iri,
    Pos,
    Program,
    Rule,
    Term,
    Var,
    literal,
)


class Unsupported(Exception):
    """A construct outside OWL 2 RL (or outside what fluxmat translates) in an axiom."""


@dataclass(frozen=True)
class OwlWarning:
    pos: Pos
    message: str

    def __str__(self) -> str:
        return f"{self.pos}: {self.message}" if self.pos.line else f"{self.pos.file}: {self.message}"


@dataclass
class Translation:
    """The rules, facts and warnings of one ontology."""

    graph: Graph
    rules: list[tuple[Rule, str]] = field(default_factory=list)  # (rule, OWL 2 RL rule name)
    facts: list[Atom] = field(default_factory=list)
    warnings: list[OwlWarning] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)

    @property
    def derives_same_as(self) -> bool:
        return any(r.head.pred == SAME_AS for r, _ in self.rules)

    def program(self) -> Program:
        return Program(tuple(r for r, _ in self.rules), tuple(self.facts),
                       tuple(self.prefixes.items()), str(self.graph.path))  # fmt: skip

    def text(self) -> str:
        """The rule program in fluxmat syntax (RDFox-style atoms), rules named and located."""
        pr = FactPrinter(self.prefixes.items())
        out = [f"% fluxmat owl2rl {self.graph.path.name}: OWL 2 RL rules (W3C OWL 2 Profiles, "
               "section 4.3) for its TBox, and its assertions as facts"]  # fmt: skip
        if self.derives_same_as:
            out.append("% derives owl:sameAs: run with --equality rewrite")
        out += [f"@prefix {p}: <{iri}> ." for p, iri in self.prefixes.items()]
        for rule, name in self.rules:
            out.append(f"% {name} ({rule.pos if rule.pos.line else 'for every ontology'})")
            body = ", ".join(_atom(pr, a) if isinstance(a, Atom) else _comparison(pr, a) for a in rule.body)
            out.append(f"{_atom(pr, rule.head)} :- {body} .")
        if self.facts:
            out.append("% assertions")
            out += [f"{_atom(pr, a)} ." for a in self.facts]
        out += [f"% warning: {w}" for w in self.warnings]
        return "\n".join(out) + "\n"


def _atom(pr: FactPrinter, atom: Atom) -> str:
    return f"{pr.pred(atom.pred)}[{', '.join(_term(pr, t) for t in atom.args)}]"


def _term(pr: FactPrinter, term: Term) -> str:
    if isinstance(term, Var):
        return f"?{term.name}"
    if isinstance(term, Call):  # the datatype rules' functions
        return f"{term.fn}({', '.join(_term(pr, t) for t in term.args)})"
    return pr.value(term.value)


def _comparison(pr: FactPrinter, c: Comparison) -> str:
    return f"{_term(pr, c.left)} {c.op} {_term(pr, c.right)}"


class _Fresh:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> Var:
        self.n += 1
        return Var(f"Y{self.n}")


X = Var("X")


class Translator:
    """Translates one ontology graph; `run()` returns the `Translation`."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.out = Translation(graph, prefixes={**STANDARD_PREFIXES, "fluxmat": FLUXMAT, **graph.prefixes})
        self.terms = Terms(file_tag(graph.path))
        self._seen: set[str] = set()
        self._pos = Pos(str(graph.path), 0, 0)
        self._about = ""
        self.annotation_props = {s for s, p, o in graph.triples
                                 if p == TYPE and o == OWL + "AnnotationProperty"}  # fmt: skip
        self.handlers = {
            RDFS + "subClassOf": lambda s, o: self.subclass(s, o, "cax-sco"),
            OWL + "equivalentClass": self.equivalent_class,
            OWL + "disjointWith": lambda s, o: self.disjoint([s, o], "cax-dw"),
            OWL + "intersectionOf": self.definition, OWL + "unionOf": self.definition,
            OWL + "complementOf": self.definition, OWL + "oneOf": self.definition,
            RDFS + "subPropertyOf": lambda s, o: self.subproperty(s, o, "prp-spo1"),
            OWL + "equivalentProperty": self.equivalent_property,
            OWL + "inverseOf": self.inverse,
            OWL + "propertyChainAxiom": self.chain,
            RDFS + "domain": lambda s, o: self.domain_range(s, o, 0, "prp-dom"),
            RDFS + "range": lambda s, o: self.domain_range(s, o, 1, "prp-rng"),
            OWL + "propertyDisjointWith": lambda s, o: self.disjoint_props([s, o], "prp-pdw"),
            OWL + "hasKey": self.has_key,
            OWL + "sameAs": self.assertion, DIFFERENT: self.different,
            OWL + "imports": lambda s, o: self.warn(
                s, f"{self.show(s)} owl:imports {self.show(o)}: not followed: give that ontology too "
                "(one more --ontology FILE)"),
        }  # fmt: skip
        self.types = {
            OWL + "SymmetricProperty": self.symmetric, OWL + "TransitiveProperty": self.transitive,
            OWL + "FunctionalProperty": self.functional,
            OWL + "InverseFunctionalProperty": self.inverse_functional,
            OWL + "IrreflexiveProperty": self.irreflexive, OWL + "AsymmetricProperty": self.asymmetric,
            OWL + "AllDisjointClasses": lambda s: self.disjoint(self.members(s), "cax-adc"),
            OWL + "AllDisjointProperties": lambda s: self.disjoint_props(self.members(s), "prp-adp"),
            OWL + "AllDifferent": self.all_different,
            OWL + "NegativePropertyAssertion": self.negative_assertion,
            OWL + "DatatypeProperty": self.ill_typed,
        }  # fmt: skip

    # ------------------------------------------------------------ driver
    def run(self) -> Translation:
        self.add(Atom(INCONSISTENT, (X, Const("cls-nothing2")), rdf=True), [self.cls(NOTHING, X)],
                 "cls-nothing2")  # fmt: skip
        for s, p, o in self.g.triples:
            self._pos = self.g.where(s)
            self._about = f"{self.show(s)} {self.show(p)}"
            try:
                self.triple(s, p, o)
            except Unsupported as exc:
                self.warn(s, f"{self._about}: {exc}")
        return self.out

    def triple(self, s, p, o) -> None:
        if p in self.handlers:
            if is_bnode(s) and p in (OWL + "intersectionOf", OWL + "unionOf", OWL + "complementOf",
                                     OWL + "oneOf", OWL + "inverseOf"):  # fmt: skip
                return  # an expression, translated where it is used
            self.handlers[p](s, o)
        elif p == TYPE:
            if o in self.types:
                self.types[o](s)
            elif isinstance(o, str) and o.startswith((OWL, RDFS, RDF)) and o not in DECLARATIONS:
                raise Unsupported(f"{self.show(o)} is outside OWL 2 RL (or not implemented): "
                                  "not translated")  # fmt: skip
            elif o not in DECLARATIONS and not self.is_schema(s):
                self.assertion(s, o, TYPE)
        elif p in ANNOTATIONS or p in PARTS or p in self.annotation_props:
            return
        elif p.startswith((OWL, RDFS, RDF)):
            if not (p.startswith(RDF + "_") or p in (RDF + "value",)):
                raise Unsupported(f"{self.show(p)} is outside OWL 2 RL (or not implemented): "
                                  f"not translated (object {self.show(o)})")  # fmt: skip
            self.assertion(s, o, p)
        else:
            self.assertion(s, o, p)

    def is_schema(self, s) -> bool:
        """Blank nodes that are parts of class expressions are not individuals."""
        return is_bnode(s) and any(k in self.g.spo.get(s, {}) for k in PARTS)

    # ------------------------------------------------------------ output
    def add(self, head: Atom, body: list[Atom | Comparison], name: str) -> None:
        pos = self._pos
        rule = Rule(Atom(head.pred, head.args, pos, True),
                    tuple(Atom(a.pred, a.args, pos, True) if isinstance(a, Atom) else a for a in body), pos)  # fmt: skip
        if not body:
            if any(isinstance(t, Var) for t in head.args):
                raise Unsupported(f"{name} would need every individual (owl:Thing in subclass "
                                  "position): not translated")  # fmt: skip
            self.out.facts.append(rule.head)
            return
        bound = {t.name for a in body if isinstance(a, Atom) for t in a.args if isinstance(t, Var)}
        free = [t.name for t in head.args if isinstance(t, Var) and t.name not in bound]
        if free:
            raise Unsupported(f"{name}: the head variable ?{free[0]} is not bound: not translated")
        key = str(rule)
        if key not in self._seen:
            self._seen.add(key)
            self.out.rules.append((rule, name))

    def warn(self, subject, message: str) -> None:
        self.out.warnings.append(OwlWarning(self.g.where(subject), message))

    def show(self, term, depth: int = 0) -> str:
        """A term for a message: a prefixed name, a literal, or a class expression as `kind(...)`."""
        if isinstance(term, ox.Literal):
            return str(term)
        if not is_bnode(term):
            return FactPrinter(self.out.prefixes.items()).value(Iri(term))
        spo = self.g.spo.get(term, {})
        if depth > 3 or not spo:
            return "[...]"
        if OWL + "inverseOf" in spo:
            return f"owl:inverseOf({self.show(spo[OWL + 'inverseOf'][0], depth + 1)})"
        found = self.kind(term)
        if found is None or found[1] is None:
            return "[" + " ".join(sorted(self.show(k) for k in spo if k != TYPE)) + "]"
        kind, arg = found
        if kind == "restriction":
            rest = [f"{self.show(k)} {self.show(v[0], depth + 1)}" for k, v in spo.items()
                    if k not in (TYPE, OWL + "onProperty")]  # fmt: skip
            return f"owl:Restriction({self.show(arg, depth + 1)}, {', '.join(rest)})"
        members = arg if isinstance(arg, list) else [arg]
        return f"owl:{kind}({', '.join(self.show(m, depth + 1) for m in members)})"

    def value(self, term):
        """An individual or literal of the ontology as a constant."""
        if isinstance(term, ox.Literal):
            return literal(term.value, term.datatype.value, term.language or "")
        if is_bnode(term):
            return self.terms.bnode(term[2:])
        return Iri(term)

    def assertion(self, s, o, p=SAME_AS) -> None:
        if p == TYPE:
            pred = o if not is_bnode(o) else self.terms.bnode(o[2:]).value
            self.out.facts.append(Atom(pred, (Const(self.value(s)),), self._pos, True))
        else:
            self.out.facts.append(Atom(p, (Const(self.value(s)), Const(self.value(o))), self._pos, True))

    # ------------------------------------------------------------ expressions
    def members(self, s) -> list:
        head = self.g.one(s, OWL + "members") or self.g.one(s, OWL + "distinctMembers")
        items = self.g.items(head) if head is not None else None
        if items is None:
            raise Unsupported(f"{self.show(s)}: expected an RDF list of members")
        return items

    def cls(self, c: str, x) -> Atom:
        return Atom(c, (x,), rdf=True)

    def prop(self, p, x, y) -> Atom:
        if isinstance(p, str) and not is_bnode(p):
            return Atom(p, (x, y), rdf=True)
        inverse = self.g.one(p, OWL + "inverseOf")
        if inverse is not None and not is_bnode(inverse):
            return Atom(inverse, (y, x), rdf=True)
        raise Unsupported(f"property expression {self.show(p)} is not a property or an inverse")

    def is_datatype(self, c) -> bool:
        if not isinstance(c, str):
            return False
        return c.startswith(XSD) or c in DATATYPES or RDFS + "Datatype" in self.g.types(c)

    def kind(self, c) -> tuple[str, object] | None:
        """(kind, argument) of a class expression node, or None when it is none we know."""
        spo = self.g.spo.get(c, {})
        for kind in ("intersectionOf", "unionOf", "oneOf"):
            if OWL + kind in spo:
                return kind, self.g.items(spo[OWL + kind][0])
        if OWL + "complementOf" in spo:
            return "complementOf", spo[OWL + "complementOf"][0]
        if OWL + "onProperty" in spo:
            return "restriction", spo[OWL + "onProperty"][0]
        return None

    def construct(self, c) -> tuple[str, object]:
        found = self.kind(c)
        if found is None:
            raise Unsupported(f"class expression {self.show(c)} is not understood: not translated")
        if found[1] is None:
            raise Unsupported(f"owl:{found[0]} of {self.show(c)} is not a well-formed list")
        return found

    def sub(self, c, x, fresh: _Fresh, defined: bool = False) -> list[list[Atom]]:
        """Bodies (alternatives) for `x` in class expression `c` (subclass position)."""
        if not defined and not is_bnode(c):
            return [[]] if c == THING else [[self.cls(c, x)]]
        kind, arg = self.construct(c)
        if kind == "intersectionOf":
            return [sum(parts, []) for parts in product(*(self.sub(m, x, fresh) for m in arg))]
        if kind == "unionOf":
            return [alt for m in arg for alt in self.sub(m, x, fresh)]
        if kind == "restriction":
            spo = self.g.spo[c]
            if OWL + "hasValue" in spo:
                return [[self.prop(arg, x, Const(self.value(spo[OWL + "hasValue"][0])))]]
            if OWL + "someValuesFrom" in spo:
                filler, y = spo[OWL + "someValuesFrom"][0], fresh()
                if self.is_datatype(filler) and filler != RDFS + "Literal":
                    raise Unsupported(f"someValuesFrom the data range {self.show(filler)}: fluxmat "
                                      "does not type literals (OWL 2 RL table 8): not translated")  # fmt: skip
                if filler == RDFS + "Literal":
                    return [[self.prop(arg, x, y)]]
                return [[self.prop(arg, x, y), *alt] for alt in self.sub(filler, y, fresh)]
        raise Unsupported(f"{self.show(c)} in subclass position is outside OWL 2 RL: not translated")

    def sup(self, c, x, fresh: _Fresh, defined: bool = False) -> list[tuple[Atom, list[Atom], str]]:
        """(head, extra body, rule name) for `x` in class expression `c` (superclass position)."""
        if not defined and not is_bnode(c):
            if c == THING:
                return []
            if c == NOTHING:
                return [(Atom(INCONSISTENT, (x, Const("cls-nothing2")), rdf=True), [], "cls-nothing2")]
            return [(self.cls(c, x), [], "")]
        kind, arg = self.construct(c)
        if kind == "intersectionOf":  # each member on its own: one outside RL does not stop the others
            out = []
            for m in arg:
                try:
                    out += [(h, e, n or "cls-int2") for h, e, n in self.sup(m, x, fresh)]
                except Unsupported as exc:
                    self.out.warnings.append(OwlWarning(self._pos, f"{self._about}: {exc}"))
            return out
        if kind == "complementOf":
            return [(Atom(INCONSISTENT, (x, Const("cls-com")), rdf=True), alt, "cls-com")
                    for alt in self.sub(arg, x, fresh)]  # fmt: skip
        if kind == "restriction":
            return self.sup_restriction(c, arg, x, fresh)
        raise Unsupported(f"{self.show(c)} in superclass position is outside OWL 2 RL: not translated")

    def sup_restriction(self, c, p, x, fresh: _Fresh) -> list[tuple[Atom, list[Atom], str]]:
        spo = self.g.spo[c]
        if OWL + "hasValue" in spo:
            return [(self.prop(p, x, Const(self.value(spo[OWL + "hasValue"][0]))), [], "cls-hv1")]
        if OWL + "allValuesFrom" in spo:
            filler, y = spo[OWL + "allValuesFrom"][0], fresh()
            if self.is_datatype(filler):
                raise Unsupported(f"allValuesFrom the data range {self.show(filler)}: fluxmat does "
                                  "not type literals (OWL 2 RL table 8): not translated")  # fmt: skip
            return [(h, [self.prop(p, x, y), *e], "cls-avf") for h, e, _ in self.sup(filler, y, fresh)]
        for key, qualified in (("maxCardinality", False), ("maxQualifiedCardinality", True)):
            if OWL + key not in spo:
                continue
            n = spo[OWL + key][0]
            count = n.value if isinstance(n, ox.Literal) else None
            on = spo.get(OWL + "onClass", [THING])[0] if qualified else THING
            if count not in ("0", "1") or OWL + "onDataRange" in spo:
                break
            y1, y2 = fresh(), fresh()
            f1 = [alt for alt in self.sub(on, y1, fresh)] if on != THING else [[]]
            if count == "0":
                name = ("cls-maxqc2" if on == THING else "cls-maxqc1") if qualified else "cls-maxc1"
                return [(Atom(INCONSISTENT, (x, Const(name)), rdf=True), [self.prop(p, x, y1), *alt], name)
                        for alt in f1]  # fmt: skip
            name = ("cls-maxqc4" if on == THING else "cls-maxqc3") if qualified else "cls-maxc2"
            f2 = [alt for alt in self.sub(on, y2, fresh)] if on != THING else [[]]
            return [(Atom(SAME_AS, (y1, y2), rdf=True),
                     [self.prop(p, x, y1), *a1, self.prop(p, x, y2), *a2], name)
                    for a1, a2 in product(f1, f2)]  # fmt: skip
        raise Unsupported(f"{self.show(c)} in superclass position is outside OWL 2 RL "
                          "(which allows allValuesFrom, hasValue, max cardinality 0 or 1 there): "
                          "not translated")  # fmt: skip

    # ------------------------------------------------------------ class axioms
    def subclass(self, sub, sup, name: str, sub_defined: bool = False, sup_defined: bool = False) -> None:
        fresh = _Fresh()
        if (sub_defined or is_bnode(sub)) and self.construct(sub)[0] == "oneOf":
            for a in self.construct(sub)[1]:
                for head, extra, _ in self.sup(sup, Const(self.value(a)), fresh, sup_defined):
                    self.add(head, extra, "cls-oo")
            return
        bodies = self.sub(sub, X, fresh, sub_defined)
        for head, extra, n in self.sup(sup, X, fresh, sup_defined):
            for body in bodies:
                self.add(head, [*body, *extra], n or name)

    def equivalent_class(self, s, o) -> None:
        problems = []
        for a, b, name in ((s, o, "cax-eqc1"), (o, s, "cax-eqc2")):
            try:
                self.subclass(a, b, name)
            except Unsupported as exc:
                problems.append(str(exc))
        if problems:
            raise Unsupported("; ".join(problems))

    def definition(self, s, _o) -> None:
        """A named class with intersectionOf / unionOf / oneOf / complementOf: an equivalence."""
        kind = self.construct(s)[0]
        names = {"intersectionOf": ("cls-int1", "cls-int2"), "unionOf": ("cls-uni", "cls-uni"),
                 "oneOf": ("cls-oo", "cls-oo"), "complementOf": ("cls-com", "cls-com")}[kind]  # fmt: skip
        problems = []
        for side, name in zip(("subclass", "superclass"), names, strict=True):
            try:  # the definition as subclass of s (s is a superclass), then s as its subclass
                self.subclass(s, s, name, sub_defined=side == "subclass", sup_defined=side == "superclass")
            except Unsupported as exc:
                problems.append(f"{self.show(s)} as {'super' if side == 'subclass' else 'sub'}class "
                                f"of its owl:{kind}: {exc}")  # fmt: skip
        if problems:
            raise Unsupported("; ".join(problems))

    def disjoint(self, classes: list, name: str) -> None:
        for a, b in combinations(classes, 2):
            fresh = _Fresh()
            for ba, bb in product(self.sub(a, X, fresh), self.sub(b, X, fresh)):
                self.add(Atom(INCONSISTENT, (X, Const(name)), rdf=True), [*ba, *bb], name)

    # ------------------------------------------------------------ property axioms
    def subproperty(self, p, q, name: str) -> None:
        y = Var("Y")
        self.add(self.prop(q, X, y), [self.prop(p, X, y)], name)

    def equivalent_property(self, p, q) -> None:
        self.subproperty(p, q, "prp-eqp1")
        self.subproperty(q, p, "prp-eqp2")

    def inverse(self, p, q) -> None:
        y = Var("Y")
        self.add(self.prop(q, y, X), [self.prop(p, X, y)], "prp-inv1")
        self.add(self.prop(p, y, X), [self.prop(q, X, y)], "prp-inv2")

    def chain(self, p, head) -> None:
        items = self.g.items(head)
        if not items:
            raise Unsupported(f"owl:propertyChainAxiom of {self.show(p)} is not a well-formed list")
        xs = [X, *(Var(f"Y{i}") for i in range(1, len(items) + 1))]
        self.add(self.prop(p, X, xs[-1]), [self.prop(q, xs[i], xs[i + 1]) for i, q in enumerate(items)],
                 "prp-spo2")  # fmt: skip

    def not_type(self, p, datatype: Term) -> None:
        """dt-not-type for the objects of `p`: a value outside `datatype`'s value space is inconsistent."""
        y, m = Var("Y"), Var("M")
        self.add(Atom(INCONSISTENT, (y, Const("dt-not-type")), rdf=True),
                 [self.prop(p, X, y), Comparison("=", m, Call("dt_member", (y, datatype)), self._pos),
                  Comparison("=", m, Const(0), self._pos)], "dt-not-type")  # fmt: skip

    def ill_typed(self, p) -> None:
        """dt-type2 then dt-not-type: a data property's ill-typed literal (`"x"^^xsd:integer`)."""
        self.not_type(p, Call("datatype", (Var("Y"),)))

    def domain_range(self, p, c, position: int, name: str) -> None:
        if self.is_datatype(c):
            if position == 1:  # prp-rng types the value with the data range; dt-not-type checks it
                if c not in VALUE_SPACES:
                    raise Unsupported(f"rdfs:range {self.show(c)} of {self.show(p)}: fluxmat does not know "
                                      "this datatype's value space: not translated")  # fmt: skip
                self.not_type(p, Const(Iri(c)))
                return
            raise Unsupported(f"rdfs:domain {self.show(c)} of {self.show(p)} is a data range")
        y = Var("Y")
        fresh = _Fresh()
        subject = X if position == 0 else y
        for head, extra, n in self.sup(c, subject, fresh):
            self.add(head, [self.prop(p, X, y), *extra], n if n and n != "cls-int2" else name)

    def symmetric(self, p) -> None:
        y = Var("Y")
        self.add(self.prop(p, y, X), [self.prop(p, X, y)], "prp-symp")

    def transitive(self, p) -> None:
        y, z = Var("Y"), Var("Z")
        self.add(self.prop(p, X, z), [self.prop(p, X, y), self.prop(p, y, z)], "prp-trp")

    def functional(self, p) -> None:
        y1, y2 = Var("Y1"), Var("Y2")
        self.add(Atom(SAME_AS, (y1, y2), rdf=True), [self.prop(p, X, y1), self.prop(p, X, y2)], "prp-fp")

    def inverse_functional(self, p) -> None:
        x1, x2, y = Var("X1"), Var("X2"), Var("Y")
        self.add(Atom(SAME_AS, (x1, x2), rdf=True), [self.prop(p, x1, y), self.prop(p, x2, y)], "prp-ifp")

    def irreflexive(self, p) -> None:
        self.add(Atom(INCONSISTENT, (X, Const("prp-irp")), rdf=True), [self.prop(p, X, X)], "prp-irp")

    def asymmetric(self, p) -> None:
        y = Var("Y")
        self.add(Atom(INCONSISTENT, (X, Const("prp-asyp")), rdf=True),
                 [self.prop(p, X, y), self.prop(p, y, X)], "prp-asyp")  # fmt: skip

    def disjoint_props(self, props: list, name: str) -> None:
        y = Var("Y")
        for p, q in combinations(props, 2):
            self.add(Atom(INCONSISTENT, (X, Const(name)), rdf=True),
                     [self.prop(p, X, y), self.prop(q, X, y)], name)  # fmt: skip

    def has_key(self, c, head) -> None:
        props = self.g.items(head)
        if not props:
            raise Unsupported(f"owl:hasKey of {self.show(c)} is not a well-formed list")
        x2 = Var("X2")
        fresh = _Fresh()
        zs = [Var(f"Z{i}") for i in range(1, len(props) + 1)]
        for b1, b2 in product(self.sub(c, X, fresh), self.sub(c, x2, fresh)):
            body = [*b1, *b2, *(a for p, z in zip(props, zs, strict=True)
                                for a in (self.prop(p, X, z), self.prop(p, x2, z)))]  # fmt: skip
            self.add(Atom(SAME_AS, (X, x2), rdf=True), body, "prp-key")

    # ------------------------------------------------------------ equality and assertions
    def _eq_diff(self, name: str) -> None:
        y = Var("Y")
        for a, b in ((X, y), (y, X)):
            self.add(Atom(INCONSISTENT, (X, Const(name)), rdf=True),
                     [Atom(SAME_AS, (X, y), rdf=True), Atom(DIFFERENT, (a, b), rdf=True)], name)  # fmt: skip

    def different(self, s, o) -> None:
        self.assertion(s, o, DIFFERENT)
        self._eq_diff("eq-diff1")

    def all_different(self, s) -> None:
        name = "eq-diff2" if self.g.one(s, OWL + "members") is not None else "eq-diff3"
        for a, b in combinations(self.members(s), 2):
            self.assertion(a, b, DIFFERENT)
        self._eq_diff(name)

    def negative_assertion(self, s) -> None:
        source = self.g.one(s, OWL + "sourceIndividual")
        prop = self.g.one(s, OWL + "assertionProperty")
        target = self.g.one(s, OWL + "targetIndividual")
        name = "prp-npa1"
        if target is None:
            target, name = self.g.one(s, OWL + "targetValue"), "prp-npa2"
        if source is None or prop is None or target is None:
            raise Unsupported(f"incomplete owl:NegativePropertyAssertion {self.show(s)}")
        a = Const(self.value(source))
        self.add(Atom(INCONSISTENT, (a, Const(name)), rdf=True),
                 [self.prop(prop, a, Const(self.value(target)))], name)  # fmt: skip


def translate(path: str | Path, fmt: str | None = None) -> Translation:
    """The OWL 2 RL rules, facts and warnings of the ontology in `path`."""
    return Translator(read_graph(path, fmt)).run()
