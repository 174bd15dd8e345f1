"""What the size gauges show, read from the engine and the state store after a batch.

The one place where the metrics do I/O: a round of Redis INFO memory (each
primary of a cluster), the namespace's entries and bytes, and the engine's own
sizes and OWL inconsistencies. Called outside the metrics' lock: a Redis call
that is retried reports through `JobMetrics.on_retry`, which takes the lock
(a stall right after a commit must not block /healthz).

Not here: the gauges themselves (ops.collectors), the status value (ops.status).
"""

from __future__ import annotations

from fluxmat.connectors.owl2rl_rdf import inconsistent_facts


def read_sizes(processor, store) -> dict:
    """The sizes after a batch: Redis memory always; with one engine (`processor`), its sizes too.

    `processor` is None with `--partition-by` (the keys' sizes come with their summaries).
    """
    nodes, limit = store.memory()  # one round of INFO memory (each primary of a cluster)
    read = {"fluxmat_redis_used_memory_bytes": sum(nodes.values()) if nodes else None,
            "fluxmat_redis_maxmemory_bytes": limit if nodes else None,
            # --partition-by: the keys' states are elsewhere (fluxmat_state_node_memory_bytes)
            "fluxmat_state_namespace_bytes": None, "nodes": nodes}  # fmt: skip
    if processor is not None:
        read.update(processor.reasoner.sizes(), entries=store.size(),
                    fluxmat_state_namespace_bytes=store.namespace_bytes())  # fmt: skip
        read["inconsistencies"] = inconsistent_facts(processor.reasoner)
    return read
