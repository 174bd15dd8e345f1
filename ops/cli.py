"""The `fluxmat` command line: a thin layer over `engine.Reasoner`.

Every subcommand exits 0 on success; a user mistake (bad file, syntax error,
unsafe rule, invalid update, unknown algorithm) prints one `fluxmat: error: ...`
line on stderr and exits 1, never a traceback; a limit that ran out
(`--max-facts`, `--max-update-work`: ops.limit_flags) prints one such line naming
the flag and exits 4; `why` exits 3 when the fact is not there.
Flags fall back to environment variables (shown in --help).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from fluxmat.connectors.files import read_facts, read_updates
from fluxmat.connectors.redact import redact
from fluxmat.engine import (
    ALGORITHMS,
    EngineOptions,
    Fed,
    FluxmatError,
    InputMemoryError,
    Reasoner,
    Report,
)
from fluxmat.engine.limits import DEFAULT_MAX_FACTS, DEFAULT_MAX_UPDATE_WORK, LimitExceeded, Limits
from fluxmat.engine.options import CORES
from fluxmat.engine.printer import FactPrinter
from fluxmat.ops import follow_cli, inspect_cli, limit_flags, program_cli, rdf_cli, stream_cli


def _env(name: str, default):
    return os.environ.get(f"FLUXMAT_{name}", default)


@dataclass(frozen=True)
class Config:
    """Options shared by the subcommands, built once from flags and environment."""

    program: str
    facts: tuple[str, ...] = ()
    algorithm: str = "dredc"
    updates: str | None = None
    schedule: str = "sequential"
    seed: int = 0
    budget: int = 1000
    output: str | None = None
    stats: str | None = None
    code: bool = False
    modules: str = "on"
    hypertree: str = "on"
    equality: str = "off"
    levels: str = "on"
    ontology: tuple[str, ...] = ()
    owl_rules: str = "axioms"
    facts_format: str | None = None
    format: str = "facts"
    max_facts: int = DEFAULT_MAX_FACTS  # 0: no limit
    max_update_work: int = DEFAULT_MAX_UPDATE_WORK
    core: str = "arrays"

    def engine_options(self) -> EngineOptions:
        """The engine's options, built once from these flags (the one place "on"/"off" is read)."""
        return EngineOptions(
            algorithm=self.algorithm, modules=self.modules == "on", hypertree=self.hypertree == "on",
            levels=self.levels == "on", equality=self.equality, schedule=self.schedule,
            seed=self.seed, budget=max(self.budget, 0),
            limits=Limits.of(self.max_update_work, self.max_facts), core=self.core,
        )  # fmt: skip

    @classmethod
    def from_args(cls, ns: argparse.Namespace) -> Config:
        values = {k: v for k, v in vars(ns).items() if k in cls.__dataclass_fields__}
        values["ontology"] = tuple(values.get("ontology") or ())
        if values.get("algorithm", "") is None:  # the default depends on --equality and --core
            bf = values.get("equality") == "rewrite" and values.get("core") != "arrays"
            values["algorithm"] = "bf" if bf else "dredc"
        return cls(**values)


def _add_program(p: argparse.ArgumentParser, facts: bool = True) -> None:
    p.add_argument("program", nargs="?", help="Datalog program file (.dl, or RDFox .dlog); "
                   "may be left out when --ontology is given")  # fmt: skip
    rdf_cli.add_input_flags(p)
    if facts:
        p.add_argument(
            "--facts", action="append", default=[], metavar="FILE",
            help="explicit facts: program syntax, JSON Lines when named *.jsonl, RDF when named "
            "*.nt *.nq *.ttl *.trig *.rdf *.owl (also *.gz) (repeatable)",
        )  # fmt: skip
        _add_modules(p)
        p.add_argument(
            "--hypertree", default=_env("HYPERTREE", "on"), choices=["on", "off"],
            help="evaluate cyclic rule bodies over a hypertree decomposition "
            "(env FLUXMAT_HYPERTREE; default: %(default)s)",
        )  # fmt: skip
        p.add_argument(
            "--levels", default=_env("LEVELS", "on"), choices=["on", "off"],
            help="dredc: keep each fact's derivation level and overdelete only facts "
            "that lost every well-founded derivation (env FLUXMAT_LEVELS; default: %(default)s)",
        )  # fmt: skip
        p.add_argument(
            "--equality", default=_env("EQUALITY", "off"), choices=["off", "rewrite"],
            help="rewrite: owl:sameAs is equality, facts rewritten to representatives "
            "(remat, dred, dredc, bf; with --core arrays also counting) "
            "(env FLUXMAT_EQUALITY; default: %(default)s)",
        )  # fmt: skip
        _add_core(p)
        limit_flags.add_limit(p, "--max-facts")


def _add_modules(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--modules", default=_env("MODULES", "on"), choices=["on", "off"],
        help="specialised modules for closures (`explain` shows which run). Objects core: "
        "transitive / symmetric-transitive / linear closure modules where the algorithm "
        "supports them (remat, dredc; fd-dred, fd-counting where the closure's stratum holds "
        "its relation alone). Arrays core: the symmetric-transitive closure module, every "
        "algorithm; linear closures are inserted by reachability whatever the flag, "
        "transitive ones maintained by DRed^c (env FLUXMAT_MODULES; default: %(default)s)",
    )  # fmt: skip


def _add_core(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--core", default=_env("CORE", "arrays"), choices=list(CORES),
        help="how the engine keeps facts: arrays (int64 columns, loops compiled by numba; "
        "counting, dred, dredc, remat -- each as counting plus DRed^c -- bf, and fd-counting, "
        "fd-dred with each run of updates integrated set-at-a-time; equality, comparisons and "
        "arithmetic too) or objects (Python objects; the reference core) "
        "(env FLUXMAT_CORE; default: %(default)s)",
    )  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse with the CLI's error contract: one `fluxmat: error:` line, exit 2.

    A subcommand whose parser has `intermixed = True` takes its positionals
    before, between or after its options (`why PROGRAM --facts F FACT` as well
    as `why PROGRAM FACT --facts F`): plain argparse gives an optional
    positional everything before the first option and then refuses the rest.
    """

    intermixed = False
    _mixing = False  # inside parse_known_intermixed_args, which calls parse_known_args itself

    def parse_known_args(self, args=None, namespace=None):
        if not self.intermixed or self._mixing:
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False

    def error(self, message: str):
        self.exit(2, f"fluxmat: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="fluxmat",
        description="Incremental Datalog materialisation under additions and deletions.",
    )
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    m = sub.add_parser("materialise", aliases=["materialize"], help="print mat(P, E), sorted")
    _add_program(m)
    m.add_argument("--output", metavar="FILE", help="write the facts here instead of stdout")
    rdf_cli.add_output_flag(m)

    r = sub.add_parser("replay", help="apply a JSONL update stream and print the final result")
    _add_program(r)
    r.add_argument("--updates", required=True, metavar="FILE.jsonl", help="one update per line")
    r.add_argument(
        "--algorithm", default=_env("ALGORITHM", None), metavar="NAME",
        help=f"maintenance algorithm: {', '.join(sorted(ALGORITHMS))} "
        "(env FLUXMAT_ALGORITHM; default: dredc, or bf -- B/F~, incremental under "
        "equality changes -- with --equality rewrite)",
    )  # fmt: skip
    r.add_argument(
        "--schedule", default=_env("SCHEDULE", "sequential"),
        choices=["sequential", "interleaved"],
        help="how updates overlap; interleaving applies to the fully dynamic algorithms "
        "(env FLUXMAT_SCHEDULE; default: %(default)s)",
    )  # fmt: skip
    r.add_argument(
        "--seed",
        type=int,
        default=int(_env("SEED", 0)),
        help="scheduler seed (env FLUXMAT_SEED; default: %(default)s)",
    )
    r.add_argument(
        "--budget",
        type=int,
        default=int(_env("BUDGET", 1000)),
        help="units of work between checks for a new update "
        "(env FLUXMAT_BUDGET; default: %(default)s)",
    )
    r.add_argument("--output", metavar="FILE", help="write the final facts here")
    rdf_cli.add_output_flag(r)
    r.add_argument("--stats", metavar="FILE", help="write one JSON object per update here")
    limit_flags.add_limit(r, "--max-update-work")

    c = sub.add_parser("check", help="validate a program and summarise its strata")
    _add_program(c, facts=False)

    e = sub.add_parser("explain", help="print every stage: AST, analysis, plans")
    _add_program(e, facts=False)
    e.add_argument("--code", action="store_true", help="also print the generated plan code")
    _add_modules(e)  # what the analysis finds, and which of its modules the core runs
    _add_core(e)
    stream_cli.add_parsers(sub)
    inspect_cli.add_parsers(sub)
    rdf_cli.add_parsers(sub)
    follow_cli.add_parsers(sub)
    program_cli.add_parsers(sub)
    return ap


# ---------------------------------------------------------------- commands


def _reasoner(cfg: Config) -> Reasoner:
    return rdf_cli.reasoner(cfg.program, cfg.ontology, cfg.engine_options(), cfg.owl_rules)


def _facts(cfg: Config, reasoner: Reasoner) -> list[tuple]:
    out: list[tuple] = []
    for f in cfg.facts:
        out.extend(read_facts(f, reasoner.prefixes, cfg.facts_format))
    return out


def _write_facts(cfg: Config, reasoner: Reasoner) -> None:
    if cfg.format != "facts":
        rdf_cli.write(rdf_cli.render(reasoner.facts(), cfg.format, reasoner.prefixes), cfg.output)
        return
    text = "".join(line + "\n" for line in reasoner.lines())
    if cfg.output:
        Path(cfg.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def _stats_line(label, report: Report, update_id=None) -> str:
    return json.dumps({
        "update": label,
        "id": update_id,
        "algorithm": report.algorithm,
        "seconds": round(report.seconds, 6),
        "added": report.added,
        "removed": report.removed,
        "noop_adds": report.noop_adds,
        "noop_deletes": report.noop_deletes,
        "rule_applications": report.total_applications,
        "module_inferences": report.total_module_inferences,
        "iterations": report.iterations,
        "backward_matches": report.backward_matches,
        "backward_reads": report.backward_reads,
        **report.details,
    })  # fmt: skip


def cmd_materialise(cfg: Config) -> None:
    """One load, no updates: `remat` (no counters to keep; all modules apply)."""
    reasoner = _reasoner(replace(cfg, algorithm="remat"))
    reasoner.load(_facts(cfg, reasoner))
    if cfg.ontology:
        rdf_cli.warn_inconsistent(reasoner)
    _write_facts(cfg, reasoner)


def cmd_replay(cfg: Config) -> None:
    reasoner = _reasoner(cfg)
    if cfg.budget < 0:
        raise FluxmatError("--budget must be at least 0")
    facts = _facts(cfg, reasoner)
    updates = list(read_updates(cfg.updates, reasoner.prefixes))
    _validate(reasoner, facts, updates)
    changes = [u for u in updates if u.program is not None]
    if changes and reasoner.core != "arrays":
        raise FluxmatError(
            f"{changes[0].where}: program changes need the arrays core (--core arrays)"
        )
    stats = open(cfg.stats, "w", encoding="utf-8") if cfg.stats else None  # noqa: SIM115
    try:
        report = reasoner.load(facts)
        if stats:
            stats.write(_stats_line("initial", report) + "\n")
        if reasoner.fully_dynamic:
            _replay_fully_dynamic(reasoner, updates, stats, lambda: _loaded(cfg, facts))
        else:
            _replay_sequential(reasoner, updates, stats)
    finally:
        if stats:
            stats.close()
    if cfg.ontology:
        rdf_cli.warn_inconsistent(reasoner)
    _write_facts(cfg, reasoner)


def _validate(reasoner: Reasoner, facts: list[tuple], updates) -> None:
    """The whole stream is checked before anything is applied (arities, add/delete clashes)."""
    check = reasoner.update_checker()
    check([*reasoner.program_facts(), *facts], ())
    for upd in updates:
        try:
            check(upd.add, upd.delete)
        except FluxmatError as exc:
            raise FluxmatError(f"{upd.where}: {exc}") from None


def _replay_sequential(reasoner: Reasoner, updates, stats) -> None:
    """Classic algorithms: one update after another (the schedule flags do not apply)."""
    progress = _Progress(len(updates))
    for n, upd in enumerate(updates, start=1):
        try:
            report = apply_update(reasoner, upd)
        except LimitExceeded as exc:
            raise exc.located(upd.where) from None
        except FluxmatError as exc:
            raise FluxmatError(f"{upd.where}: {exc}") from None
        if stats:
            stats.write(_stats_line(n, report, upd.id) + "\n")
        progress.tick(n)
    progress.done()


def apply_update(reasoner: Reasoner, upd) -> Report:
    """One update of a stream file: facts, or a program change (connectors.files.ProgramChange)."""
    change = upd.program
    if change is None:
        return reasoner.update(upd.add, upd.delete)
    report = reasoner.change_program(change.add, change.delete, change.whole)
    report.details["program_version"] = reasoner.program_version
    return report


def _loaded(cfg: Config, facts: list[tuple]) -> Reasoner:
    """A new reasoner of `cfg` with `facts` loaded (to replay the updates again)."""
    reasoner = _reasoner(cfg)
    reasoner.load(facts)
    return reasoner


def _replay_fully_dynamic(reasoner: Reasoner, updates, stats, again=None) -> None:
    """Submit each update, then do `--budget` units of work before the next arrives (engine.feed).

    Sequential: every update is processed to quiescence before the next one is
    integrated. Interleaved: updates overlap; `--seed` drives the scheduler; after
    the last update the engine runs until quiescent (reported on that update's line).
    A limit that ran out in a run of several updates (the arrays core: `shared`) is
    located by replaying them one at a time on the reasoner `again()` gives.
    """
    progress = _Progress(len(updates))
    clock = {"start": time.perf_counter(), "counts": reasoner.work_counts()}

    def after_each(fed: Fed, _seq: int) -> None:
        n, upd = fed.key
        if stats:
            seconds = time.perf_counter() - clock["start"]
            stats.write(_fd_stats_line(n, upd.id, reasoner, clock["counts"], seconds) + "\n")
        progress.tick(n)
        clock.update(start=time.perf_counter(), counts=reasoner.work_counts())

    def rejected(key, exc: Exception) -> None:  # validated before: what the engine refuses late
        if isinstance(exc, FluxmatError):
            raise FluxmatError(f"{key[1].where}: {exc}") from None
        raise exc

    try:
        reasoner.feed(_fed(updates), rejected=rejected, after_each=after_each)
    except LimitExceeded as exc:  # charged to one update (with overlap: where its work ran out)
        if exc.shared and again is not None:
            exc = _one_at_a_time(again(), updates) or exc
        raise exc.located(exc.key[1].where if exc.key else "replay") from None
    progress.done()


def _fed(updates) -> Iterator[Fed]:
    """The updates as engine.feed takes them, keyed (line number, update)."""
    return (Fed((n, u), u.add, u.delete, u.id if u.id is not None else n)
            for n, u in enumerate(updates, start=1))  # fmt: skip


def _one_at_a_time(reasoner: Reasoner, updates) -> LimitExceeded | None:
    """The limit error of replaying `updates` without overlap: charged to exactly one update."""
    try:
        reasoner.feed(_fed(updates), overlap=False)
    except LimitExceeded as exc:
        return exc
    return None  # each update alone stays within the limits: keep the run's charge


def _fd_stats_line(label, update_id, reasoner: Reasoner, before: dict, seconds: float) -> str:
    point = reasoner.poll()
    line = {
        "update": label,
        "id": update_id,
        "algorithm": reasoner.name,
        "seconds": round(seconds, 6),
        "quiescent": point is not None,
        "added": len(point.added) if point else None,
        "removed": len(point.removed) if point else None,
        "pending": reasoner.pending,
    }
    line.update(Reasoner.counts_since(reasoner.work_counts(), before))
    line["log_size"] = reasoner.sizes()["log"]
    return json.dumps(line)


class _Progress:
    """Shows `update i/n` on a terminal's stderr during long replays."""

    def __init__(self, total: int):
        self.total = total
        self.start = self.last = time.monotonic()
        self.shown = False

    def tick(self, n: int) -> None:
        now = time.monotonic()
        if sys.stderr.isatty() and now - self.last > 0.5 and now - self.start > 2:
            sys.stderr.write(f"\rfluxmat: update {n}/{self.total}")
            sys.stderr.flush()
            self.last, self.shown = now, True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")


def cmd_check(cfg: Config) -> None:
    reasoner = _reasoner(cfg)
    an = reasoner.analysis
    internal = an.internal
    user_rules = [r for r in an.rules if r.head.pred not in internal]
    nrec = sum(1 for r in user_rules if r.recursive)
    print(f"{cfg.program or ', '.join(cfg.ontology)}: ok")
    print(f"  rules: {len(user_rules)} ({len(user_rules) - nrec} non-recursive, {nrec} recursive)")
    print(f"  facts: {len(reasoner.program.facts)}")
    preds = {an.display.get(p, p) for p in an.arity if p not in internal}
    print(f"  predicates: {len(preds)}")
    print(f"  strata: {len(an.strata)}")
    comps = [s for s in an.strata if s.recursive]
    print(f"  recursive components: {len(comps)}")
    for s in comps:
        names = ", ".join(sorted({reasoner.printer.pred(an.display.get(p, p)) for p in s.preds}))
        print(f"    stratum {s.index}: {names} ({len(s.recursive)} recursive rules)")
    print(f"  modules: {len(an.modules)}")
    for m in an.modules:
        rules = f"{len(m.rules)} rule{'s' if len(m.rules) != 1 else ''}"
        print(f"    stratum {m.stratum}: {_module(reasoner, m)} ({rules})")


def _module(reasoner: Reasoner, m) -> str:
    """`tc(path)`: a detected module with its predicate as the program writes it."""
    return f"{m.kind}({reasoner.printer.pred(reasoner.analysis.display.get(m.pred, m.pred))})"


def cmd_explain(cfg: Config) -> None:
    reasoner = _reasoner(cfg)
    an = reasoner.analysis
    pr: FactPrinter = reasoner.printer
    print("== AST")
    print(reasoner.program)
    print("\n== analysis")
    module_of = {rid: m for m in an.modules for rid in m.rules}
    used = reasoner.modules_used()
    for s in an.strata:
        preds = ", ".join(sorted(pr.pred(p) for p in s.preds))
        print(f"stratum {s.index}: {preds}")
        for m in an.modules_of(s):
            unused = "" if m in used else f" (not used by {reasoner.name}, core {cfg.core})"
            print(f"  module {_module(reasoner, m)}: rules {', '.join(map(str, m.rules))}{unused}")
        for rid in s.rules:
            r = an.rules[rid]
            kind = "recursive" if r.recursive else "non-recursive"
            if rid in module_of:
                kind += f", module {_module(reasoner, module_of[rid])}"
            print(f"  [{rid}] {kind}: {r}")
    print("\n== plans")
    for plan in reasoner.plans():
        print(plan.describe())
        if cfg.code:
            print(plan.source)


# The engine's commands over files: each is called with the `Config` built from the flags.
COMMANDS_ON_CONFIG = {
    "materialise": cmd_materialise, "materialize": cmd_materialise, "replay": cmd_replay,
    "check": cmd_check, "explain": cmd_explain,
}  # fmt: skip


# The other commands (the job, the state and RDF tools, the follower, the queries and `why`):
# each is called with the parsed arguments and builds its own settings from them.
COMMANDS_ON_ARGS = {"run": stream_cli.cmd_run, "demo": stream_cli.cmd_demo, **inspect_cli.COMMANDS,
                    **rdf_cli.COMMANDS, **follow_cli.COMMANDS,
                    **program_cli.COMMANDS}  # fmt: skip


def _limit_hit(exc: BaseException) -> str:
    """The message for a MemoryError or RecursionError: which limit was hit."""
    if isinstance(exc, RecursionError):
        return (f"the input nests too deeply: Python's recursion limit "
                f"({sys.getrecursionlimit()} frames) was reached")  # fmt: skip
    import resource

    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    limit = ("the memory available to the process" if soft == resource.RLIM_INFINITY
             else f"the address-space limit of {soft // 2**20} MiB (ulimit -v)")  # fmt: skip
    if isinstance(exc, InputMemoryError):  # named the file it was reading (and the line)
        return f"{exc}: out of memory while reading it: {limit} was used up"
    return f"out of memory: {limit} was used up"


def error_line(message: str) -> str:
    """The one `fluxmat: error:` line for `message`: URL passwords masked, newlines escaped."""
    return "fluxmat: error: " + redact(message).replace("\r", "\\r").replace("\n", "\\n")


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    message = None
    try:
        if ns.command in COMMANDS_ON_ARGS:
            COMMANDS_ON_ARGS[ns.command](ns)
        else:
            COMMANDS_ON_CONFIG[ns.command](Config.from_args(ns))
    except LimitExceeded as exc:
        print(limit_flags.message(exc), file=sys.stderr)
        return limit_flags.LIMIT_EXIT
    except FluxmatError as exc:
        message = str(exc)
    except BrokenPipeError:  # e.g. `fluxmat materialise ... | head`
        sys.stderr.close()
        return 0
    except (OSError, ConnectionError) as exc:
        message = str(exc)
    except (MemoryError, RecursionError) as exc:
        message = _limit_hit(exc)  # the traceback's frames are freed before printing
    except KeyboardInterrupt:
        print("fluxmat: interrupted", file=sys.stderr)
        return 130
    if message is None:
        return 0
    print(error_line(message), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
