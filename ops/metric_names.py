"""The Prometheus metrics `fluxmat run` exports: one table, the single source of truth.

`METRICS` maps each *exported* name to `(type, help text, label names)`. The
metrics code creates its collectors from it; the Grafana dashboard and the alert
rules under `ops/` may only use names from it (tests/ops/test_deployment.py checks).

Types are "counter", "gauge" and "histogram". Keys are the names as scraped:

* counters end in `_total`. prometheus_client's `Counter()` appends `_total`
  on export (and strips a `_total` it is given), so a Counter is created with
  the suffix stripped, which says what it does::

      Counter(name.removesuffix("_total"), help, labels)

* a histogram `X` is scraped as `X_bucket`, `X_sum` and `X_count`; its key here
  is the bare `X`, the name `Histogram()` takes.

Everything lives under the `fluxmat_` prefix, except the driver process's
`process_*` metrics (`PROCESS`), which prometheus_client's process collector
provides (so they are not created from this table). Nothing here imports
prometheus_client, so the table can be read without it.
"""

from __future__ import annotations

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"

METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "fluxmat_info": (
        GAUGE, "Always 1; the labels describe the running job.",
        ("program", "algorithm", "namespace")),
    "fluxmat_updates_consumed_total": (
        COUNTER, "Update messages applied to the engine.", ()),
    "fluxmat_fact_operations_total": (
        COUNTER, "Explicit fact operations in applied updates.", ("op",)),
    "fluxmat_batches_total": (
        COUNTER, "Micro-batches processed: applied, or replayed (already committed).",
        ("outcome",)),
    "fluxmat_batch_duration_seconds": (
        HISTOGRAM, "Wall time of one micro-batch, from its rows to its published output.", ()),
    "fluxmat_update_latency_seconds": (
        HISTOGRAM, "Producer timestamp of an update to the publication of its delta.", ()),
    "fluxmat_delta_messages_total": (
        COUNTER, "Delta messages sent to the deltas topic: every part of every batch, the initial "
        "materialisation (batch -1) and replays re-sent included.", ()),
    "fluxmat_delta_facts_total": (
        COUNTER, "Facts in the delta messages sent, added or removed (as fluxmat_delta_messages_total: "
        "a replay re-sends its facts).", ("kind",)),
    "fluxmat_dead_letters_total": (
        COUNTER, "Bad update messages: invalid, oversized, or quarantined by a work limit "
        "(sent to the dead-letter topic, or logged without one).", ()),
    "fluxmat_batch_failures_total": (
        COUNTER, "Micro-batches that raised (not committed; Spark replays them).", ()),
    "fluxmat_consumer_lag_messages": (
        GAUGE, "Messages in the updates topic not yet read by the job.",
        ("topic", "partition")),
    "fluxmat_pending_operations": (
        GAUGE, "Operations queued in the fully dynamic engine.", ()),
    "fluxmat_operations_cancelled_total": (
        COUNTER, "Pending add/del operations cancelled against each other.", ()),
    "fluxmat_recursion_stops_total": (
        COUNTER, "Additions stopped by recursion tagging.", ()),
    "fluxmat_rederivations_total": (
        COUNTER, "Facts rederived after a deletion wave.", ()),
    "fluxmat_materialisation_facts": (
        GAUGE, "Facts in the materialisation mat(P, E).", ()),
    "fluxmat_explicit_facts": (
        GAUGE, "Explicit facts E.", ()),
    "fluxmat_owl_inconsistencies": (
        GAUGE, "Inconsistencies the OWL 2 RL rules derived (fluxmat:inconsistent facts: owl:Nothing "
        "members, disjoint classes, irreflexive properties, ...); 0 without --ontology.", ()),
    "fluxmat_derivation_log_entries": (
        GAUGE, "Entries in the derivation log (applied rule instances).", ()),
    "fluxmat_state_entries": (
        GAUGE, "Hash entries in the Redis state (explicit facts, facts, log).", ()),
    "fluxmat_state_namespace_bytes": (
        GAUGE, "Bytes of this namespace's state in Redis (MEMORY USAGE of its keys, hashes sampled).", ()),
    "fluxmat_redis_used_memory_bytes": (
        GAUGE, "Memory used by the Redis server holding the state, every namespace (INFO used_memory).", ()),
    "fluxmat_redis_maxmemory_bytes": (
        GAUGE, "Redis maxmemory (INFO maxmemory; 0: no limit).", ()),
    "fluxmat_last_consistency_point_batch": (
        GAUGE, "Id of the last committed micro-batch.", ()),
    "fluxmat_last_consistency_point_timestamp_seconds": (
        GAUGE, "Unix time of the last committed micro-batch.", ()),
    "fluxmat_dead_letters_by_reason_total": (
        COUNTER, "Dead letters by the kind of their reason (stream.batch.DEAD_LETTER_KINDS).", ("reason",)),
    "fluxmat_engine_work_total": (
        COUNTER, "The fully dynamic engine's work: units of work, rule applications, no-op adds and deletes.",
        ("kind",)),
    "fluxmat_rule_applications_total": (
        COUNTER, "Rule applications by rule (file:line; modules as 'module NAME'): each batch's top rules "
        "get a series of their own (at most 50 over the job's life), the rest 'other'.", ("rule",)),
    "fluxmat_rule_log_entries": (
        GAUGE, "Derivation-log entries by rule (fd-counting on the objects core; 0 on the arrays core, which "
        "keeps counters, no log; the rules of fluxmat_rule_applications_total, the rest 'other'); its growth "
        "is the log's growth per rule.", ("rule",)),
    "fluxmat_batch_phase_seconds": (
        HISTOGRAM, "Time per micro-batch in each of our phases: collect (the source read and the rows to "
        "the driver), rows (its Arrow columns as messages), decode, engine (feed), poll (the delta and its "
        "causes), deltas (encoding them), export (state changes), commit (Redis), publish (Kafka).", ("phase",)),
    "fluxmat_spark_phase_seconds": (
        HISTOGRAM, "Spark's time per micro-batch by phase (lastProgress.durationMs: triggerExecution, "
        "addBatch, latestOffset, queryPlanning, walCommit, commitOffsets, getBatch).", ("phase",)),
    "fluxmat_retries_total": (
        COUNTER, "Failed calls to Redis or the broker that were retried.", ("target",)),
    "fluxmat_health_state": (
        GAUGE, "0 healthy, 1 degraded, 2 failing (the reason is on /healthz and the page).", ()),
    "fluxmat_batch_in_flight_seconds": (
        GAUGE, "Age of the micro-batch in flight (0 when none); over --stall-seconds the health is degraded, "
        "naming its phase (fluxmat_batch_in_flight_phase).", ()),
    "fluxmat_batch_in_flight_phase": (
        GAUGE, "1 for the phase the micro-batch in flight is in (collect, check, decode, engine, restore, "
        "export, commit, publish, tasks, sizes, verify, start), 0 for the others; all 0 when idle.", ("phase",)),
    "fluxmat_shared_fact_deletes_total": (
        COUNTER, "Deletions of a shared --facts fact in a key's update, dropped: a key cannot delete "
        "the shared facts (--partition-by).", ()),
    "fluxmat_consistency_point_age_seconds": (
        GAUGE, "Seconds since the last committed micro-batch (grows when idle too: see fluxmat_idle).", ()),
    "fluxmat_time_lag_seconds": (
        GAUGE, "Age of the oldest update not yet reflected in a committed batch (its Kafka timestamp); "
        "0 when nothing waits; NaN (unknown) when updates wait but the oldest one's timestamp could "
        "not be read.", ()),
    "fluxmat_idle": (
        GAUGE, "1 when nothing waits (no lag, no pending work): an old consistency point is then fine.", ()),
    "fluxmat_verified_batch": (
        GAUGE, "Last batch a --verify-every self-check found exact (-1: none yet).", ()),
    "fluxmat_verifications_total": (
        COUNTER, "--verify-every self-checks finished, by result.", ("result",)),
    # --partition-by: one materialisation per key, reasoned in executor tasks (stream.keyed)
    "fluxmat_keys_active": (
        GAUGE, "Keys with updates in the last micro-batch (--partition-by).", ()),
    "fluxmat_keys_seen": (
        GAUGE, "Distinct keys seen since the job started (--partition-by).", ()),
    "fluxmat_engines_cached": (
        GAUGE, "Key engines cached in the executors' Python workers (each worker's last report).", ()),
    "fluxmat_engine_cache_total": (
        COUNTER, "Key batches by engine cache result: hit, miss (rebuilt from Redis), new (a first key).",
        ("result",)),
    "fluxmat_engine_rebuild_seconds": (
        HISTOGRAM, "Time to rebuild a key's engine from Redis on a cache miss.", ()),
    "fluxmat_task_seconds": (
        HISTOGRAM, "Wall time of one executor task of a keyed micro-batch (all its keys).", ()),
    "fluxmat_key_batch_seconds": (
        HISTOGRAM, "Wall time of one key's part of a micro-batch in an executor task.", ()),
    "fluxmat_state_node_memory_bytes": (
        GAUGE, "used_memory of each Redis node holding state (each primary of a cluster).", ("node",)),
}  # fmt: skip

# The driver process, from prometheus_client's ProcessCollector (the names it exports).
PROCESS = {
    "process_cpu_seconds_total": (COUNTER, "Total user and system CPU time spent in seconds.", ()),
    "process_resident_memory_bytes": (GAUGE, "Resident memory size in bytes.", ()),
    "process_virtual_memory_bytes": (GAUGE, "Virtual memory size in bytes.", ()),
    "process_start_time_seconds": (GAUGE, "Start time of the process since unix epoch in seconds.", ()),
    "process_open_fds": (GAUGE, "Number of open file descriptors.", ()),
    "process_max_fds": (GAUGE, "Maximum number of open file descriptors.", ()),
}

SUFFIXES = {COUNTER: ("",), GAUGE: ("",), HISTOGRAM: ("_bucket", "_sum", "_count")}


def exported_names() -> set[str]:
    """Every series name a scrape can show (histograms as `_bucket`/`_sum`/`_count`)."""
    return {name + s for name, (kind, _, _) in METRICS.items() for s in SUFFIXES[kind]}
