"""Operations: the `fluxmat` command line, a thin layer over the library.

Later also metrics, the dashboard and the benchmark runner. Depends on engine/
and connectors/.
"""
