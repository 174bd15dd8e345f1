"""The limit flags of the CLI (engine.limits) and how a limit that ran out is reported.

`--max-facts N` (materialise, replay, query, why, run) bounds the
materialisation, `--max-update-work N` (replay, run) the rule applications and
module inferences of one update, `--max-message-bytes N` (run) an update
message. Each falls back to `FLUXMAT_<FLAG>`; 0 turns it off. A limit that runs
out in a command stops it with one `fluxmat: error:` line naming the flag and
exit code `LIMIT_EXIT`; in `fluxmat run` it quarantines the update instead
(stream.batch).
"""

from __future__ import annotations

import argparse
import os

from fluxmat.engine.limits import (
    DEFAULT_MAX_FACTS,
    DEFAULT_MAX_UPDATE_WORK,
    FactLimitExceeded,
    LimitExceeded,
    WorkLimitExceeded,
)

LIMIT_EXIT = 4  # distinct from 1 (user error), 2 (usage) and 3 (`why`: fact not found)
HINTS = {
    FactLimitExceeded: "raise --max-facts (env FLUXMAT_MAX_FACTS; 0: no limit); recursive "
    "arithmetic can make a materialisation infinite",
    WorkLimitExceeded: "raise --max-update-work (env FLUXMAT_MAX_UPDATE_WORK; 0: no limit)",
}


def limit(text: str) -> int:
    """The argparse type of a limit flag: a whole number >= 0 (0: no limit)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0 (0: no limit), got {n}")
    return n


FLAGS = {  # flag -> (environment variable, default, help)
    "--max-facts": ("FLUXMAT_MAX_FACTS", DEFAULT_MAX_FACTS,
                    "stop (exit 4) when the materialisation would hold more than N facts; "
                    "recursive arithmetic can make it infinite"),
    "--max-update-work": ("FLUXMAT_MAX_UPDATE_WORK", DEFAULT_MAX_UPDATE_WORK,
                          "stop (exit 4) when one update causes more than N rule applications "
                          "and module inferences"),
}  # fmt: skip


def add_limit(p: argparse.ArgumentParser, flag: str) -> None:
    """Add the limit `flag` of `FLAGS` to a subcommand's parser."""
    env, default, text = FLAGS[flag]
    p.add_argument(flag, type=limit, metavar="N", default=os.environ.get(env, str(default)),
                   help=f"{text} (env {env}; 0: no limit; default: %(default)s)")


def message(exc: LimitExceeded) -> str:
    """The one error line for a limit that ran out, with the flag that raises it."""
    return f"fluxmat: error: {exc}; {HINTS[type(exc)]}"
