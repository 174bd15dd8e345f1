"""A whole-stream micro-batch's rows, read on the driver instead of by a Spark job.

`foreachBatch` hands the job a DataFrame over the Kafka ranges Spark planned
for the batch (the `fluxmat-kafka` source's input partitions, with the end
offsets already in Spark's offset log). `df.toArrow()` would run a Spark job
for it: a task per partition, each starting the source's `read` in an executor
Python worker, the rows converted to Spark's rows and back to Arrow, then sent
to the driver. That job was a third of a micro-batch on a quiet machine.

`DriverCollect` reads the very same planned partitions (`planned`: Spark's own
input partitions of the batch, unpickled) with the source's `read`, here, in the
driver, keeping its Kafka consumers between micro-batches. The offsets, the
replay after a crash and the checkpoint are Spark's as before: only where the
records are read changes. When the DataFrame is not a plain read of the source
(another Spark version, another plan), it falls back to `df.toArrow()` and says
so once.

Not here: planning the batch (Spark and connectors.kafka_source), what is done
with the rows (stream.micro, stream.batch).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from fluxmat.connectors.kafka_source import KafkaInputPartition, KafkaStreamReader

# The RDD of a DataSource V2 scan: its partitions carry the input partitions.
SCAN_RDD = "DataSourceRDD"
MAX_LINEAGE = 16  # RDDs walked from the batch's DataFrame down to its scan (three in Spark 4.3)


def planned(df) -> list[KafkaInputPartition] | None:
    """The `fluxmat-kafka` input partitions Spark planned for a `foreachBatch` DataFrame, None if it is not one.

    `foreachBatch` gets a DataFrame over the planned RDD of the batch
    (`LogicalRDD`); down its one-parent lineage is the scan's RDD, whose
    partitions hold the source's input partitions, pickled by PySpark.
    """
    from pyspark.serializers import CloudPickleSerializer

    try:
        rdd = df._jdf.queryExecution().logical().rdd()
        for _ in range(MAX_LINEAGE):
            if rdd.getClass().getSimpleName() == SCAN_RDD:
                break
            deps = rdd.dependencies()
            if deps.size() != 1:
                return None
            rdd = deps.apply(0).rdd()
        else:
            return None
        pickled = [_input_partition(p) for p in rdd.partitions()]
    except Exception:  # not a DataFrame of this Spark, or another plan: py4j says so in many ways
        return None
    parts = [CloudPickleSerializer().loads(p) for p in pickled if p is not None]
    return parts if all(isinstance(p, KafkaInputPartition) for p in parts) else None


def _input_partition(partition) -> bytes | None:
    """The pickled input partition of a scan RDD's partition (None: an empty one)."""
    held = partition.inputPartition()  # scala.Option[InputPartition]
    return held.get().pickedPartition() if held.isDefined() else None


class DriverCollect:
    """`foreachBatch`'s DataFrame as one Arrow table, read on the driver (see the module docstring)."""

    def __init__(self, options: dict[str, str], log: Callable[[str], None]):
        self.reader = KafkaStreamReader(options)  # the source's options: kafkaConfig, maxValueBytes
        self.log = log
        self.fell_back = False  # told the log that the batches are collected by Spark jobs

    def __call__(self, df) -> pa.Table:
        parts = planned(df)
        if parts is None:
            if not self.fell_back:
                self.fell_back = True
                self.log("the micro-batch's plan is not a plain read of the fluxmat-kafka source: "
                         "its rows are collected by Spark jobs (df.toArrow())")  # fmt: skip
            return df.toArrow()
        return self.reader.read_table(parts)
