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
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from zklocks import SASL, InvalidArgument
from zklocks._cli.options import Text
from zklocks._frontend import settings
from zklocks._frontend.settings import SASL_PASSWORD_ENV

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


_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


def security_options(*, acl: bool = False) -> Callable[[F], F]:
    """Add the options, and pass the command one ``security: Security`` instead.

    ``acl``: the command creates lock nodes, so ``--acl`` applies to it.
    """

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            acl_value = kwargs.pop("acl", "open")
            try:
                auth, context, login = settings.security(
                    kwargs.pop("auth"), kwargs.pop("auth_file"), acl_value, kwargs.pop("tls"),
                    kwargs.pop("tls_ca"), kwargs.pop("tls_cert"), kwargs.pop("tls_key"),
                    (kwargs.pop("sasl_mechanism"), kwargs.pop("sasl_user"),
                     kwargs.pop("sasl_password_file"), kwargs.pop("sasl_service"),
                     kwargs.pop("sasl_principal")),
                )  # fmt: skip
            except settings.BadValue as error:
                raise click.BadParameter(str(error)) from None
            except InvalidArgument as error:
                raise click.UsageError(str(error)) from None
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
