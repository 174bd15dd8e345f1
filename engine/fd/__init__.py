"""Fully dynamic maintenance (Illich & Glimm 2023): updates whose processing overlaps.

`FullyDynamic` (core) keeps pending add/del operations per update, integrates new
updates at any time, performs bounded units of work chosen fairly across
updates, and reports consistency points. `FDDRed` and `FDCounting` (policies) are
the two algorithms. Pure engine code: no Spark, Kafka or Redis.
"""

from engine.fd.core import FullyDynamic
from engine.fd.policies import FDCounting, FDDRed
from engine.fd.records import ConsistencyPoint, FDStats, NotQuiescent

__all__ = ["ConsistencyPoint", "FDCounting", "FDDRed", "FDStats", "FullyDynamic", "NotQuiescent"]
