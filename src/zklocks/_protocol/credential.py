"""One ``(scheme, credential)`` pair of ``auth``: what goes out as an auth packet.

Below both the lock engine (``_core/security.py`` turns ``auth=`` into these and checks a
lock directory's ACL against their identities) and the transport (``SASL`` is a
``Credential`` whose connection step runs an exchange instead of one packet), so that
neither imports the other. The secret never appears in a repr or a message.
"""

from __future__ import annotations

from zklocks._protocol.records import Id, digest_id

__all__ = ["Credential"]


class Credential:
    """One ``(scheme, credential)`` pair of ``auth``; the secret stays out of every repr."""

    __slots__ = ("_secret", "scheme")

    def __init__(self, scheme: str, secret: bytes) -> None:
        self.scheme = scheme
        self._secret = secret

    @property
    def packet(self) -> tuple[str, bytes]:
        """What the connection sends (scheme, credential bytes)."""
        return self.scheme, self._secret

    def identity(self) -> Id | None:
        """The identity the server gives a session that sent this, if computable here."""
        if self.scheme == "digest":
            user, _, password = self._secret.decode("utf-8").partition(":")
            return digest_id(user, password)
        return None

    @property
    def user(self) -> str:
        """What may be shown of it: the user of a digest credential, else the scheme."""
        if self.scheme == "digest":
            return self._secret.decode("utf-8").partition(":")[0]
        return ""

    def __repr__(self) -> str:
        shown = f" user={self.user!r}" if self.user else ""
        return f"<Credential {self.scheme}{shown} (secret hidden)>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Credential) and other.packet == self.packet

    def __hash__(self) -> int:
        return hash(self.packet)
