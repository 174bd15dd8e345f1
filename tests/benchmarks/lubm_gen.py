"""Deterministic LUBM-style data (univ-bench ontology), scalable by universities.

Follows the shape of the Lehigh University Benchmark generator (UBA 1.7):

* per university: 15-25 departments (or `departments_per_university`), each a
  `subOrganizationOf` the university, with 10-20 research groups
  (`subOrganizationOf` the department);
* per department: 7-10 full, 10-14 associate, 8-11 assistant professors and
  5-7 lecturers (all `worksFor` the department; one full professor `headOf` it),
  each teaching 1-2 courses and 1-2 graduate courses, with bachelor's, master's
  and doctoral degrees from random universities (of a pool of 1,000, as in UBA);
  8-14 undergraduates and 3-4 graduate students per faculty member
  (`memberOf` the department); undergraduates take 2-4 courses and 1 in 5 has a
  professor as `advisor`; graduate students take 1-3 graduate courses, all have
  an advisor and an undergraduate degree, 1 in 5 is a `teachingAssistantOf` a
  course and 1 in 4 is a `ResearchAssistant`;
* publications: 15-20 per full, 10-18 per associate, 5-10 per assistant
  professor, 0-5 per lecturer; each graduate student co-authors 0-5 of their
  advisor's publications;
* data properties `name`, `emailAddress`, `telephone` (and `researchInterest`
  for professors) as xsd:string literals in the style of the corpus streams.

Facts are tuples `(pred, *args)`; predicates are the prefixed names of the corpus
program `lubm.dlog` and its streams (`a1:takesCourse`), constants plain strings
(`http://www.Department1.University0.edu/UndergraduateStudent388`). The engine
does not expand prefixes of Python facts (only the JSON/text readers do), so
pass `prefixes` (e.g. `dict(program.prefixes)`) to get full-IRI predicates.

    python3 -m tests.benchmarks.lubm_gen --universities 1 > lubm.jsonl
    python3 -m tests.benchmarks.lubm_gen --universities 1 --format turtle > lubm.ttl

`write_rdf(facts, path, fmt)` writes the same data as RDF (`--format ntriples |
turtle | rdfxml`): `C(x)` as `x rdf:type ub:C`, `p(x, y)` as `x ub:p y`, constants
starting with `http://` as IRIs and `"..."^^xsd:string` as plain literals.
"""

from __future__ import annotations

import argparse
import json
import random
import sys

SEED = 20240611
UNIVERSITY_POOL = 1000  # degrees come from University0 .. University999, as in UBA
A1 = "a1:"


def _lit(text: str) -> str:
    return f'"{text}"^^xsd:string'


TELEPHONE = _lit("xxx-xxx-xxxx")


def generate(
    universities: int = 1,
    departments_per_university: int | None = None,
    seed: int = SEED,
    prefixes: dict[str, str] | None = None,
) -> list[tuple]:
    """Distinct LUBM-style facts, in generation order (same arguments, same list).

    `departments_per_university=None` draws 15-25 per university as LUBM does.
    With `prefixes`, predicate names `a1:X` become `prefixes["a1"] + "X"`.
    """
    if universities < 1:
        raise ValueError("universities must be at least 1")
    if departments_per_university is not None and departments_per_university < 1:
        raise ValueError("departments_per_university must be at least 1")
    rng = random.Random(seed)
    pool = max(UNIVERSITY_POOL, universities)
    out: dict[tuple, None] = {}  # ordered set

    def fact(pred: str, *args: str) -> None:
        out[(A1 + pred, *args)] = None

    def any_university() -> str:
        return f"http://www.University{rng.randrange(pool)}.edu"

    for u in range(universities):
        univ = f"http://www.University{u}.edu"
        fact("University", univ)
        fact("name", univ, _lit(f"University{u}"))
        n_dept = departments_per_university or rng.randint(15, 25)
        for d in range(n_dept):
            _department(fact, rng, any_university, univ, u, d)

    facts = list(out)
    if prefixes is not None:
        base = prefixes["a1"]
        facts = [(base + f[0][len(A1) :], *f[1:]) for f in facts]
    return facts


def _department(fact, rng: random.Random, any_university, univ: str, u: int, d: int) -> None:
    host = f"Department{d}.University{u}.edu"
    dept = f"http://www.{host}"
    fact("Department", dept)
    fact("subOrganizationOf", dept, univ)
    fact("name", dept, _lit(f"Department{d}"))
    for g in range(rng.randint(10, 20)):
        group = f"{dept}/ResearchGroup{g}"
        fact("ResearchGroup", group)
        fact("subOrganizationOf", group, dept)

    def person(kind: str, i: int) -> str:
        who = f"{dept}/{kind}{i}"
        fact(kind, who)
        fact("name", who, _lit(f"{kind}{i}"))
        fact("emailAddress", who, _lit(f"{kind}{i}@{host}"))
        fact("telephone", who, TELEPHONE)
        return who

    # faculty: (class, how many, publications per member)
    ranks = (
        ("FullProfessor", rng.randint(7, 10), (15, 20)),
        ("AssociateProfessor", rng.randint(10, 14), (10, 18)),
        ("AssistantProfessor", rng.randint(8, 11), (5, 10)),
        ("Lecturer", rng.randint(5, 7), (0, 5)),
    )
    faculty: list[str] = []
    professors: list[str] = []
    publications: dict[str, list[str]] = {}
    courses: list[str] = []
    grad_courses: list[str] = []
    for kind, count, (lo, hi) in ranks:
        for i in range(count):
            who = person(kind, i)
            faculty.append(who)
            fact("worksFor", who, dept)
            fact("undergraduateDegreeFrom", who, any_university())
            fact("mastersDegreeFrom", who, any_university())
            fact("doctoralDegreeFrom", who, any_university())
            if kind != "Lecturer":
                professors.append(who)
                fact("researchInterest", who, _lit(f"Research{rng.randrange(30)}"))
            for _ in range(rng.randint(1, 2)):
                course = f"{dept}/Course{len(courses)}"
                courses.append(course)
                fact("Course", course)
                fact("name", course, _lit(f"Course{len(courses) - 1}"))
                fact("teacherOf", who, course)
            for _ in range(rng.randint(1, 2)):
                course = f"{dept}/GraduateCourse{len(grad_courses)}"
                grad_courses.append(course)
                fact("GraduateCourse", course)
                fact("name", course, _lit(f"GraduateCourse{len(grad_courses) - 1}"))
                fact("teacherOf", who, course)
            pubs = publications[who] = []
            for p in range(rng.randint(lo, hi)):
                pub = f"{who}/Publication{p}"
                pubs.append(pub)
                fact("Publication", pub)
                fact("name", pub, _lit(f"Publication{p}"))
                fact("publicationAuthor", pub, who)
    fact("headOf", f"{dept}/FullProfessor{rng.randrange(ranks[0][1])}", dept)  # the chair

    n_faculty = len(faculty)
    for i in range(n_faculty * rng.randint(8, 14)):
        who = person("UndergraduateStudent", i)
        fact("memberOf", who, dept)
        for course in rng.sample(courses, min(len(courses), rng.randint(2, 4))):
            fact("takesCourse", who, course)
        if rng.random() < 0.2:
            fact("advisor", who, rng.choice(professors))
    ta_courses = list(courses)
    rng.shuffle(ta_courses)  # at most one teaching assistant per course
    for i in range(n_faculty * rng.randint(3, 4)):
        who = person("GraduateStudent", i)
        fact("memberOf", who, dept)
        fact("undergraduateDegreeFrom", who, any_university())
        for course in rng.sample(grad_courses, min(len(grad_courses), rng.randint(1, 3))):
            fact("takesCourse", who, course)
        adv = rng.choice(professors)
        fact("advisor", who, adv)
        pubs = publications[adv]
        for pub in rng.sample(pubs, min(len(pubs), rng.randint(0, 5))):
            fact("publicationAuthor", pub, who)
        if rng.random() < 0.2 and ta_courses:
            fact("teachingAssistantOf", who, ta_courses.pop())
        if rng.random() < 0.25:
            fact("ResearchAssistant", who)


UB = "http://swat.cse.lehigh.edu/onto/univ-bench.owl#"
RDF_FORMATS = ("ntriples", "turtle", "rdfxml")


def triples(facts: list[tuple]) -> list:
    """The generated facts as pyoxigraph triples (univ-bench IRIs)."""
    import pyoxigraph as ox

    rdf_type = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
    nodes: dict[str, object] = {}

    def term(value: str):
        found = nodes.get(value)
        if found is None:
            if value.startswith('"') and value.endswith('"^^xsd:string'):
                found = ox.Literal(value[1 : -len('"^^xsd:string')])
            else:
                found = ox.NamedNode(value)
            nodes[value] = found
        return found

    out = []
    for f in facts:
        name = f[0][len(A1) :] if f[0].startswith(A1) else f[0]
        if len(f) == 2:
            out.append(ox.Triple(term(f[1]), rdf_type, term(UB + name)))
        else:
            out.append(ox.Triple(term(f[1]), term(UB + name), term(f[2])))
    return out


def write_rdf(facts: list[tuple], out, fmt: str) -> None:
    """Write the facts as RDF in `fmt` (ntriples, turtle, rdfxml) to a path or binary stream."""
    import pyoxigraph as ox

    kind = {"ntriples": ox.RdfFormat.N_TRIPLES, "turtle": ox.RdfFormat.TURTLE,
            "rdfxml": ox.RdfFormat.RDF_XML}[fmt]  # fmt: skip
    ox.serialize(triples(facts), out, kind, prefixes={"ub": UB} if fmt != "ntriples" else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tests.benchmarks.lubm_gen", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--universities", type=int, default=1)
    ap.add_argument("--departments", type=int, default=None,
                    help="departments per university (default: 15-25 at random, as LUBM)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--format", choices=["jsonl", *RDF_FORMATS], default="jsonl",
                    help="one JSONL update line (default), or RDF")  # fmt: skip
    args = ap.parse_args(argv)
    facts = generate(args.universities, args.departments, args.seed)
    if args.format != "jsonl":
        write_rdf(facts, sys.stdout.buffer, args.format)
        print(f"{len(facts)} triples", file=sys.stderr)
        return 0
    # one corpus-style JSONL update line: {"add": [[pred, arg, ...], ...]}
    json.dump({"add": [list(f) for f in facts]}, sys.stdout)
    sys.stdout.write("\n")
    print(f"{len(facts)} facts", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
