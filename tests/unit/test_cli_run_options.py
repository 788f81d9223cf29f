"""The options ``zklocks run`` and ``zklocks elect`` share are one declaration each: the
two commands take them alike (docs: ``zklocks._cli.run_options``)."""

from __future__ import annotations

import click
import pytest

from zklocks._cli.elect import elect
from zklocks._cli.run import run
from zklocks._cli.run_options import command_line

SHARED = (
    "shell_command",
    "timeout",
    "non_blocking",
    "identifier",
    "kill_after",
    "session_timeout",
    "verbosity",
)


def test_command_to_run_is_the_command_or_sh_c() -> None:
    assert command_line(("make", "report"), None) == ("make", "report")
    assert command_line((), "echo $ZKLOCKS_TOKEN") == ("sh", "-c", "echo $ZKLOCKS_TOKEN")
    assert command_line((), None) == ()


def test_command_to_run_refuses_both() -> None:
    with pytest.raises(click.UsageError, match="not both"):
        command_line(("true",), "true")


@pytest.mark.parametrize("name", SHARED)
def test_run_and_elect_declare_the_shared_options_alike(name: str) -> None:
    def declared(command: click.Command) -> tuple[object, ...]:
        (option,) = [p for p in command.params if p.name == name]
        assert isinstance(option, click.Option)
        return (option.opts, repr(option.type), option.default, option.metavar, option.count)

    assert declared(run) == declared(elect)
