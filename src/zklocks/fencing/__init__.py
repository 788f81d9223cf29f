"""Fencing: how a protected resource refuses a holder whose lease ran out.

A lease can end without its holder knowing in time (a long pause, a partition): the
server expires the session and grants the lock to someone else while the old holder
still runs. No lock can stop that old holder from *trying* to write; only the resource
it writes to can refuse it. Each lease carries a token that strictly increases from one
holder to the next (its node's creation zxid); a fenced resource remembers, per resource
or key, the highest token it has accepted and refuses a lower one (``StaleToken``). An
equal token may write again: it is the same holder.

Three ways, one per kind of store (docs/fencing.md says when to use which):

* data in **ZooKeeper**: ``client.transaction(guard=lease)``, one multi that checks the
  lease's node and writes, all or nothing (no token needed: ZooKeeper decides);
* a **PostgreSQL** table: ``PostgresFence`` / ``AsyncPostgresFence``, a check in the
  caller's own transaction, so a stale holder's whole transaction rolls back;
* **Redis** keys: ``RedisFence`` / ``AsyncRedisFence``, each write one Lua script.

psycopg and redis-py are optional extras (``zklocks[postgres]``, ``zklocks[redis]``):
importing this module imports neither; the fences use the connection or client they are
given. ``FencedStore`` is a small fenced SQLite table (store-wide bar), which the demo
uses.
"""

from zklocks.fencing._errors import StaleToken
from zklocks.fencing._postgres import AsyncPostgresFence, PostgresFence
from zklocks.fencing._redis import AsyncRedisFence, RedisFence
from zklocks.fencing._sqlite import FencedStore

__all__ = [
    "AsyncPostgresFence",
    "AsyncRedisFence",
    "FencedStore",
    "PostgresFence",
    "RedisFence",
    "StaleToken",
]
