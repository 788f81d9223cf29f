"""One round trip after the first handshake: is this an ensemble, is the chroot there?

``/zookeeper/config`` lists the members of an ensemble and is empty on a standalone
server (which times sessions itself: every answer counts). A server that cannot say
(older than 3.5, or no answer in time) is taken for an ensemble, whose tickTime the
lease rule then needs (``LeaseProofs.learn_timing``). With a chroot, an ``exists`` of
its root tells whether it was made yet (the front end says so, once).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from zklocks._protocol.records import Exists, GetData, NodeData
from zklocks._protocol.session import Session
from zklocks._transport.outgoing import Outgoing

__all__ = ["ask_server"]


async def ask_server(session: Session, out: Outgoing, deadline: float) -> tuple[bool, bool | None]:
    """``(ensemble, chroot_exists)``, the second None without a chroot or an answer.

    Waits until every answer, a dropped connection or ``deadline``.
    """
    chroot = session.chroot
    requests: list[tuple[object, str | None]] = [(GetData("/zookeeper/config"), "")]
    if chroot:
        requests.append((Exists("/"), None))
    loop = asyncio.get_running_loop()
    wire = out.wire
    assert wire is not None
    futures: list[asyncio.Future[Any]] = []
    now = time.monotonic()
    for request, root in requests:
        future: asyncio.Future[Any] = loop.create_future()
        futures.append(future)
        with out.lock:
            out.write(session.request(request, (future, now), None, chroot=root))
    answered = asyncio.gather(*futures, return_exceptions=True)
    await asyncio.wait(
        (answered, wire.lost),
        timeout=max(deadline - time.monotonic(), 0.001),
        return_when=asyncio.FIRST_COMPLETED,
    )
    if not answered.done():
        answered.cancel()
        answered.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved
    ok = [f.done() and not f.cancelled() and f.exception() is None for f in futures]
    results = [f.result() if good else None for f, good in zip(futures, ok, strict=True)]
    config = results[0]
    data = config.data if isinstance(config, NodeData) else None
    ensemble = data is None or b"server." in data
    chroot_exists = results[-1] is not None if chroot and ok[-1] else None
    return ensemble, chroot_exists
