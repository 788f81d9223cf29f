"""Fixtures of the integration tests that need a store beside ZooKeeper: a private
PostgreSQL cluster and a private redis-server for the whole run (``fence_servers.py``),
started on first use only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fence_servers import PostgresServer, RedisServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this run's own; tests keep apart by their table or resource names."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A redis-server of this run's own; tests keep apart by their key prefixes."""
    with RedisServer() as server:
        yield server
