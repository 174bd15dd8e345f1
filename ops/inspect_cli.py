"""`fluxmat query`, `fluxmat why`, `fluxmat export` and `fluxmat dashboard`: questions about a materialisation.

The state is the streaming job's (`--redis URL [--namespace NS]`, env
FLUXMAT_REDIS / FLUXMAT_NAMESPACE) or, with `--facts FILE`, mat(P, E) computed
from files. `query` prints the matching facts, sorted, one per line (a count on
stderr); `why` prints a proof tree down to explicit facts; `--json` prints the
dashboard API's JSON instead. `export` prints the job's stored explicit facts
(`--all`: the materialisation) as JSON Lines, sorted, with the batch on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from fluxmat.engine import FluxmatError
from fluxmat.ops.limit_flags import add_limit
from fluxmat.ops.rdf_cli import add_owl_rules_flag


def _source_flags(p: argparse.ArgumentParser) -> None:
    from fluxmat.ops.rdf_cli import add_input_flags

    p.add_argument("program", nargs="?",
                   help="the Datalog program the state was built for (may be left out with --ontology)")
    p.add_argument("--redis", default=os.environ.get("FLUXMAT_REDIS"),
                   help="the job's state store redis://HOST:PORT/DB (env FLUXMAT_REDIS)")
    p.add_argument("--namespace", default=os.environ.get("FLUXMAT_NAMESPACE", "default"),
                   help="the job's namespace (env FLUXMAT_NAMESPACE; default: %(default)s)")
    _key_flags(p)
    p.add_argument("--facts", action="append", default=[], metavar="FILE",
                   help="instead of --redis: compute mat(P, E) from these explicit facts")
    p.add_argument("--json", action="store_true", help="print JSON (as the dashboard's API)")
    add_input_flags(p)
    add_limit(p, "--max-facts")  # with --facts: mat(P, E) is computed here


def _key_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--key", default=None,
                   help="with a job run with --partition-by: the key whose materialisation to read")
    p.add_argument("--redis-cluster", action="store_true", default=bool(os.environ.get("FLUXMAT_REDIS_CLUSTER")),
                   help="--redis is a seed node of a Redis Cluster (env FLUXMAT_REDIS_CLUSTER)")


def add_parsers(sub) -> None:
    q = sub.add_parser("query", help="print the facts matching a pattern such as 'path(a, ?X)'")
    _source_flags(q)
    q.add_argument("pattern", help="an atom with constants and variables (?X, X or _)")
    q.intermixed = True  # PATTERN before or after the options (ops.cli._Parser)
    q.add_argument("--limit", type=int, default=None, help="print at most this many facts")
    w = sub.add_parser("why", help="explain why a fact is in the materialisation")
    _source_flags(w)
    w.add_argument("fact", help="a ground fact such as 'path(a, b)'")
    w.intermixed = True  # FACT before or after the options
    x = sub.add_parser("export", help="print the job's stored explicit facts as JSON Lines (the --facts format)")
    x.add_argument("program", nargs="?",
                   help="the Datalog program the state was built for (may be left out with --ontology)")
    x.add_argument("--redis", default=os.environ.get("FLUXMAT_REDIS"), required=not os.environ.get("FLUXMAT_REDIS"),
                   help="the job's state store redis://HOST:PORT/DB (env FLUXMAT_REDIS)")
    x.add_argument("--namespace", default=os.environ.get("FLUXMAT_NAMESPACE", "default"),
                   help="the job's namespace (env FLUXMAT_NAMESPACE; default: %(default)s)")
    _key_flags(x)
    x.add_argument("--all", action="store_true", help="the whole materialisation, not only the explicit facts")
    x.add_argument("--ontology", action="append", default=[], metavar="FILE",
                   help="the ontologies the job was started with (repeatable)")
    add_owl_rules_flag(x)
    d = sub.add_parser("dashboard", help="serve the live dashboard over the job's Redis state")
    d.add_argument("program", help="the Datalog program the job runs")
    d.add_argument("--redis", default=os.environ.get("FLUXMAT_REDIS"), required=not os.environ.get("FLUXMAT_REDIS"),
                   help="the job's state store (env FLUXMAT_REDIS)")
    d.add_argument("--namespace", default=os.environ.get("FLUXMAT_NAMESPACE", "default"),
                   help="the job's namespace (env FLUXMAT_NAMESPACE; default: %(default)s)")
    _key_flags(d)
    d.add_argument("--status-url", default=os.environ.get("FLUXMAT_STATUS_URL"),
                   help="the job's status, http://JOB:PORT/api/status of its dashboard: its counters, lag and "
                        "health, as the job's page shows them (env FLUXMAT_STATUS_URL)")
    d.add_argument("--status-token", default=os.environ.get("FLUXMAT_STATUS_TOKEN"),
                   help="the auth token of the job's dashboard, for --status-url (env FLUXMAT_STATUS_TOKEN)")
    d.add_argument("--metrics-url", help=argparse.SUPPRESS)  # replaced by --status-url: a clear error
    d.add_argument("--host", default=os.environ.get("FLUXMAT_DASHBOARD_HOST", "127.0.0.1"),
                   help="address to bind (env FLUXMAT_DASHBOARD_HOST; default: %(default)s)")
    d.add_argument("--port", type=int, default=int(os.environ.get("FLUXMAT_DASHBOARD_PORT", 8088)),
                   help="port (env FLUXMAT_DASHBOARD_PORT; default: %(default)s)")
    d.add_argument("--auth-token", default=os.environ.get("FLUXMAT_AUTH_TOKEN"),
                   help="token required by every page (env FLUXMAT_AUTH_TOKEN; needed beyond 127.0.0.1)")
    d.add_argument("--ontology", action="append", default=[], metavar="FILE",
                   help="the ontologies the job was started with (repeatable)")
    add_owl_rules_flag(d)


def _view(ns: argparse.Namespace):
    from fluxmat.ops.inspect import from_files, from_store

    if ns.redis and ns.facts:
        raise FluxmatError("give either --redis (the job's state) or --facts (files), not both")
    if ns.key is not None and not ns.redis:
        raise FluxmatError("--key names a key of the job's state: give --redis too")
    if ns.redis:
        return from_store(ns.program, ns.redis, ns.namespace, ns.ontology, key=ns.key, cluster=ns.redis_cluster,
                          owl_rules=ns.owl_rules)
    return from_files(ns.program, ns.facts, ontologies=ns.ontology, facts_format=ns.facts_format,
                      max_facts=ns.max_facts, owl_rules=ns.owl_rules)  # fmt: skip


def cmd_query(ns: argparse.Namespace) -> None:
    from fluxmat.ops.inspect import json_text

    result = _view(ns).query(ns.pattern, ns.limit)
    if ns.json:
        print(json_text(result))
        return
    sys.stdout.write("".join(f + ".\n" for f in result["facts"]))
    more = f" (showing {len(result['facts'])})" if result["truncated"] else ""
    print(f"{result['count']} fact{'s' * (result['count'] != 1)}{more}", file=sys.stderr)


def cmd_why(ns: argparse.Namespace) -> None:
    from fluxmat.ops.inspect import json_text

    result = _view(ns).why(ns.fact)
    if ns.json:
        print(json_text(result))  # a proof thousands of steps deep nests as deep
    else:
        print("\n".join(result["lines"]))
    if not result["found"]:
        raise SystemExit(3)


def cmd_dashboard(ns: argparse.Namespace) -> None:
    from fluxmat.ops.dashboard import StoredSource, serve

    if not 0 <= ns.port <= 65535:
        raise FluxmatError(f"--port must be a port number from 0 to 65535, got {ns.port}")
    if ns.metrics_url:
        raise FluxmatError("--metrics-url is gone: the dashboard reads the job's status, "
                           "give --status-url http://JOB:DASHBOARD-PORT/api/status (and --status-token)")
    source = StoredSource(ns.program, ns.redis, ns.namespace, ns.status_url, tuple(ns.ontology),
                          key=ns.key, cluster=ns.redis_cluster, owl_rules=ns.owl_rules,
                          status_token=ns.status_token)  # fmt: skip
    source.view()  # load (and check) the state before announcing the page
    server = serve(source, ns.host, ns.port, ns.auth_token)
    host, port = server.server_address[:2]
    print(f"fluxmat: dashboard on http://{host}:{port}/ (Ctrl-C to stop)", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.shutdown()


def cmd_export(ns: argparse.Namespace) -> None:
    from fluxmat.ops.inspect import export_facts

    if ns.program is None and not ns.ontology:
        raise FluxmatError("give the program the job runs (or its --ontology)")
    versions: list[int] = []
    batch, lines = export_facts(ns.program, ns.redis, ns.namespace, ns.ontology, key=ns.key,
                                cluster=ns.redis_cluster, everything=ns.all, owl_rules=ns.owl_rules,
                                versions=versions)  # fmt: skip
    sys.stdout.write("".join(line + "\n" for line in lines))
    what = "facts" if ns.all else "explicit facts"
    print(f"{len(lines)} {what} of batch {batch}, program version {versions[0]}", file=sys.stderr)


COMMANDS = {"query": cmd_query, "why": cmd_why, "export": cmd_export, "dashboard": cmd_dashboard}
