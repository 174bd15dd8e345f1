"""The arrays core: the materialisation as int64 columns and numpy hash tables, loops compiled by numba.

Selected by `EngineOptions(core="arrays")`; reached only through `Reasoner`
(engine.reasoner), which builds a `CompactMaintainer` (engine.compact.maintainer)
in place of the object maintainers. Layout: `kernels` (numba loops: hash
tables, join steps, closure searches), `relation` (one relation's arrays),
`plans` (the program compiled from the engine's analysis), `core` (counting
per update, components in order), `dred` (DRed^c for recursive components),
`recompute` (its fallback: a component evaluated afresh), `remat` (from scratch),
`closure` (the symmetric-transitive closure module), `cache` (numba's cache
folder). Contract: the same materialisation as every other algorithm after
every load and update; what it cannot do yet is refused with an
`AlgorithmError` naming it (`maintainer.unsupported`), never answered wrongly.

Importing this package loads nothing (numba is imported by `kernels`), so
`cache` can choose numba's cache folder before numba is loaded.

Not here: parsing and analysis (engine.parser, engine.analysis), the fully
dynamic algorithms (engine.fd), equality (engine.equality), proofs (engine.why).
"""
