"""Poison messages through the per-batch processor: none may stop the job.

The fuzz test interleaves 10,000 generated malformed messages (scaled by
FLUXMAT_HYPOTHESIS_SCALE) with valid updates and runs them through
`stream.batch.BatchProcessor` with the in-memory state store and a recording
publisher standing in for one without a dead-letter topic (it formats every
dead letter as the log line `KafkaPublisher` would write). Every bad message
must become exactly one dead letter, and the valid updates must give exactly
`remat`'s result -- in the engine, in the committed state and in the deltas.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from fluxmat.connectors import json_scan
from fluxmat.connectors.state import MemoryStateStore
from fluxmat.engine import EngineOptions, Reasoner
from fluxmat.stream import batch_decode as decode_module
from fluxmat.stream.batch import DEAD_RAW_CHARS, DEFAULT_MAX_MESSAGE_BYTES, BatchProcessor
from tests.support.gen import examples
from tests.support.shared import Recorder

PROGRAM = ("path(X, Y) :- edge(X, Y). path(X, Z) :- path(X, Y), edge(Y, Z). "
           "src(X) :- edge(X, _), not edge(_, X).")  # fmt: skip
NODES = "abcdef"
MAX_BYTES = DEFAULT_MAX_MESSAGE_BYTES  # --max-message-bytes (1 MiB)


def remat(explicit) -> set[tuple]:
    ref = Reasoner.from_text(PROGRAM, "remat")
    ref.load(sorted(explicit, key=repr))
    return ref.facts()


def rebuild(deltas) -> set[tuple]:
    current: set[tuple] = set()
    for d in deltas:
        current = (current - {tuple(f) for f in d["removed"]}) | {tuple(f) for f in d["added"]}
    return current


# ------------------------------------------------------------------ generators


def edge(rnd):
    return ["edge", rnd.choice(NODES), rnd.choice(NODES)]


def valid_update(rnd) -> dict:
    """Adds/deletes of edges, sometimes a predicate the program does not know (valid too)."""
    add = [edge(rnd) for _ in range(rnd.randint(0, 3))]
    dele = [f for f in (edge(rnd) for _ in range(rnd.randint(0, 2))) if f not in add]
    if rnd.random() < 0.2:
        add.append(["note", rnd.choice(NODES), rnd.randint(-5, 5)])
    upd: dict = {"add": add, "del": dele}
    if rnd.random() < 0.3:
        upd["id"] = rnd.choice([f"u{rnd.randint(0, 99)}", rnd.randint(0, 99), None, [1, "x"]])
    return upd


def _text(rnd, n: int) -> str:
    return "".join(rnd.choice(string.printable) for _ in range(n))


def _json(obj) -> str:
    return json.dumps(obj)


def bad_random_bytes(rnd):  # not UTF-8
    return b"\xff" + rnd.randbytes(rnd.randint(0, 60))


def bad_garbage(rnd):  # UTF-8, not JSON
    return "x" + _text(rnd, rnd.randint(0, 60))


def bad_truncated(rnd):
    text = _json(valid_update(rnd))
    return text[: rnd.randrange(len(text))]


def bad_deep(rnd):
    depth = rnd.choice([65, 100, 1_000, rnd.randint(65, 5_000), 100_000])
    opener = rnd.choice(["[", '{"add": ', '[{"a": '])
    closer = {"[": "]", '{"add": ': "}", '[{"a": ': "}]"}[opener]
    inner = rnd.choice(["", "1", '"x"', "[]"])
    return opener * depth + inner + closer * rnd.choice([0, depth])


def bad_types(rnd):
    wrong = rnd.choice([1.5, True, None, {"p": 1}, [1], -0.0, 10**3 + 0.5])  # never a valid value
    return _json(rnd.choice([
        {"add": wrong}, {"del": wrong}, {"add": [wrong]},
        {"add": [["edge", "a", wrong]]}, {"del": [["edge", wrong, "b"]]},
        {"add": [[wrong, "a", "b"]]}, {"add": [[]]}, {"add": [["", "a"]]},
    ]))


def bad_huge_number(rnd):
    digits = rnd.choice([4_001, 4_299, 4_301, rnd.randint(4_001, 20_000)])
    number = rnd.choice("123456789") + "".join(rnd.choice(string.digits) for _ in range(digits - 1))
    sign = rnd.choice(["", "-"])
    return '{"add": [["edge", "a", ' + sign + number + "]]}"


def bad_arity(rnd):
    return _json(rnd.choice([
        {"add": [["edge", "a"]]}, {"add": [["edge", "a", "b", "c"]]}, {"del": [["path"]]},
        {"add": [["src", "a", "b"]]}, {"add": [["fresh", 1], ["fresh", 1, 2]]},
        {"add": [edge(rnd), ["edge", "a"]]},
    ]))


class Oversized:
    """A message of `size` bytes as the source yields it: cut to MAX_BYTES (`prefix`)."""

    def __init__(self, prefix: str, size: int):
        self.prefix, self.size = prefix, size


def bad_oversized(rnd):  # a valid update, but too large: dead-lettered unparsed
    text = _json(valid_update(rnd))
    size = MAX_BYTES + rnd.choice([1, rnd.randint(2, 10**9)])
    return Oversized(text[:-1] + " " * (MAX_BYTES - len(text)), size)


def bad_duplicate_keys(rnd):
    key = rnd.choice(["add", "del", "id"])
    return '{"' + key + '": [], "add": [["edge", "a", "b"]], "' + key + '": []}'


def bad_not_an_object(rnd):
    return rnd.choice([None, "[]", '"add"', "17", "null", "true", _json([edge(rnd)]), " "])


def bad_clash(rnd):
    fact = edge(rnd)
    return _json({"add": [fact, edge(rnd)], "del": [fact]})


def bad_unknown_key(rnd):
    return _json({"add": [], rnd.choice(["ad", "Add", "delete", ""]): []})


REASONS = {  # kind -> what its dead letters' reasons say
    "oversized": "message too large", "random bytes": "not valid UTF-8",
    "deep": "invalid JSON: nested deeper than 64 levels", "duplicate keys": "duplicate key",
    "huge number": "invalid JSON: an integer with more than 4000 digits", "truncated": "invalid JSON",
    "garbage": "invalid JSON", "added and deleted": "both added and deleted",
    "unknown key": "unknown key", "arity": "argument",
}  # fmt: skip
BAD = {  # kind -> generator of a raw value (bytes: as sent; str: UTF-8 text; None: tombstone)
    "random bytes": bad_random_bytes, "garbage": bad_garbage, "truncated": bad_truncated,
    "deep": bad_deep, "types": bad_types, "huge number": bad_huge_number, "arity": bad_arity,
    "oversized": bad_oversized, "duplicate keys": bad_duplicate_keys,
    "not an object": bad_not_an_object, "added and deleted": bad_clash,
    "unknown key": bad_unknown_key,
}  # fmt: skip


def row(partition: int, offset: int, raw) -> tuple:
    """A source row as `connectors.kafka_source` yields it, values cut at MAX_BYTES."""
    if isinstance(raw, Oversized):
        return (partition, offset, None, raw.prefix, 1_000 + offset, True, raw.size)
    data = raw.encode("utf-8") if isinstance(raw, str) else raw
    size = None if data is None else len(data)
    if data is not None and size > MAX_BYTES:
        data = data[:MAX_BYTES]
    value = None if data is None else data.decode("utf-8", errors="replace")
    utf8 = True
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            utf8 = False
    return (partition, offset, None, value, 1_000 + offset, utf8, size)


def fuzz_batches(seed: int, bad_total: int, bad: dict, cut: dict):
    """Yield batches of rows on 2 partitions, recording bad (partition, offset) -> kind in `bad`.

    `cut` gets whether the dead letter's raw value must be truncated.
    Made one batch at a time: the oversized messages are 1 MiB each.
    """
    rnd = random.Random(seed)
    kinds = sorted(BAD)
    offsets = [0, 0]
    while len(bad) < bad_total:
        rows = []
        for _ in range(rnd.randint(20, 200)):
            p = rnd.randrange(2)
            if len(bad) < bad_total and rnd.random() < 0.85:
                kind = kinds[len(bad) % len(kinds)]
                rows.append(row(p, offsets[p], BAD[kind](rnd)))
                bad[(p, offsets[p])] = kind
                cut[(p, offsets[p])] = kind == "oversized" or len(rows[-1][3] or "") > DEAD_RAW_CHARS
            else:
                rows.append(row(p, offsets[p], _json(valid_update(rnd))))
            offsets[p] += 1
        rnd.shuffle(rows)  # Spark gives no order; the processor sorts by (partition, offset)
        yield rows


# ------------------------------------------------------------------ the fuzz test


@pytest.mark.parametrize("core", ["arrays", "objects"])  # the default core and the reference one
@pytest.mark.parametrize("alg", ["fd-counting", "fd-dred"])
def test_fuzzed_poison_messages_become_dead_letters_and_valid_updates_equal_remat(alg, core):
    bad_total, bad, cut = examples(10_000), {}, {}
    store, pub = MemoryStateStore(), Recorder()
    options = EngineOptions(core=core)
    p = BatchProcessor(Reasoner.from_text(PROGRAM, alg, options=options), store, pub, budget=3,
                       max_message_bytes=MAX_BYTES)  # fmt: skip
    initial = [("edge", "a", "b"), ("edge", "b", "c")]
    explicit = set(initial)
    p.start(initial)
    for b, rows in enumerate(fuzz_batches(14 if alg == "fd-counting" else 41, bad_total, bad, cut)):
        out = p.process(b, rows)
        assert not out.replayed and out.dead + out.updates == len(rows)
        for r in sorted(rows, key=lambda r: (r[0], r[1])):
            if (r[0], r[1]) not in bad:  # the valid updates, in the order they apply
                u = json.loads(r[3])
                explicit = (explicit - {tuple(f) for f in u["del"]}) | {tuple(f) for f in u["add"]}
    assert len(bad) == bad_total and set(bad.values()) == set(BAD)
    dead_at = [(d[1], d[2]) for d in pub.dead]
    assert len(dead_at) == len(set(dead_at)), "a message became more than one dead letter"
    missing = {k: bad[k] for k in set(bad) - set(dead_at)}
    assert not missing, f"bad messages applied: {sorted(missing.items())[:10]}"
    assert set(dead_at) == set(bad), "a valid update became a dead letter"
    for reason, partition, offset, _, _ in pub.dead:
        kind = bad[(partition, offset)]
        assert REASONS.get(kind, "") in reason, (kind, reason)
    for reason, partition, offset, raw, truncated in pub.dead:
        assert raw is None or len(raw) <= DEAD_RAW_CHARS, reason
        assert truncated == cut[(partition, offset)], (reason, truncated)
    assert all("\n" not in line and line.startswith("dead letter: partition ") for line in pub.lines)
    expected = remat(explicit)
    assert p.facts() == expected
    assert rebuild(pub.deltas) == expected
    fresh = Reasoner.from_text(PROGRAM, alg, options=options)
    fresh.restore(store.load())  # the committed state, through the door (each core restores its own)
    assert fresh.facts() == expected and fresh.explicit() == explicit


# ------------------------------------------------------------------ any exception, one message


@pytest.mark.parametrize("error", [RecursionError, MemoryError, KeyError, OverflowError, ValueError])
def test_any_exception_while_decoding_one_message_makes_it_a_dead_letter(monkeypatch, error):
    """Whatever decoding one message raises, that message alone is a dead letter (in bulk or one by one)."""
    real = decode_module.decode_json

    def decode(text, *rest):  # fault injection: this one message breaks the decoder
        if '"poison"' in text:
            raise error("injected")
        return real(text, *rest)

    def plain_text(builder, text):  # and the bulk reader too: the message goes one by one
        if '"poison"' in text:
            raise error("injected")
        return bulk(builder, text)

    def scan(texts, eligible):  # and the scan of a batch's plain messages: the batch goes one by one
        if any('"poison"' in t for t in texts):
            raise error("injected")
        return real_scan(texts, eligible)

    bulk = decode_module.ColumnsBuilder.plain_text
    real_scan = json_scan.scan
    monkeypatch.setattr(json_scan, "scan", scan)
    monkeypatch.setattr(decode_module, "decode_json", decode)
    monkeypatch.setattr(decode_module.ColumnsBuilder, "plain_text", plain_text)
    store, pub = MemoryStateStore(), Recorder()
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, pub)
    p.start([])
    rows = [row(0, 0, _json({"add": [["edge", "a", "b"]]})),
            row(0, 1, _json({"add": [["edge", "b", "c"]], "id": "poison"})),
            row(0, 2, _json({"add": [["edge", "c", "d"]], "id": "last"}))]  # fmt: skip
    out = p.process(0, rows)
    assert (out.updates, out.dead, out.through) == (2, 1, "last")
    (reason, partition, offset, _, _), = pub.dead
    assert (partition, offset) == (0, 1) and error.__name__ in reason and "injected" in reason
    assert p.facts() == remat({("edge", "a", "b"), ("edge", "c", "d")})
    assert store.last_batch() == 0


def test_a_batch_of_dead_letters_is_committed_once_and_replayed_identically():
    """Dead letters are part of the committed output: a replayed batch re-publishes them, nothing else."""
    store, pub = MemoryStateStore(), Recorder()
    p = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, pub, max_message_bytes=MAX_BYTES)
    p.start([])
    rows = [row(0, 0, "[" * 100_000), row(0, 1, Oversized("x" * MAX_BYTES, 5 << 20)), row(0, 2, b"\xff{}"),
            row(0, 3, '{"add": [], "add": []}'), row(0, 4, _json({"add": [["edge", "a", "b"]]}))]  # fmt: skip
    first = p.process(0, rows)
    assert (first.dead, first.updates) == (4, 1)
    again = BatchProcessor(Reasoner.from_text(PROGRAM, "fd-counting"), store, pub)
    again.start([])
    assert again.process(0, rows).replayed  # Spark's replay after a crash
    assert pub.dead[4:] == pub.dead[:4] and pub.deltas[-1] == pub.deltas[-2]
    oversized = pub.dead[1]
    assert oversized[0] == f"message too large: 5,242,880 bytes (limit {MAX_BYTES:,})"
    assert oversized[3:] == ("x" * DEAD_RAW_CHARS, True)


def test_a_dead_letter_fits_a_message_and_reads_back_as_stored():
    """DeadLetter: reason and raw value cut to fit, `truncated` kept through the stored form and publishing."""
    from fluxmat.stream.batch import REASON_CHARS, DeadLetter

    letter = DeadLetter.of("r" * (REASON_CHARS + 10), 3, 7, "x" * 10, size=20)  # the source cut the value
    assert (len(letter.reason), letter.reason[-1], letter.raw, letter.truncated) == (REASON_CHARS, "…", "x" * 10, True)
    assert DeadLetter.of("r", 0, 1, "x" * (DEAD_RAW_CHARS + 1)).raw == "x" * DEAD_RAW_CHARS
    assert DeadLetter.of("r", 0, 1, "whole").truncated is False
    stored = json.loads(json.dumps(letter.stored()))  # as the state store keeps it
    assert DeadLetter.read(stored) == letter
    assert DeadLetter.read(["no key", 1, 9]) == DeadLetter("no key", 1, 9, None, False)  # a keyed summary's
    pub = Recorder()
    DeadLetter.read(stored).publish(pub)
    assert pub.dead == [(letter.reason, 3, 7, "x" * 10, True)]
