"""Every command's text options say what their text is (docs: ``zklocks._cli.options``).

Text that zklocks encodes (paths, identifiers, hosts, credentials) must be UTF-8, and a
value that is not is a usage error; text that goes to the operating system as it is (a
command, ``-c``, file names) may hold any bytes. A parameter with click's plain string
type would be neither, and let bytes that are not UTF-8 through to a traceback.
"""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from zklocks._cli.options import Identifier, Seconds, Text, as_typed
from zklocks.cli import main

#: Types whose values are checked, or are not free text: anything else is a gap.
DECLARED = (
    Text,
    Seconds,
    click.Path,
    click.Choice,
    click.types.IntParamType,
    click.types.FloatParamType,
    click.types.BoolParamType,
)


def _commands() -> list[click.Command]:
    context = click.Context(main)
    commands: list[click.Command] = [main]
    for name in main.list_commands(context):
        command = main.get_command(context, name)
        assert command is not None, name
        commands.append(command)
    return commands


@pytest.mark.parametrize("command", _commands(), ids=lambda command: command.name)
def test_every_parameter_declares_what_its_text_is(command: click.Command) -> None:
    for param in command.params:
        if param.type is click.UNPROCESSED or isinstance(param.type, DECLARED):
            continue
        if isinstance(param, click.Option) and (param.is_flag or param.count):
            continue
        if param.name in ("help", "version"):
            continue
        raise AssertionError(f"zklocks {command.name}: {param.name} takes {param.type!r}")


def test_bytes_that_are_not_utf8_are_shown_as_typed() -> None:
    value = b"/locks/caf\xe9\x1b".decode("utf-8", "surrogateescape")
    assert as_typed(value) == "/locks/caf\\xe9\\x1b"
    assert as_typed("café") == "café"


@pytest.mark.parametrize(
    ("kind", "value", "error"),
    [
        (Text(), "caf\udce9", "'caf\\xe9' is not UTF-8 text"),
        (Text(secret=True), "me:caf\udce9", "the value (not shown here) is not UTF-8 text"),
        (Identifier(), "caf\udce9", "'caf\\xe9' is not UTF-8 text"),
        (Identifier(), "a\x01b", "identifier must be printable text"),
        (Identifier(), "x" * 1025, "at most 1024 characters"),
    ],
)
def test_text_that_zklocks_cannot_use_is_refused(kind: Text, value: str, error: str) -> None:
    with pytest.raises(click.BadParameter) as refused:
        kind.convert(value, None, None)
    assert error in refused.value.format_message()


def test_text_that_zklocks_can_use_is_kept() -> None:
    assert Text().convert("/locks/café", None, None) == "/locks/café"
    assert Identifier().convert("nœud 1", None, None) == "nœud 1"
    assert Identifier().convert("", None, None) == ""  # the default, as before


def test_a_refused_identifier_is_a_usage_error_before_connecting() -> None:
    result = CliRunner().invoke(
        main, ["run", "/x", "--hosts", "127.0.0.1:1", "--identifier", "caf\udce9", "--", "true"]
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--identifier': 'caf\\xe9' is not UTF-8 text" in result.output
