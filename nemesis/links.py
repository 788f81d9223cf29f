"""Proxies on a loop thread of their own, for links that must outlive one test step.

An ensemble's members talk to each other for as long as they run, from before the
test's first line (``ZooKeeperEnsemble.start`` blocks) to after its last, so their
links cannot live on the test's event loop (nor on the nemesis runner's). Shared by the
fault tests (tests/integration/test_ensemble_faults.py) and the nemesis runner.
``Links.route`` is a ``peer_route`` for ``ZooKeeperEnsemble``: every member reaches
every other through a proxy of its own, and ``isolate(myid)`` cuts (resets, and refuses
new connections) or stalls (holds every byte, accepts new connections that go nowhere)
every link of one member.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, Literal, TypeVar

from nemesis.proxy import Proxy

T = TypeVar("T")


class _Link(Proxy):
    """A ``Proxy`` that can also be cut: reset now, and reset whatever connects later."""

    cut_off = False

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.transport.abort()
            return
        await super()._accept(reader, writer)

    def cut(self) -> None:
        self.cut_off = True
        self.reset()

    def heal(self) -> None:
        self.cut_off = False
        self.unstall()


class Links:
    """Every proxy made by ``route`` or ``add``; ``close()`` stops them all."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._links: list[tuple[int, int, _Link]] = []

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(30)

    def add(self, port: int, src: int = 0, dst: int = 0) -> int:
        """A proxy to 127.0.0.1:``port``; returns the port to dial instead."""
        link = _Link("127.0.0.1", port)
        self._run(link.__aenter__())
        self._links.append((src, dst, link))
        return link.port

    def route(self, src: int, dst: int, port: int) -> int:
        return self.add(port, src, dst)

    def isolate(self, myid: int, how: Literal["cut", "stall"]) -> None:
        """Cut or stall every link from or to member ``myid`` (client links: ``add``)."""

        async def apply() -> None:
            for src, dst, link in self._links:
                if myid in (src, dst):
                    link.cut() if how == "cut" else link.stall()

        self._run(apply())

    def heal(self) -> None:
        async def apply() -> None:
            for _, _, link in self._links:
                link.heal()

        self._run(apply())

    def close(self) -> None:
        async def stop() -> None:
            for _, _, link in self._links:
                link.heal()
                await link.__aexit__(None, None, None)

        self._run(stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
