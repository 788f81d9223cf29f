"""The SQL and Redis fences on real servers (a private PostgreSQL and redis-server, see
fence_servers.py): the rule (equal passes, lower is ``StaleToken``, a bar per resource
or key, tokens compared as 64-bit numbers), what rolls back, and 8-thread races on one
resource or key that must end with the highest token's write.

The races start their threads at one barrier; what they check is the order in which
writes were *accepted* (a sequence taken inside the fenced transaction), not timing.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis
import redis.asyncio

import zklocks
from fence_servers import PostgresServer, RedisServer
from helpers import run
from zklocks.fencing import (
    AsyncPostgresFence,
    AsyncRedisFence,
    PostgresFence,
    RedisFence,
    StaleToken,
)

_names = itertools.count(1)
THREADS = 8


def fresh(stem: str) -> str:
    return f"{stem}_{next(_names)}_{random.randrange(10**6)}"


# ---------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg(postgres_server: PostgresServer) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_server.dsn) as conn:
        yield conn


@pytest.fixture
def table() -> str:
    return fresh("fence")


def bar(conn: psycopg.Connection[Any], table: str, resource: str) -> int | None:
    with conn.transaction():
        row = conn.execute(f'SELECT token FROM "{table}" WHERE resource = %s', (resource,))
        found = row.fetchone()
    return None if found is None else int(found[0])


def test_the_first_check_creates_the_table_and_sets_the_bar(
    pg: psycopg.Connection[Any], table: str
) -> None:
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "orders", 10)
    columns = pg.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = %s ORDER BY ordinal_position",
        (table,),
    ).fetchall()
    assert columns == [("resource", "text"), ("token", "bigint")]
    assert bar(pg, table, "orders") == 10


def test_an_equal_token_passes_again_and_a_lower_one_is_stale(
    pg: psycopg.Connection[Any], table: str
) -> None:
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "orders", 10)
    with pg.transaction():
        fence.check(pg, "orders", 10)  # the same holder, writing again
    with pytest.raises(StaleToken) as raised, pg.transaction():
        fence.check(pg, "orders", 9)
    assert (raised.value.key, raised.value.token, raised.value.highest) == ("orders", 9, 10)
    assert isinstance(raised.value, zklocks.LockError)
    assert bar(pg, table, "orders") == 10


def test_a_stale_holders_whole_transaction_rolls_back(
    pg: psycopg.Connection[Any], table: str
) -> None:
    data = fresh("orders")
    pg.execute(f'CREATE TABLE "{data}" (id INT PRIMARY KEY, value TEXT)')
    pg.execute(f"INSERT INTO \"{data}\" VALUES (1, 'new')")
    pg.commit()
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "orders", 20)
    # even a write made before the check goes: the refusal ends the transaction
    with pytest.raises(StaleToken), pg.transaction():
        pg.execute(f"UPDATE \"{data}\" SET value = 'stale' WHERE id = 1")
        fence.check(pg, "orders", 19)
    assert pg.execute(f'SELECT value FROM "{data}"').fetchone() == ("new",)


def test_the_bar_is_per_resource(pg: psycopg.Connection[Any], table: str) -> None:
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "orders", 50)
        fence.check(pg, "invoices", 7)  # another resource, its own bar
    with pytest.raises(StaleToken), pg.transaction():
        fence.check(pg, "invoices", 6)
    assert (bar(pg, table, "orders"), bar(pg, table, "invoices")) == (50, 7)


def test_a_check_in_a_transaction_that_rolls_back_raises_no_bar(
    pg: psycopg.Connection[Any], table: str
) -> None:
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "orders", 5)

    class Abandon(Exception):
        pass

    with pytest.raises(Abandon), pg.transaction():
        fence.check(pg, "orders", 900)
        raise Abandon
    assert bar(pg, table, "orders") == 5
    with pg.transaction():
        fence.check(pg, "orders", 6)  # 900 was never accepted


def test_a_first_check_that_rolls_back_takes_its_table_with_it(
    pg: psycopg.Connection[Any], table: str
) -> None:
    fence = PostgresFence(table=table)
    with pytest.raises(ZeroDivisionError), pg.transaction():
        fence.check(pg, "orders", 5)
        _ = 1 / 0
    with pg.transaction():
        fence.check(pg, "orders", 4)  # the table is made again; no bar was raised
    assert bar(pg, table, "orders") == 4


def test_pg_tokens_are_compared_as_64_bit_numbers(pg: psycopg.Connection[Any], table: str) -> None:
    fence = PostgresFence(table=table)
    with pg.transaction():
        fence.check(pg, "a", 9)
        fence.check(pg, "a", 10)  # as text, "10" < "9"
        fence.check(pg, "b", 2**53 + 1)
        fence.check(pg, "c", 2**63 - 1)
    with pytest.raises(StaleToken), pg.transaction():
        fence.check(pg, "b", 2**53)  # as doubles, equal
    with pytest.raises(zklocks.InvalidArgument), pg.transaction():
        fence.check(pg, "c", 2**63)
    with pytest.raises(zklocks.InvalidArgument), pg.transaction():
        fence.check(pg, "c", "12")  # type: ignore[arg-type]
    assert (bar(pg, table, "a"), bar(pg, table, "b")) == (10, 2**53 + 1)


def test_a_check_outside_any_transaction_is_refused(
    postgres_server: PostgresServer, table: str
) -> None:
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        with pytest.raises(zklocks.InvalidArgument, match="inside the transaction"):
            PostgresFence(table=table).check(conn, "orders", 1)
        with conn.transaction():  # an explicit one is fine
            PostgresFence(table=table).check(conn, "orders", 1)


def test_a_schema_qualified_table(pg: psycopg.Connection[Any]) -> None:
    schema = fresh("fences")
    pg.execute(f'CREATE SCHEMA "{schema}"')
    pg.commit()
    with pg.transaction():
        PostgresFence(table=f"{schema}.bars").check(pg, "orders", 3)
    assert pg.execute(f'SELECT token FROM "{schema}"."bars"').fetchone() == (3,)


def test_a_table_name_that_is_not_a_plain_identifier_is_refused() -> None:
    for bad in ("", "a b", 'x"; DROP TABLE y; --', "a.b.c", "1abc", None):
        with pytest.raises(zklocks.InvalidArgument):
            PostgresFence(table=bad)  # type: ignore[arg-type]


def test_pg_eight_thread_race_on_one_resource_keeps_the_highest_token(
    postgres_server: PostgresServer, table: str
) -> None:
    """Eight holders with tokens 1..8 race on one resource, five rounds; the first round
    also races to create the fence's table. Accepted writes must come in non-decreasing
    token order and the last one must be the highest token's."""
    data = fresh("orders")
    with psycopg.connect(postgres_server.dsn, autocommit=True) as setup:
        setup.execute(f'CREATE TABLE "{data}" (id INT PRIMARY KEY, value TEXT, token BIGINT)')
        setup.execute(f'CREATE TABLE "{data}_log" (seq SERIAL PRIMARY KEY, token BIGINT)')
        setup.execute(f"INSERT INTO \"{data}\" VALUES (1, 'none', 0)")
    fence = PostgresFence(table=table)
    refused_total = 0
    for round_ in range(5):
        base = round_ * 100
        tokens = [base + i for i in range(1, THREADS + 1)]
        random.shuffle(tokens)
        start = threading.Barrier(THREADS)
        outcomes: dict[int, str] = {}
        args = (postgres_server.dsn, fence, data, start, outcomes)
        threads = [threading.Thread(target=_pg_holder, args=(*args, t)) for t in tokens]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
        assert sorted(outcomes) == sorted(tokens)
        assert set(outcomes.values()) <= {"accepted", "refused"}, outcomes  # errors show here
        with psycopg.connect(postgres_server.dsn) as conn:
            row = conn.execute(f'SELECT value, token FROM "{data}" WHERE id = 1').fetchone()
            log = [
                t
                for (t,) in conn.execute(
                    f'SELECT token FROM "{data}_log" WHERE token > %s ORDER BY seq', (base,)
                )
            ]
        assert row == (f"v{base + THREADS}", base + THREADS)
        assert log == sorted(log) and log[-1] == base + THREADS
        assert sorted(log) == sorted(t for t, o in outcomes.items() if o == "accepted")
        refused_total += sum(o == "refused" for o in outcomes.values())
    print(f"postgres race: {refused_total} of {5 * THREADS} writes refused as stale")


def _pg_holder(
    dsn: str,
    fence: PostgresFence,
    data: str,
    start: threading.Barrier,
    outcomes: dict[int, str],
    token: int,
) -> None:
    """One holder: its fence check and its write, one transaction."""
    with psycopg.connect(dsn) as conn:
        start.wait(30)
        try:
            with conn.transaction():
                fence.check(conn, "orders", token)
                conn.execute(
                    f'UPDATE "{data}" SET value = %s, token = %s WHERE id = 1',
                    (f"v{token}", token),
                )
                conn.execute(f'INSERT INTO "{data}_log" (token) VALUES (%s)', (token,))
            outcomes[token] = "accepted"
        except StaleToken:
            outcomes[token] = "refused"
        except BaseException as error:
            outcomes[token] = repr(error)


def test_the_async_pg_fence_has_the_same_rule(postgres_server: PostgresServer, table: str) -> None:
    async def scenario() -> None:
        fence = AsyncPostgresFence(table=table)
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            async with conn.transaction():
                await fence.check(conn, "orders", 10)
            async with conn.transaction():
                await fence.check(conn, "orders", 10)
            with pytest.raises(StaleToken) as raised:
                async with conn.transaction():
                    await fence.check(conn, "orders", 9)
            assert (raised.value.token, raised.value.highest) == (9, 10)

        async def holder(token: int) -> bool:
            async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
                try:
                    async with conn.transaction():
                        await fence.check(conn, "race", token)
                except StaleToken:
                    return False
                return True

        tokens = list(range(1, THREADS + 1))
        random.shuffle(tokens)
        await asyncio.gather(*(holder(t) for t in tokens))
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            cursor = await conn.execute(
                f'SELECT token FROM "{table}" WHERE resource = %s', ("race",)
            )
            assert await cursor.fetchone() == (THREADS,)

    run(scenario())


# ---------------------------------------------------------------------------- Redis


@pytest.fixture
def rds(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis(host="127.0.0.1", port=redis_server.port)
    yield client
    client.close()


@pytest.fixture
def prefix() -> str:
    return f"{fresh('test')}:fence:"


def test_redis_set_get_and_the_rule(rds: redis.Redis, prefix: str) -> None:
    fence = RedisFence(rds, prefix=prefix)
    assert fence.get("orders") is None
    fence.set("orders", b"v10", 10)
    fence.set("orders", "v10 again", 10)  # equal: the same holder writes again
    assert fence.get("orders") == b"v10 again"
    with pytest.raises(StaleToken) as raised:
        fence.set("orders", b"stale", 9)
    assert (raised.value.key, raised.value.token, raised.value.highest) == ("orders", 9, 10)
    assert fence.get("orders") == b"v10 again"  # nothing written


def test_redis_the_bar_is_per_key(rds: redis.Redis, prefix: str) -> None:
    fence = RedisFence(rds, prefix=prefix)
    fence.set("orders", b"o", 50)
    fence.set("invoices", b"i", 7)  # another key, its own bar
    with pytest.raises(StaleToken):
        fence.set("invoices", b"late", 6)
    assert (fence.get("orders"), fence.get("invoices")) == (b"o", b"i")


def test_redis_delete_keeps_the_bar(rds: redis.Redis, prefix: str) -> None:
    fence = RedisFence(rds, prefix=prefix)
    fence.set("orders", b"v", 5)
    with pytest.raises(StaleToken):
        fence.delete("orders", 4)
    assert fence.get("orders") == b"v"
    fence.delete("orders", 6)
    assert fence.get("orders") is None
    with pytest.raises(StaleToken) as raised:
        fence.set("orders", b"resurrected", 5)  # a stale holder after the delete
    assert raised.value.highest == 6
    assert fence.get("orders") is None


def test_redis_tokens_are_compared_as_64_bit_numbers(rds: redis.Redis, prefix: str) -> None:
    fence = RedisFence(rds, prefix=prefix)
    fence.set("a", b"9", 9)
    fence.set("a", b"10", 10)  # as text, "10" < "9"
    fence.set("b", b"big", 2**53 + 1)
    with pytest.raises(StaleToken) as raised:
        fence.set("b", b"lower", 2**53)  # as Lua numbers (doubles), the two are equal
    assert raised.value.highest == 2**53 + 1
    fence.set("c", b"max", 2**63 - 1)
    with pytest.raises(StaleToken):
        fence.set("c", b"lower", 2**63 - 2)
    with pytest.raises(zklocks.InvalidArgument):
        fence.set("c", b"x", 2**63)
    with pytest.raises(zklocks.InvalidArgument):
        fence.set("c", b"x", "12")  # type: ignore[arg-type]
    assert (fence.get("a"), fence.get("b"), fence.get("c")) == (b"10", b"big", b"max")


def test_redis_every_key_the_fence_uses_is_under_its_prefix(rds: redis.Redis, prefix: str) -> None:
    before = set(rds.keys("*"))
    fence = RedisFence(rds, prefix=prefix)
    fence.set("orders", b"1", 1)
    fence.set("invoices", b"2", 2)
    fence.delete("orders", 3)
    with pytest.raises(StaleToken):
        fence.set("invoices", b"3", 1)
    new = set(rds.keys("*")) - before
    assert new == {f"{prefix}orders".encode(), f"{prefix}invoices".encode()}


def test_redis_a_decoding_client_still_gets_bytes(redis_server: RedisServer, prefix: str) -> None:
    client = redis.Redis(host="127.0.0.1", port=redis_server.port, decode_responses=True)
    try:
        fence = RedisFence(client, prefix=prefix)
        fence.set("k", "välue", 3)
        assert fence.get("k") == "välue".encode()
        with pytest.raises(StaleToken) as raised:
            fence.set("k", "x", 2)
        assert raised.value.highest == 3
    finally:
        client.close()


def test_redis_eight_thread_race_on_one_key_keeps_the_highest_token(
    redis_server: RedisServer, prefix: str
) -> None:
    """Eight holders with tokens 1..8 each write 50 times to one key; afterwards the key
    holds the highest token's value, and no write ever lowered the bar (every writer's
    last write below the final holder's first one was refused)."""
    start = threading.Barrier(THREADS)
    counts: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def holder(token: int) -> None:
        client = redis.Redis(host="127.0.0.1", port=redis_server.port)
        fence = RedisFence(client, prefix=prefix)
        accepted = refused = 0
        start.wait(30)
        try:
            for _ in range(50):
                try:
                    fence.set("orders", f"v{token}".encode(), token)
                    accepted += 1
                except StaleToken as stale:
                    assert stale.highest > token
                    refused += 1
        finally:
            client.close()
        counts[token] = [accepted, refused]

    def guarded(token: int) -> None:
        try:
            holder(token)
        except BaseException as error:
            errors.append(error)

    tokens = list(range(1, THREADS + 1))
    random.shuffle(tokens)
    threads = [threading.Thread(target=guarded, args=(t,)) for t in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    fence = RedisFence(redis.Redis(host="127.0.0.1", port=redis_server.port), prefix=prefix)
    assert fence.get("orders") == f"v{THREADS}".encode()
    assert counts[THREADS] == [50, 0]  # the highest is never refused
    with pytest.raises(StaleToken) as raised:
        fence.set("orders", b"x", THREADS - 1)
    assert raised.value.highest == THREADS
    refused = sum(r for _, r in counts.values())
    print(f"redis race: {refused} of {THREADS * 50} writes refused; per token {counts}")


def test_the_async_redis_fence_has_the_same_rule(redis_server: RedisServer, prefix: str) -> None:
    async def scenario() -> None:
        client = redis.asyncio.Redis(host="127.0.0.1", port=redis_server.port)
        try:
            fence = AsyncRedisFence(client, prefix=prefix)
            await fence.set("orders", b"v10", 10)
            await fence.set("orders", b"v10b", 10)
            with pytest.raises(StaleToken):
                await fence.set("orders", b"stale", 9)
            assert await fence.get("orders") == b"v10b"
            await fence.delete("orders", 11)
            assert await fence.get("orders") is None
            with pytest.raises(StaleToken):
                await fence.delete("orders", 10)
            tokens = list(range(20, 28))
            random.shuffle(tokens)
            outcomes = await asyncio.gather(
                *(fence.set("race", f"v{t}".encode(), t) for t in tokens),
                return_exceptions=True,
            )
            assert all(o is None or isinstance(o, StaleToken) for o in outcomes)
            assert await fence.get("race") == b"v27"
        finally:
            await client.aclose()

    run(scenario())
