"""SASL logins (``zklocks.SASL``): what to log in as, and the mechanism that does it.

ZooKeeper's SASL is a conversation, not one auth packet: after every handshake the client
sends tokens (``GetSASLRequest``) and reads the server's (``SetSASLResponse``) until the
mechanism is complete; only then may anything else be sent. The connection runs that
loop (``Connection._sasl_login``); this module holds the two pieces it needs and does no
I/O:

* ``SASL``: the user's choice, checked at construction. It is a ``Credential`` so that
  ``acl="creator"`` and the lock directory's ACL check know the identity the server will
  give the session (``sasl:<user>`` for DIGEST-MD5).
* ``Mechanism``: one exchange's state, made fresh per connection from pure-sasl, which
  is an optional extra (``pip install 'zklocks[sasl]'``).

The password lives only in the ``SASL`` object and the mechanism; no repr, log line or
error shows it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from zklocks._errors import InvalidArgument
from zklocks._protocol.credential import Credential
from zklocks._protocol.records import Id
from zklocks._transport.kerberos import principal_name

__all__ = [
    "DIGEST_MD5_SERVER_NAME",
    "MECHANISMS",
    "SASL",
    "Mechanism",
    "SaslFailed",
    "login_of",
    "plain_packets",
    "with_login",
]

MECHANISMS = ("DIGEST-MD5", "GSSAPI")
#: the host name ZooKeeper's DIGEST-MD5 server uses for every client, whatever it dials
DIGEST_MD5_SERVER_NAME = "zk-sasl-md5"
_INSTALL_HINT = "SASL needs the pure-sasl package: pip install 'zklocks[sasl]'"
_KERBEROS_HINT = (
    "SASL GSSAPI (Kerberos) needs the pure-sasl and kerberos packages: "
    "pip install 'zklocks[kerberos]' (building kerberos needs libkrb5-dev)"
)


class SaslFailed(Exception):
    """A SASL exchange failed in a way that retrying cannot fix (the wording says why)."""


class SASL(Credential):
    """Log in with SASL on every (re)connect: ``Client(hosts, sasl=zklocks.SASL(...))``.

    ``mechanism="DIGEST-MD5"`` needs ``username`` and ``password`` (as in the server's
    JAAS ``user_<name>="<password>"`` lines); the session's identity is
    ``sasl:<username>``, which ``acl="creator"`` gives every lock node. Needs the
    ``sasl`` extra (pure-sasl).

    ``mechanism="GSSAPI"`` is Kerberos: the ticket comes from the credential cache
    (``kinit``, ``KRB5CCNAME``) or the client keytab (``KRB5_CLIENT_KTNAME``);
    ``principal`` picks one of several (``None``: the cache's default principal, else the
    keytab's first). The client asks for the service principal ``<service>/<host>``, with
    the host as written in ``hosts`` (so use the names the servers' principals carry,
    not addresses). The identity keeps its realm: ``sasl:alice@EXAMPLE.COM``. Needs the
    ``kerberos`` extra (pure-sasl and kerberos).

    ``service`` is the server's SASL service name (``zookeeper``, ZooKeeper's default).
    The password never appears in a repr, a log line or an error.
    """

    __slots__ = ("_identity", "mechanism", "principal", "service", "username")
    mechanism: str
    username: str
    service: str
    principal: str | None

    def __init__(
        self,
        mechanism: str = "DIGEST-MD5",
        *,
        username: str | None = None,
        password: str | None = None,
        service: str = "zookeeper",
        principal: str | None = None,
    ) -> None:
        if mechanism not in MECHANISMS:
            raise InvalidArgument(
                f"SASL mechanism must be one of {', '.join(MECHANISMS)}, not {mechanism!r}"
            )
        if not isinstance(service, str) or not service:
            raise InvalidArgument("SASL service must be a non-empty string such as 'zookeeper'")
        self._identity: Id | None = None  # GSSAPI: asked of libkrb5 when first needed
        if mechanism == "GSSAPI":
            self._init_gssapi(service, username, password, principal)
            return
        if not isinstance(username, str) or not username:
            raise InvalidArgument("SASL DIGEST-MD5 needs username='...' (a non-empty string)")
        if not isinstance(password, str) or not password:
            raise InvalidArgument("SASL DIGEST-MD5 needs password='...' (a non-empty string)")
        if principal is not None:
            raise InvalidArgument("SASL principal= is for GSSAPI; DIGEST-MD5 takes username=")
        if importlib.util.find_spec("puresasl") is None:
            raise InvalidArgument(_INSTALL_HINT)
        super().__init__("sasl", password.encode("utf-8"))
        self.mechanism = mechanism
        self.username = username
        self.service = service
        self.principal = principal
        self._identity = Id("sasl", username)

    def _init_gssapi(
        self, service: str, username: str | None, password: str | None, principal: str | None
    ) -> None:
        if username is not None or password is not None:
            raise InvalidArgument(
                "SASL GSSAPI takes no username or password: the ticket comes from the "
                "credential cache or KRB5_CLIENT_KTNAME (principal= picks one)"
            )
        if principal is not None and (not isinstance(principal, str) or not principal):
            raise InvalidArgument("SASL principal must be a non-empty string such as 'alice'")
        if (
            importlib.util.find_spec("puresasl") is None
            or importlib.util.find_spec("kerberos") is None
        ):
            raise InvalidArgument(_KERBEROS_HINT)
        super().__init__("sasl", b"")
        self.mechanism = "GSSAPI"
        self.username = ""
        self.service = service
        self.principal = principal

    def identity(self) -> Id | None:
        """The id ZooKeeper gives this login: ``sasl:<username>`` (DIGEST-MD5), or
        ``sasl:<principal@REALM>`` (GSSAPI; None while no ticket or keytab names one)."""
        if self._identity is None and self.mechanism == "GSSAPI":
            name = principal_name(self.principal)
            self._identity = None if name is None else Id("sasl", name)
        return self._identity

    @property
    def user(self) -> str:
        return self.username or (self.principal or "")

    def __repr__(self) -> str:
        if self.mechanism == "GSSAPI":
            return (
                f"SASL(mechanism='GSSAPI', service={self.service!r}, principal={self.principal!r})"
            )
        return f"SASL(mechanism={self.mechanism!r}, username={self.username!r}, password=<hidden>)"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, SASL) and other._key() == self._key() and other.packet == self.packet
        )

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[str, str, str, str | None]:
        return self.mechanism, self.username, self.service, self.principal

    def mechanism_for(self, host: str) -> Mechanism:
        """A fresh exchange for one connection to ``host``."""
        return Mechanism(self, host)


class Mechanism:
    """One SASL exchange: ``first()`` is the opening token, ``answer(challenge)`` each next
    one; ``complete`` once the server's last token checked out. Errors are ``SaslFailed``.
    """

    def __init__(self, sasl: SASL, host: str) -> None:
        try:
            from puresasl.client import SASLClient  # type: ignore[import-untyped]
        except ImportError as exc:  # found at construction, gone since
            raise SaslFailed(_INSTALL_HINT) from exc
        if sasl.mechanism == "GSSAPI":
            try:
                self._client: Any = SASLClient(
                    host, service=sasl.service, mechanism="GSSAPI", principal=sasl.principal
                )
            except Exception as exc:  # kerberos.GSSError: no ticket, no keytab, ...
                raise SaslFailed(
                    f"SASL authentication failed: no Kerberos credentials for "
                    f"{sasl.principal or 'the default principal'} ({_gss_reason(exc)})"
                ) from None
            return
        # ZooKeeper's DIGEST-MD5 server names itself the same for every client
        _scheme, secret = sasl.packet
        self._client = SASLClient(
            DIGEST_MD5_SERVER_NAME,
            service=sasl.service,
            mechanism=sasl.mechanism,
            username=sasl.username,
            password=secret.decode("utf-8"),
        )

    @property
    def complete(self) -> bool:
        return bool(self._client.complete)

    def first(self) -> bytes:
        return self.answer(None)

    def answer(self, challenge: bytes | None) -> bytes:
        try:
            token = self._client.process(challenge)
        except Exception as exc:  # pure-sasl raises several kinds; say which, not secrets
            raise SaslFailed(
                "SASL authentication failed: the mechanism refused the server's token "
                f"({_gss_reason(exc)})"
            ) from None
        return bytes(token or b"")

    def dispose(self) -> None:
        """Forget the password (pure-sasl keeps it on the client object)."""
        self._client.dispose()


def _gss_reason(error: BaseException) -> str:
    """What a mechanism error says: Kerberos' own words (they hold no secret), or the
    type of anything else (DIGEST-MD5's messages are not looked into)."""
    parts = error.args[0] if error.args else None
    if type(error).__name__ == "GSSError" and isinstance(parts, tuple) and parts:
        return str(parts[0])
    return type(error).__name__


def with_login(auth: object, sasl: object) -> object:
    """The clients' ``auth`` with the ``sasl`` login added, so that ACLs see its identity.

    ``auth`` is returned as it is when it is not a list of pairs (its own check then says
    what is wrong with it).
    """
    if sasl is None:
        return auth
    if not isinstance(sasl, SASL):
        raise InvalidArgument(f"sasl must be a zklocks.SASL(...), not {type(sasl).__name__}")
    if auth is None:
        return [sasl]
    if isinstance(auth, list | tuple):
        return [*auth, sasl]
    return auth


def plain_packets(credentials: Sequence[Credential]) -> list[tuple[str, bytes]]:
    """The auth packets sent on every (re)connect: every credential but the SASL login."""
    return [cred.packet for cred in credentials if not isinstance(cred, SASL)]


def login_of(credentials: Sequence[Credential]) -> SASL | None:
    """The SASL login among the credentials, if any."""
    return next((cred for cred in credentials if isinstance(cred, SASL)), None)
