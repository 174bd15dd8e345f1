"""Shared fixtures: real servers on loopback, stopped by PID."""

from __future__ import annotations

import pytest

from tests.servers import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
