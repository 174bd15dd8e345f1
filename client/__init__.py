"""fluxmat's clients: the message formats, an update producer and a delta follower.

Contract: importable without Spark and without the engine (it imports neither
engine, connectors, stream nor ops); it needs kafka-python to talk to Kafka,
pyoxigraph only for N-Triples deltas and RDF triples, psycopg only for
PostgreSQL. Pieces:

* `schemas` -- the JSON Schemas of update messages, delta messages and dead
  letters (`schema("delta")`), shipped as `client/schemas/*.schema.json`;
* `client.wire` -- facts and constants on the wire (`Iri`, `Literal`);
* `client.fold` -- the rules of folding deltas exactly once (`Folder`);
* `UpdateProducer` -- builds and sends updates;
* `DeltaFollower` -- follows a delta topic into a `MemoryView` or a database
  (`open_store("sqlite:///view.db")`, `open_store("postgresql://...")`).
"""

from __future__ import annotations

import json
from importlib import resources

from fluxmat.client.database import SqlStore, open_store
from fluxmat.client.fold import VERSION, VERSIONS, Batch, Folder, MessageError, check_delta
from fluxmat.client.follower import DeltaFollower
from fluxmat.client.producer import UpdateProducer, arities_of
from fluxmat.client.view import Change, MemoryView, Progress
from fluxmat.client.wire import Iri, Literal, WireError, decode_fact, encode_fact

SCHEMAS = ("update", "delta", "dead-letter")

__all__ = ["SCHEMAS", "VERSION", "VERSIONS", "Batch", "Change", "DeltaFollower", "Folder", "Iri", "Literal", "MemoryView",
           "MessageError", "Progress", "SqlStore", "UpdateProducer", "WireError", "arities_of", "check_delta",
           "decode_fact", "encode_fact", "open_store", "schema"]  # fmt: skip


def schema(name: str) -> dict:
    """The JSON Schema (2020-12) of `update`, `delta` or `dead-letter` messages."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown schema {name!r} (expected one of {', '.join(SCHEMAS)})")
    return json.loads(resources.files("client").joinpath(f"schemas/{name}.schema.json").read_text("utf-8"))
