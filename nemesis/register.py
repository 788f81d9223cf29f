"""The guarded register of the guarded-set workload: one SQLite file every client writes.

The fenced one is ``zklocks.fencing.FencedStore`` itself (the resource-side check the
library ships): it refuses a token lower than the highest it accepted. ``UnfencedStore``
is the planted bug ``no-fence``: the same table, no check.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Protocol

from zklocks.fencing import FencedStore

KEY = "register"


class Register(Protocol):
    def write(self, key: str, value: str, token: int) -> None:
        """Store ``value``; raise ``zklocks.fencing.StaleToken`` to refuse it."""


class UnfencedStore:
    """A store that accepts every write, whatever its token (the ``no-fence`` plant)."""

    def __init__(self, path: str | Path) -> None:
        self._path = str(path)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS unfenced (key TEXT PRIMARY KEY, value TEXT)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self._path, timeout=30, isolation_level=None)

    def write(self, key: str, value: str, token: int) -> None:
        db = self._connect()
        try:
            db.execute("INSERT OR REPLACE INTO unfenced (key, value) VALUES (?, ?)", (key, value))
        finally:
            db.close()


def open_register(path: str | Path, *, fenced: bool) -> Register:
    return FencedStore(path) if fenced else UnfencedStore(path)
