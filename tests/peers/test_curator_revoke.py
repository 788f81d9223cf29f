"""Revoke across zklocks and the real Apache Curator 5.4, in both directions.

Curator's revocation: ``InterProcessMutex.makeRevocable(listener)`` before acquiring;
``Revoker.attemptRevoke(client, nodePath)`` writes ``__REVOKE__`` into a holder's node
and the holder's listener is called. zklocks' ``client.revoke(path)`` writes the same
bytes into a Curator-named node, and hears them in its own (``layout="curator"``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from interop.curator.harness import CuratorWorker
from peers_support import WAIT, wait_for_children

import zklocks

Workers = Callable[..., CuratorWorker]


def test_zklocks_revoke_reaches_a_revocable_curator_holder(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    java.mutex("m", path)
    java.call("revocable", "m")
    java.begin("m")
    assert java.held("m", WAIT)
    assert client.revoke(path) == 1  # no layout given: the Curator node is found
    assert java.call("revoked", "m", int(WAIT * 1000), timeout=WAIT + 60) == ["1"]
    (node,) = kazoo.get_children(path)
    assert kazoo.get(f"{path}/{node}")[0] == b"__REVOKE__"
    java.end("m")
    assert kazoo.get_children(path) == []


def test_curator_revoker_reaches_a_zklocks_holder(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    lease = client.lock(path, layout="curator").acquire(timeout=5)
    told = threading.Event()
    lease.add_revoke_callback(lambda _lease: told.set())
    java = curator()
    java.call("revoke", lease.node)
    assert told.wait(WAIT)
    assert not lease.lost
    lease.release()
    assert kazoo.get_children(path) == []


def test_zklocks_revoke_asks_only_the_curator_holder_not_its_waiter(
    client: zklocks.Client, kazoo: Any, curator: Workers, path: str
) -> None:
    java = curator()
    java.mutex("m", path)
    java.call("revocable", "m")
    java.begin("m")
    assert java.held("m", WAIT)
    waiter = client.lock(path, layout="curator")
    waiting = threading.Thread(target=lambda: waiter.acquire(timeout=WAIT * 2) and waiter.release())
    waiting.start()
    names = wait_for_children(kazoo, path, 2)
    assert client.revoke(path) == 1
    assert java.call("revoked", "m", int(WAIT * 1000), timeout=WAIT + 60) == ["1"]
    data = {name: kazoo.get(f"{path}/{name}")[0] for name in names}
    assert sorted(d == b"__REVOKE__" for d in data.values()) == [False, True]
    java.end("m")
    waiting.join(WAIT * 2)
    assert not waiting.is_alive()
