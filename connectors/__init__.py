"""Connectors: files now; Kafka source/sink and the Redis state store later.

Depends on engine/, never the reverse. Readers turn external formats into the
engine's Python facts `(pred, *values)` and report bad input as `ParseError`s
that name the file and line.
"""
