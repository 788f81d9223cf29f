"""Helpers shared by test folders."""

from __future__ import annotations

import contextlib
import signal
import socket
import struct
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from zklocks.server import ZooKeeperEnsemble, ZooKeeperServer


@contextlib.contextmanager
def ctrl_c_restored() -> Iterator[None]:
    """Inside the block, SIGINT raises ``KeyboardInterrupt`` here, and a child started
    here starts with SIGINT at its default (a Python child then raises it too), whatever
    this run was started with.

    ``nohup make test &``, a script's ``&`` and some CI runners start the run with SIGINT
    ignored: Python then installs no handler, and children inherit the ``SIG_IGN``
    across exec (a handler is reset to the default by exec; "ignored" is kept). A test
    that sends SIGINT sets up the disposition it relies on with this. Main thread only.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


_IGNORING = """\
import os, signal, sys
for number in sys.argv[1].split(","):
    signal.signal(int(number), signal.SIG_IGN)
os.execv(sys.argv[2], sys.argv[2:])
"""


def ignoring(*signals: int) -> list[str]:
    """An argv prefix that starts the rest with ``signals`` ignored, as ``nohup``
    (SIGHUP), a script's ``&`` (SIGINT, SIGQUIT) or some CI runners start a command."""
    return [sys.executable, "-c", _IGNORING, ",".join(str(int(sig)) for sig in signals)]


def session_credentials(client: Any) -> tuple[int, bytes]:
    """The (session id, password) of a started ``zklocks.Client``."""
    session = client._session
    assert session is not None, "client not started"
    credentials: tuple[int, bytes] = session.credentials()
    return credentials


@contextlib.contextmanager
def frozen(client: Any) -> Iterator[None]:
    """Hold the client's connection thread still (a stalled client) inside the block."""
    loop = client._session._loop
    gate, holding = threading.Event(), threading.Event()

    def hold() -> None:
        holding.set()
        gate.wait(60)

    loop.call_soon_threadsafe(hold)
    assert holding.wait(10), "the client's loop did not stop"
    try:
        yield
    finally:
        gate.set()


def expire_session(client: Any, hosts: str) -> None:
    """Make the server end ``client``'s session now, as an expiry would.

    The classic trick: a second connection presents the session's id and password,
    then closes the session. The client is frozen meanwhile: it would otherwise
    reconnect within milliseconds when the server moves its session to the twin, take
    the session back, and the server would refuse the twin's close.
    """
    with frozen(client):
        close_session(hosts, *session_credentials(client))


def close_session(hosts: str, session_id: int, password: bytes) -> None:
    """Attach to a session from a raw socket and close it (one write, both frames)."""
    host, port = hosts.split(",")[0].split("/")[0].rsplit(":", 1)
    connect = struct.pack(">iqiqi", 0, 0, 10_000, session_id, len(password)) + password
    connect += b"\x00"  # readOnly = false
    close = struct.pack(">ii", 1, -11)  # xid 1, closeSession
    frames = b"".join(struct.pack(">i", len(body)) + body for body in (connect, close))
    with socket.create_connection((host, int(port)), timeout=10) as twin:
        twin.sendall(frames)
        received = b""
        while len(received) < 4 + 36 + 4 + 16:  # connect reply, then the close reply
            chunk = twin.recv(4096)
            if not chunk:
                break
            received += chunk
    _proto, timeout, granted_id = struct.unpack(">iiq", received[4:20])
    assert granted_id == session_id and timeout > 0, "the server did not re-attach the session"


# Set by the root conftest when a test's call phase failed.
CALL_FAILED = pytest.StashKey[bool]()


def show_member_logs_if_failed(request: pytest.FixtureRequest, ensemble: ZooKeeperEnsemble) -> None:
    """Print the members' warnings into the failed test's report (its teardown output):
    an ensemble's temporary directory, logs included, is gone once the fixture ends, and a
    failure seen once in CI is otherwise impossible to read afterwards."""
    if not request.node.stash.get(CALL_FAILED, False) or ensemble.data_dir is None:
        return
    for member in ensemble.members:
        log = ensemble.data_dir / f"member-{member.myid}" / "zookeeper.log"
        with contextlib.suppress(OSError):
            notable = [
                line
                for line in log.read_text(errors="replace").splitlines()
                if " WARN " in line or " ERROR " in line or "LEADING" in line
            ]
            print(f"--- member {member.myid} ({member.hosts}): last warnings of {log}")
            print("\n".join(notable[-40:]))


def watches_of(server: ZooKeeperServer, session_id: int) -> list[str]:
    """The paths the server watches for one session (the ``wchc`` four-letter word)."""
    watched: list[str] = []
    current = None
    for line in server.four_letter("wchc").splitlines():
        if line.startswith("0x"):
            current = int(line, 16)
        elif line.strip() and current == session_id:
            watched.append(line.strip())
    return watched


def wait_for_watch(
    server: ZooKeeperServer, session_id: int, path: str, limit: float = 10.0
) -> None:
    """Return once the server holds a watch of ``session_id`` on ``path``: a lease's watch
    on its own node goes out from the client's loop after ``acquire`` returned, so a test
    that counts the session's requests waits for it first."""
    deadline = time.monotonic() + limit
    while path not in watches_of(server, session_id):
        assert time.monotonic() < deadline, f"no watch on {path} after {limit} s"
        time.sleep(0.01)
