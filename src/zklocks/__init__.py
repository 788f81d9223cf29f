"""zklocks: distributed locks on Apache ZooKeeper.

Fair (FIFO) and one-node exclusive locks, read/write locks, semaphores, leader elections
and multi-locks, each with a fencing token and notice of lock loss:

    import zklocks

    with zklocks.Client("127.0.0.1:2181") as client:
        with client.lock("/locks/orders") as lease:
            write_orders(fencing_token=lease.token)

The library logs on ``zklocks.connection`` and ``zklocks.lock`` and prints nothing unless
the application configures logging; ``zklocks.metrics.enable()`` exports Prometheus
metrics (docs/operations.md).
"""

import logging as _logging

from zklocks import tracing as _tracing
from zklocks._asyncio.client import AsyncClient
from zklocks._asyncio.election import AsyncElection, AsyncMultiLock
from zklocks._asyncio.locks import AsyncLock, AsyncReadWriteLock
from zklocks._asyncio.transaction import AsyncTransaction
from zklocks._core.breaking import Holder
from zklocks._core.contenders import Contender
from zklocks._core.events import ConnectionState
from zklocks._core.inspect import LockSummary
from zklocks._core.lease import AsyncLease, Lease, current_lease
from zklocks._core.security import ACL
from zklocks._errors import (
    AccessDenied,
    AlreadyHeld,
    ClientClosed,
    ConnectionFailed,
    InvalidArgument,
    InvalidPath,
    LeaseUnkeepable,
    LockError,
    LockLost,
    LockTimeout,
    NoNode,
    NotHeld,
    TransactionFailed,
)
from zklocks._exclusive import exclusive
from zklocks._protocol.records import CreatedPath, Stat
from zklocks._sync.client import Client
from zklocks._sync.election import Election, MultiLock
from zklocks._sync.locks import Lock, ReadWriteLock
from zklocks._sync.transaction import Transaction
from zklocks._transport.sasl import SASL
from zklocks._vocabulary import WatchedEvent, WatchKind

__version__ = "0.1.0"

_tracing.install()  # OpenTelemetry spans, when opentelemetry-api is installed

# A library is quiet until asked (the logging HOWTO): without this, Python's last-resort
# handler would print our warnings to stderr in programs that never configured logging.
_logging.getLogger("zklocks").addHandler(_logging.NullHandler())

__all__ = [
    "ACL",
    "SASL",
    "AccessDenied",
    "AlreadyHeld",
    "AsyncClient",
    "AsyncElection",
    "AsyncLease",
    "AsyncLock",
    "AsyncMultiLock",
    "AsyncReadWriteLock",
    "AsyncTransaction",
    "Client",
    "ClientClosed",
    "ConnectionFailed",
    "ConnectionState",
    "Contender",
    "CreatedPath",
    "Election",
    "Holder",
    "InvalidArgument",
    "InvalidPath",
    "Lease",
    "LeaseUnkeepable",
    "Lock",
    "LockError",
    "LockLost",
    "LockSummary",
    "LockTimeout",
    "MultiLock",
    "NoNode",
    "NotHeld",
    "ReadWriteLock",
    "Stat",
    "Transaction",
    "TransactionFailed",
    "WatchKind",
    "WatchedEvent",
    "__version__",
    "current_lease",
    "exclusive",
]
