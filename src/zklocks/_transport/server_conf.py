"""Ask a ZooKeeper member for its tickTime, which the lease rule on an ensemble needs.

Two ways, tried together, the first answer wins:

* the ``conf`` four-letter word on the client port (over TLS too, as the client
  connects). Stock servers allow only ``srvr`` unless ``4lw.commands.whitelist`` names
  ``conf``; they then answer with a line saying so, which we take as "no answer";
* the AdminServer's ``/commands/conf`` on port 8080 of the same host (on by default
  since ZooKeeper 3.5), plain HTTP, JSON with ``tick_time`` in milliseconds.

The session's own handshake cannot tell: the negotiated timeout bounds tickTime only
under the default minSessionTimeout, which operators change.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl as _ssl

from zklocks._transport.lease_rule import Timing

__all__ = ["ADMIN_PORT", "learn_timing", "parse_admin_conf", "parse_four_letter_conf"]

ADMIN_PORT = 8080  # the AdminServer's default port
_LIMIT = 64 * 1024  # a conf answer is a few hundred bytes

log = logging.getLogger("zklocks.connection")


def parse_four_letter_conf(text: str, source: str) -> Timing | None:
    """``tickTime=2000`` and ``syncLimit=5`` lines of a ``conf`` answer; None if absent."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return _timing(values.get("tickTime"), values.get("syncLimit"), source)


def parse_admin_conf(body: bytes, source: str) -> Timing | None:
    """The AdminServer's ``conf`` JSON: ``tick_time`` (ms) and, if there, ``sync_limit``."""
    try:
        document = json.loads(body)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    return _timing(document.get("tick_time"), document.get("sync_limit"), source)


def _timing(tick_ms: object, sync_limit: object, source: str) -> Timing | None:
    try:
        tick = int(str(tick_ms))
    except ValueError:
        return None
    if not 0 < tick <= 3_600_000:
        return None
    limit: int | None
    try:
        limit = int(str(sync_limit))
    except ValueError:
        limit = None
    return Timing(tick / 1000, source, limit)


async def _read_all(host: str, port: int, request: bytes, ssl: _ssl.SSLContext | None) -> bytes:
    reader, writer = await asyncio.open_connection(
        host, port, ssl=ssl, server_hostname=host if ssl is not None else None
    )
    try:
        writer.write(request)
        await writer.drain()
        chunks: list[bytes] = []
        size = 0
        while size < _LIMIT:
            chunk = await reader.read(_LIMIT - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _ask_four_letter(host: str, port: int, ssl: _ssl.SSLContext | None) -> Timing | None:
    answer = await _read_all(host, port, b"conf", ssl)
    return parse_four_letter_conf(answer.decode("utf-8", "replace"), f"conf of {host}:{port}")


async def _ask_admin(host: str) -> Timing | None:
    request = f"GET /commands/conf HTTP/1.0\r\nHost: {host}\r\n\r\n".encode("ascii")
    answer = await _read_all(host, ADMIN_PORT, request, None)
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or not status[0].startswith(b"HTTP/") or status[1] != b"200":
        return None
    return parse_admin_conf(body, f"the AdminServer of {host}")


async def learn_timing(
    host: str, port: int, ssl: _ssl.SSLContext | None, timeout: float
) -> Timing | None:
    """The member's tickTime from whichever way answers first within ``timeout``."""
    tasks = [
        asyncio.ensure_future(_ask_four_letter(host, port, ssl)),
        asyncio.ensure_future(_ask_admin(host)),
    ]
    try:
        pending = set(tasks)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while pending:
            done, pending = await asyncio.wait(
                pending,
                timeout=max(deadline - loop.time(), 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                return None
            for task in done:
                if not task.cancelled() and task.exception() is None and task.result():
                    return task.result()
                if not task.cancelled() and task.exception() is not None:
                    log.debug("asking %s for tickTime: %s", host, task.exception())
        return None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
