"""A private certificate authority for the issue-37 fakes, handed to clients the standard way.

`FakeCA.create(folder)` makes a trustme CA and writes `bundle.pem`: the CA followed by the roots this
machine already trusts (the file `SSL_CERT_FILE` or `REQUESTS_CA_BUNDLE` names, else OpenSSL's default,
else certifi's), as a machine whose administrator added a company CA to the system store would have. Keeping
the machine's own roots matters: a test that installs packages (tests/test_fresh_install.py) may reach the
registry through a proxy that only the system store trusts. The session
fixture `fake_ca` (tests/fixtures/oauth_fakes.py) points `SSL_CERT_FILE` and `REQUESTS_CA_BUNDLE` at that
bundle for the test process, so every `anyy` subprocess a test starts inherits it. Code under test must
trust the fakes only through those variables (the system's trust settings): nothing passes a context.

Servers get their certificate for 127.0.0.1 and localhost from `server_context()` (asyncio / aiohttp) or
`cert_file()` (pymap wants a PEM holding key and chain).
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import certifi
import trustme

HOSTS = ("127.0.0.1", "localhost")


def trusted_roots() -> Path:
    """The CA file this process trusts before the fake CA is added."""
    candidates = (os.environ.get("SSL_CERT_FILE"), os.environ.get("REQUESTS_CA_BUNDLE"),
                  ssl.get_default_verify_paths().cafile)
    return next((Path(c) for c in candidates if c and Path(c).is_file()), Path(certifi.where()))


@dataclass(frozen=True)
class FakeCA:
    ca: trustme.CA
    cert: trustme.LeafCert
    bundle: Path  # the CA and the public roots: what SSL_CERT_FILE / REQUESTS_CA_BUNDLE name
    folder: Path

    @classmethod
    def create(cls, folder: Path) -> FakeCA:
        ca = trustme.CA(organization_name="Anyy test CA")
        bundle = folder / "bundle.pem"
        bundle.write_bytes(ca.cert_pem.bytes() + trusted_roots().read_bytes())
        return cls(ca=ca, cert=ca.issue_cert(*HOSTS), bundle=bundle, folder=folder)

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.cert.configure_cert(context)
        return context

    def cert_file(self) -> Path:
        """The server's key and certificate chain in one PEM file."""
        path = self.folder / "server.pem"
        if not path.exists():
            self.cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        return path

    def client_context(self) -> ssl.SSLContext:
        """A client context trusting the CA, for a test's own set-up and inspection calls."""
        return ssl.create_default_context(cafile=str(self.bundle))

    def environ(self) -> dict[str, str]:
        return {"SSL_CERT_FILE": str(self.bundle), "REQUESTS_CA_BUNDLE": str(self.bundle)}
