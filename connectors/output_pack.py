"""A batch's output as the state store keeps it (connectors.state, hash `out`): JSON, lz4-compressed when large."""

from __future__ import annotations

import json
from collections.abc import Iterator

PACK_OVER = 65_536  # bytes of output JSON above which it is stored compressed
PACK_SLICE = 50_000  # facts JSON-encoded (in a large output also compressed) at a time
FACTS = ("added", "removed")  # the fields holding facts: encoded by orjson


def pack_output(output: dict) -> str:
    """A batch's output as stored: its JSON, or `lz4:` + base64 of the lz4 frame of it when large.

    The facts (`added`, `removed`) are written by orjson `PACK_SLICE` at a time
    (by json where orjson refuses a slice: an integer beyond 64 bits, a lone
    surrogate), the other fields by json (an update id may be any JSON value json
    reads, NaN included). The initial output holds the whole materialisation
    (~120 bytes a fact as JSON); compressed it takes ~6x less while it is kept
    (`KEEP_OUTPUTS`). With more than `PACK_SLICE` facts the JSON is compressed
    as it is made, so the whole text never is in memory at once.
    """
    if sum(len(output.get(k) or ()) for k in FACTS) > PACK_SLICE:
        return _lz4(_pieces(output))
    text = b"".join(_pieces(output))
    if len(text) <= PACK_OVER:
        return text.decode("utf-8")
    return _lz4(iter((text,)))


def _pieces(output: dict) -> Iterator[bytes]:
    """The output's JSON text (UTF-8) in pieces: its fields in order, the facts a slice at a time."""
    yield b"{"
    for i, (key, value) in enumerate(output.items()):
        yield (b", " if i else b"") + json.dumps(key).encode("utf-8") + b": "
        if key in FACTS and isinstance(value, list):
            yield b"["
            for at in range(0, len(value), PACK_SLICE):
                piece = _json_bytes(value[at : at + PACK_SLICE])[1:-1]
                yield (b", " if at else b"") + piece
            yield b"]"
        else:
            yield json.dumps(value).encode("utf-8")
    yield b"}"


def _lz4(pieces: Iterator[bytes]) -> str:
    """`lz4:` + base64 of one lz4 frame of the pieces, compressed one after the other."""
    import base64

    import lz4.frame

    comp = lz4.frame.LZ4FrameCompressor()
    parts = [comp.begin(), *(comp.compress(p) for p in pieces), comp.flush()]
    return "lz4:" + base64.b64encode(b"".join(parts)).decode("ascii")


def _json_bytes(items: list) -> bytes:
    """`items` as JSON (UTF-8), by orjson; by json where orjson refuses (an integer beyond 64 bits)."""
    import orjson

    try:
        return orjson.dumps(items)
    except TypeError:
        return json.dumps(items).encode("utf-8")


def unpack_output(raw: str) -> dict:
    """The output `pack_output` stored (plain JSON as stored before, too)."""
    if raw.startswith("lz4:"):
        import base64

        import lz4.frame

        return json.loads(lz4.frame.decompress(base64.b64decode(raw[4:])))
    return json.loads(raw)
