"""The public surface: ``__all__`` names exactly what users may import, and nothing is
named that does not exist."""

from __future__ import annotations

import zklocks


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name in vars(zklocks)
        if not name.startswith("_") and not isinstance(getattr(zklocks, name), type(zklocks))
    }
    assert set(zklocks.__all__) - {"__version__"} == public


def test_all_names_exist() -> None:
    for name in zklocks.__all__:
        assert hasattr(zklocks, name), name


def test_errors_are_the_builtins_users_expect() -> None:
    assert issubclass(zklocks.LockTimeout, TimeoutError)
    assert issubclass(zklocks.NotHeld, RuntimeError)
    assert issubclass(zklocks.AlreadyHeld, RuntimeError)
    assert issubclass(zklocks.InvalidPath, ValueError)
    assert issubclass(zklocks.InvalidArgument, ValueError)
    for name in (
        "LockTimeout",
        "LockLost",
        "NotHeld",
        "AlreadyHeld",
        "InvalidArgument",
        "InvalidPath",
        "ClientClosed",
        "ConnectionFailed",
        "LeaseUnkeepable",
    ):
        assert issubclass(getattr(zklocks, name), zklocks.LockError), name


def test_sync_and_async_locks_share_method_names() -> None:
    names = {
        "acquire",
        "try_acquire",
        "release",
        "held",
        "lease",
        "contenders",
        "wait_for_change",
        "path",
        "kind",
    }
    for cls in (zklocks.Lock, zklocks.AsyncLock):
        assert names <= set(dir(cls)), cls
    for cls in (zklocks.Client, zklocks.AsyncClient):
        assert {"lock", "read_write_lock", "semaphore", "start", "stop"} <= set(dir(cls))


def test_elections_and_multi_locks_share_names_across_front_ends() -> None:
    for cls in (zklocks.Election, zklocks.AsyncElection):
        assert {"campaign", "resign", "leader", "is_leader", "observe"} <= set(dir(cls)), cls
    for cls in (zklocks.MultiLock, zklocks.AsyncMultiLock):
        assert {"acquire", "release", "held", "leases", "locks"} <= set(dir(cls)), cls
    for cls in (zklocks.Client, zklocks.AsyncClient):
        assert {"election", "multi_lock"} <= set(dir(cls)), cls


def test_connection_state_and_listeners_on_both_clients() -> None:
    assert [state.name for state in zklocks.ConnectionState] == [
        "CONNECTED",
        "SUSPENDED",
        "LOST",
        "CLOSED",
    ]
    for cls in (zklocks.Client, zklocks.AsyncClient):
        assert {"add_listener", "remove_listener", "state", "session_timeout"} <= set(dir(cls))
        assert "revoke" in dir(cls)


def test_metrics_module_names() -> None:
    import zklocks.metrics

    assert zklocks.metrics.__all__ == ["disable", "enable"]
    for name in zklocks.metrics.__all__:
        assert callable(getattr(zklocks.metrics, name))


def test_lease_internal_hooks_are_private() -> None:
    for cls in (zklocks.Lease, zklocks.AsyncLease):
        public = {name for name in dir(cls) if not name.startswith("_")}
        assert public == {
            "add_lost_callback",
            "add_waiting_callback",
            "add_revoke_callback",
            "check",
            "ended",
            "lost",
            "lost_reason",
            "node",
            "owner",
            "release",
            "suspended",
            "time_left",
            "token",
            "traceparent",  # the hold span's W3C context (zklocks.tracing)
            "wait_lost",
        }, cls


def test_transactions_on_both_clients() -> None:
    ops = {"create", "set_data", "delete", "check", "commit", "guard"}
    for cls in (zklocks.Transaction, zklocks.AsyncTransaction):
        assert ops <= set(dir(cls)), cls
    for cls in (zklocks.Client, zklocks.AsyncClient):
        assert "transaction" in dir(cls)
    assert issubclass(zklocks.TransactionFailed, zklocks.LockError)
    assert issubclass(zklocks.CreatedPath, str)  # a create's result: the path, and .stat


def test_fencing_names_and_its_optional_dependencies_stay_unimported() -> None:
    import subprocess
    import sys

    import zklocks.fencing

    assert zklocks.fencing.__all__ == [
        "AsyncPostgresFence",
        "AsyncRedisFence",
        "FencedStore",
        "PostgresFence",
        "RedisFence",
        "StaleToken",
    ]
    assert issubclass(zklocks.fencing.StaleToken, zklocks.LockError)
    # psycopg and redis-py are extras: importing the fences must not need them
    probe = (
        "import sys, zklocks, zklocks.fencing; "
        "print(sorted(m for m in ('psycopg', 'redis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
