"""``Outgoing``'s one write per turn of the loop, without a server.

What a turn makes with ``write_soon`` leaves in one write at the turn's end; a
``write`` in the meantime sends it first; and frames made for a wire that has ended are
never sent on the next one (their requests fail with the old wire).
"""

from __future__ import annotations

import asyncio
import struct
import threading
from typing import Any

from zklocks._protocol.records import Exists
from zklocks._protocol.session import Session
from zklocks._transport.liveness import Liveness
from zklocks._transport.outgoing import Outgoing


class _Transport:
    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def get_write_buffer_size(self) -> int:
        return 0


class _Wire:
    def __init__(self) -> None:
        self.transport: Any = _Transport()


def _outgoing(loop: asyncio.AbstractEventLoop) -> tuple[Outgoing, Session]:
    session = Session(timeout_ms=10_000)
    session.connect()  # established by a hand-made answer: no server needed
    reply = struct.pack(">iiqi", 0, 10_000, 0x1234, 16) + b"p" * 16 + b"\x00"
    session.receive(struct.pack(">i", len(reply)) + reply)
    return Outgoing(session, threading.RLock(), Liveness(10.0), lambda: loop), session


def _frame(session: Session) -> bytes:
    return session.request(Exists("/"), (None, 0.0), None)


def test_a_turns_frames_leave_in_one_write_and_a_write_sends_them_first() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], list[bytes]]:
        out, session = _outgoing(asyncio.get_running_loop())
        wire = _Wire()
        out.attach(wire)  # type: ignore[arg-type]
        soon = [_frame(session) for _ in range(3)]
        with out.lock:
            for frame in soon:
                out.write_soon(frame)
        await asyncio.sleep(0)  # the turn ends: one write
        first = list(wire.transport.written)
        wire.transport.written.clear()
        later, now = _frame(session), _frame(session)
        with out.lock:
            out.write_soon(later)
            out.write(now)  # cannot wait: what waits goes first, in the same write
        await asyncio.sleep(0)
        return first, list(wire.transport.written), [b"".join(soon), later + now]

    first, second, expected = asyncio.run(scenario())
    assert [first, second] == [[expected[0]], [expected[1]]]


def test_frames_made_for_an_ended_wire_never_go_out_on_the_next() -> None:
    async def scenario() -> tuple[list[bytes], list[bytes], bytes]:
        out, session = _outgoing(asyncio.get_running_loop())
        old, new = _Wire(), _Wire()
        out.attach(old)  # type: ignore[arg-type]
        with out.lock:
            out.write_soon(_frame(session))
        out.detach()
        out.attach(new)  # type: ignore[arg-type]
        restore = _frame(session)
        with out.lock:
            out.write(restore)  # the new wire's first frame: alone
        await asyncio.sleep(0)
        return old.transport.written, new.transport.written, restore

    on_old, on_new, restore = asyncio.run(scenario())
    assert on_old == []
    assert on_new == [restore]
