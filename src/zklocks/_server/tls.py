"""TLS for a local ZooKeeper: what ``ServerTLS`` adds to zoo.cfg, and our probes' context."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServerTLS"]


@dataclass(frozen=True)
class ServerTLS:
    """Serve clients over TLS only. PEM files: ``keystore`` holds the server's PKCS#8
    private key then its certificate chain; ``truststore`` the CA certificates that sign
    client certificates. ``client_auth`` is ZooKeeper's ``ssl.clientAuth``: ``none``,
    ``want`` or ``need`` (mutual TLS). ``probe_chain`` (key and certificate in one PEM
    file) lets our own readiness probes in when the server needs client certificates.

    ``zklocks.server.make_tls_files(directory)`` generates a throwaway set.
    """

    keystore: Path
    truststore: Path
    client_auth: str = "none"
    probe_chain: Path | None = None

    def __post_init__(self) -> None:
        if self.client_auth not in ("none", "want", "need"):
            raise ValueError(f"client_auth must be none, want or need, not {self.client_auth!r}")

    def config(self, port: int) -> list[str]:
        """zoo.cfg lines: a TLS port and no plaintext one."""
        return [
            f"secureClientPort={port}",
            "secureClientPortAddress=127.0.0.1",
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            f"ssl.keyStore.location={self.keystore}",
            "ssl.keyStore.type=PEM",
            f"ssl.trustStore.location={self.truststore}",
            "ssl.trustStore.type=PEM",
            f"ssl.clientAuth={self.client_auth}",
        ]

    def quorum_config(self) -> list[str]:
        """zoo.cfg lines for TLS on the links between members (``sslQuorum``): each member
        shows the keystore's certificate to the others, as server and as client, and
        trusts those the truststore's CA signed."""
        return [
            "sslQuorum=true",
            f"ssl.quorum.keyStore.location={self.keystore}",
            "ssl.quorum.keyStore.type=PEM",
            f"ssl.quorum.trustStore.location={self.truststore}",
            "ssl.quorum.trustStore.type=PEM",
        ]

    def probe_context(self) -> ssl.SSLContext:
        """For our probes of our own JVM (identified by its data dir in ``conf``), so the
        server's certificate is not checked; ours is shown when the server wants one."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if self.probe_chain is not None:
            context.load_cert_chain(self.probe_chain)
        return context
