"""The guarded set of the guarded-set workload: one set, kept in three stores.

Each holder adds elements to the set in every store by a read-modify-write under the
lock: read the set in every store, work a while (the gap a pause falls into), write
each set back with its element added (``Store.turn``: read, yield, write). Unguarded,
a holder paused past its session between its reads and its writes resumes and writes
back the sets it read before, erasing whatever the holders after it added: elements
are lost. Guarded, each store refuses it:

* ``zk``: a ZooKeeper node, written by ``client.transaction(guard=lease)`` with
  ``set_data(path, data, version=v)`` (``v`` the version read): ``LockLost`` when the
  lease's node is gone, ``TransactionFailed`` (BadVersion) when someone wrote since the
  read. The read is a ``sync`` and a ``get`` through a kazoo client (zklocks has no
  data reads): a follower's stale answer costs a refusal, never a loss.
* ``pg``: a PostgreSQL row, read and written in one transaction that begins with
  ``PostgresFence.check`` (the fence row stays locked until the commit, so the check
  also orders the reads): ``StaleToken`` once a newer token checked.
* ``redis``: a Redis key through ``RedisFence``. The fence orders writes, not reads, so
  each turn first raises the key's bar to its token by writing back the value it just
  read (``get`` then ``set``, back to back), then reads, works and writes: once the bar
  is up, a stale holder's write is ``StaleToken``. What the fence cannot close is a
  stale write landing between that ``get`` and ``set`` (one round trip, no work in it).

The ``unguarded`` plant does the same reads and writes with no guard and no fence
(a plain ``set_data``, no fence check, plain ``HGET``/``HSET``).

Elements are ``"<token>:c<client>:<w>"``, unique per turn; a set is a JSON list, kept in
the order added, so a duplicate would show.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

import zklocks
from zklocks.fencing import PostgresFence, RedisFence, StaleToken

STORES = ("zk", "pg", "redis")
PG_TABLE = "nemesis_set"
PG_FENCE_TABLE = "nemesis_fence"
PG_RESOURCE = "set"
REDIS_PREFIX = "nemesis:fence:"
REDIS_KEY = "set"


@dataclass(frozen=True)
class Where:
    """Where the set lives: the ZooKeeper node, PostgreSQL's DSN, Redis's port."""

    zk_hosts: str
    zk_path: str
    pg_dsn: str
    redis_port: int


class Refused(Exception):
    """The store refused the write and applied nothing (``stale: ...``/``conflict: ...``)."""


def encode(elements: list[str]) -> bytes:
    return json.dumps(elements, separators=(",", ":")).encode()


def decode(data: bytes | str | None) -> list[str]:
    if not data:
        return []
    value = json.loads(data)
    if not isinstance(value, list) or not all(isinstance(e, str) for e in value):
        raise ValueError(f"not a set of elements: {data!r}")
    return value


class Store(Protocol):
    name: str

    def turn(self, lease: zklocks.Lease, element: str) -> Generator[None, None, None]:
        """Read the set, yield (the caller works), write it back with ``element``.

        ``Refused`` if the store refused (nothing applied); any other exception: the
        outcome is unknown. Closed at the yield, it writes nothing."""


def _kazoo(hosts: str, timeout: float) -> Any:
    from kazoo.client import KazooClient

    reader = KazooClient(hosts=hosts, timeout=timeout, connection_retry={"max_tries": -1})
    reader.start(timeout=30)
    return reader


class ZkSet:
    name = "zk"

    def __init__(self, client: zklocks.Client, hosts: str, path: str, *, guarded: bool) -> None:
        self._client = client
        self._path = path
        self._guarded = guarded
        self._reader = _kazoo(hosts, client.session_timeout)  # the client's own members
        self._wait = 2 * client.session_timeout  # a read queued while cut off gives up

    def turn(self, lease: zklocks.Lease, element: str) -> Generator[None, None, None]:
        self._reader.sync_async(self._path).get(timeout=self._wait)
        data, stat = self._reader.get_async(self._path).get(timeout=self._wait)
        elements = decode(data)
        yield
        if not self._guarded:
            txn = self._client.transaction()
            txn.set_data(self._path, encode([*elements, element]))
            txn.commit()
            return
        txn = self._client.transaction(guard=lease)
        txn.set_data(self._path, encode([*elements, element]), version=stat.version)
        try:
            txn.commit()
        except zklocks.LockLost as exc:
            raise Refused(f"stale: {exc}") from exc
        except zklocks.TransactionFailed as exc:
            raise Refused(f"conflict: {exc.reason}") from exc

    def close(self) -> None:
        self._reader.stop()
        self._reader.close()


class PgSet:
    name = "pg"

    def __init__(self, where: Where, *, guarded: bool) -> None:
        import psycopg

        self._conn = psycopg.connect(where.pg_dsn, autocommit=True, connect_timeout=30)
        self._fence = PostgresFence(table=PG_FENCE_TABLE)
        self._guarded = guarded

    def turn(self, lease: zklocks.Lease, element: str) -> Generator[None, None, None]:
        try:
            with self._conn.transaction():
                if self._guarded:
                    self._fence.check(self._conn, PG_RESOURCE, lease.token)
                row = self._conn.execute(f"SELECT elements FROM {PG_TABLE} WHERE id = 1")
                found = row.fetchone()
                elements = decode(found[0] if found else None)
                yield
                self._conn.execute(
                    f"UPDATE {PG_TABLE} SET elements = %s WHERE id = 1",
                    (encode([*elements, element]).decode(),),
                )
        except StaleToken as exc:
            raise Refused(f"stale: highest {exc.highest}") from exc

    def close(self) -> None:
        self._conn.close()


class RedisSet:
    name = "redis"

    def __init__(self, where: Where, *, guarded: bool) -> None:
        import redis

        self._redis = redis.Redis(host="127.0.0.1", port=where.redis_port, socket_timeout=30)
        self._fence = RedisFence(self._redis, prefix=REDIS_PREFIX)
        self._guarded = guarded

    def turn(self, lease: zklocks.Lease, element: str) -> Generator[None, None, None]:
        if not self._guarded:
            data = self._redis.hget(REDIS_PREFIX + REDIS_KEY, "value")
            elements = decode(data)
            yield
            self._redis.hset(REDIS_PREFIX + REDIS_KEY, "value", encode([*elements, element]))
            return
        try:
            # raise the bar first: from here on no older token's write lands
            self._fence.set(REDIS_KEY, self._fence.get(REDIS_KEY) or encode([]), lease.token)
            elements = decode(self._fence.get(REDIS_KEY))
            yield
            self._fence.set(REDIS_KEY, encode([*elements, element]), lease.token)
        except StaleToken as exc:
            raise Refused(f"stale: highest {exc.highest}") from exc

    def close(self) -> None:
        self._redis.close()


def open_stores(client: zklocks.Client, hosts: str, where: Where, *, guarded: bool) -> list[Store]:
    """The three stores, in the order a turn writes them (each closed by ``close_stores``)."""
    stores: list[Store] = []
    try:
        stores.append(ZkSet(client, hosts, where.zk_path, guarded=guarded))
        stores.append(PgSet(where, guarded=guarded))
        stores.append(RedisSet(where, guarded=guarded))
    except BaseException:
        close_stores(stores)
        raise
    return stores


def close_stores(stores: list[Store]) -> None:
    for store in stores:
        close = getattr(store, "close", None)
        if close is not None:
            with contextlib.suppress(Exception):  # on the way out: nothing left to do
                close()


# ------------------------------------------------------------------ the runner's side


def prepare(where: Where) -> None:
    """Make each store's set empty (before the clients start)."""
    import psycopg
    import redis

    reader = _kazoo(where.zk_hosts, 10.0)
    try:
        reader.ensure_path(where.zk_path)
        reader.set(where.zk_path, encode([]))
    finally:
        reader.stop()
        reader.close()
    with psycopg.connect(where.pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {PG_TABLE} (id INT PRIMARY KEY, elements TEXT NOT NULL)")
        conn.execute(f"INSERT INTO {PG_TABLE} (id, elements) VALUES (1, '[]')")
    with redis.Redis(host="127.0.0.1", port=where.redis_port) as r:
        r.delete(REDIS_PREFIX + REDIS_KEY)


def read_final(where: Where, store: str) -> list[str]:
    """A store's set at the end of the run (every client stopped)."""
    if store == "zk":
        reader = _kazoo(where.zk_hosts, 10.0)
        try:
            reader.sync(where.zk_path)
            data, _ = reader.get(where.zk_path)
            return decode(data)
        finally:
            reader.stop()
            reader.close()
    if store == "pg":
        import psycopg

        with psycopg.connect(where.pg_dsn, autocommit=True, connect_timeout=30) as conn:
            found = conn.execute(f"SELECT elements FROM {PG_TABLE} WHERE id = 1").fetchone()
            return decode(found[0] if found else None)
    if store == "redis":
        import redis

        with redis.Redis(host="127.0.0.1", port=where.redis_port, socket_timeout=30) as r:
            value = r.hget(REDIS_PREFIX + REDIS_KEY, "value")
            return decode(value if isinstance(value, bytes | str) else None)
    raise ValueError(f"unknown store {store!r}")
