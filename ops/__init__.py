"""Operations: the `fluxmat` command line, metrics, the dashboard and explanations.

A thin layer over the library: cli/stream_cli/inspect_cli parse flags, metrics
feeds Prometheus and the dashboard's history, dashboard serves the live page and
its JSON API, inspect answers `query` / `why`. Depends on engine/, connectors/
and stream/; nothing below depends on it.
"""
