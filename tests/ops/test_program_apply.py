"""`fluxmat program apply` against a real broker: one control message, readable as a program change."""

from __future__ import annotations

import json

from kafka import KafkaConsumer

from fluxmat.connectors.broker import ensure_topics
from fluxmat.connectors.files import ProgramChange, parse_update
from tests.support.cli import NEW, OLD, fluxmat, ok


def test_apply_sends_one_program_change(broker, tmp_path):
    (tmp_path / "old.dl").write_text(OLD)
    (tmp_path / "new.dl").write_text(NEW)
    ensure_topics(broker.bootstrap, {"program-updates": 1})
    out = ok(fluxmat("program", "apply", tmp_path / "new.dl", "--program", tmp_path / "old.dl",
                     "--bootstrap-servers", broker.bootstrap, "--updates-topic", "program-updates", "--id", "v2"))  # fmt: skip
    assert out.splitlines()[-1] == "sent the program change to program-updates"
    consumer = KafkaConsumer("program-updates", bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)  # fmt: skip
    messages = [json.loads(m.value) for m in consumer]
    consumer.close()
    assert messages == [{"program": {"whole": NEW}, "id": "v2"}]
    update = parse_update(messages[0], {}, "program-updates:0")
    assert update.program == ProgramChange(whole=NEW) and update.id == "v2"
