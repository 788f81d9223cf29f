"""Every carrier keeps the carrier contract (``zklocks._core.carrying``), alike.

One table of cases, run over all four carriers a client can run on: the native sync one
(``NativeSyncCarrier``) and the native asyncio one (``NativeAsyncCarrier``), each on the
real ZooKeeper through a proxy that can cut it off, and the simulator's sync
(``SimSession``) and asyncio (``AsyncSimSession``) ones on a ``SimServer``. The rules the
flows rely on and no server states: requests not sent by their deadline are each
``TIMED_OUT`` (and were never applied); a node watch on a node already gone fires
``DELETED``; a closed carrier answers ``ClientClosedError`` at once.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import pytest
from nemesis.proxy import Proxy

import zklocks
from helpers import Heard
from zklocks._core.ops import TIMED_OUT, Reply, Request
from zklocks._protocol.errors import ClientClosedError
from zklocks._protocol.records import Create, Delete, Exists, GetChildren
from zklocks._vocabulary import SessionState, Watcher, WatchEvent, WatchKind
from zklocks.server import ZooKeeperServer
from zklocks.sim.async_session import async_session_factory
from zklocks.sim.session import SimServer, session_factory

WAIT = 10.0
T = TypeVar("T")


class Rig(Protocol):
    """One carrier, driven from the test's thread."""

    def call(self, requests: Sequence[Request], deadline: float | None) -> list[Reply]: ...
    def watch_node(self, path: str, watcher: Watcher) -> None: ...
    def now(self) -> float: ...
    def cut_off(self) -> None:
        """Cut the carrier off from its server, and wait until it knows (SUSPENDED)."""
        ...

    def restore(self) -> None:
        """Let it reconnect, and wait until it has (CONNECTED)."""
        ...

    def close_carrier(self) -> None: ...
    def stop(self) -> None: ...


class _Loop:
    """An event loop on a thread of its own: the proxy's, and the asyncio clients'."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(WAIT * 2)

    def call(self, fn: Callable[[], T]) -> T:
        async def on_loop() -> T:
            return fn()

        return self.run(on_loop())

    def stop(self) -> None:
        self.run(self.loop.shutdown_default_executor())  # the clients' to_thread workers
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class _Base:
    """What every rig shares: a carrier, its state heard, the cut and its undoing."""

    carrier: Any

    def _listen(self, carrier: Any) -> None:
        self.carrier = carrier
        self.states = Heard()
        carrier.add_state_listener(self.states)

    def now(self) -> float:
        clock: Callable[[], float] = self.carrier.facts.clock
        return clock()

    def _until(self, state: SessionState, action: Callable[[], object]) -> None:
        """Do ``action``, then wait until the carrier tells its listeners ``state``."""
        count = len(self.states.seen)
        action()
        self.states.wait_for(lambda seen: state in seen[count:])


class NativeRig(_Base):
    """A native carrier (sync or asyncio) on the real server, through a proxy."""

    def __init__(self, hosts: str, asynchronous: bool) -> None:
        host, port = hosts.split(",")[0].rsplit(":", 1)
        self.on_loop = _Loop()
        self.proxy = self.on_loop.run(Proxy(host, int(port)).__aenter__())
        self.asynchronous = asynchronous
        self.sync_client: zklocks.Client | None = None
        self.async_client: zklocks.AsyncClient | None = None
        if asynchronous:
            self.async_client = self.on_loop.run(
                zklocks.AsyncClient(self.proxy.hosts, session_timeout=30.0).start()
            )
            carrier = self.async_client._session_or_raise()
            self.on_loop.call(lambda: self._listen(carrier))
        else:
            self.sync_client = zklocks.Client(self.proxy.hosts, session_timeout=30.0).start()
            self._listen(self.sync_client._session_or_raise())

    def call(self, requests: Sequence[Request], deadline: float | None) -> list[Reply]:
        if self.asynchronous:
            result: list[Reply] = self.on_loop.run(self.carrier.call(requests, deadline))
            return result
        result = self.carrier.call(requests, deadline)
        return result

    def watch_node(self, path: str, watcher: Watcher) -> None:
        if self.asynchronous:
            self.on_loop.call(lambda: self.carrier.watch_node(path, watcher))
        else:
            self.carrier.watch_node(path, watcher)

    def cut_off(self) -> None:
        # Stalled, a reconnect's handshake hangs: the carrier stays cut off.
        self.on_loop.call(self.proxy.stall)
        self._until(SessionState.SUSPENDED, lambda: self.on_loop.call(self.proxy.reset))

    def restore(self) -> None:
        self._until(SessionState.CONNECTED, lambda: self.on_loop.call(self.proxy.unstall))

    def close_carrier(self) -> None:
        if self.asynchronous:
            self.on_loop.run(self.carrier.close())
        else:
            self.carrier.close()

    def stop(self) -> None:
        if self.async_client is not None:
            self.on_loop.run(self.async_client.stop())
        if self.sync_client is not None:
            self.sync_client.stop()
        self.on_loop.run(self.proxy.__aexit__(None, None, None))
        self.on_loop.stop()


class SimRig(_Base):
    """A simulator carrier (sync or asyncio) on a ``SimServer``."""

    def __init__(self, asynchronous: bool) -> None:
        self.server = SimServer()
        self.asynchronous = asynchronous
        self.on_loop = _Loop()
        self.sync_client: zklocks.Client | None = None
        self.async_client: zklocks.AsyncClient | None = None
        if asynchronous:
            factory = async_session_factory(self.server)
            self.async_client = self.on_loop.run(
                zklocks.AsyncClient("sim", session_factory=factory).start()
            )
            carrier = self.async_client._session_or_raise()
            self.on_loop.call(lambda: self._listen(carrier))
        else:
            sync_factory = session_factory(self.server)
            self.sync_client = zklocks.Client("sim", session_factory=sync_factory).start()
            self._listen(self.sync_client._session_or_raise())
        self.session_id: int = self.carrier.session_id()

    call = NativeRig.call
    watch_node = NativeRig.watch_node
    close_carrier = NativeRig.close_carrier

    def cut_off(self) -> None:
        self._until(SessionState.SUSPENDED, lambda: self.server.disconnect(self.session_id))

    def restore(self) -> None:
        self._until(SessionState.CONNECTED, lambda: self.server.reconnect(self.session_id))

    def stop(self) -> None:
        if self.async_client is not None:
            self.on_loop.run(self.async_client.stop())
        if self.sync_client is not None:
            self.sync_client.stop()
        self.on_loop.stop()
        # The reaper thread of a cut-off session waits for its expiry instant: wake it
        # (nothing is cut off now, so it ends), lest it outlive the test.
        reaper = self.server._reaper
        if reaper is not None:
            with self.server.lock:
                self.server._changed.notify_all()
            reaper.join(WAIT)
            assert not reaper.is_alive()


CARRIERS = ["native-sync", "native-asyncio", "sim-sync", "sim-asyncio"]


@pytest.fixture(params=CARRIERS)
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    which: str = request.param
    made: Rig
    if which.startswith("native"):
        zk_server: ZooKeeperServer = request.getfixturevalue("zk_server")
        made = NativeRig(zk_server.hosts, asynchronous=which.endswith("asyncio"))
    else:
        made = SimRig(asynchronous=which.endswith("asyncio"))
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture
def base(rig: Rig) -> str:
    path = f"/carrier-{uuid.uuid4().hex}"
    (created,) = rig.call([Create(path, ephemeral=False)], None)
    assert not isinstance(created, BaseException), created
    return path


def test_requests_not_sent_by_their_deadline_are_each_timed_out(rig: Rig, base: str) -> None:
    rig.cut_off()
    replies = rig.call([Create(f"{base}/never"), GetChildren(base)], rig.now() + 0.3)
    assert replies == [TIMED_OUT, TIMED_OUT]
    rig.restore()
    # "never sent" means never applied: the create is not there once connected again
    assert rig.call([Exists(f"{base}/never"), GetChildren(base)], None) == [None, []]


def test_a_node_watch_on_a_node_already_gone_fires_deleted(rig: Rig, base: str) -> None:
    heard = Heard()
    rig.watch_node(f"{base}/missing", heard)
    assert heard.wait_for(lambda seen: len(seen) >= 1) == [
        WatchEvent(WatchKind.DELETED, f"{base}/missing")
    ]


def test_a_node_watch_hears_its_node_deleted(rig: Rig, base: str) -> None:
    """The other half of the same promise: a watch on a present node is set, silent
    until the node goes, then DELETED."""
    rig.call([Create(f"{base}/n", ephemeral=True)], None)
    heard = Heard()
    rig.watch_node(f"{base}/n", heard)
    rig.call([Exists(base)], None)  # a round trip after the watch's: it is set by now
    assert heard.seen == []
    rig.call([Delete(f"{base}/n")], None)
    assert heard.wait_for(lambda seen: len(seen) >= 1) == [
        WatchEvent(WatchKind.DELETED, f"{base}/n")
    ]


def test_a_closed_carrier_answers_client_closed_at_once(rig: Rig, base: str) -> None:
    rig.close_carrier()
    (reply,) = rig.call([GetChildren(base)], None)
    assert isinstance(reply, ClientClosedError)
