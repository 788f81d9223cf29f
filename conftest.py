"""Collects the examples of README.md and docs/ as tests (tests/doc_snippets.py says how).

It sits at the root because pytest asks only the conftests above a file to collect it,
and the pages live outside tests/. Their ZooKeeper is a server of their own, so that a
page's sample output never depends on what another test left behind.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.doc_snippets import doc_sybil

from zklocks.server import ZooKeeperServer

pytest_collect_file = doc_sybil().pytest()


@pytest.fixture(scope="session")
def docs_zk_hosts() -> Iterator[str]:
    """The connect string of a standalone ZooKeeper that the pages' examples use."""
    with ZooKeeperServer(tick_time=200, max_session_timeout=60_000) as server:
        yield server.hosts
