"""Test certificates (trustme) and TLS-only ZooKeeper servers (``zklocks.server``)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization

from zklocks.server import ServerTLS, ZooKeeperServer


def pkcs8(key_pem: bytes) -> bytes:
    """ZooKeeper's PEM keystore reads PKCS#8 keys; trustme writes traditional ones."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class TLSSetup:
    """A CA, the server's files, and a client certificate, all written under ``directory``."""

    directory: Path
    ca: trustme.CA
    ca_file: Path
    keystore: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def make(cls, directory: Path) -> TLSSetup:
        directory.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        client = ca.issue_cert("zklocks-test-client")
        ca_file = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        keystore = directory / "server-keystore.pem"
        keystore.write_bytes(
            pkcs8(server.private_key_pem.bytes())
            + b"".join(blob.bytes() for blob in server.cert_chain_pems)
        )
        client_cert = directory / "client-cert.pem"
        client_cert.write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
        client_key = directory / "client-key.pem"
        client_key.write_bytes(pkcs8(client.private_key_pem.bytes()))
        return cls(directory, ca, ca_file, keystore, client_cert, client_key)

    def server_tls(self, client_auth: str = "none") -> ServerTLS:
        chain = self.directory / "probe-chain.pem"
        chain.write_bytes(self.client_key.read_bytes() + self.client_cert.read_bytes())
        return ServerTLS(self.keystore, self.ca_file, client_auth, probe_chain=chain)

    def server(self, client_auth: str = "none") -> ZooKeeperServer:
        return ZooKeeperServer(
            tick_time=200, max_session_timeout=60_000, tls=self.server_tls(client_auth)
        )

    def context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """What a client passes as ``ssl=``: trusts our CA, shows our certificate if asked."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        if client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context
