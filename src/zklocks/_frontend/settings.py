"""The security settings and the ``ZKLOCKS_*`` environment, read in plain Python.

The command line's ``@security_options()`` and ``zklocks.exclusive`` read credentials,
TLS and SASL by these rules, with these messages, so that both say the same thing of one
value. Nothing here knows click: a value that cannot be used raises ``BadValue`` (the
command line's "Invalid value"), options that do not go together raise
``InvalidArgument`` (its usage error). ``from_environment`` reads the variables the
command line's options read, as click reads them (an empty variable is unset), for a
program that has no command line (``zklocks.exclusive``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zklocks._core.shown import as_typed, undecodable
from zklocks._core.validate import hosts as hosts_string
from zklocks._errors import InvalidArgument
from zklocks._frontend.options import DEFAULT_HOSTS
from zklocks._transport.sasl import SASL

Auth = tuple[tuple[str, str], ...]


class BadValue(InvalidArgument):
    """One value cannot be used (a malformed credential, an unreadable file)."""


SASL_PASSWORD_ENV = "ZKLOCKS_SASL_PASSWORD"


def read_password_file(path: Path) -> str:
    """The password in ``path``: its trailing newline (``echo pw > file``) stripped."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadValue(f"cannot read {as_typed(str(path))}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise BadValue(
            f"{as_typed(str(path))} is not UTF-8 text (its content is not shown here)"
        ) from None
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise BadValue(f"{as_typed(str(path))} is empty: it must hold the password")
    return password


def sasl_login(
    mechanism: str | None,
    user: str | None,
    password_file: Path | None,
    service: str,
    principal: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> SASL | None:
    """The ``--sasl-*`` options as a login, or None when none was asked for."""
    if mechanism == "GSSAPI":
        if user is not None or password_file is not None:
            raise InvalidArgument(
                "--sasl-mechanism GSSAPI takes no --sasl-user or password: the ticket comes "
                "from kinit or KRB5_CLIENT_KTNAME (--sasl-principal picks one)"
            )
        return SASL("GSSAPI", service=service, principal=principal)
    if principal is not None:
        raise InvalidArgument("--sasl-principal is for --sasl-mechanism GSSAPI")
    password_env = environ.get(SASL_PASSWORD_ENV)
    if user is None:
        if mechanism or password_file:
            raise InvalidArgument("--sasl-mechanism and --sasl-password-file need --sasl-user")
        return None
    if password_file is not None:
        password = read_password_file(password_file)
    elif password_env:
        password = password_env
    else:
        raise InvalidArgument(
            f"--sasl-user needs a password: --sasl-password-file FILE or {SASL_PASSWORD_ENV} "
            "(never on the command line, where ps shows it)"
        )
    return SASL(mechanism or "DIGEST-MD5", username=user, password=password, service=service)


def parse_auth(text: str, source: str) -> tuple[str, str]:
    """``digest:user:password`` -> ``("digest", "user:password")``; errors never show it."""
    scheme, colon, credential = text.strip().partition(":")
    if not colon or not scheme or not credential or not scheme.isidentifier():
        raise BadValue(
            f"{source} must look like SCHEME:CREDENTIAL, e.g. digest:user:password "
            "(the value is not shown here)"
        )
    if scheme == "digest" and ":" not in credential:
        raise BadValue(f"{source}: a digest credential is user:password (no ':' after the user)")
    return scheme, credential


def read_auth_file(path: Path) -> tuple[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise BadValue(f"cannot read {as_typed(str(path))}: {error.strerror}") from None
    except UnicodeDecodeError:  # the message would quote the credential's bytes: not shown
        raise BadValue(
            f"{as_typed(str(path))} is not UTF-8 text (its content is not shown here)"
        ) from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        shown = as_typed(str(path))
        raise BadValue(f"{shown} must hold exactly one SCHEME:CREDENTIAL line")
    return parse_auth(lines[0], f"the line in {as_typed(str(path))}")


def tls_context(
    tls: bool, ca: Path | None, cert: Path | None, key: Path | None
) -> ssl.SSLContext | None:
    """``--tls`` (system CAs), ``--tls-ca`` (that CA), ``--tls-cert``/``--tls-key``
    (mutual TLS); any of the files implies ``--tls``."""
    if not (tls or ca or cert or key):
        return None
    if key is not None and cert is None:
        raise BadValue("--tls-key needs --tls-cert")
    try:
        context = ssl.create_default_context(cafile=None if ca is None else str(ca))
    except (ssl.SSLError, OSError) as error:
        raise BadValue(f"cannot load the CA file {ca}: {error}") from None
    if cert is not None:
        try:
            context.load_cert_chain(str(cert), None if key is None else str(key))
        except (ssl.SSLError, OSError) as error:
            raise BadValue(
                f"cannot load the client certificate {cert}"
                + (f" and key {key}" if key else "")
                + f": {getattr(error, 'reason', None) or error}"
            ) from None
    return context


def security(
    auth_value: str | None,
    auth_file: Path | None,
    acl: str,
    tls: bool,
    tls_ca: Path | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    sasl: tuple[str | None, str | None, Path | None, str, str | None],
    environ: Mapping[str, str] = os.environ,
) -> tuple[Auth, ssl.SSLContext | None, SASL | None]:
    """The credentials, TLS context and SASL login the options ask for, checked in the
    command line's order. ``sasl``: mechanism, user, password file, service, principal."""
    context = tls_context(tls, tls_ca, tls_cert, tls_key)
    if auth_value and auth_file:
        raise InvalidArgument("give either --auth (ZKLOCKS_AUTH) or --auth-file")
    auth: Auth = ()
    if auth_file is not None:
        auth = (read_auth_file(auth_file),)
    elif auth_value:
        auth = (parse_auth(auth_value, "--auth (or ZKLOCKS_AUTH)"),)
    login = sasl_login(*sasl, environ=environ)
    if acl == "creator" and not auth and login is None:
        raise InvalidArgument(
            "--acl creator needs credentials: --sasl-user, --auth-file FILE, ZKLOCKS_AUTH or --auth"
        )
    return auth, context, login


def from_environment(
    hosts: str | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, dict[str, Any]]:
    """The connect string (``hosts``, else ``ZKLOCKS_HOSTS``, else the default) and the
    client's security options from the ``ZKLOCKS_*`` variables; ``InvalidArgument``
    naming the variable (never showing a credential) for a value that cannot be used."""

    def text(name: str, *, secret: bool = False) -> str | None:
        value = environ.get(name) or None  # as click reads it: empty is unset
        if value is not None and undecodable(value):
            shown = "the value (not shown here)" if secret else f"'{as_typed(value)}'"
            raise BadValue(f"{name}: {shown} is not UTF-8 text")
        return value

    def file(name: str) -> Path | None:
        value = environ.get(name) or None
        if value is None:
            return None
        path = Path(value)
        if not path.exists():
            raise BadValue(f"{name}: file {as_typed(value)!r} does not exist")
        if path.is_dir():
            raise BadValue(f"{name}: {as_typed(value)!r} is a directory")
        return path

    def choice(name: str, choices: tuple[str, ...], default: str | None) -> str | None:
        value = text(name)
        if value is not None and value not in choices:
            raise BadValue(f"{name}: {as_typed(value)!r} is not one of {', '.join(choices)}")
        return default if value is None else value

    if hosts is None:  # given hosts win: ZKLOCKS_HOSTS is then not even read
        hosts = hosts_string(text("ZKLOCKS_HOSTS") or DEFAULT_HOSTS).strip(" \t\r\n")
    tls_word = (text("ZKLOCKS_TLS") or "false").strip().lower()
    if tls_word not in _TRUE + _FALSE:
        raise BadValue(f"ZKLOCKS_TLS: {as_typed(tls_word)!r} is not a valid boolean")
    acl = choice("ZKLOCKS_ACL", ("open", "creator"), "open")
    assert acl is not None
    auth, context, login = security(
        text("ZKLOCKS_AUTH", secret=True),
        file("ZKLOCKS_AUTH_FILE"),
        acl,
        tls_word in _TRUE,
        file("ZKLOCKS_TLS_CA"),
        file("ZKLOCKS_TLS_CERT"),
        file("ZKLOCKS_TLS_KEY"),
        (
            choice("ZKLOCKS_SASL_MECHANISM", ("DIGEST-MD5", "GSSAPI"), None),
            text("ZKLOCKS_SASL_USER"),
            file("ZKLOCKS_SASL_PASSWORD_FILE"),
            text("ZKLOCKS_SASL_SERVICE") or "zookeeper",
            text("ZKLOCKS_SASL_PRINCIPAL"),
        ),
        environ,
    )
    return hosts, {"auth": list(auth) or None, "acl": acl, "ssl": context, "sasl": login}


_TRUE = ("1", "true", "t", "yes", "y", "on")
_FALSE = ("0", "false", "f", "no", "n", "off")
