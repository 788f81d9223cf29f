"""A client's options as two values, checked once where the user passed them.

``ClientOptions`` is what every session needs, whichever makes it (our transport or the
simulator): it is handed whole to the session factory, so a default is written once and an
option is checked once, with an error that names it. ``ConnectionSecurity`` is what only our own
transport uses (TLS, auth packets, SASL); its secrets stay out of every repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ssl import SSLContext

from zklocks._core import validate as _validate
from zklocks._errors import InvalidArgument
from zklocks._transport.connection import Connection
from zklocks._transport.sasl import SASL
from zklocks._vocabulary import DEFAULT_SESSION_TIMEOUT as DEFAULT_SESSION_TIMEOUT

DEFAULT_HOSTS = "127.0.0.1:2181"
DEFAULT_CONNECT_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Where to connect and how long sessions and starts may take."""

    hosts: str = DEFAULT_HOSTS
    session_timeout: float = DEFAULT_SESSION_TIMEOUT  # asked for; the server may grant less
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT  # bounds one start() in all
    lease_timing: _validate.LeaseTiming = _validate.DEFAULT_LEASE_TIMING

    @classmethod
    def checked(
        cls,
        hosts: object,
        *,
        session_timeout: object = DEFAULT_SESSION_TIMEOUT,
        connect_timeout: object = DEFAULT_CONNECT_TIMEOUT,
        tick_time: object = None,
        clock_drift: object = _validate.DEFAULT_CLOCK_DRIFT,
        connect_string: bool = True,
    ) -> ClientOptions:
        """The options, each checked and named in its error. ``connect_string=False``:
        ``hosts`` is for a session factory of the caller's, which decides what it means."""
        if connect_string:
            _validate.hosts(hosts)  # a bad connect string fails here, not at start()
        if not isinstance(hosts, str) or not hosts.strip():
            raise InvalidArgument(f"hosts must be a 'host:port,...' string, not {hosts!r}")
        return cls(
            hosts,
            _validate.session_timeout(session_timeout),
            _validate.connect_timeout(connect_timeout),
            _validate.LeaseTiming.of(tick_time, clock_drift),
        )


@dataclass(frozen=True, slots=True)
class ConnectionSecurity:
    """How a session on our transport proves who it is: each (re)connect sends ``auth``,
    then logs in with ``sasl``, over ``ssl`` when given."""

    ssl: SSLContext | None = None
    auth: tuple[tuple[str, bytes], ...] = field(default=(), repr=False)
    sasl: SASL | None = field(default=None, repr=False)

    def connection(self, options: ClientOptions) -> Connection:
        """A connection (not started) for a session with ``options``."""
        return Connection(
            options.hosts,
            session_timeout=options.session_timeout,
            tick_time=options.lease_timing.tick_time,
            clock_drift=options.lease_timing.clock_drift,
            ssl=self.ssl,
            auth=self.auth,
            sasl=self.sasl,
        )


NO_SECURITY = ConnectionSecurity()
