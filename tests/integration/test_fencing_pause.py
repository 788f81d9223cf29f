"""The fencing promise end to end: a holder SIGSTOPped past its session, then resumed,
is refused by each of the three fenced stores, and the newer holder's writes stay.

The holder is a separate process (fence_worker.py) with a 1 s session. While it is
stopped the server expires its session and this test takes the lock (so the new
holder's token is higher) and writes "new" to the ZooKeeper node through a guarded
transaction, to PostgreSQL through ``PostgresFence`` and to Redis through
``RedisFence``. Then the old holder resumes and tries its "stale" writes.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

import zklocks
from fence_servers import PostgresServer, RedisServer
from zklocks.fencing import PostgresFence, RedisFence, StaleToken
from zklocks.server import ZooKeeperServer

WORKER = Path(__file__).with_name("fence_worker.py")


def test_a_paused_holder_is_refused_by_zookeeper_postgres_and_redis(
    zk_server: ZooKeeperServer,
    postgres_server: PostgresServer,
    redis_server: RedisServer,
    kazoo: Any,
) -> None:
    stamp = time.monotonic_ns()
    lock_path, node = f"/fenced/lock-{stamp}", f"/fenced/data-{stamp}"
    table, prefix = f"orders_{stamp}", f"pause-{stamp}:"
    kazoo.create(node, b"none", makepath=True)
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, value TEXT, token BIGINT)')
        conn.execute(f"INSERT INTO \"{table}\" VALUES (1, 'none', 0)")
    store = redis.Redis(host="127.0.0.1", port=redis_server.port)
    redis_fence = RedisFence(store, prefix=prefix)
    pg_fence = PostgresFence(table=f"fence_{table}")

    def row() -> tuple[str, int]:
        with psycopg.connect(postgres_server.dsn) as conn:
            found = conn.execute(f'SELECT value, token FROM "{table}" WHERE id = 1').fetchone()
        assert found is not None
        return found[0], found[1]

    worker = subprocess.Popen(
        [sys.executable, str(WORKER), zk_server.hosts, lock_path, node, postgres_server.dsn,
         table, str(redis_server.port), prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert worker.stdin is not None and worker.stdout is not None
    try:
        first = worker.stdout.readline().split()
        assert first[:1] == ["HELD"], first
        old_token = int(first[1])
        assert kazoo.get(node)[0] == b"old"
        assert row() == ("old", old_token)
        assert redis_fence.get("orders") == b"old"

        worker.send_signal(signal.SIGSTOP)  # paused past its 1 s session timeout
        with zklocks.Client(zk_server.hosts) as client, client.lock(lock_path) as lease:
            assert lease.token > old_token  # granted only once the old session expired
            txn = client.transaction(guard=lease)
            txn.set_data(node, b"new")
            txn.commit()
            with psycopg.connect(postgres_server.dsn) as conn, conn.transaction():
                pg_fence.check(conn, "orders", lease.token)
                conn.execute(
                    f"UPDATE \"{table}\" SET value = 'new', token = %s WHERE id = 1",
                    (lease.token,),
                )
            redis_fence.set("orders", b"new", lease.token)

            worker.send_signal(signal.SIGCONT)
            worker.stdin.write("write\n")
            worker.stdin.flush()
            report = dict(item.split("=", 1) for item in worker.stdout.readline().split())
            # still holding: the stale writes were refused while the lock was ours
            assert report == {
                "lost": "True",
                "zk": "LockLost",
                "pg": "StaleToken",
                "redis": "StaleToken",
            }
            assert kazoo.get(node)[0] == b"new"
            assert row() == ("new", lease.token)
            assert redis_fence.get("orders") == b"new"
        # and from anywhere, the old token stays refused
        with pytest.raises(StaleToken):
            redis_fence.set("orders", b"later", old_token)
        assert worker.wait(30) == 0
    finally:
        worker.send_signal(signal.SIGCONT)
        worker.kill()
        worker.wait()
        store.close()
