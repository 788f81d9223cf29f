"""How an ``NativeAsyncCarrier.call`` waits for its replies (``_all_answered``).

A caller cancelled while its requests are in flight leaves them to finish: the server
applies them anyway, and the connection must still match each reply to its request.
Their errors are marked seen, so asyncio reports no "exception never retrieved".
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from helpers import run
from zklocks._asyncio.native_carrier import _all_answered
from zklocks._protocol.errors import NoNodeError


def test_waits_for_every_future_in_any_order() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in range(3)]
        waiting = asyncio.ensure_future(_all_answered(futures))
        seen = []
        for index in (2, 0, 1):
            await asyncio.sleep(0)
            seen.append(f"done={waiting.done()}")
            futures[index].set_result(index)
        await waiting
        return seen

    assert run(scenario(), 10) == ["done=False"] * 3


def test_a_cancelled_caller_leaves_the_requests_to_finish_and_their_errors_seen() -> None:
    reported: list[dict[str, Any]] = []

    async def scenario() -> tuple[list[bool], str]:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        futures: list[asyncio.Future[Any]] = [loop.create_future() for _ in range(2)]
        waiting = asyncio.ensure_future(_all_answered(futures))
        await asyncio.sleep(0)
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            outcome = "cancelled"
        else:
            outcome = "finished"
        cancelled = [future.cancelled() for future in futures]
        futures[0].set_exception(NoNodeError(path="/gone"))  # the replies come later
        futures[1].set_result(None)
        del futures
        gc.collect()
        await asyncio.sleep(0)
        return cancelled, outcome

    cancelled, outcome = run(scenario(), 10)
    assert outcome == "cancelled"
    assert cancelled == [False, False]
    assert [c.get("message") for c in reported] == []
