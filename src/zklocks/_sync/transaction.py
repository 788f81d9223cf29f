"""``Transaction``: the sync client's ZooKeeper multi, optionally guarded by a lease."""

from __future__ import annotations

from collections.abc import Callable

from zklocks._core.security import AclPolicy
from zklocks._core.transaction import TransactionResult
from zklocks._frontend.transaction import TransactionBuilder
from zklocks._sync import driver
from zklocks._sync.carrier import SyncCarrier


class Transaction(TransactionBuilder):
    """ZooKeeper ops applied all or none; made by ``Client.transaction(guard=lease)``.

    Add ops with ``create``, ``set_data``, ``delete`` and ``check``, then ``commit()``.
    With a guard, the commit is one multi whose first op checks that the lease's node
    still exists, so the ops are applied only while the lease holds, in ZooKeeper's own
    order: a holder paused past its session is refused (``LockLost``) even if it never
    looked at its lease. See docs/fencing.md.
    """

    def __init__(
        self, session: Callable[[], SyncCarrier], guard: object, acl: AclPolicy | None
    ) -> None:
        super().__init__(guard, acl)
        self._session = session

    def commit(self) -> list[TransactionResult]:
        """Apply every op, or none; one result per op, in the order they were added.

        Results: the created path for ``create``, the node's new ``Stat`` for
        ``set_data`` (its ``version``), ``None`` for ``delete`` and ``check``.
        Raises ``LockLost`` if the guard's lease was released or lost (nothing is sent)
        or its node is gone when the multi is applied; ``TransactionFailed`` (``.index``,
        ``.reason``) if an op was refused; ``InvalidArgument`` on a second commit;
        ``ClientClosed`` if the client is not running; ``LockError`` if the connection
        dropped with the multi in flight (it may or may not have been applied). In every
        refusal nothing was applied. While disconnected it waits for a connection as
        long as the session lives.
        """
        driver.warn_if_in_event_loop(stacklevel=3)
        session = self._session()  # ClientClosed before the transaction is spent
        results: list[TransactionResult] = driver.run(self._commit_flow(), session)
        return results
