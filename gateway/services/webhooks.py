"""Webhook triggers: `POST /hooks/<name>` on the resident's HTTP listener fires the automations whose schedule
is `{"type": "webhook", "name": <name>}`.

Each webhook automation has its own secret (shown once when it is created, replaced by `anyy automations
secret ID`), stored encrypted with the vault key. A request proves it with `Authorization: Bearer <secret>`
or with `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>` (GitHub's style). An unknown name, a
missing proof and a wrong one get the same answer after the same work (a store look-up and an HMAC
against a secret), so a stranger learns neither which names exist nor how close a guess was.

A delivery id (`Idempotency-Key`, or the provider's `X-GitHub-Delivery`) names the event: a redelivery
records nothing new and fires nothing. The answer 202 comes only after `fire_event` has recorded the
event and claimed its run in the store, so a process killed after answering still delivers it at start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import uuid
from collections.abc import Awaitable, Callable, Mapping
from enum import IntEnum
from pathlib import Path

from store.db import Store
from store.triggers import TriggerEvent
from store.webhooks import WebhookSecrets

log = logging.getLogger(__name__)

MAX_BODY = 256 * 1024
MAX_DELIVERY_ID = 200
DELIVERY_HEADERS = ("Idempotency-Key", "X-GitHub-Delivery")
SIGNATURE_HEADER = "X-Hub-Signature-256"
SECRET_PREFIX = "whsec_"
_SUMMARY_CHARS = 200
_TEXT_CHARS = 64 * 1024  # of the body, what a prompt's turn sees

Fire = Callable[[str, TriggerEvent], Awaitable[bool]]


class Verdict(IntEnum):
    """The HTTP status of a webhook request."""

    ACCEPTED = 202
    BAD_REQUEST = 400
    NOT_FOUND = 404  # unknown name, no proof, a wrong proof: one answer
    TOO_LARGE = 413


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value of `body` under `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def proves(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether the request carries `secret` as a Bearer token or signs `body` with it. Both comparisons
    run every time, in constant time."""
    auth = headers.get("Authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    by_bearer = hmac.compare_digest(bearer.encode(), secret.encode())
    by_signature = hmac.compare_digest(headers.get(SIGNATURE_HEADER, "").strip().encode(),
                                       signature(secret, body).encode())
    return by_bearer or by_signature


def webhook_event(automation_id: str, name: str, delivery: str, body: bytes, content_type: str) -> TriggerEvent:
    """The recorded event of one delivery: the body is outside content; its first line fills {summary}."""
    text = body[:_TEXT_CHARS].decode("utf-8", errors="replace")
    summary = " ".join(text.split())[:_SUMMARY_CHARS]
    header = f"Content-Type: {content_type}\n\n" if content_type else ""
    return TriggerEvent(key=f"hook:{automation_id}:{delivery}", kind="webhook", source=f"webhook {name}",
                        fields={"name": name, "summary": summary}, text=header + text)


def delivery_id(headers: Mapping[str, str]) -> str | None:
    """The provider's id of this delivery, or None when it sent none. ValueError when it is too long."""
    for header in DELIVERY_HEADERS:
        value = headers.get(header, "").strip()
        if value:
            if len(value) > MAX_DELIVERY_ID or not value.isprintable():
                raise ValueError(f"{header} must be at most {MAX_DELIVERY_ID} printable characters")
            return value
    return None


class WebhookService:
    """Issues secrets and accepts deliveries.

    Args:
        store: the open store.
        data_dir: where the vault key lives (`ANYY_SECRET_KEY` overrides it).
        fire: `AutomationService.fire_event`.
    """

    def __init__(self, store: Store, data_dir: Path, fire: Fire) -> None:
        from gateway.accounts.vault import Vault

        self.secrets = WebhookSecrets(store)
        self._vault = Vault(data_dir)
        self._fire = fire
        self._plain: dict[str, str] = {}  # sealed secret -> secret: Fernet runs once per secret
        self._decoy = new_secret()  # what an unknown name is checked against, for the same work

    async def issue(self, automation_id: str) -> str:
        """Make (or replace) the automation's secret and return it: the only time it is shown."""
        secret = new_secret()
        sealed = await asyncio.to_thread(self._vault.encrypt, secret)
        await self.secrets.put(automation_id, sealed)
        log.info("webhook_secret_issued automation=%s", automation_id)
        return secret

    async def _secret(self, sealed: str) -> str:
        plain = self._plain.get(sealed)
        if plain is None:
            plain = self._plain[sealed] = await asyncio.to_thread(self._vault.decrypt, sealed)
        return plain

    async def accept(self, name: str, headers: Mapping[str, str], body: bytes) -> Verdict:
        """Check one delivery and fire each automation it proves itself to; the answer's status."""
        if len(body) > MAX_BODY:
            return Verdict.TOO_LARGE
        targets = await self.secrets.targets(name)
        proven = [t.automation_id for t in targets if proves(await self._secret(t.sealed_secret), headers, body)]
        if not targets:
            proves(self._decoy, headers, body)
        if not proven:
            log.info("webhook_refused name_len=%d", len(name))
            return Verdict.NOT_FOUND
        try:
            delivery = delivery_id(headers) or uuid.uuid4().hex
        except ValueError:
            return Verdict.BAD_REQUEST
        content_type = headers.get("Content-Type", "")[:100]
        for automation_id in proven:
            fired = await self._fire(automation_id, webhook_event(automation_id, name, delivery, body, content_type))
            log.info("webhook_accepted automation=%s fired=%s bytes=%d", automation_id, fired, len(body))
        return Verdict.ACCEPTED
