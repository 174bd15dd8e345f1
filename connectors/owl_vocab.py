"""The OWL, RDF and RDFS vocabulary the OWL 2 RL translation (connectors.owl2rl) sorts axioms by."""

from __future__ import annotations

from fluxmat.connectors.owl import OWL, RDF, RDFS

FLUXMAT = "urn:fluxmat:"
INCONSISTENT = FLUXMAT + "inconsistent"
SAME_AS = OWL + "sameAs"
DIFFERENT = OWL + "differentFrom"
TYPE = RDF + "type"
THING, NOTHING = OWL + "Thing", OWL + "Nothing"
DATATYPES = {RDFS + "Literal", RDF + "PlainLiteral", RDF + "langString", RDF + "XMLLiteral"}
DECLARATIONS = {OWL + k for k in (
    "Class", "ObjectProperty", "DatatypeProperty", "AnnotationProperty", "Ontology",
    "NamedIndividual", "Restriction", "Thing",
)} | {RDFS + "Class", RDF + "Property", RDFS + "Datatype", RDF + "List", OWL + "DeprecatedClass",
      OWL + "DeprecatedProperty", OWL + "OntologyProperty"}  # fmt: skip
ANNOTATIONS = {RDFS + k for k in ("label", "comment", "seeAlso", "isDefinedBy")} | {OWL + k for k in (
    "versionInfo", "versionIRI", "priorVersion", "backwardCompatibleWith", "incompatibleWith",
    "deprecated", "annotatedSource", "annotatedProperty", "annotatedTarget",
)}  # fmt: skip
# parts of expressions and lists: read through the axioms that use them
PARTS = {RDF + "first", RDF + "rest"} | {OWL + k for k in (
    "onProperty", "someValuesFrom", "allValuesFrom", "hasValue", "maxCardinality",
    "maxQualifiedCardinality", "minCardinality", "minQualifiedCardinality", "cardinality",
    "qualifiedCardinality", "onClass", "onDataRange", "members", "distinctMembers",
    "sourceIndividual", "assertionProperty", "targetIndividual", "targetValue", "onDatatype",
    "withRestrictions", "onProperties", "hasSelf",
)}  # fmt: skip
