"""The Spark Structured Streaming job: wiring (`stream.job`) and per-batch logic (`stream.batch`).

`stream.batch.BatchProcessor` is plain Python, tested without Spark; `stream.job`
only wires Spark: the `fluxmat-kafka` source, `foreachBatch`, the checkpoint.
Depends on connectors/ and engine/.
"""
