"""SASL logins on a local ZooKeeper: the JAAS file the server reads, and its zoo.cfg lines.

Passwords go only into the JAAS file, created readable by its owner alone; nothing here
prints them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["JAAS_FILE", "ServerKerberos", "sasl_config", "write_jaas"]

#: The JAAS file's name beside the data (the JVM's ``java.security.auth.login.config``).
JAAS_FILE = "jaas.conf"
_SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"


@dataclass(frozen=True)
class ServerKerberos:
    """SASL GSSAPI (Kerberos) logins: the server's ``principal`` (``zookeeper/HOST@REALM``;
    clients ask for ``zookeeper@HOST``), its key in ``keytab``, and the ``krb5_conf`` that
    names the realm's KDC (the JVM's ``java.security.krb5.conf``)."""

    keytab: Path
    principal: str
    krb5_conf: Path


def sasl_config(sasl: bool, enforce: bool) -> list[str]:
    """zoo.cfg lines for SASL logins (and for refusing sessions without one)."""
    if not sasl:
        return []
    lines = [f"authProvider.sasl={_SASL_PROVIDER}"]
    if enforce:
        lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
    return lines


def write_jaas(
    path: Path, users: Mapping[str, str], kerberos: ServerKerberos | None = None
) -> None:
    """The JAAS ``Server`` section ZooKeeper's SASL server reads: one
    ``user_<name>="<password>"`` per DIGEST-MD5 user, and the Kerberos login of the server
    itself when ``kerberos`` is given; created readable by its owner only."""
    for user in users:
        if not user or not all(ch.isalnum() or ch in "_-." for ch in user):
            raise ValueError(f"a SASL user name is letters, digits, '_', '-', '.': {user!r}")

    def quoted(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    modules = []
    if users:
        entries = "".join(f"\n    user_{user}={quoted(word)}" for user, word in users.items())
        modules.append(f"    org.apache.zookeeper.server.auth.DigestLoginModule required{entries};")
    if kerberos is not None:
        modules.append(
            "    com.sun.security.auth.module.Krb5LoginModule required\n"
            f"    useKeyTab=true\n    keyTab={quoted(str(kerberos.keytab))}\n"
            "    storeKey=true\n    useTicketCache=false\n"
            f"    principal={quoted(kerberos.principal)};"
        )
    text = "Server {\n" + "\n".join(modules) + "\n};\n"
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
