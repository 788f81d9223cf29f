"""What the flow's unit tests share: names of our nodes and theirs, an acquire spec, and a
stepper that feeds a flow its replies one operation at a time."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from zklocks._core import kinds
from zklocks._core.flow import AcquireSpec, Flow
from zklocks._core.ops import TIMED_OUT, Pipeline, Wait, inline_cleanups
from zklocks._core.steps import Gone
from zklocks._protocol.errors import ClientClosedError, SessionExpiredError
from zklocks._protocol.records import Created, Delete, Multi, NodeData, SetData, Stat
from zklocks._vocabulary import WatchEvent, WatchKind

ATTEMPT = "a" * 32
OTHER = "b" * 32
PATH = "/locks/x"
SESSION = 77


def mine(seq: int, kind: str = "lock") -> str:
    return f"{kind}-{ATTEMPT}-{seq:010d}"


def theirs(seq: int, kind: str = "lock") -> str:
    return f"{kind}-{OTHER}-{seq:010d}"


def spec(**changes: Any) -> AcquireSpec:
    """An ``AcquireSpec``; ``kind`` may be given by its name."""
    fields: dict[str, Any] = {"path": PATH, "kind": "lock", "data": b"d", "attempt": ATTEMPT}
    fields.update(changes)
    if isinstance(fields["kind"], str):
        fields["kind"] = kinds.of(fields["kind"])
    return AcquireSpec(**fields)


def created(name: str, czxid: int = 100) -> Created:
    return Created(f"{PATH}/{name}", Stat(czxid=czxid, ephemeral_owner=SESSION))


class Stepper:
    """Feeds replies to a flow and checks each operation it yields; a ``Cleanup``'s
    steps come one by one, in its place, as the simulator runs them."""

    def __init__(self, flow: Generator[Any, Any, Any]) -> None:
        self.flow = inline_cleanups(flow)
        self.op: Any = next(self.flow)
        self.result: Any = None
        self.done = False

    def expect(self, kind: type, reply: Any) -> Any:
        assert isinstance(self.op, kind), f"expected {kind.__name__}, flow yielded {self.op!r}"
        op = self.op
        try:
            self.op = self.flow.send(reply)
        except StopIteration as stop:
            self.result, self.done = stop.value, True
        return op

    def wait(self, outcome: Any) -> tuple[Pipeline, Wait]:
        """The flow waits for its blockers: it sets the watches (all still there), then
        waits; ``outcome`` says how the wait ends: ``Gone(node)`` (its deletion fires),
        ``SessionExpiredError()`` or ``ClientClosedError()`` (the session's end reaches
        the watches) or ``TIMED_OUT``. Returns the two operations."""
        assert isinstance(self.op, Pipeline) and self.op.watch, f"flow yielded {self.op!r}"
        present = NodeData(b"", Stat(czxid=1, ephemeral_owner=SESSION + 100))
        watch = self.expect(Pipeline, tuple(present for _ in self.op.requests))
        wait = self.op
        node = watch.requests[0].path
        if isinstance(outcome, Gone):
            reply: Any = (WatchEvent(WatchKind.DELETED, outcome.node),)
        elif isinstance(outcome, SessionExpiredError):
            reply = (WatchEvent(WatchKind.SESSION_LOST, node),)
        elif isinstance(outcome, ClientClosedError):
            reply = (WatchEvent(WatchKind.CLOSED, node),)
        else:
            assert outcome is TIMED_OUT, outcome
            reply = TIMED_OUT
        self.expect(Wait, reply)
        return watch, wait


def watched(op: Any) -> tuple[str, ...]:
    """The nodes a watch-setting pipeline watches."""
    assert isinstance(op, Pipeline) and op.watch, op
    return tuple(request.path for request in op.requests)


def wrapped_flow(flow: Flow, rewrite: Any) -> Flow:
    """Run ``flow``; ``rewrite(op, (last op, its reply))`` may answer ``op`` itself (a
    generator returning the reply) or return None to send it as it is: how the
    simulator's tests plant a bug into the real flows."""
    last: tuple[Any, Any] = (None, None)
    try:
        op = next(flow)
    except StopIteration as stop:
        return stop.value
    while True:
        try:
            answer = rewrite(op, last)
            reply = (yield from answer) if answer is not None else (yield op)
        except BaseException as exc:
            try:
                op = flow.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        last = (op, reply)
        try:
            op = flow.send(reply)
        except StopIteration as stop:
            return stop.value


MARKED = [None, Stat(czxid=1)]
"""A marked departure's reply (``Multi``: the delete, the directory's ``setData``)."""


def left(op: Any) -> str:
    """The node a waiter's way out removes, as the zklocks layout does it: one ``Multi``
    deleting the node and marking the departure clean on its directory."""
    assert isinstance(op, Multi), f"a way out should be a marked departure, not {op!r}"
    delete, mark = op.ops
    assert isinstance(delete, Delete) and isinstance(mark, SetData), op
    assert mark.path == delete.path.rsplit("/", 1)[0], op
    return delete.path
