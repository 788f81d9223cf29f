"""What both clients share: their arguments, checked the same way, and the three lock
factories. Each client says only which lock classes it builds."""

from __future__ import annotations

import ssl as _ssl
from typing import Generic, TypeVar

from zklocks import _security, _validate
from zklocks._errors import InvalidArgument
from zklocks._holdings import LockConfig, make_config

LockT = TypeVar("LockT")
ReadWriteT = TypeVar("ReadWriteT")

DEFAULT_HOSTS = "127.0.0.1:2181"


class LockMaker(Generic[LockT, ReadWriteT]):
    """``lock``, ``read_write_lock`` and ``semaphore``: validate, then build."""

    def __init__(
        self,
        hosts: str,
        session_timeout: float,
        connect_timeout: float,
        ensemble_lag: float | None = None,
        *,
        auth: object = None,
        acl: object = "open",
        ssl: object = None,
    ) -> None:
        if not isinstance(hosts, str) or not hosts.strip():
            raise InvalidArgument(f"hosts must be a 'host:port,...' string, not {hosts!r}")
        self.hosts = hosts
        self.session_timeout = _validate.session_timeout(session_timeout)
        self.connect_timeout = _validate.session_timeout(connect_timeout)
        self.ensemble_lag = None if ensemble_lag is None else _validate.ensemble_lag(ensemble_lag)
        # Security options (docs/security.md); the credentials' secrets stay out of reprs.
        self._credentials = _security.credentials(auth)
        self._acl = _security.acl_policy(acl, self._credentials)
        self._ssl: _ssl.SSLContext | None = _security.ssl_context(ssl)

    @property
    def _auth_packets(self) -> list[tuple[str, bytes]]:
        """What the connection sends on every (re)connect."""
        return [credential.packet for credential in self._credentials]

    def _new_lock(self, config: LockConfig) -> LockT:
        raise NotImplementedError

    def _new_read_write(self, read: LockConfig, write: LockConfig) -> ReadWriteT:
        raise NotImplementedError

    def lock(
        self,
        path: str,
        *,
        fair: bool = True,
        reentrant: bool = False,
        identifier: str | None = None,
    ) -> LockT:
        """An exclusive lock: fair (FIFO queue) or, with ``fair=False``, one node (seed 000)."""
        return self._new_lock(
            make_config(
                path, "lock", fair=fair, reentrant=reentrant, identifier=identifier, acl=self._acl
            )
        )

    def read_write_lock(
        self, path: str, *, reentrant: bool = False, identifier: str | None = None
    ) -> ReadWriteT:
        """A read/write lock: ``.read`` is shared, ``.write`` exclusive, one FIFO queue."""
        return self._new_read_write(
            make_config(path, "read", reentrant=reentrant, identifier=identifier, acl=self._acl),
            make_config(path, "write", reentrant=reentrant, identifier=identifier, acl=self._acl),
        )

    def semaphore(
        self,
        path: str,
        *,
        permits: int,
        reentrant: bool = False,
        identifier: str | None = None,
    ) -> LockT:
        """At most ``permits`` holders at once, granted in FIFO order."""
        return self._new_lock(
            make_config(
                path,
                "lease",
                permits=permits,
                reentrant=reentrant,
                identifier=identifier,
                acl=self._acl,
            )
        )
