"""Shared fixtures: real servers on loopback, stopped by PID."""

from __future__ import annotations

import pytest

from connectors.broker import EmbeddedBroker
from tests.servers import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """An embedded tansu broker per test module (stopped by PID)."""
    log = tmp_path_factory.mktemp("tansu") / "tansu.log"
    with EmbeddedBroker(log_path=log) as b:
        yield b
