"""Throwaway TLS files for a local ZooKeeper: a CA, a server certificate, a client one.

Only ``zklocks server --tls`` (and whoever wants the same from Python) needs this, so it
uses ``cryptography``, an optional dependency (``pip install 'zklocks[tls-server]'``):
the library and the rest of the CLI never import it. We chose it over shelling out to
``openssl``: it is the library made for the job, behaves the same on every platform and
has no command-line flags that differ between OpenSSL versions; it is only needed by
the local server helper, so it stays out of the core dependencies.

Everything is valid for ``127.0.0.1``, ``::1`` and ``localhost``, for ``days`` days.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_INSTALL = (
    "TLS files for a local server are made with the 'cryptography' package: "
    "pip install 'zklocks[tls-server]'"
)


@dataclass(frozen=True)
class TLSFiles:
    """Where the generated files are (PEM): hand ``ca`` to clients (``--tls-ca``), and
    ``client_cert`` / ``client_key`` too where the server asks for client certificates."""

    ca: Path
    server_keystore: Path  # the server's PKCS#8 key, then its certificate and the CA
    client_cert: Path
    client_key: Path
    client_chain: Path  # key and certificate in one file, for the server's own probes


def make_tls_files(directory: Path, *, days: int = 7) -> TLSFiles:
    """Generate a CA and a server and a client certificate signed by it, in ``directory``.

    Keys are written readable by their owner only. Raises ``ImportError`` saying what to
    install when ``cryptography`` is missing.
    """
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(_INSTALL) from error

    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(minutes=5), now + dt.timedelta(days=days)

    def name(common: str) -> Any:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "zklocks local server"),
                x509.NameAttribute(NameOID.COMMON_NAME, common),
            ]
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    # Key identifiers: RFC 5280 wants them, and OpenSSL's VERIFY_X509_STRICT (on by
    # default in Python 3.13's create_default_context) refuses a chain without them.
    ca_key_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_name = name("zklocks throwaway CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_ca_usage(x509), critical=True)
        .add_extension(ca_key_id, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common: str, *usage: Any) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(list(usage)), critical=False)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_key_id),
                critical=False,
            )
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("::1")),
                    ]
                ),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return key, cert

    def pem_key(key: Any) -> bytes:
        data: bytes = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,  # ZooKeeper's PEM keystore reads PKCS#8
            serialization.NoEncryption(),
        )
        return data

    def pem_cert(cert: Any) -> bytes:
        data: bytes = cert.public_bytes(serialization.Encoding.PEM)
        return data

    # members of an ensemble show the server certificate to each other both ways
    server_key, server_cert = leaf(
        "localhost", ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH
    )
    client_key, client_cert = leaf("zklocks client", ExtendedKeyUsageOID.CLIENT_AUTH)
    directory.mkdir(parents=True, exist_ok=True)
    files = TLSFiles(
        ca=directory / "ca.pem",
        server_keystore=directory / "server-keystore.pem",
        client_cert=directory / "client-cert.pem",
        client_key=directory / "client-key.pem",
        client_chain=directory / "client-chain.pem",
    )
    _write(files.ca, pem_cert(ca_cert))
    _write(files.server_keystore, pem_key(server_key) + pem_cert(server_cert) + pem_cert(ca_cert),
           secret=True)  # fmt: skip
    _write(files.client_cert, pem_cert(client_cert))
    _write(files.client_key, pem_key(client_key), secret=True)
    _write(files.client_chain, pem_key(client_key) + pem_cert(client_cert), secret=True)
    return files


def _ca_usage(x509: Any) -> Any:
    """Signs certificates and CRLs, nothing else."""
    flags = dict.fromkeys(
        ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
         "encipher_only", "decipher_only"),
        False,
    )  # fmt: skip
    return x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **flags)


def _write(path: Path, data: bytes, *, secret: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    descriptor = os.open(path, flags, 0o600 if secret else 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
