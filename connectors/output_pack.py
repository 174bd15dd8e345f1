"""A batch's output as the state store keeps it (connectors.state, hash `out`): JSON, lz4-compressed when large."""

from __future__ import annotations

import json

PACK_OVER = 65_536  # bytes of output JSON above which it is stored compressed
PACK_SLICE = 50_000  # added facts JSON-encoded and compressed at a time in a large output (pack_output)


def pack_output(output: dict) -> str:
    """A batch's output as stored: its JSON, or `lz4:` + base64 of the lz4 frame of it when large.

    The initial output holds the whole materialisation (~120 bytes a fact as
    JSON); compressed it takes ~6x less while it is kept (`KEEP_OUTPUTS`). With
    more than `PACK_SLICE` added facts the JSON is made and compressed
    `PACK_SLICE` facts at a time, so the whole text never is in memory at once.
    """
    added = output.get("added") or ()
    if len(added) > PACK_SLICE:
        return _pack_sliced(output, added)
    text = json.dumps(output)
    if len(text) <= PACK_OVER:
        return text
    import base64

    import lz4.frame

    return "lz4:" + base64.b64encode(lz4.frame.compress(text.encode("utf-8"))).decode("ascii")


def _pack_sliced(output: dict, added) -> str:
    """`pack_output` of a large output: the same JSON text, compressed slice by slice into one lz4 frame."""
    import base64

    import lz4.frame

    head = json.dumps({**output, "added": []})  # the other fields, in their places
    cut = head.index('"added": []') + len('"added": [')
    comp = lz4.frame.LZ4FrameCompressor()
    parts = [comp.begin(), comp.compress(head[:cut].encode("utf-8"))]
    for at in range(0, len(added), PACK_SLICE):
        piece = _json_bytes(added[at : at + PACK_SLICE])[1:-1]
        parts.append(comp.compress((b", " if at else b"") + piece))
    parts += [comp.compress(head[cut:].encode("utf-8")), comp.flush()]
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
