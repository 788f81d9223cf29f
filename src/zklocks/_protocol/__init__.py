"""ZooKeeper's wire protocol with no I/O in it (h11-style): encode requests, decode replies.

The asyncio connection in ``zklocks._transport.connection`` runs it; nothing here touches a socket
or reads a clock.

* ``jute``       the record encoding's primitives (ints, longs, strings, buffers, vectors)
* ``constants``  op codes, reserved xids, create modes, event types, watch kinds
* ``records``    every request and reply record (the lock flows' included), ACLs, stats
* ``codec``      each request's body and each reply's decoder
* ``paths``      connect strings, path checks, the chroot
* ``watches``    the client's watch table: routing events, restoring with setWatches
* ``session``    the session state machine: handshake, pipelined xids, events
* ``errors``     every ZooKeeper error code as a typed exception
"""
