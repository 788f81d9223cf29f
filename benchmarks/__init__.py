"""Benchmarks: zklocks against kazoo, tooz and redis-py on the same servers, in one run.

Run with ``python -m benchmarks.run`` (see ``benchmarks/README.md``).
"""
