"""Webhook triggers: `POST /hooks/<name>` on the resident's HTTP listener fires the automations whose schedule
is `{"type": "webhook", "name": <name>}`.

Each webhook automation has its own secret (shown once when it is created, replaced by `anyy automations
secret ID`), stored encrypted with the vault key. A request proves it with `Authorization: Bearer <secret>`
or with `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>` (GitHub's style). An unknown name, a
missing proof and a wrong one get the same answer after the same work (a store look-up and an HMAC
against a secret), so a stranger learns neither which names exist nor how close a guess was.

A delivery id (`Idempotency-Key`, or the provider's `X-GitHub-Delivery`) names the event: a redelivery
records nothing new and fires nothing. A signed request is named by its body's digest instead: the
signature covers only the body, so the header could be changed at will, and a captured request replayed
with a new one would otherwise be a new event (a paid prompt run) for as long as the secret lives. The
repeat is answered like any redelivery while the first is recorded (30 days, gateway/retention.py).
Every automation also takes at most `per_minute` proven requests a minute in this process; more get 429.
The answer 202 comes only after `fire_event` has recorded the event and claimed its run in the store, so
a process killed after answering still delivers it at start.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
import uuid
from collections import deque
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
PER_MINUTE = 30  # proven requests an automation takes a minute (per process)

Fire = Callable[[str, TriggerEvent], Awaitable[bool]]


class Verdict(IntEnum):
    """The HTTP status of a webhook request."""

    ACCEPTED = 202
    BAD_REQUEST = 400
    NOT_FOUND = 404  # unknown name, no proof, a wrong proof: one answer
    TOO_LARGE = 413
    TOO_MANY = 429


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value of `body` under `secret`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def proof(secret: str, headers: Mapping[str, str], body: bytes) -> str | None:
    """How the request proves `secret`: "signature" (it signs `body` with it), "bearer" (it carries it as a
    Bearer token) or None. Both comparisons run every time, in constant time."""
    auth = headers.get("Authorization", "")
    bearer = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    by_bearer = hmac.compare_digest(bearer.encode(), secret.encode())
    by_signature = hmac.compare_digest(headers.get(SIGNATURE_HEADER, "").strip().encode(),
                                       signature(secret, body).encode())
    return "signature" if by_signature else "bearer" if by_bearer else None


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


class RateLimit:
    """At most `per_minute` takes per key in any 60 seconds (a sliding window)."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute, self._clock = per_minute, clock
        self._taken: dict[str, deque[float]] = {}

    def take(self, key: str) -> bool:
        """Count one for `key`; False (and not counted) when its minute is full."""
        now = self._clock()
        taken = self._taken.setdefault(key, deque())
        while taken and now - taken[0] >= 60:
            taken.popleft()
        if len(taken) >= self._per_minute:
            return False
        taken.append(now)
        return True


class WebhookService:
    """Issues secrets and accepts deliveries.

    Args:
        store: the open store.
        data_dir: where the vault key lives (`ANYY_SECRET_KEY` overrides it).
        fire: `AutomationService.fire_event`.
        limit: the per-automation rate limit (default: PER_MINUTE a minute).
    """

    def __init__(self, store: Store, data_dir: Path, fire: Fire, limit: RateLimit | None = None) -> None:
        from gateway.accounts.vault import Vault

        self.secrets = WebhookSecrets(store)
        self._vault = Vault(data_dir)
        self._fire = fire
        self._limit = limit or RateLimit(PER_MINUTE)
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
        proofs = {t.automation_id: proof(await self._secret(t.sealed_secret), headers, body) for t in targets}
        proven = {automation_id: how for automation_id, how in proofs.items() if how is not None}
        if not targets:
            proof(self._decoy, headers, body)
        if not proven:
            log.info("webhook_refused name_len=%d", len(name))
            return Verdict.NOT_FOUND
        try:
            given = delivery_id(headers)
        except ValueError:
            return Verdict.BAD_REQUEST
        allowed = [automation_id for automation_id in proven if self._limit.take(automation_id)]
        if not allowed:
            log.warning("webhook_rate_limited name_len=%d", len(name))
            return Verdict.TOO_MANY
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        content_type = headers.get("Content-Type", "")[:100]
        for automation_id in allowed:
            # A signed body names itself (see the module's docstring); a Bearer request is named by its header.
            delivery = digest if proven[automation_id] == "signature" else given or uuid.uuid4().hex
            fired = await self._fire(automation_id, webhook_event(automation_id, name, delivery, body, content_type))
            log.info("webhook_accepted automation=%s fired=%s bytes=%d", automation_id, fired, len(body))
        return Verdict.ACCEPTED
