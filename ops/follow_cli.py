"""`fluxmat follow`: keep a delta topic's materialisation in SQLite or PostgreSQL.

A thin layer over client.DeltaFollower and client.open_store: every complete
batch is applied in one database transaction together with its progress, so
the follower can be killed at any moment and started again with the same
command. It runs until SIGTERM/SIGINT (or, with `--until-caught-up`, until it
has read every partition to its end), printing one line per applied batch
unless `--quiet`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from fluxmat.engine import FluxmatError


def add_parsers(sub) -> None:
    f = sub.add_parser("follow", help="keep the materialisation of a delta topic in a database (SQLite, PostgreSQL)")
    f.add_argument("--deltas-topic", default=os.environ.get("FLUXMAT_DELTAS_TOPIC"),
                   required=not os.environ.get("FLUXMAT_DELTAS_TOPIC"),
                   help="the job's delta topic (env FLUXMAT_DELTAS_TOPIC)")
    f.add_argument("--bootstrap-servers", default=os.environ.get("FLUXMAT_BOOTSTRAP_SERVERS"),
                   required=not os.environ.get("FLUXMAT_BOOTSTRAP_SERVERS"),
                   help="Kafka bootstrap servers HOST:PORT (env FLUXMAT_BOOTSTRAP_SERVERS)")
    f.add_argument("--to", default=os.environ.get("FLUXMAT_FOLLOW_TO", "sqlite:///view.db"),
                   help="sqlite:///FILE or postgresql://USER@HOST:PORT/DB "
                        "(env FLUXMAT_FOLLOW_TO; default: %(default)s)")
    f.add_argument("--key", default=None, help="follow only this key of a job run with --partition-by")
    f.add_argument("--group-id", default=os.environ.get("FLUXMAT_FOLLOW_GROUP_ID"),
                   help="also commit the follower's offsets to this Kafka consumer group, for lag monitoring "
                        "(env FLUXMAT_FOLLOW_GROUP_ID; the database's progress stays the record)")
    f.add_argument("--kafka-config", default=os.environ.get("FLUXMAT_KAFKA_CONFIG"), metavar="FILE",
                   help="Kafka client settings (security.protocol, ssl.*, sasl.*) as for fluxmat run "
                        "(env FLUXMAT_KAFKA_CONFIG)")
    f.add_argument("--until-caught-up", action="store_true",
                   help="stop once every partition has been read to its end (default: run until stopped)")
    f.add_argument("--quiet", action="store_true", help="no line per applied batch")
    f.add_argument("--audit", action="store_true",
                   help="also keep every applied change with the update that caused it in table fluxmat_changes "
                        "(in the same transaction as its batch)")


def _stopper():
    stopped = []

    def stop(signum, frame) -> None:
        stopped.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return stopped


def cmd_follow(ns: argparse.Namespace) -> None:
    from fluxmat.client import DeltaFollower, MessageError, open_store
    from fluxmat.client.kafka_config import KafkaConfigError, load

    try:
        load(ns.kafka_config)  # a bad settings file is one error line before anything is contacted
    except KafkaConfigError as exc:
        raise FluxmatError(str(exc)) from None
    try:
        store = open_store(ns.to, audit=ns.audit)
    except ValueError as exc:
        raise FluxmatError(str(exc)) from None
    except Exception as exc:  # the database's own error (psycopg.OperationalError, sqlite3.Error)
        raise ConnectionError(f"cannot open {ns.to}: {exc}") from None
    stopped = _stopper()
    follower = DeltaFollower(ns.bootstrap_servers, ns.deltas_topic, store, key=ns.key, group_id=ns.group_id,
                             kafka_config=ns.kafka_config)  # fmt: skip
    try:
        while not stopped:
            for batch in follower.poll(0.5):
                if not ns.quiet:
                    key = "" if batch.key is None else f" key {batch.key}"
                    print(f"batch {batch.batch}{key}: +{len(batch.added)} -{len(batch.removed)} "
                          f"through {batch.through!r}", flush=True)
            if ns.until_caught_up and follower.caught_up() and not follower.folder.pending:
                break
    except MessageError as exc:
        raise FluxmatError(f"{ns.deltas_topic}: {exc}; nothing of its batch was applied") from None
    finally:
        follower.close()
    sys.stdout.flush()


COMMANDS = {"follow": cmd_follow}
