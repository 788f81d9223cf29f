"""What starting a local ZooKeeper raises; the tree is drawn in ``zklocks.server``."""

from __future__ import annotations

__all__ = [
    "JavaNotFound",
    "PortInUse",
    "ServerError",
    "ServerSetupError",
    "ServerStartError",
    "ServerStartTimeout",
    "ZooKeeperNotFound",
]


class ServerError(RuntimeError):
    """A local ZooKeeper could not be set up or started."""


class ServerSetupError(ServerError):
    """ZooKeeper or Java is missing; the message says how to install it."""


class ZooKeeperNotFound(ServerSetupError):
    """Neither ``$ZOOKEEPER_HOME`` nor the distribution's package has ZooKeeper."""


class JavaNotFound(ServerSetupError):
    """Neither ``$JAVA_HOME`` nor ``PATH`` has a ``java``."""


class ServerStartError(ServerError):
    """The JVM exited before serving, or did not serve in time."""


class PortInUse(ServerStartError):
    """The client port asked for is taken (another server, or anything else)."""


class ServerStartTimeout(ServerStartError, TimeoutError):
    """The server was still not serving when ``startup_timeout`` ran out."""
