"""Who may touch a lock's nodes: credentials (``auth``), ACLs (``acl``) and TLS (``ssl``).

No I/O. The clients turn their arguments into the pieces below once, at construction:

* ``auth`` -> ``Credential``s: what the connection sends as auth packets on every
  (re)connect. A credential's secret never appears in its ``repr`` or in any message.
  Each credential also says which ZooKeeper *identity* it gives the session, when that
  can be known on this side (``digest``: ``user:base64(sha1(user:password))``); that is
  what lets the client check a lock directory's ACL. A scheme that needs a conversation
  with the server (SASL: DIGEST-MD5, Kerberos) would be another ``Credential`` kind whose
  connection step runs that exchange instead of sending one auth packet; nothing else
  changes (see docs/security.md).
* ``acl`` -> the entries sent with every create (``"open"`` sends ZooKeeper's open ACL)
  and the entries the server will *store* for them (``auth:`` expanded to our identities),
  which is what ``weaker_entries`` compares a lock directory's ACL with.
* ``ssl`` -> an ``ssl.SSLContext`` or ``None``.
"""

from __future__ import annotations

import ssl as _ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from zklocks._errors import InvalidArgument
from zklocks._protocol.constants import Perm
from zklocks._protocol.credential import Credential
from zklocks._protocol.records import Id, WireACL

ALL = int(Perm.ALL)
_PERM_LETTERS = (("c", Perm.CREATE), ("d", Perm.DELETE), ("r", Perm.READ), ("w", Perm.WRITE),
                 ("a", Perm.ADMIN))  # fmt: skip


@dataclass(frozen=True, slots=True)
class ACL:
    """One access-control entry: ``perms`` (ZooKeeper's bitmask: read 1, write 2, create 4,
    delete 8, admin 16; 31 for all) granted to the identity ``scheme:id``.

    ``ACL("auth", "", 31)`` is "whoever created the node" (the session's identities),
    ``ACL("world", "anyone", 1)`` lets everyone read, ``ACL("digest", "user:HASH", 31)``
    names a digest identity, ``ACL("ip", "10.0.0.0/8", 1)`` an address range.
    """

    scheme: str
    id: str
    perms: int

    def __post_init__(self) -> None:
        if not isinstance(self.scheme, str) or not self.scheme:
            raise InvalidArgument("an ACL entry needs a scheme such as 'auth', 'digest', 'world'")
        if not isinstance(self.id, str):
            raise InvalidArgument(f"ACL id must be a string, not {type(self.id).__name__}")
        if isinstance(self.perms, bool) or not isinstance(self.perms, int):
            raise InvalidArgument("ACL perms must be an int bitmask (31 for all)")
        if not 0 < self.perms <= ALL:
            raise InvalidArgument(f"ACL perms must be between 1 and 31, not {self.perms}")

    def __str__(self) -> str:
        return f"{show_id(self.scheme, self.id)}={perm_letters(self.perms)}"


def credentials(auth: object) -> tuple[Credential, ...]:
    """``auth`` checked: a list of ``(scheme, credential)``; digest needs ``user:password``."""
    if auth is None:
        return ()
    if isinstance(auth, str | bytes) or not isinstance(auth, Iterable):
        raise InvalidArgument("auth must be a list of (scheme, credential) pairs")
    found: list[Credential] = []
    for entry in auth:
        if isinstance(entry, Credential):
            found.append(entry)
            continue
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise InvalidArgument(
                "each auth entry must be a (scheme, credential) pair, "
                'e.g. ("digest", "user:password")'
            )
        scheme, secret = entry
        if not isinstance(scheme, str) or not scheme or ":" in scheme:
            raise InvalidArgument(f"auth scheme must be a name such as 'digest', not {scheme!r}")
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not isinstance(secret, bytes):
            raise InvalidArgument(f"the {scheme} credential must be str or bytes")
        if scheme == "digest":
            user, colon, _ = secret.partition(b":")
            if not colon or not user:
                raise InvalidArgument("a digest credential is 'user:password' (no ':' found)")
        found.append(Credential(scheme, secret))
    return tuple(found)


_ACL_FORMS = "acl must be 'open', 'creator' or a non-empty list of zklocks.ACL"


def acl_entries(acl: object, creds: Sequence[Credential]) -> tuple[ACL, ...]:
    """``acl`` as entries; ``()`` for ``"open"`` (the default, ZooKeeper's open ACL)."""
    if acl is None or acl == "open":
        return ()
    if acl == "creator":
        entries: tuple[ACL, ...] = (ACL("auth", "", ALL),)
    elif isinstance(acl, str):
        raise InvalidArgument(f"{_ACL_FORMS}, not {acl!r}")
    elif isinstance(acl, Iterable):
        entries = tuple(acl)
        if not entries or not all(isinstance(entry, ACL) for entry in entries):
            raise InvalidArgument(_ACL_FORMS)
    else:
        raise InvalidArgument(f"{_ACL_FORMS}, not {acl!r}")
    if any(entry.scheme == "auth" for entry in entries) and not creds:
        raise InvalidArgument(
            "acl='creator' (or an 'auth' entry) needs credentials: pass "
            'auth=[("digest", "user:password")]; ZooKeeper refuses it for a session '
            "that has no identity"
        )
    return entries


def wire_acl(entries: Sequence[ACL]) -> tuple[WireACL, ...]:
    """The entries as the protocol encodes them."""
    return tuple(WireACL(entry.perms, Id(entry.scheme, entry.id)) for entry in entries)


def stored_acl(entries: Sequence[ACL], creds: Sequence[Credential]) -> tuple[ACL, ...]:
    """What the server stores for ``entries``: ``auth:`` becomes each of our identities."""
    stored: list[ACL] = []
    for entry in entries:
        if entry.scheme != "auth":
            stored.append(entry)
            continue
        for cred in creds:
            ident = cred.identity()
            if ident is not None:
                stored.append(ACL(ident.scheme, ident.id, entry.perms))
    return tuple(stored)


def public_acl(entries: Iterable[WireACL]) -> tuple[ACL, ...]:
    """Entries read from the server, as ``zklocks.ACL``."""
    return tuple(ACL(entry.id.scheme, entry.id.id, entry.perms) for entry in entries if entry.perms)


def weaker_entries(existing: Sequence[WireACL], allowed: Sequence[ACL]) -> list[ACL]:
    """Entries of ``existing`` that grant someone more than ``allowed`` does.

    An empty answer means the existing ACL gives nobody any permission the requested one
    would not: the directory is at least as strict as asked. A digest id the server shows
    redacted (``user:x``, when we lack ADMIN on it) cannot be checked and counts as weaker.
    """
    grants: dict[tuple[str, str], int] = {}
    for entry in allowed:
        key = (entry.scheme, entry.id)
        grants[key] = grants.get(key, 0) | entry.perms
    weaker = []
    for held in existing:
        ident = held.id
        if held.perms & ~grants.get((ident.scheme, ident.id), 0):
            weaker.append(ACL(ident.scheme, ident.id, held.perms))
    return weaker


def perm_letters(perms: int) -> str:
    """ZooKeeper's letters for a bitmask, as ``zkCli getAcl`` prints them: ``cdrwa``."""
    return "".join(letter for letter, bit in _PERM_LETTERS if perms & bit) or "-"


def show_id(scheme: str, ident: str) -> str:
    """An identity for people: a digest id's password hash is left out."""
    if scheme == "digest":
        return f"digest:{ident.partition(':')[0]}"
    if scheme == "auth" and not ident:
        return "auth (the creator)"
    return f"{scheme}:{ident}"


def describe(entries: Iterable[WireACL | ACL]) -> str:
    """``world:anyone=cdrwa, digest:alice=cdrwa``; never a password hash."""
    parts = []
    for entry in entries:
        if isinstance(entry, ACL):
            parts.append(str(entry))
        else:
            ident = entry.id
            parts.append(f"{show_id(ident.scheme, ident.id)}={perm_letters(entry.perms)}")
    return ", ".join(parts) or "(empty)"


def ssl_context(ssl: object) -> _ssl.SSLContext | None:
    """``None``/``False``: plain; ``True``: the system's defaults; or the context given."""
    if ssl is None or ssl is False:
        return None
    if ssl is True:
        return _ssl.create_default_context()
    if isinstance(ssl, _ssl.SSLContext):
        return ssl
    raise InvalidArgument(f"ssl must be None, True or an ssl.SSLContext, not {type(ssl).__name__}")


@dataclass(frozen=True, slots=True)
class AclPolicy:
    """What a lock's creates send (``wire``) and what a directory may grant (``stored``)."""

    name: str  # how the user asked for it, for messages: 'creator' or the entries
    wire: tuple[WireACL, ...]
    stored: tuple[ACL, ...]


def acl_policy(acl: object, creds: Sequence[Credential]) -> AclPolicy | None:
    """``None`` for the open ACL (nothing to send, nothing to check)."""
    entries = acl_entries(acl, creds)
    if not entries:
        return None
    name = repr(acl) if isinstance(acl, str) else "[" + describe(entries) + "]"
    return AclPolicy(name, wire_acl(entries), stored_acl(entries, creds))


def weak_directory_message(
    path: str, existing: Sequence[WireACL], policy: AclPolicy, allowed: Sequence[ACL]
) -> str:
    weaker = weaker_entries(existing, allowed)
    return (
        f"refusing to use the lock directory {path}: its ACL ({describe(existing)}) grants "
        f"more than acl={policy.name} allows ({describe(weaker)}), so others could delete "
        "it or plant nodes in it between two holders. Fix: delete it while nobody uses it "
        f"(zkCli.sh: deleteall {path}) so that zklocks re-creates it with your ACL, give it "
        f"your ACL as its owner (zkCli.sh: addauth digest USER:PASSWORD, then setAcl {path} "
        "auth::cdrwa), or lock another path"
    )
