"""The model client's TLS: an https model's certificate is verified against the CA bundle; a plain-http
model's client trusts no certificate at all (it never speaks TLS), so nothing is read at start-up and a
TLS connection could not slip through unverified."""

from __future__ import annotations

import ssl

from gateway.llm.http import _tls_for


def test_an_https_model_is_verified_as_httpx_verifies() -> None:
    assert _tls_for("https://api.openai.com/v1") is True
    assert _tls_for("HTTPS://example.test") is True


def test_a_plain_http_model_gets_a_context_that_trusts_nothing() -> None:
    ctx = _tls_for("http://127.0.0.1:8080/v1")
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] == 0
