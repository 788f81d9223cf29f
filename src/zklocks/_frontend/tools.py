"""What operators' tools ask of a client besides locks, written once for both clients.

``zklocks status``, ``ls``, ``break``, ``serve``, ``doctor`` and ``demo`` see the locks
through these, as any user's tool can: walk a tree of locks, list a lock's contenders and
holders, break holders, read a directory's ACL, delete a tree, and watch for changes.
Each is an operation (``zklocks._frontend.operations``): it checks its path, names the
client's session with ``Use``, and runs a flow of ``zklocks._core``. The sync client
blocks on it and the asyncio client awaits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zklocks._core import breaking as _breaking
from zklocks._core import contenders as _contenders
from zklocks._core import inspect as _inspect
from zklocks._core import validate as _validate
from zklocks._core.security import ACL
from zklocks._frontend.lockmaker import LockMaker
from zklocks._frontend.operations import Operation, Use
from zklocks._vocabulary import Watcher

Maker = LockMaker[Any, Any, Any]


def locks(client: Maker, root: str, left_behind: bool) -> Operation[list[_inspect.LockSummary]]:
    checked = _validate.node_path(root)
    yield Use(client._session_or_raise())
    return (yield from _inspect.walk_locks(checked, left_behind))


def contenders(client: Maker, path: str) -> Operation[list[_contenders.Contender]]:
    checked = _validate.node_path(path)
    yield Use(client._session_or_raise())
    return (yield from _contenders.list_contenders(checked))


def holders(client: Maker, path: str) -> Operation[list[_breaking.Holder]]:
    checked = _validate.node_path(path)
    yield Use(client._session_or_raise())
    return (yield from _breaking.current_holders(checked))


def break_holders(client: Maker, holders: Sequence[_breaking.Holder]) -> Operation[str | None]:
    yield Use(client._session_or_raise())
    return (yield from _breaking.break_holders(holders))


def get_acl(client: Maker, path: str) -> Operation[list[ACL] | None]:
    checked = _validate.node_path(path)
    yield Use(client._session_or_raise())
    entries = yield from _contenders.directory_acl(checked)
    if entries is None:
        return None
    return [ACL(entry.id.scheme, entry.id.id, entry.perms) for entry in entries]


def delete_tree(client: Maker, root: str) -> Operation[list[str]]:
    checked = _validate.node_path(root)
    yield Use(client._session_or_raise())
    return (yield from _inspect.delete_tree(checked))


def watch_lock(client: Maker, path: str, watcher: Watcher) -> Operation[bool]:
    checked = _validate.node_path(path)
    yield Use(client._session_or_raise())
    return (yield from _inspect.watch_lock(checked, watcher))


def watch_tree(client: Maker, roots: Sequence[str], watcher: Watcher) -> Operation[None]:
    checked = [_validate.node_path(root) for root in roots]
    yield Use(client._session_or_raise())
    yield from _inspect.watch_tree(checked, watcher)


def session_id(client: Maker) -> Operation[int]:
    yield Use(client._session_or_raise())
    return (yield from _inspect.session_id())
