"""The security options every command that talks to ZooKeeper takes (docs/security.md).

``--auth SCHEME:CREDENTIAL`` (or ``ZKLOCKS_AUTH``, or ``--auth-file FILE`` holding one
such line), ``--acl creator|open`` (commands that create nodes), ``--tls``,
``--tls-ca FILE``, ``--tls-cert FILE``, ``--tls-key FILE`` (or ``ZKLOCKS_TLS*``), and a
SASL login: ``--sasl-user USER`` with ``--sasl-password-file FILE`` or the environment's
``ZKLOCKS_SASL_PASSWORD`` (a password is never taken from the command line, where ``ps``
shows it), ``--sasl-mechanism``, ``--sasl-service`` (or ``ZKLOCKS_SASL_*``); Kerberos is
``--sasl-mechanism GSSAPI`` with the ticket of ``kinit`` or a ``KRB5_CLIENT_KTNAME``
keytab, ``--sasl-principal`` picking one.
A command declares them with ``@security_options()`` and receives one ``security``
argument. A credential is never echoed back: not in errors, not in ``--help``.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from zklocks._cli.options import Text, as_typed
from zklocks._core.errors import InvalidArgument
from zklocks._transport.sasl import SASL

F = TypeVar("F", bound=Callable[..., Any])

AUTH_HELP = (
    "Authenticate as SCHEME:CREDENTIAL, e.g. digest:user:password. A credential on the "
    "command line is visible to other users in `ps`: prefer ZKLOCKS_AUTH or --auth-file."
)


@dataclass(frozen=True)
class Security:
    """What the options asked for, ready to hand to ``Client``."""

    auth: tuple[tuple[str, str], ...] = ()
    acl: str = "open"
    ssl: ssl.SSLContext | None = None
    sasl: SASL | None = None

    def __repr__(self) -> str:  # the credential stays hidden
        schemes = ",".join(scheme for scheme, _ in self.auth) or "none"
        login = "none" if self.sasl is None else self.sasl.mechanism
        return (
            f"Security(auth={schemes}, sasl={login}, acl={self.acl!r}, tls={self.ssl is not None})"
        )

    def client_options(self) -> dict[str, Any]:
        return {
            "auth": list(self.auth) or None,
            "acl": self.acl,
            "ssl": self.ssl,
            "sasl": self.sasl,
        }


SASL_PASSWORD_ENV = "ZKLOCKS_SASL_PASSWORD"


def read_password_file(path: Path) -> str:
    """The password in ``path``: its trailing newline (``echo pw > file``) stripped."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(f"cannot read {as_typed(str(path))}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise click.BadParameter(
            f"{as_typed(str(path))} is not UTF-8 text (its content is not shown here)"
        ) from None
    password = text.removesuffix("\n").removesuffix("\r")
    if not password:
        raise click.BadParameter(f"{as_typed(str(path))} is empty: it must hold the password")
    return password


def sasl_login(
    mechanism: str | None,
    user: str | None,
    password_file: Path | None,
    service: str,
    principal: str | None = None,
) -> SASL | None:
    """The ``--sasl-*`` options as a login, or None when none was asked for."""
    if mechanism == "GSSAPI":
        if user is not None or password_file is not None:
            raise click.UsageError(
                "--sasl-mechanism GSSAPI takes no --sasl-user or password: the ticket comes "
                "from kinit or KRB5_CLIENT_KTNAME (--sasl-principal picks one)"
            )
        try:
            return SASL("GSSAPI", service=service, principal=principal)
        except InvalidArgument as error:
            raise click.UsageError(str(error)) from None
    if principal is not None:
        raise click.UsageError("--sasl-principal is for --sasl-mechanism GSSAPI")
    password_env = os.environ.get(SASL_PASSWORD_ENV)
    if user is None:
        if mechanism or password_file:
            raise click.UsageError("--sasl-mechanism and --sasl-password-file need --sasl-user")
        return None
    if password_file is not None:
        password = read_password_file(password_file)
    elif password_env:
        password = password_env
    else:
        raise click.UsageError(
            f"--sasl-user needs a password: --sasl-password-file FILE or {SASL_PASSWORD_ENV} "
            "(never on the command line, where ps shows it)"
        )
    try:
        return SASL(mechanism or "DIGEST-MD5", username=user, password=password, service=service)
    except InvalidArgument as error:
        raise click.UsageError(str(error)) from None


def parse_auth(text: str, source: str) -> tuple[str, str]:
    """``digest:user:password`` -> ``("digest", "user:password")``; errors never show it."""
    scheme, colon, credential = text.strip().partition(":")
    if not colon or not scheme or not credential or not scheme.isidentifier():
        raise click.BadParameter(
            f"{source} must look like SCHEME:CREDENTIAL, e.g. digest:user:password "
            "(the value is not shown here)"
        )
    if scheme == "digest" and ":" not in credential:
        raise click.BadParameter(
            f"{source}: a digest credential is user:password (no ':' after the user)"
        )
    return scheme, credential


def read_auth_file(path: Path) -> tuple[str, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(f"cannot read {as_typed(str(path))}: {error.strerror}") from None
    except UnicodeDecodeError:  # the message would quote the credential's bytes: not shown
        raise click.BadParameter(
            f"{as_typed(str(path))} is not UTF-8 text (its content is not shown here)"
        ) from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        shown = as_typed(str(path))
        raise click.BadParameter(f"{shown} must hold exactly one SCHEME:CREDENTIAL line")
    return parse_auth(lines[0], f"the line in {as_typed(str(path))}")


def tls_context(
    tls: bool, ca: Path | None, cert: Path | None, key: Path | None
) -> ssl.SSLContext | None:
    """``--tls`` (system CAs), ``--tls-ca`` (that CA), ``--tls-cert``/``--tls-key``
    (mutual TLS); any of the files implies ``--tls``."""
    if not (tls or ca or cert or key):
        return None
    if key is not None and cert is None:
        raise click.BadParameter("--tls-key needs --tls-cert")
    try:
        context = ssl.create_default_context(cafile=None if ca is None else str(ca))
    except (ssl.SSLError, OSError) as error:
        raise click.BadParameter(f"cannot load the CA file {ca}: {error}") from None
    if cert is not None:
        try:
            context.load_cert_chain(str(cert), None if key is None else str(key))
        except (ssl.SSLError, OSError) as error:
            raise click.BadParameter(
                f"cannot load the client certificate {cert}"
                + (f" and key {key}" if key else "")
                + f": {getattr(error, 'reason', None) or error}"
            ) from None
    return context


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def security_options(*, acl: bool = False) -> Callable[[F], F]:
    """Add the options, and pass the command one ``security: Security`` instead.

    ``acl``: the command creates lock nodes, so ``--acl`` applies to it.
    """

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            auth_value = kwargs.pop("auth")
            auth_file = kwargs.pop("auth_file")
            acl_value = kwargs.pop("acl", "open")
            context = tls_context(
                kwargs.pop("tls"), kwargs.pop("tls_ca"), kwargs.pop("tls_cert"),
                kwargs.pop("tls_key"),
            )  # fmt: skip
            if auth_value and auth_file:
                raise click.UsageError("give either --auth (ZKLOCKS_AUTH) or --auth-file")
            auth: tuple[tuple[str, str], ...] = ()
            if auth_file is not None:
                auth = (read_auth_file(auth_file),)
            elif auth_value:
                auth = (parse_auth(auth_value, "--auth (or ZKLOCKS_AUTH)"),)
            login = sasl_login(
                kwargs.pop("sasl_mechanism"), kwargs.pop("sasl_user"),
                kwargs.pop("sasl_password_file"), kwargs.pop("sasl_service"),
                kwargs.pop("sasl_principal"),
            )  # fmt: skip
            if acl_value == "creator" and not auth and login is None:
                raise click.UsageError(
                    "--acl creator needs credentials: --sasl-user, --auth-file FILE, "
                    "ZKLOCKS_AUTH or --auth"
                )
            security = Security(auth=auth, acl=acl_value, ssl=context, sasl=login)
            return command(*args, security=security, **kwargs)

        options = [
            click.option("--auth", envvar="ZKLOCKS_AUTH", show_envvar=True,
                         type=Text(secret=True), metavar="SCHEME:CREDENTIAL", help=AUTH_HELP),
            click.option("--auth-file", envvar="ZKLOCKS_AUTH_FILE", show_envvar=True,
                         type=_FILE, help="Read SCHEME:CREDENTIAL from this file (one line)."),
            click.option("--sasl-user", envvar="ZKLOCKS_SASL_USER", show_envvar=True,
                         type=Text(), metavar="USER",
                         help="Log in with SASL as USER (the password: --sasl-password-file "
                         f"or {SASL_PASSWORD_ENV})."),
            click.option("--sasl-password-file", envvar="ZKLOCKS_SASL_PASSWORD_FILE",
                         show_envvar=True, type=_FILE,
                         help="Read the SASL password from this file (a trailing newline "
                         "is ignored)."),
            click.option("--sasl-mechanism", envvar="ZKLOCKS_SASL_MECHANISM",
                         show_envvar=True, type=click.Choice(["DIGEST-MD5", "GSSAPI"]),
                         help="The SASL mechanism: DIGEST-MD5 (the default with "
                         "--sasl-user) or GSSAPI (Kerberos)."),
            click.option("--sasl-principal", envvar="ZKLOCKS_SASL_PRINCIPAL",
                         show_envvar=True, type=Text(), metavar="PRINCIPAL",
                         help="GSSAPI: log in as this principal (default: the credential "
                         "cache's, else the KRB5_CLIENT_KTNAME keytab's)."),
            click.option("--sasl-service", envvar="ZKLOCKS_SASL_SERVICE", show_envvar=True,
                         type=Text(), default="zookeeper", show_default=True,
                         help="The server's SASL service name."),
            click.option("--tls", is_flag=True, envvar="ZKLOCKS_TLS", show_envvar=True,
                         help="Connect over TLS, trusting the system's CAs."),
            click.option("--tls-ca", envvar="ZKLOCKS_TLS_CA", show_envvar=True, type=_FILE,
                         help="Trust this CA (PEM) for the server's certificate; implies --tls."),
            click.option("--tls-cert", envvar="ZKLOCKS_TLS_CERT", show_envvar=True, type=_FILE,
                         help="Client certificate (PEM) for mutual TLS; implies --tls."),
            click.option("--tls-key", envvar="ZKLOCKS_TLS_KEY", show_envvar=True, type=_FILE,
                         help="The client certificate's key (PEM), if not in --tls-cert."),
        ]  # fmt: skip
        if acl:
            options.insert(2, click.option(
                "--acl", type=click.Choice(["open", "creator"]), default="open",
                envvar="ZKLOCKS_ACL", show_envvar=True, show_default=True,
                help="Who may touch the lock's nodes: anyone (open), or only clients with "
                "the same credentials (creator; needs --auth).",
            ))  # fmt: skip
        decorated: Any = wrapper
        for option in reversed(options):
            decorated = option(decorated)
        return decorated  # type: ignore[no-any-return]

    return decorate
