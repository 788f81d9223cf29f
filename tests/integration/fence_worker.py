"""A holder that gets paused, writing to three fenced stores (run by
test_fencing_pause.py).

    fence_worker.py HOSTS LOCK NODE PG_DSN PG_TABLE REDIS_PORT REDIS_PREFIX

Acquires LOCK with a 1 s session and writes "old" with its lease to each store: the
ZooKeeper node NODE (a transaction guarded by the lease), the PostgreSQL table
PG_TABLE's row 1 (after a ``PostgresFence`` check in the same transaction) and the Redis
key "orders" (``RedisFence``). Prints "HELD <token>", then waits for a line on stdin.
After it (the test has paused and resumed this process meanwhile) it tries the same
three writes with "stale" and prints one line: "lost=<bool> zk=<outcome> pg=<outcome>
redis=<outcome>", each outcome "accepted" or the name of the error that refused it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import psycopg
import redis

import zklocks
from zklocks.fencing import PostgresFence, RedisFence


def main() -> None:
    hosts, lock_path, node, dsn, table, redis_port, prefix = sys.argv[1:8]
    pg_fence = PostgresFence(table="fence_" + table)
    store = redis.Redis(host="127.0.0.1", port=int(redis_port))
    redis_fence = RedisFence(store, prefix=prefix)
    with zklocks.Client(hosts, session_timeout=1.0) as client, psycopg.connect(dsn) as conn:
        lock = client.lock(lock_path)
        lease = lock.acquire()

        def write_zk(value: bytes) -> None:
            txn = client.transaction(guard=lease)
            txn.set_data(node, value)
            txn.commit()

        def write_pg(value: bytes) -> None:
            with conn.transaction():
                pg_fence.check(conn, "orders", lease.token)
                conn.execute(
                    f'UPDATE "{table}" SET value = %s, token = %s WHERE id = 1',
                    (value.decode(), lease.token),
                )

        def write_redis(value: bytes) -> None:
            redis_fence.set("orders", value, lease.token)

        writes: dict[str, Callable[[bytes], None]] = {
            "zk": write_zk,
            "pg": write_pg,
            "redis": write_redis,
        }
        for write in writes.values():
            write(b"old")
        print(f"HELD {lease.token}", flush=True)
        sys.stdin.readline()
        lost = lease.lost  # the clock rule: no need to hear from ZooKeeper first
        outcomes = []
        for name, write in writes.items():
            try:
                write(b"stale")
                outcomes.append(f"{name}=accepted")
            except zklocks.LockError as refused:  # LockLost, StaleToken: both LockErrors
                outcomes.append(f"{name}={type(refused).__name__}")
        print(f"lost={lost} " + " ".join(outcomes), flush=True)
    store.close()


if __name__ == "__main__":
    main()
