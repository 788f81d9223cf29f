"""Client CPU of the codec for the lock flows' requests: ``codec.plan`` + the reply decode.

No server, no socket: for each request a lock cycle sends, the time to build its plan
(op code and body) and to decode a typical reply body: this thread's CPU time (not the
wall clock, so other processes on a busy machine count less), the median of repeats.
Run it before and after a change to the protocol records or the codec::

    .venv/bin/python -m benchmarks.codec_micro
"""

from __future__ import annotations

import statistics
import sys
import time
import timeit
from collections.abc import Callable

from zklocks._protocol import codec
from zklocks._protocol.jute import STAT, write_buffer, write_string, write_string_vector
from zklocks._protocol.records import Create, Delete, Exists, GetChildren, GetData

_LOCK = "/locks/orders"
_NODE = _LOCK + "/lock-3f2a9c1e8b7d4e6fa0b1c2d3e4f5a6b7-0000000042"
_STAT = STAT.pack(42, 42, 1_700_000_000_000, 1_700_000_000_000, 0, 0, 0, 0x10000AB, 7, 0, 42)
_NAMES = [f"lock-{i:032x}-{i:010d}" for i in range(8)]

# (name, request, watch, reply body)
CASES: list[tuple[str, object, bool, bytes]] = [
    (
        "create ephemeral sequential",
        Create(_LOCK + "/lock-3f2a9c1e8b7d4e6fa0b1c2d3e4f5a6b7-", b"host:pid", sequential=True),
        False,
        write_string(_NODE) + _STAT,
    ),
    ("getChildren (8 names)", GetChildren(_LOCK), False, write_string_vector(_NAMES)),
    ("getData + watch", GetData(_NODE), True, write_buffer(b"host:pid") + _STAT),
    ("exists", Exists(_NODE), False, _STAT),
    ("delete", Delete(_NODE), False, b""),
]


def _one(request: object, watch: bool, reply: bytes) -> Callable[[], object]:
    plan = codec.plan

    def run() -> object:
        p = plan(request, "", watch)
        return p.decode(reply, 0, "")

    return run


def main(number: int = 20_000, repeat: int = 15) -> None:
    total = 0.0
    for name, request, watch, reply in CASES:
        times = timeit.repeat(
            _one(request, watch, reply), timer=time.thread_time, number=number, repeat=repeat
        )
        median_ns = statistics.median(times) / number * 1e9
        total += median_ns
        print(f"{name:32s} {median_ns:8.0f} ns")
    print(f"{'sum (one of each)':32s} {total:8.0f} ns")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
