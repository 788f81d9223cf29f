"""``acquire()`` is typed by ``blocking``: a ``Lease`` when it blocks, ``Lease | None`` not.

Checked by running mypy on a snippet, since the promise is about what a type checker
sees (``@overload``), not about runtime behaviour (tested on a real server).
"""

from __future__ import annotations

from pathlib import Path

from mypy import api

SNIPPET = """
import zklocks

async def use(client: zklocks.Client, aclient: zklocks.AsyncClient, flag: bool) -> None:
    reveal_type(client.lock("/x").acquire())
    reveal_type(client.lock("/x").acquire(5.0))
    reveal_type(client.lock("/x").acquire(blocking=False))
    reveal_type(client.lock("/x").acquire(blocking=flag))
    reveal_type(await aclient.lock("/x").acquire())
    reveal_type(await aclient.lock("/x").acquire(blocking=False))
"""

EXPECTED = [
    "zklocks._core.lease.Lease",
    "zklocks._core.lease.Lease",
    "zklocks._core.lease.Lease | None",
    "zklocks._core.lease.Lease | None",
    "zklocks._core.lease.AsyncLease",
    "zklocks._core.lease.AsyncLease | None",
]


def test_acquire_returns_a_lease_unless_told_not_to_block(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET)
    out, err, _status = api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(snippet)]
    )
    revealed = [
        line.split('Revealed type is "', 1)[1].rstrip('"')
        for line in out.splitlines()
        if "Revealed type is" in line
    ]
    assert revealed == EXPECTED, out + err
