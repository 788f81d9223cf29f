"""An operator's tools against the model: ``zklocks revoke`` run in one go.

The operator is another client, on a session of its own that never faults: its flow
(the real ``zklocks._core.revoke.revoke``, or a test's planted variant) runs to its end
inside one step of the schedule, so the clients see its writes as a single burst, the
way a quick command-line tool's writes land between their own requests.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, TypeAlias

from zklocks._core.ops import Op, Pipeline, Reply, SessionId
from zklocks._protocol.errors import BadVersionError, NoNodeError
from zklocks._protocol.records import Check, Delete, Multi, SetData
from zklocks.sim.model import Model

RevokeFn: TypeAlias = Callable[[str], Generator[Op, Any, int]]
"""Makes the revoke flow of one ``zklocks revoke PATH``: ``zklocks._core.revoke.revoke``,
or a test's variant (to plant a bug and show that the simulator finds it)."""

_MAX_OPS = 10_000  # a flow that never ends is a bug of its own


def operate(model: Model, session: int, flow: Generator[Op, Any, Any]) -> Any:
    """Run ``flow`` to its end against ``model`` as ``session``; its value."""
    value: Any = None
    for _ in range(_MAX_OPS):
        try:
            op = flow.send(value)
        except StopIteration as stop:
            return stop.value
        value = _reply(model, session, op)
    raise RuntimeError("the operator's flow did not end")


def _reply(model: Model, session: int, op: Op) -> Reply:
    if isinstance(op, Pipeline):
        return tuple(_reply(model, session, request) for request in op.requests)
    if isinstance(op, SessionId):
        return session
    if isinstance(op, Multi):
        return _multi(model, session, op)
    return model.apply(session, op)  # type: ignore[arg-type]


def _multi(model: Model, session: int, multi: Multi) -> Reply:
    """All or nothing: every version checked before anything is applied."""
    for op in multi.ops:
        version = getattr(op, "version", -1)
        node = model.nodes.get(op.path)
        if isinstance(op, Check | SetData | Delete) and node is None:
            return NoNodeError(path=op.path)
        if node is not None and version != -1 and node.version != version:
            return BadVersionError(path=op.path)
    results: list[Any] = []
    for op in multi.ops:
        if isinstance(op, SetData):
            results.append(model.set_data(session, op.path, op.data))
        elif isinstance(op, Delete):
            results.append(model.delete(session, op.path))
        elif isinstance(op, Check):
            results.append(None)
        else:
            raise ValueError(f"the operator does not create nodes: {op!r}")
    return results
