"""``zklocks.exclusive``: one call at a time, across every process and machine.

Made for code that runs under a process manager that forks (Celery's prefork pool,
gunicorn with ``--preload``, multiprocessing): the decorator is applied at import time,
in a process that forks later, and makes nothing then. The client it locks with is made
on the first call in each process, so it is always made after the fork, and a process
forked from one that had made it makes its own (the inherited one is the parent's:
``zklocks._transport.forks``). A client is made from ``hosts`` or, without it, from the
variables the command line reads (``ZKLOCKS_HOSTS``, ``ZKLOCKS_AUTH``,
``ZKLOCKS_AUTH_FILE``, ``ZKLOCKS_ACL``, ``ZKLOCKS_TLS*``, ``ZKLOCKS_SASL_*``), read by the
rules the command line's options use (``zklocks._frontend.settings``), so the two can
never disagree. One ``Client`` per process and connect string
serves every sync function (it is thread-safe); an ``AsyncClient`` lives on one event
loop, so async functions get one per loop, stopped when that loop shuts down (as
``asyncio.run`` does at its end).

Each call is one contender of a fair lock on ``path`` (or ``path/<key>``); its
identifier names the function and the process, so ``zklocks status`` shows who runs.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, overload

from zklocks._asyncio.client import AsyncClient
from zklocks._asyncio.hold import AsyncHold
from zklocks._asyncio.locks import AsyncLock
from zklocks._core import validate as _validate
from zklocks._core.lease import AsyncLease, Lease
from zklocks._errors import InvalidArgument, LockTimeout
from zklocks._frontend import operations
from zklocks._frontend import settings as _environment
from zklocks._sync.client import Client
from zklocks._sync.hold import Hold
from zklocks._sync.locks import Lock

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
OnBusy = Literal["wait", "skip", "raise"]
OnLoss = Literal["notify", "cancel"]
Key = Callable[..., object]
_ON_BUSY = ("wait", "skip", "raise")
_ON_LOSS = ("notify", "cancel")


class Decorator(Protocol):
    """``on_busy="wait"`` or ``"raise"``: the function keeps its type."""

    def __call__(self, fn: F, /) -> F: ...


class SkippingDecorator(Protocol):
    """``on_busy="skip"``: the function may also return None (it did not run)."""

    @overload
    def __call__(
        self, fn: Callable[P, Coroutine[Any, Any, T]], /
    ) -> Callable[P, Coroutine[Any, Any, T | None]]: ...

    @overload
    def __call__(self, fn: Callable[P, T], /) -> Callable[P, T | None]: ...


@overload
def exclusive(
    path: str,
    *,
    hosts: str | None = None,
    timeout: float | None = None,
    on_busy: Literal["wait", "raise"] = "wait",
    key: Key | None = None,
    on_loss: OnLoss = "notify",
) -> Decorator: ...


@overload
def exclusive(
    path: str,
    *,
    hosts: str | None = None,
    timeout: float | None = None,
    on_busy: Literal["skip"],
    key: Key | None = None,
    on_loss: OnLoss = "notify",
) -> SkippingDecorator: ...


def exclusive(
    path: str,
    *,
    hosts: str | None = None,
    timeout: float | None = None,
    on_busy: OnBusy = "wait",
    key: Key | None = None,
    on_loss: OnLoss = "notify",
) -> Any:
    """Run the decorated function (sync or async) in one place at a time.

    Every call, in any thread, task, process or machine, takes a fair ZooKeeper lock on
    ``path`` first and releases it when the function returns or raises; the calls run
    one after another, in the order they asked. When the lock is busy:

    * ``on_busy="wait"`` (the default) waits for it, at most ``timeout`` seconds
      (``None``: for ever), then raises ``zklocks.LockTimeout``;
    * ``on_busy="skip"`` returns None without running the function;
    * ``on_busy="raise"`` raises ``zklocks.LockTimeout`` without running it.

    With ``"skip"`` and ``"raise"``, ``timeout=None`` means "do not wait at all"; a
    number waits that long before giving up.

    ``key`` makes one lock per argument value: a callable given the call's own
    arguments that returns a ``str`` or an ``int``; the lock is then ``path/<key>``
    (``key=lambda order_id, **_: order_id`` serialises calls per order and lets calls
    for different orders run side by side). A key that makes a bad path raises
    ``InvalidPath`` at the call.

    The client is made on the first call in each process (so after a fork), from
    ``hosts``, else ``ZKLOCKS_HOSTS`` (default ``127.0.0.1:2181``), with the credentials,
    ACL and TLS the ``ZKLOCKS_AUTH*``, ``ZKLOCKS_ACL`` and ``ZKLOCKS_TLS*`` variables
    give, as for the command line; a bad variable raises ``InvalidArgument`` at the
    first call. A lease lost while the function ran (the session expired, say) raises
    ``zklocks.LockLost`` when it returns (``on_loss="notify"``, the default); with
    ``on_loss="cancel"`` the function is stopped at the loss instant, as ``lock.hold()``
    does (an async function's task is cancelled; a sync function gets ``LockLost``
    raised in its thread between bytecodes), for work that cannot be fenced. Calls that
    hold ``path`` already in the same thread (recursion) raise ``AlreadyHeld``. Inside
    the function, ``zklocks.current_lease()`` is the call's lease (``.token`` for a
    fenced write).

    Raises ``InvalidPath`` or ``InvalidArgument`` for bad arguments, at decoration.
    See docs/recipes.md for Celery, gunicorn, FastAPI and multiprocessing.
    """
    base = _validate.lock_path(path)
    if on_busy not in _ON_BUSY:
        raise InvalidArgument(f"on_busy must be one of {', '.join(_ON_BUSY)}, not {on_busy!r}")
    if on_loss not in _ON_LOSS:
        raise InvalidArgument(f"on_loss must be one of {', '.join(_ON_LOSS)}, not {on_loss!r}")
    # Checked before anything is sent; the call keeps what None meant (no wait, for
    # "skip" and "raise") apart from a number that means "for ever" (inf).
    waits = on_busy == "wait" or timeout is not None
    limit = _validate.timeout(timeout)
    if hosts is not None:
        _validate.hosts(hosts)
    if key is not None and not callable(key):
        raise InvalidArgument(f"key must be a callable of the call's arguments, not {key!r}")
    policy = _Policy(base, waits, limit, on_busy, key, on_loss == "cancel")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise InvalidArgument(f"zklocks.exclusive decorates a function, not {fn!r}")
        name = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                client = await _clients.async_client(hosts)
                lock = client.lock(policy.path_of(args, kwargs), identifier=_identifier(name))
                lease = await policy.take_async(lock)
                if lease is None:
                    return None
                async with policy.held_async(lock, lease):
                    return await fn(*args, **kwargs)

            return run_async

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            lock = _clients.client(hosts).lock(
                policy.path_of(args, kwargs), identifier=_identifier(name)
            )
            lease = policy.take(lock)
            if lease is None:
                return None
            with policy.held(lock, lease):
                return fn(*args, **kwargs)

        return run

    return decorate


@dataclass(frozen=True)
class _Policy:
    """One decorator's checked arguments: which lock a call takes, and how it waits."""

    base: str
    waits: bool  # False: "skip" or "raise" with timeout=None, i.e. try once
    timeout: float | None  # when it waits: None is for ever
    on_busy: OnBusy
    key: Key | None
    cancels: bool  # on_loss="cancel": the call is stopped at the loss instant

    def held(self, lock: Lock, lease: Lease) -> AbstractContextManager[Lease]:
        """The block the call runs in: it releases ``lease``; with ``cancels``, it also
        interrupts the call at the loss instant (``lock.hold()``'s block)."""
        if not self.cancels:
            return lease
        return Hold(lock.path, lambda: lease, functools.partial(operations.let_go, lock))

    def held_async(
        self, lock: AsyncLock, lease: AsyncLease
    ) -> AbstractAsyncContextManager[AsyncLease]:
        if not self.cancels:
            return lease

        async def granted() -> AsyncLease:
            return lease

        return AsyncHold(lock.path, granted, functools.partial(operations.let_go, lock))

    def path_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        if self.key is None:
            return self.base
        value = self.key(*args, **kwargs)
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise InvalidArgument(f"exclusive's key must return a str or an int, not {value!r}")
        return _validate.lock_path(f"{self.base}/{value}")

    def take(self, lock: Lock) -> Lease | None:
        if not self.waits:
            return self._busy(lock, lock.try_acquire())
        try:
            return lock.acquire(self.timeout)
        except LockTimeout:
            if self.on_busy == "skip":
                return None
            raise

    async def take_async(self, lock: AsyncLock) -> AsyncLease | None:
        if not self.waits:
            return self._busy(lock, await lock.try_acquire())
        try:
            return await lock.acquire(self.timeout)
        except LockTimeout:
            if self.on_busy == "skip":
                return None
            raise

    def _busy(self, lock: Lock | AsyncLock, lease: T | None) -> T | None:
        if lease is None and self.on_busy == "raise":
            raise LockTimeout(f"{lock.path} is busy: another call holds it (on_busy='raise')")
        return lease


_HOST = socket.gethostname()


def _identifier(name: str) -> str:
    """The function and the process, for ``contenders()`` and ``zklocks status``."""
    where = f" (pid {os.getpid()} on {_HOST})"
    return name[: 1024 - len(where)] + where


def _settings(hosts: str | None) -> tuple[str, dict[str, Any]]:
    """The connect string and the client's security options, from ``hosts`` or the
    command line's variables, read by the rules the command line's options use (one
    reading, one set of rules and errors)."""
    try:
        return _environment.from_environment(hosts)
    except InvalidArgument as error:
        raise InvalidArgument(f"zklocks.exclusive: the ZKLOCKS_* environment: {error}") from None


@dataclass
class _LoopClient:
    """The ``AsyncClient`` of one event loop, being started or started."""

    loop: asyncio.AbstractEventLoop
    starting: asyncio.Task[AsyncClient]
    keeper: AsyncIterator[None] | None = None


@dataclass
class _Clients:
    """This process's clients, made on first use (after any fork)."""

    mutex: threading.Lock = field(default_factory=threading.Lock)
    sync: dict[str, Client] = field(default_factory=dict)
    by_loop: dict[tuple[int, str], _LoopClient] = field(default_factory=dict)

    def client(self, hosts: str | None) -> Client:
        key = _where(hosts)
        client = self.sync.get(key)
        if client is not None:
            return client
        with self.mutex:  # one start per process, whichever thread calls first
            client = self.sync.get(key)
            if client is None:
                found, options = _settings(hosts)
                client = Client(found, **options).start()
                self.sync[key] = client
            return client

    async def async_client(self, hosts: str | None) -> AsyncClient:
        loop = asyncio.get_running_loop()
        index = (id(loop), _where(hosts))
        entry = self.by_loop.get(index)
        if entry is None or entry.loop is not loop:  # none, or an id reused by a new loop
            self.by_loop = {k: e for k, e in self.by_loop.items() if not e.loop.is_closed()}
            # shielded below: the first caller's cancel must not fail the others' start
            entry = _LoopClient(loop, loop.create_task(_start_async(hosts)))
            self.by_loop[index] = entry
        try:
            client = await asyncio.shield(entry.starting)
        except BaseException:
            if entry.starting.done() and self.by_loop.get(index) is entry:
                del self.by_loop[index]  # a failed start: the next call tries again
            raise
        if entry.keeper is None:
            entry.keeper = _stopped_at_shutdown(client)
            await entry.keeper.__anext__()
        return client

    def stop_all(self) -> None:
        """At exit: end the sync sessions now (the server frees their nodes at once)."""
        clients, self.sync = list(self.sync.values()), {}
        for client in clients:
            client.stop()


def _where(hosts: str | None) -> str:
    """Which client a call uses: one per connect string, ``ZKLOCKS_HOSTS``'s as it is now
    when none is given (the other variables are read when that client is made)."""
    return f"hosts={hosts}" if hosts is not None else f"env={os.environ.get('ZKLOCKS_HOSTS')}"


async def _start_async(hosts: str | None) -> AsyncClient:
    found, options = _settings(hosts)
    return await AsyncClient(found, **options).start()


async def _stopped_at_shutdown(client: AsyncClient) -> AsyncIterator[None]:
    """Stops ``client`` when its loop shuts down: a suspended async generator is one the
    loop closes then (``loop.shutdown_asyncgens()``, called by ``asyncio.run``)."""
    try:
        yield
    finally:
        await client.stop()


_clients = _Clients()


def _in_child() -> None:
    # The inherited clients are the parent's (and refuse every call): forget them, and
    # the mutex, which a thread of the parent may have held at the fork.
    global _clients
    _clients = _Clients()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
atexit.register(lambda: _clients.stop_all())
