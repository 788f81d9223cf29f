"""The ``ZKLOCKS_*`` environment read in plain Python (``zklocks._frontend.settings``)
agrees with the command line's options, and ``zklocks.exclusive`` loads no click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from zklocks._cli.common import hosts_option
from zklocks._cli.security import Security, security_options
from zklocks._errors import InvalidArgument
from zklocks._frontend.settings import from_environment


def by_click(environ: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    """What the command line's own options make of ``environ`` (None: refused)."""

    def read(security: Security, hosts: str = "") -> tuple[str, Security]:
        return hosts, security

    command = click.command()(hosts_option()(security_options(acl=True)(read)))
    try:
        hosts, security = _main(command, environ)
    except click.ClickException:
        return None
    return hosts, security.client_options()


def _main(command: click.Command, environ: dict[str, str]) -> Any:
    saved, env = dict(os.environ), os.environ
    try:
        for name in [n for n in env if n.startswith("ZKLOCKS_")]:
            del env[name]
        env.update(environ)
        return command.main(args=[], prog_name="t", standalone_mode=False)
    finally:
        env.clear()
        env.update(saved)


def by_plain(environ: dict[str, str]) -> tuple[str, dict[str, Any]] | None:
    try:
        return from_environment(None, environ)
    except InvalidArgument:
        return None


@pytest.fixture
def auth_file(tmp_path: Path) -> str:
    path = tmp_path / "auth"
    path.write_text("digest:user:pw\n")
    return str(path)


CASES = [
    {},
    {"ZKLOCKS_HOSTS": "zk1:2181,zk2:2181/app"},
    {"ZKLOCKS_HOSTS": "h:notaport"},
    {"ZKLOCKS_HOSTS": ""},
    {"ZKLOCKS_AUTH": "digest:user:pw"},
    {"ZKLOCKS_AUTH": "not-a-credential"},
    {"ZKLOCKS_AUTH": "digest:userpw"},
    {"ZKLOCKS_AUTH": "digest:user:pw", "ZKLOCKS_ACL": "creator"},
    {"ZKLOCKS_ACL": "creator"},
    {"ZKLOCKS_ACL": "everyone"},
    {"ZKLOCKS_AUTH_FILE": "/no/such/file"},
    {"ZKLOCKS_AUTH_FILE": "/"},
    {"ZKLOCKS_AUTH_FILE": "AUTH_FILE"},
    {"ZKLOCKS_AUTH_FILE": "AUTH_FILE", "ZKLOCKS_AUTH": "digest:a:b"},
    {"ZKLOCKS_TLS": "1"},
    {"ZKLOCKS_TLS": "no"},
    {"ZKLOCKS_TLS": "maybe"},
    {"ZKLOCKS_TLS_KEY": "AUTH_FILE"},
    {"ZKLOCKS_SASL_USER": "alice"},
    {"ZKLOCKS_SASL_USER": "alice", "ZKLOCKS_SASL_PASSWORD": "pw"},
    {"ZKLOCKS_SASL_MECHANISM": "PLAIN"},
    {"ZKLOCKS_SASL_PRINCIPAL": "alice@EXAMPLE"},
    {"ZKLOCKS_SASL_MECHANISM": "GSSAPI", "ZKLOCKS_SASL_USER": "alice"},
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_the_plain_reading_agrees_with_the_command_lines_options(
    case: dict[str, str], auth_file: str
) -> None:
    environ = {name: auth_file if value == "AUTH_FILE" else value for name, value in case.items()}
    clicked, plain = by_click(environ), by_plain(environ)
    assert (clicked is None) == (plain is None), (clicked, plain)
    if clicked is not None and plain is not None:
        assert plain[0] == clicked[0]
        assert {k: v for k, v in plain[1].items() if k not in ("sasl", "ssl")} == {
            k: v for k, v in clicked[1].items() if k not in ("sasl", "ssl")
        }
        assert repr(plain[1]["sasl"]) == repr(clicked[1]["sasl"])
        assert (plain[1]["ssl"] is None) == (clicked[1]["ssl"] is None)


def test_a_refused_value_is_named_and_a_credential_never_shown() -> None:
    with pytest.raises(InvalidArgument, match="SCHEME:CREDENTIAL") as refused:
        from_environment(None, {"ZKLOCKS_AUTH": "digest-secret-value"})
    assert "secret" not in str(refused.value)


def test_exclusive_reads_its_settings_without_loading_click() -> None:
    probe = (
        "import sys, zklocks._exclusive as e\n"
        "print(e._settings(None)[0])\n"
        "print('click' in sys.modules, any(m.startswith('zklocks._cli') for m in sys.modules))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "ZKLOCKS_HOSTS": "zk1:2181"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.splitlines() == ["zk1:2181", "False False"]
