"""How an ``NativeAsyncCarrier.call`` waits for its replies (``_Gate``).

The connection answers the gate's tokens as it would futures, in any order. A caller
cancelled while its requests are in flight leaves them to finish: the server applies
them anyway, and the connection must still match each reply to its request, whose
answer then goes nowhere, with nothing left for asyncio to report as never retrieved.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from helpers import run
from zklocks._asyncio.native_carrier import _Gate
from zklocks._protocol.errors import ConnectionLossError, NoNodeError


def test_waits_for_every_reply_in_any_order() -> None:
    async def scenario() -> tuple[list[str], list[Any]]:
        gate = _Gate(asyncio.get_running_loop(), 3)
        tokens = gate.tokens()
        waiting = asyncio.ensure_future(gate.replies())
        seen = []
        for index in (2, 0, 1):
            await asyncio.sleep(0)
            seen.append(f"done={waiting.done()}")
            tokens[index].set_result(index)
        return seen, await waiting

    seen, replies = run(scenario(), 10)
    assert seen == ["done=False"] * 3
    assert replies == [0, 1, 2]


def test_a_zookeeper_error_is_a_reply_and_any_other_error_is_raised() -> None:
    async def scenario() -> tuple[list[Any], BaseException | None]:
        loop = asyncio.get_running_loop()
        gate = _Gate(loop, 2)
        first, second = gate.tokens()
        first.set_exception(NoNodeError(path="/gone"))
        second.set_exception(ConnectionLossError())
        replies = await gate.replies()
        broken = _Gate(loop, 1)
        (only,) = broken.tokens()
        only.set_exception(TypeError("not a request"))
        try:
            await broken.replies()
        except TypeError as exc:
            return replies, exc
        return replies, None

    replies, raised = run(scenario(), 10)
    assert [type(reply) for reply in replies] == [NoNodeError, ConnectionLossError]
    assert isinstance(raised, TypeError)


@pytest.mark.parametrize("count", [1, 2])
def test_a_cancelled_caller_leaves_the_requests_to_finish_and_nothing_unretrieved(
    count: int,
) -> None:
    reported: list[dict[str, Any]] = []

    async def scenario() -> tuple[str, list[bool]]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        gate = _Gate(loop, count)
        tokens = gate.tokens()
        waiting = asyncio.ensure_future(gate.replies())
        await asyncio.sleep(0)
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            outcome = "cancelled"
        else:
            outcome = "finished"
        done = [token.done() for token in tokens]  # the connection skips them now
        for token in tokens:  # the replies come later, and go nowhere
            token.set_exception(NoNodeError(path="/gone"))
        token = None
        del gate, tokens, waiting
        gc.collect()
        await asyncio.sleep(0)
        return outcome, done

    outcome, done = run(scenario(), 10)
    assert outcome == "cancelled"
    assert done == [True] * count
    assert [c.get("message") for c in reported] == []
