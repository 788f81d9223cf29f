"""``FencedStore``: a small fenced key-value table in SQLite (the demo's store).

The token comparison and the write are one transaction, so two writers cannot both pass
the check. Its bar is store-wide (one highest token for every key): right for the demo,
where one lock guards the whole store; ``PostgresFence`` and ``RedisFence`` keep a bar
per resource or key.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from zklocks.fencing._errors import StaleToken


class FencedStore:
    """A key-value table in SQLite that accepts a write only with a current token."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS fenced "
                "(key TEXT PRIMARY KEY, value TEXT, token INTEGER)"
            )
            db.execute("CREATE TABLE IF NOT EXISTS fence (id INTEGER PRIMARY KEY, token INTEGER)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=30, isolation_level=None)

    def write(self, key: str, value: str, token: int) -> None:
        """Store ``value`` under ``key`` if ``token`` is not older than any accepted one.

        Raises ``StaleToken`` otherwise. The same holder may write many times with its
        token; a newer holder's first write raises the bar for everyone older.
        """
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")  # take the write lock before reading the bar
            row = db.execute("SELECT token FROM fence WHERE id = 1").fetchone()
            highest = row[0] if row else None
            if highest is not None and token < highest:
                db.execute("ROLLBACK")
                raise StaleToken(key, token, highest)
            db.execute("INSERT OR REPLACE INTO fence (id, token) VALUES (1, ?)", (token,))
            db.execute(
                "INSERT OR REPLACE INTO fenced (key, value, token) VALUES (?, ?, ?)",
                (key, value, token),
            )
            db.execute("COMMIT")
        finally:
            db.close()

    def read(self, key: str) -> tuple[str, int] | None:
        """``(value, token that wrote it)`` or None."""
        with self._connect() as db:
            row = db.execute("SELECT value, token FROM fenced WHERE key = ?", (key,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def highest_token(self) -> int | None:
        """The highest token accepted so far."""
        with self._connect() as db:
            row = db.execute("SELECT token FROM fence WHERE id = 1").fetchone()
        return None if row is None else int(row[0])
