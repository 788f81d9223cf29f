"""Harnesses that run other ZooKeeper lock clients (the peers zklocks is measured against
and must interoperate with) from Python: shared by ``benchmarks`` and the tests."""
