"""The throwaway certificates pass RFC 5280's strict checks (Python 3.13's default).

Python 3.13's ``ssl.create_default_context()`` sets ``VERIFY_X509_STRICT``: OpenSSL then
refuses a chain whose CA lacks a Subject Key Identifier or whose leaf lacks an Authority
Key Identifier ("Missing Authority Key Identifier"). We set the flag ourselves, so the
check runs on 3.11 too, and shake hands in memory: no server, no sockets.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509

from tls_support import TLSSetup
from zklocks.server import make_tls_files


def strict_client(ca_file: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file))
    context.verify_flags |= ssl.VERIFY_X509_STRICT
    return context


def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> None:
    """Pump a TLS handshake between two in-memory ends until both are done."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client_end = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    server_end = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError(f"the handshake did not finish: {done}")


def test_zklocks_server_tls_files_pass_strict_verification(tmp_path: Path) -> None:
    files = make_tls_files(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(files.server_keystore)
    handshake(strict_client(files.ca), server)


@pytest.mark.parametrize("which", ["ca", "server", "client"])
def test_zklocks_server_tls_files_carry_key_identifiers(tmp_path: Path, which: str) -> None:
    files = make_tls_files(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    path = {"ca": files.ca, "server": files.server_keystore, "client": files.client_cert}
    cert = x509.load_pem_x509_certificates(path[which].read_bytes())[0]
    ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert ski.digest == x509.SubjectKeyIdentifier.from_public_key(cert.public_key()).digest
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest


def test_test_suite_certificates_pass_strict_verification(tmp_path: Path) -> None:
    """The suite's own chain (trustme): one too old for 3.13's default fails here first."""
    setup = TLSSetup.make(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(setup.keystore)
    handshake(strict_client(setup.ca_file), server)
