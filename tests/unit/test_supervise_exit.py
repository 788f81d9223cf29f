"""``zklocks run``'s supervisor on a real command and a real lease whose clock the test
moves: a lease lost only after the command exited keeps the command's status (its work
was done under the lock) and is said; a lease still held says nothing."""

from __future__ import annotations

import re

import pytest

from helpers import ManualClock, lease_on
from zklocks._cli.supervise import Supervisor


def _supervisor(script: str) -> Supervisor:
    return Supervisor(
        ("sh", "-c", script),
        path="/locks/nightly",
        held="the lock on /locks/nightly",
        kill_after=5.0,
        term_on_revoke=False,
        stops=(),  # no signal handler installed in the test's process
    )


def test_a_loss_after_the_command_exited_keeps_its_status_and_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = ManualClock()
    lease = lease_on(clock)
    supervisor = _supervisor("exit 3")
    assert supervisor.run(lease) == 3  # exited with the lease held
    clock.now = 200.0  # then the session's time runs out: lost, after the exit
    assert lease.lost
    assert supervisor.lost_afterwards(lease)
    err = capsys.readouterr().err
    assert "lost the lock on /locks/nightly after the command exited" in err
    assert "exiting with its status, 3" in err
    assert "SIGTERM" not in err


def test_a_lease_still_held_after_the_exit_says_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lease = lease_on(ManualClock())
    supervisor = _supervisor("exit 4")
    assert supervisor.run(lease) == 4
    assert not supervisor.lost_afterwards(lease)
    assert capsys.readouterr().err == ""


def test_a_lease_lost_before_the_exit_was_seen_is_76_with_the_status(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = ManualClock()
    clock.now = 200.0  # lost before the command even starts: it runs unprotected
    lease = lease_on(clock)
    assert _supervisor("exit 5").run(lease) == 76
    err = capsys.readouterr().err
    assert "lost the lock on /locks/nightly while the command ran" in err
    # said with its status: 5, or 143 had the SIGTERM reached it before it exited
    assert re.search(r"status (5|143)\b", err), err
