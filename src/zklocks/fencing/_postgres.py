"""``PostgresFence``: a fencing check inside the caller's own PostgreSQL transaction.

The fence is one table, ``resource TEXT PRIMARY KEY, token BIGINT``: per resource, the
highest token accepted so far. ``check`` raises it to the caller's token, or refuses:

    INSERT INTO fence (resource, token) VALUES (%s, %s)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token
        WHERE fence.token <= excluded.token
    RETURNING token

A row back means accepted (an equal token may write again); none means a higher token
was accepted, and ``StaleToken`` is raised. Two things make this a fence and not a
race:

* **It runs in the caller's transaction**, before the caller's own writes. The upsert
  locks the resource's row until that transaction ends (even when its ``WHERE`` is
  false), so a concurrent check on the same resource waits, then sees the committed
  bar. A stale holder's ``StaleToken`` leaves its transaction to roll back, writes and
  all; a check in a transaction that rolls back raises no bar.
* **Tokens are BIGINTs**, compared as numbers by the server.

Under REPEATABLE READ or SERIALIZABLE a check that waited for a concurrent one fails
with PostgreSQL's serialization error instead: retry the transaction, as for any write
conflict at those levels.

The table is created if missing, in the caller's transaction and under an advisory lock
(two first checks must not race to create it); once the fence has seen it exist, it
stops asking. psycopg is the caller's: nothing here imports it at run time, the shells
only call the connection they are given (``zklocks[postgres]`` installs psycopg 3).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TypeAlias

from zklocks._errors import InvalidArgument
from zklocks.fencing._errors import StaleToken, checked_name, checked_token

if TYPE_CHECKING:  # psycopg is an optional extra; only type checking needs it here
    import psycopg

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

Statement: TypeAlias = tuple[str, tuple[Any, ...]]
Row: TypeAlias = "tuple[Any, ...] | None"


def _quoted(table: object) -> str:
    """``table`` ("name" or "schema.name") as a quoted SQL identifier.

    Only plain identifiers are accepted, so the quoting is exact and the name can never
    carry SQL; it is used as written (quoted: case is kept).
    """
    if not isinstance(table, str) or not all(
        _IDENTIFIER.fullmatch(part) for part in table.split(".")
    ):
        raise InvalidArgument(
            f"table must be a name or schema.name of letters, digits and _, not {table!r}"
        )
    if table.count(".") > 1:
        raise InvalidArgument(f"table must be a name or schema.name, not {table!r}")
    return ".".join(f'"{part}"' for part in table.split("."))


class _Fence:
    """The statements of a check and what their rows mean, written once for both shells:
    ``_steps`` yields each statement and is sent the first row it returns (or None)."""

    def __init__(self, table: str = "zklocks_fence") -> None:
        self.table = table
        quoted = _quoted(table)
        self._regclass = quoted  # what to_regclass() is asked: the name as SQL reads it
        # Two first checks must not both create the table (the loser's CREATE fails on
        # the catalog's unique index): they take this lock, for their transactions.
        digest = hashlib.blake2b(f"zklocks.fence:{quoted}".encode(), digest_size=8).digest()
        self._lock_key = int.from_bytes(digest, "big", signed=True)
        self._create = (
            f"CREATE TABLE IF NOT EXISTS {quoted} "
            "(resource TEXT PRIMARY KEY, token BIGINT NOT NULL)"
        )
        self._upsert = (
            f"INSERT INTO {quoted} AS fence (resource, token) VALUES (%s, %s) "
            "ON CONFLICT (resource) DO UPDATE SET token = excluded.token "
            "WHERE fence.token <= excluded.token RETURNING token"
        )
        self._highest = f"SELECT token FROM {quoted} WHERE resource = %s"
        self._table_seen = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r})"

    def _steps(
        self, resource: object, token: object, in_transaction: bool
    ) -> Generator[Statement, Row, None]:
        resource = checked_name("resource", resource)
        token = checked_token(token)
        if not in_transaction:
            raise InvalidArgument(
                "check() belongs inside the transaction that writes (with conn.transaction(): "
                "...): on an autocommit connection outside one, the bar would rise alone"
            )
        if not self._table_seen:
            found = yield ("SELECT to_regclass(%s)", (self._regclass,))
            if found is not None and found[0] is not None:
                self._table_seen = True  # it existed before us: committed, here to stay
            else:
                # Made in the caller's transaction: if that rolls back, so does the table,
                # and the next check makes it again.
                yield ("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
                yield (self._create, ())
        accepted = yield (self._upsert, (resource, token))
        if accepted is not None:
            return
        # The upsert locked the row (its WHERE was false): this reads the bar that beat us.
        highest = yield (self._highest, (resource,))
        raise StaleToken(resource, token, int(highest[0]) if highest else token)


def _in_transaction(conn: Any) -> bool:
    """Will our statements be part of the caller's transaction? Not only on an autocommit
    connection outside ``conn.transaction()`` (psycopg starts one otherwise)."""
    return not conn.autocommit or conn.info.transaction_status.name != "IDLE"


class PostgresFence(_Fence):
    """A per-resource fencing check for psycopg 3 connections (``zklocks[postgres]``).

    ``PostgresFence(table="zklocks_fence")``: the table (``name`` or ``schema.name``) is
    created if missing, with ``resource TEXT PRIMARY KEY, token BIGINT``. Call ``check``
    first thing in the transaction that writes; see docs/fencing.md.
    """

    def check(self, conn: psycopg.Connection[Any], resource: str, token: int) -> None:
        """Accept ``token`` for ``resource`` in ``conn``'s current transaction, or raise
        ``StaleToken`` (``.token``, ``.highest``) if a higher one was accepted; an equal
        one passes. Waits for a concurrent check on the same resource to commit or roll
        back. ``InvalidArgument`` on an autocommit connection outside a transaction.
        """
        steps = self._steps(resource, token, _in_transaction(conn))
        row: Row = None
        with conn.cursor() as cursor:
            while True:
                try:
                    query, params = steps.send(row)
                except StopIteration:
                    return
                cursor.execute(query, params)
                row = cursor.fetchone() if cursor.description else None


class AsyncPostgresFence(_Fence):
    """``PostgresFence`` for psycopg 3's ``AsyncConnection``: ``await fence.check(...)``."""

    async def check(self, conn: psycopg.AsyncConnection[Any], resource: str, token: int) -> None:
        """See ``PostgresFence.check``."""
        steps = self._steps(resource, token, _in_transaction(conn))
        row: Row = None
        async with conn.cursor() as cursor:
            while True:
                try:
                    query, params = steps.send(row)
                except StopIteration:
                    return
                await cursor.execute(query, params)
                row = await cursor.fetchone() if cursor.description else None
