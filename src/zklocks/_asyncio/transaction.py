"""``AsyncTransaction``: ``AsyncClient``'s ZooKeeper multi, optionally guarded by a lease."""

from __future__ import annotations

from collections.abc import Callable

from zklocks._asyncio import driver
from zklocks._asyncio.carrier import AsyncCarrier
from zklocks._core.security import AclPolicy
from zklocks._core.transaction import TransactionResult
from zklocks._frontend.transaction import TransactionBuilder


class AsyncTransaction(TransactionBuilder):
    """The asyncio twin of ``Transaction``: the same ops, and ``await txn.commit()``.

    Made by ``AsyncClient.transaction(guard=lease)``; see ``Transaction`` and
    docs/fencing.md.
    """

    def __init__(
        self, session: Callable[[], AsyncCarrier], guard: object, acl: AclPolicy | None
    ) -> None:
        super().__init__(guard, acl)
        self._session = session

    async def commit(self) -> list[TransactionResult]:
        """Apply every op, or none; one result per op (see ``Transaction.commit``).

        A cancel while the multi is in flight leaves it to the server: it is applied or
        not as a whole, and the caller does not learn which.
        """
        session = self._session()  # ClientClosed before the transaction is spent
        results: list[TransactionResult] = await driver.run(self._commit_flow(), session)
        return results
