"""Loading a program: its file, plus the rules and assertions of OWL ontologies.

`load_program(program, ontologies)` is what `--ontology` does for every command
(materialise, replay, check, explain, query, why, sparql, dashboard and the
streaming job): the program file (optional when an ontology is given) and each
ontology's OWL 2 RL translation (connectors.owl2rl) in one `Program`;
`summary(warnings)` is the one line the commands print about what was not
translated.
"""

from __future__ import annotations

from fluxmat.connectors.owl2rl import OwlWarning, translate
from fluxmat.engine.errors import FluxmatError
from fluxmat.engine.lexer import read_source
from fluxmat.engine.parser import parse_program
from fluxmat.engine.syntax import Atom, Program, Rule


def load_program(
    program: str | None, ontologies: tuple[str, ...] | list[str] = ()
) -> tuple[Program, list[OwlWarning]]:
    """The program in `program` (None: none) plus the rules and facts of the ontologies.

    Raises:
        FluxmatError: neither a program nor an ontology, or a file that cannot be read.
    """
    if program is None and not ontologies:
        raise FluxmatError("give a PROGRAM, an --ontology FILE, or both")
    parsed = None
    if program is not None:  # read_source: one message per problem (missing, directory, not UTF-8)
        parsed = parse_program(read_source(program), str(program))
    if not ontologies:
        return parsed, []
    onto, warnings = ontology_rules(ontologies)
    if parsed is None:
        return onto, warnings
    prefixes = {**dict(onto.prefixes), **dict(parsed.prefixes)}
    merged = Program(parsed.rules + onto.rules, parsed.facts + onto.facts, tuple(prefixes.items()),
                     parsed.source)  # fmt: skip
    return merged, warnings


def summary(warnings: list[OwlWarning]) -> str | None:
    """One line about the warnings of `load_program` (None when there are none)."""
    if not warnings:
        return None
    files = ", ".join(dict.fromkeys(w.pos.file for w in warnings))
    n = len(warnings)
    return (f"{n} axiom{'s' * (n != 1)} of {files} outside OWL 2 RL not translated "
            f"(`fluxmat owl2rl FILE` lists {'them' if n != 1 else 'it'}); first: {warnings[0]}")  # fmt: skip


def ontology_rules(paths: tuple[str, ...] | list[str]) -> tuple[Program, list[OwlWarning]]:
    """One program holding the rules and facts of every ontology in `paths`, and their warnings."""
    rules: list[Rule] = []
    facts: list[Atom] = []
    prefixes: dict[str, str] = {}
    warnings: list[OwlWarning] = []
    for path in paths:
        t = translate(path)
        rules += [r for r, _ in t.rules]
        facts += t.facts
        prefixes.update(t.prefixes)
        warnings += t.warnings
    return Program(tuple(rules), tuple(facts), tuple(prefixes.items()), ", ".join(paths)), warnings

