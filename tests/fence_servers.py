"""The throwaway PostgreSQL and Redis servers of the fencing tests: they live in
``nemesis/fence_servers.py``, which the nemesis's guarded-set workload starts too."""

from nemesis.fence_servers import PostgresServer, RedisServer, free_port, postgres_bin

__all__ = ["PostgresServer", "RedisServer", "free_port", "postgres_bin"]
