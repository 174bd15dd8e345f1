"""The page's time series: the rows a job's status keeps in its ring buffers, one function a kind.

`history_point` is one point of the per-second history (cumulative counters
and sizes); `batch_row` one finished batch; `dead_letter_rows` a batch's dead
letters; `delta_entry` a published delta as the page lists it (with `fact_text`,
its facts as program text); `rules_panel` the top rules of a batch;
`verified_row` a self-check; `error_row` an error. The ring buffers that hold
them are the job's status value (ops.status.JobStatus); `ops.metrics.JobMetrics`
appends to them from the job's events, the dashboard apart from the job reads
them from the job's `/api/status`.

Not here: Prometheus (ops.collectors), the health checks (ops.health).
"""

from __future__ import annotations

import time

from fluxmat.engine import atom_to_fact
from fluxmat.engine.wire import fact_from_json
from fluxmat.stream.batch import DeadLetter, dead_letter_kind

SHOWN_FACTS = 8  # facts of each delta kept for the dashboard
RULES_SHOWN = 10  # the top rules of a batch the page lists (by rule applications)


def history_point(totals: dict, now: dict) -> dict:
    """One point of the dashboard's per-second history (cumulative counters and sizes)."""
    return {
        "t": round(time.time(), 3), "updates": totals["updates"],
        "fact_ops": totals["adds"] + totals["deletes"], "deltas": totals["deltas"],
        "facts": now["facts"], "pending": now["pending"], "lag": sum(now["lag"].values()),
        "time_lag": now.get("time_lag"),
    }  # fmt: skip


def batch_row(outcome, t: float) -> dict:
    """A finished batch (a `stream.batch.BatchOutcome`) as the page's batch series holds it."""
    latency = None
    if outcome.oldest_timestamp_ms is not None:
        latency = max(t - outcome.oldest_timestamp_ms / 1000.0, 0.0)
    return {
        "batch": outcome.batch, "t": t, "seconds": round(outcome.seconds, 4),
        "latency": None if latency is None else round(latency, 4),
        "updates": outcome.updates, "added": outcome.added, "removed": outcome.removed,
        "dead": outcome.dead, "peak_pending": outcome.peak_pending,
    }  # fmt: skip


def dead_letter_rows(outcome, t: float) -> list[dict]:
    """A batch's dead letters as the page lists them: where, the kind of reason, and the reason."""
    rows = []
    for letter in map(DeadLetter.read, (outcome.output or {}).get("dead", ())):
        rows.append({"t": t, "batch": outcome.batch, "partition": letter.partition, "offset": letter.offset,
                     "kind": dead_letter_kind(letter.reason), "reason": letter.reason[:500]})  # fmt: skip
    return rows


def delta_entry(batch: int, output: dict, t: float | None, show=None, outcome=None) -> dict:
    """A published delta as the dashboard lists it (sizes, and the first facts).

    `added` / `removed` are the facts as published; with `show` (`fact_text`),
    `added_text` / `removed_text` are the same facts as program text that reads
    back as the same fact -- what "why" takes (the page shows these). With the
    batch's `outcome` (a live job), `added_by` / `removed_by` name the update
    whose work changed each fact (stream.batch.BatchOutcome.causes; None: the
    work of several updates), and `updates` how many the batch applied.
    """
    added, removed = output["added"][:SHOWN_FACTS], output["removed"][:SHOWN_FACTS]
    entry = {
        "batch": batch, "through": output["through"], "t": t,
        "n_added": len(output["added"]), "n_removed": len(output["removed"]),
        "added": added, "removed": removed,
    }  # fmt: skip
    if outcome is not None and outcome.causes:
        entry["updates"] = outcome.updates
        entry["added_by"] = outcome.causes["added"][:SHOWN_FACTS]
        entry["removed_by"] = outcome.causes["removed"][:SHOWN_FACTS]
    if show is not None:
        entry["added_text"] = [show(f) for f in added]
        entry["removed_text"] = [show(f) for f in removed]
    return entry


def fact_text(reasoner):
    """A function from a published fact (JSON array, or an N-Triples line) to program text."""
    prefixes = reasoner.prefixes

    def show(item) -> str:
        if isinstance(item, str):  # --delta-format ntriples: a triple's N-Triples line
            return item
        return reasoner.show(atom_to_fact(fact_from_json(item, prefixes)))

    return show


def top_rules(rules: dict) -> list[tuple]:
    """A batch's busiest rules, (label, (applications, log growth, log entries)), at most `RULES_SHOWN`."""
    return sorted(rules.items(), key=lambda kv: (-kv[1][0], -abs(kv[1][1]), kv[0]))[:RULES_SHOWN]


def rules_panel(batch: int, rules: dict, top: list[tuple], texts: dict[str, str]) -> dict:
    """The page's top rules of a batch, each with its text (file:line -> the rules written there)."""
    return {
        "batch": batch, "changed": len(rules),
        "top": [{"rule": label, "text": texts.get(label, ""), "applications": a, "log": g}
                for label, (a, g, _) in top],
    }  # fmt: skip


def verified_row(result, outcome: str) -> dict:
    """A self-check (stream.verify.Verification) as the page's `now.verified` shows it."""
    return {"batch": result.batch, "result": outcome, "missing": result.missing, "extra": result.extra,
            "sample": list(result.sample), "seconds": round(result.seconds, 3), "error": result.error}  # fmt: skip


def verification_text(result) -> str:
    """A self-check that did not find the same materialisation, as a line of the page's errors."""
    if result.error is not None:
        return f"self-check of batch {result.batch} could not run: {result.error}"
    return (f"self-check of batch {result.batch}: the materialisation differs from a from-scratch "
            f"evaluation ({result.missing} missing, {result.extra} too many: {', '.join(result.sample)})")  # fmt: skip


def error_row(message: str) -> dict:
    return {"t": time.time(), "message": message}
