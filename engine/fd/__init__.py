"""Fully dynamic maintenance (Illich & Glimm 2023): updates whose processing overlaps.

`FullyDynamic` (core) keeps pending add/del operations per update, integrates new
updates at any time, performs bounded units of work chosen fairly across
updates, and reports consistency points: `submit`, `step(budget)`, `run` to
quiescence and `poll` are its driver; `update` (the `Maintainer` interface) is
submit, run and poll in one. `FDDRed` and `FDCounting` (policies) are the two
algorithms; units.py executes the units of work (in rounds of one update's
items), forward.py finds the rule instances a fact takes part in through
compiled plans and views built once; records.py holds waves, the export
journal and statistics;
snapshot.py exports and restores the state as plain JSON values, columns.py as
integer columns with the same term ids (a local snapshot's content). Specialised
modules are upkeep modules (engine.modules), kept operation by operation.

Not here: the semi-naive materialisation it loads with (engine.seminaive),
storing the state anywhere (connectors), Spark, Kafka or Redis.
"""

from fluxmat.engine.fd.core import FullyDynamic
from fluxmat.engine.fd.policies import FDCounting, FDDRed
from fluxmat.engine.fd.records import ConsistencyPoint, FDStats, NotQuiescent

__all__ = ["ConsistencyPoint", "FDCounting", "FDDRed", "FDStats", "FullyDynamic", "NotQuiescent"]
