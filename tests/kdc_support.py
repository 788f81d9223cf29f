"""A throwaway MIT Kerberos KDC (Debian's ``krb5-kdc``) for the GSSAPI tests.

Everything lives in one directory: ``krb5.conf`` (what clients and the JVM read, through
``KRB5_CONFIG`` and ``-Djava.security.krb5.conf``), ``kdc.conf``, the database and the
keytabs made with ``kadmin.local``. The KDC listens on a free loopback port (UDP and
TCP); ``stop()`` ends it. Nothing touches ``/etc``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

REALM = "ZKLOCKS.TEST"
_TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local")


def _free_port() -> int:
    while True:
        with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            try:
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        raise RuntimeError(
            f"{name} not found: the GSSAPI tests need Debian's krb5-kdc and krb5-admin-server "
            "(scripts/ensure-system-deps.sh installs them)"
        )
    return found


class KDC:
    """A KDC for ``REALM`` on 127.0.0.1, its files under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.krb5_conf = directory / "krb5.conf"
        self.kdc_conf = directory / "kdc.conf"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        """What a process needs to use this realm (and nothing else)."""
        return {"KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}

    def start(self) -> None:
        tools = {name: _tool(name) for name in _TOOLS}
        self.directory.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {REALM}\n"
            "  dns_lookup_realm = false\n"
            "  dns_lookup_kdc = false\n"
            "  rdns = false\n"
            "  dns_canonicalize_hostname = false\n"
            "  udp_preference_limit = 1\n"
            "[realms]\n"
            f"  {REALM} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
            "[domain_realm]\n"
            f"  localhost = {REALM}\n"
        )
        self.kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_ports = {self.port}\n"
            f"  kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f"  {REALM} = {{\n"
            f"    database_name = {self.directory / 'principal'}\n"
            f"    key_stash_file = {self.directory / 'stash'}\n"
            f"    acl_file = {self.directory / 'kadm5.acl'}\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
        )
        (self.directory / "kadm5.acl").write_text("")
        self._run(tools["kdb5_util"], "create", "-s", "-r", REALM, "-P", "master-not-secret")
        self._process = subprocess.Popen(
            [tools["krb5kdc"], "-n", "-r", REALM],
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the test KDC did not start") from None
                time.sleep(0.05)

    def add_principal(self, name: str) -> Path:
        """Make ``name`` (random key) and a keytab holding it; returns the keytab."""
        keytab = self.directory / (name.replace("/", "_") + ".keytab")
        kadmin = _tool("kadmin.local")
        self._run(kadmin, "-r", REALM, "-q", f"addprinc -randkey {name}")
        self._run(kadmin, "-r", REALM, "-q", f"ktadd -k {keytab} {name}")
        return keytab

    def _run(self, *command: str) -> None:
        done = subprocess.run(
            command,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stderr.decode(errors='replace')}")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
