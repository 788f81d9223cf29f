"""Logging in on a fresh connection: SASL's exchange, and the words for a refusal.

The exchange runs after every handshake, before anything else is sent (see ``sasl.py``
for the mechanisms, which do no I/O). A refusal that no retry can fix (AUTH_FAILED, or a
server that requires a login we do not make) ends the connection for good; the errors
built here say what to change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any

from zklocks._protocol.errors import (
    AuthFailedError,
    ConnectionFailedError,
    ConnectionLossError,
    SessionClosedRequireSaslAuthError,
)
from zklocks._protocol.records import SetSASLResponse
from zklocks._protocol.session import Session
from zklocks._transport.outgoing import Outgoing
from zklocks._transport.sasl import SASL, SaslFailed

__all__ = ["auth_refused", "auth_required", "credentials_answered", "sasl_login"]

# how a refused SASL step is named to people (ZooKeeper's own code names)
_REFUSALS: dict[type[BaseException], str] = {
    AuthFailedError: "AUTH_FAILED",
    SessionClosedRequireSaslAuthError: "SESSION_CLOSED_REQUIRE_SASL_AUTH",
}


async def sasl_login(
    sasl: SASL,
    host: str,
    port: int,
    lost: asyncio.Future[None],
    send: Callable[[bytes, asyncio.Future[Any]], None],
) -> None:
    """Run the SASL exchange on a fresh connection, before anything else is sent.

    Each token goes out (``send``: as a ``GetSASLRequest``, its answer to the future) and
    the server's answer is fed back to the mechanism until it is complete. A refusal
    (AUTH_FAILED, or the enforcing server's SESSIONCLOSEDREQUIRESASLAUTH) raises
    ``SaslFailed``; a hang-up mid-way (``lost``) is an ordinary ``ConnectionLossError``
    (the server may be going down).
    """
    mechanism = sasl.mechanism_for(host)
    loop = asyncio.get_running_loop()
    try:
        token = mechanism.first()
        while True:
            answer: asyncio.Future[Any] = loop.create_future()
            send(token, answer)
            await asyncio.wait((answer, lost), return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                answer.cancel()
                raise ConnectionLossError("the server hung up during the SASL exchange")
            error = answer.exception()
            if error is not None:
                raise SaslFailed(
                    f"SASL authentication failed: {host}:{port} refused the "
                    f"{sasl.mechanism} login of {sasl.username!r} "
                    f"({_REFUSALS.get(type(error), type(error).__name__)}); check the "
                    "user and password"
                )
            reply = answer.result()
            assert isinstance(reply, SetSASLResponse)
            if mechanism.complete:  # that was our last token (GSSAPI): accepted
                return
            token = mechanism.answer(reply.token)
            if mechanism.complete and not token:  # nothing left to say (DIGEST-MD5)
                return
    finally:
        mechanism.dispose()


async def credentials_answered(session: Session, out: Outgoing) -> None:
    """At start: wait until the server has answered the credentials sent first thing.

    The server answers auth packets as it reads them, ahead of anything queued, so once
    a ping sent after them is answered they were accepted; a refusal arrives first and
    ends the session (ZooKeeper closes it on AUTH_FAILED). A drop for another reason
    ends the wait too; the supervisor then reconnects.
    """
    wire = out.wire
    assert wire is not None
    probe: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    probe.add_done_callback(lambda done: done.cancelled() or done.exception())
    with out.lock:
        out.write(session.ping((probe, time.monotonic())))
    await asyncio.wait((probe, wire.lost), return_when=asyncio.FIRST_COMPLETED)


def auth_refused(host: str | None, auth: Iterable[tuple[str, bytes]]) -> ConnectionFailedError:
    """AUTH_FAILED for the auth packets we sent: the server closed the session."""
    schemes = ", ".join(sorted({scheme for scheme, _ in auth})) or "?"
    host = host or "?"
    return ConnectionFailedError(
        f"ZooKeeper at {host} refused our credentials (AUTH_FAILED for scheme "
        f"{schemes}) and closed the session; check auth (scheme and 'user:password')",
        hosts=(host,),
        reasons=(f"{host} refused our credentials (AUTH_FAILED)",),
        refused=True,
    )


def auth_required(host: str | None) -> ConnectionFailedError:
    """The server enforces authentication (enforce.auth.enabled) and we made no login."""
    host = host or "?"
    return ConnectionFailedError(
        f"ZooKeeper at {host} requires authentication (enforce.auth.enabled) and closed "
        "the session: log in with SASL, sasl=zklocks.SASL(mechanism='DIGEST-MD5', "
        "username=..., password=...) (CLI: --sasl-user and --sasl-password-file)",
        hosts=(host,),
        reasons=(f"{host} requires authentication: a SASL login (enforce.auth.enabled)",),
        refused=True,
    )
