"""Helpers shared by test folders."""

from __future__ import annotations

from typing import Any


def session_credentials(client: Any) -> tuple[int, bytes]:
    """The (session id, password) of a started ``zklocks.Client``."""
    session = client._session
    assert session is not None, "client not started"
    credentials: tuple[int, bytes] = session.credentials()
    return credentials


def expire_session(client: Any, hosts: str) -> None:
    """Make the server expire ``client``'s session now.

    The classic trick: a second connection that presents the same session id and
    password and then closes makes the server close (expire) that session at once.
    """
    from kazoo.client import KazooClient

    twin = KazooClient(hosts=hosts, client_id=session_credentials(client))
    twin.start(timeout=15)
    twin.stop()
    twin.close()
