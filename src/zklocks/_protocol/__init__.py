"""ZooKeeper's wire protocol with no I/O in it (h11-style): encode requests, decode replies.

The asyncio connection in ``zklocks._connection`` runs it; nothing here touches a socket.
"""
