"""Issue 41, webhooks: `POST /hooks/<name>` on `anyy run`'s listener, through a real resident on the fake
Telegram — secrets (shown once, rotated by the CLI), Bearer and HMAC proofs, one answer for every refusal,
413 over 256 KB, redeliveries that do nothing, and kill -9 between the 202 and the delivery."""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import aiohttp
import pytest

from gateway.accounts.vault import KEY_ENV
from gateway.automations.scheduler import AutomationService
from gateway.config import load_config
from gateway.services.webhooks import MAX_BODY, RateLimit, WebhookService, signature
from gateway.surfaces.console import CHAT_ID
from store.outbox import Outbox
from store.records import Origin
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.cli import SUBPROCESS_S, anyy
from tests.support.context import RecordingContext
from tests.support.resident import Resident, resident, run_config
from tests.support.telegram_api import OWNER_ID, FakeBot
from toolsets.automation import TOOLSET
from toolsets.schedule import parse_action, parse_schedule

KEY = "x5fS2v8mN1oUuJ3pQ9rT0wY7zA4bC6dE8fG1hI2jK3k="  # a Fernet key (32 bytes, URL-safe base64)
LISTENING = re.compile(r"dashboard: up on 127\.0\.0\.1:(\d+)")


def telegram(tg: FakeBot) -> str:
    return f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10
"""


async def port_of(proc: Resident) -> int:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SUBPROCESS_S
    while not (found := LISTENING.search(proc.output())):
        assert proc.process.returncode is None, proc.output()
        assert loop.time() < deadline, proc.output()
        await asyncio.sleep(0.05)
    return int(found.group(1))


@asynccontextmanager
async def listening(tmp_path: Path, tg: FakeBot, model: FakeModel, **env: str) -> AsyncIterator[tuple[Resident, str]]:
    config = run_config(tmp_path, model, telegram(tg), dashboard_listen="127.0.0.1:0")
    async with resident(tmp_path, config, {"TELEGRAM_BOT_TOKEN": tg.token, KEY_ENV: KEY, **env}) as proc:
        yield proc, f"http://127.0.0.1:{await port_of(proc)}/hooks/"


async def make_webhook(tmp_path: Path, model: FakeModel, monkeypatch: pytest.MonkeyPatch, name: str,
                       text: str) -> tuple[str, str]:
    """A webhook automation with a reminder action, made in the store before `anyy run` starts: (id, secret)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("ANYY_HOME", str(tmp_path / "home"))
    config = load_config(str(run_config(tmp_path, model, "")))
    async with config.new_store() as store:
        service = AutomationService(store, config.tz, Outbox(store).enqueue)
        rec = await service.create(f"telegram:{OWNER_ID}", Origin(surface="telegram", chat_id=str(OWNER_ID)), name,
                                   parse_schedule({"type": "webhook", "name": name}),
                                   parse_action({"kind": "reminder", "text": text}))
        secret = await WebhookService(store, config.data_dir, service.fire_event).issue(rec.id)
    return rec.id, secret


async def post(client: aiohttp.ClientSession, url: str, body: bytes, **headers: str) -> tuple[int, str]:
    async with client.post(url, data=body, headers=headers) as r:
        return r.status, await r.text()


def texts(tg: FakeBot) -> list[str]:
    return [str(c.params.get("text", "")) for c in tg.sent("sendMessage")]


async def test_a_webhook_made_in_chat_fires_on_bearer_and_hmac_once_per_delivery_and_refuses_the_rest(
        tg: FakeBot, model: FakeModel, tmp_path: Path) -> None:
    model.script(tool_call("automation_create", {"name": "ci", "schedule": {"type": "webhook", "name": "ci"},
                                                 "action": {"kind": "reminder", "text": "🔔 CI: {summary}"}}),
                 reply("Your webhook is ready."))
    async with listening(tmp_path, tg, model) as (proc, hooks):
        tg.message("make an automation that tells me when CI posts")
        shown = await tg.wait(lambda: [t for t in texts(tg) if "whsec_" in t], timeout=SUBPROCESS_S,
                              what="the secret in the chat")
        secret = re.search(r"whsec_[\w-]+", shown[0]).group(0)  # type: ignore[union-attr]
        await tg.wait(lambda: "Your webhook is ready." in texts(tg), timeout=SUBPROCESS_S, what="the answer")
        assert all(secret not in json.dumps(r.body) for r in model.requests)  # the model never saw it

        body = json.dumps({"status": "failed", "job": "build"}).encode()
        async with aiohttp.ClientSession() as client:
            assert (await post(client, hooks + "ci", body, Authorization=f"Bearer {secret}",
                               **{"Idempotency-Key": "run-1"}))[0] == 202
            await tg.wait(lambda: [t for t in texts(tg) if t.startswith("🔔 CI:") and "failed" in t],
                          timeout=SUBPROCESS_S, what="the Bearer delivery's line")
            signed = json.dumps({"status": "passed"}).encode()
            github = {"X-Hub-Signature-256": signature(secret, signed), "X-GitHub-Delivery": "d-7"}
            assert (await post(client, hooks + "ci", signed, **github))[0] == 202
            assert (await post(client, hooks + "ci", signed, **github))[0] == 202  # a redelivery
            assert (await post(client, hooks + "ci", body, Authorization=f"Bearer {secret}",
                               **{"Idempotency-Key": "run-1"}))[0] == 202  # the first one again
            await tg.wait(lambda: [t for t in texts(tg) if "passed" in t], timeout=SUBPROCESS_S,
                          what="the signed delivery's line")

            refused = await post(client, hooks + "ci", signed, **{"X-Hub-Signature-256": signature("wrong", signed)})
            assert refused[0] == 404
            assert await post(client, hooks + "nope", signed, **{"X-Hub-Signature-256": signature(secret, signed)}) \
                == refused  # an unknown name: the same status and body
            assert await post(client, hooks + "ci", signed) == refused  # no proof at all
            assert await post(client, hooks + "ci", signed, Authorization=f"Bearer {secret}x") == refused
            tampered = signed.replace(b"passed", b"failed")
            assert await post(client, hooks + "ci", tampered, **github) == refused
            status, _ = await post(client, hooks + "ci", b"x" * (MAX_BODY + 1), Authorization=f"Bearer {secret}")
            assert status == 413
            async with client.get(hooks + "ci") as r:
                assert r.status == 405
            # A last good delivery: once its line is here, every earlier one has had its chance to arrive.
            assert (await post(client, hooks + "ci", b"last", Authorization=f"Bearer {secret}"))[0] == 202
            await tg.wait(lambda: "🔔 CI: last" in texts(tg), timeout=SUBPROCESS_S, what="the last line")
        lines = [t for t in texts(tg) if t.startswith("🔔 CI:")]
        assert len(lines) == 3, lines  # run-1, d-7, last: no redelivery and no refusal fired
        assert secret not in proc.output()  # never logged
        assert await proc.terminate() == 0


async def test_the_cli_rotates_the_secret_and_the_old_one_stops_working(
        tg: FakeBot, model: FakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    automation_id, old = await make_webhook(tmp_path, model, monkeypatch, "deploy", "🚀 {summary}")
    config = tmp_path / "config.toml"
    env = {**os.environ, "ANYY_HOME": str(tmp_path / "home"), KEY_ENV: KEY}
    code, out, err = await anyy("automations", "secret", automation_id, "--config", str(config), env=env)
    assert code == 0, err
    new = re.search(r"whsec_[\w-]+", out).group(0)  # type: ignore[union-attr]
    assert new != old
    code, _, err = await anyy("automations", "secret", "nope", "--config", str(config), env=env)
    assert code != 0 and "no automation nope" in err
    async with listening(tmp_path, tg, model) as (proc, hooks), aiohttp.ClientSession() as client:
        assert (await post(client, hooks + "deploy", b"v1", Authorization=f"Bearer {old}"))[0] == 404
        assert (await post(client, hooks + "deploy", b"v2", Authorization=f"Bearer {new}"))[0] == 202
        await tg.wait(lambda: "🚀 v2" in texts(tg), timeout=SUBPROCESS_S, what="the delivery")
        assert not [t for t in texts(tg) if "v1" in t]
        assert await proc.terminate() == 0


async def test_outside_text_in_a_reminder_line_is_shown_as_written_never_as_a_link(
        tg: FakeBot, model: FakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trusted-looking notice must not carry a link, mention or formatting the sender wrote."""
    _, secret = await make_webhook(tmp_path, model, monkeypatch, "bank", "📧 **Bank**: {summary}")
    body = b"[Verify your account](https://evil.example/login) <https://evil.example> **now** `x`"
    async with listening(tmp_path, tg, model) as (proc, hooks), aiohttp.ClientSession() as client:
        assert (await post(client, hooks + "bank", body, Authorization=f"Bearer {secret}"))[0] == 202
        [sent] = await tg.wait(lambda: [t for t in texts(tg) if t.startswith("📧")], timeout=SUBPROCESS_S,
                               what="the notice")
        assert await proc.terminate() == 0
    assert sent.startswith("📧 <b>Bank</b>: ")  # the owner's own template is still Markdown
    assert "<a " not in sent and sent.count("<b>") == 1 and "<code>" not in sent
    with tg.lock:
        [shown] = [m["text"] for m in tg.messages.values() if m["text"].startswith("📧")]
    assert shown == f"📧 Bank: {body.decode()}"


async def test_kill_9_after_the_202_and_before_the_delivery_still_delivers_exactly_once(
        tg: FakeBot, model: FakeModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, secret = await make_webhook(tmp_path, model, monkeypatch, "alarm", "🚨 {summary}")
    async with listening(tmp_path, tg, model, ANYY_PAUSE_AT="outbox.before_send") as (proc, hooks):
        async with aiohttp.ClientSession() as client:
            status, _ = await post(client, hooks + "alarm", b"smoke", Authorization=f"Bearer {secret}",
                                   **{"Idempotency-Key": "k-1"})
        assert status == 202
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SUBPROCESS_S
        while "paused at outbox.before_send" not in proc.output():
            assert loop.time() < deadline, proc.output()
            await asyncio.sleep(0.05)
        proc.process.kill()  # kill -9: recorded and answered, not delivered
        await proc.process.wait()
    assert "🚨 smoke" not in texts(tg)
    async with listening(tmp_path, tg, model) as (proc, hooks):
        await tg.wait(lambda: "🚨 smoke" in texts(tg), timeout=SUBPROCESS_S, what="the delivery after restart")
        async with aiohttp.ClientSession() as client:  # the sender retries, having seen no answer it trusted
            assert (await post(client, hooks + "alarm", b"smoke", Authorization=f"Bearer {secret}",
                               **{"Idempotency-Key": "k-1"}))[0] == 202
            assert (await post(client, hooks + "alarm", b"end", Authorization=f"Bearer {secret}"))[0] == 202
        await tg.wait(lambda: "🚨 end" in texts(tg), timeout=SUBPROCESS_S, what="a later delivery")
        assert texts(tg).count("🚨 smoke") == 1
        assert await proc.terminate() == 0


@pytest.mark.both_backends
async def test_one_delivery_taken_by_two_residents_on_one_store_fires_once(start_console: Any,
                                                                           make_config: Any) -> None:
    config = make_config()
    first, second = await start_console(config), await start_console(config)
    user = f"console:{config.console.user_id}"
    rec = await first.gw.services["automations"].create(
        user, Origin(surface="console", chat_id=CHAT_ID), "ci", parse_schedule({"type": "webhook", "name": "ci"}),
        parse_action({"kind": "reminder", "text": "🔔 {summary}"}))
    secret = await first.gw.services["webhooks"].issue(rec.id)
    headers = {"Authorization": f"Bearer {secret}", "X-GitHub-Delivery": "d-1"}
    verdicts = await asyncio.gather(first.gw.services["webhooks"].accept("ci", headers, b"deploy failed"),
                                    second.gw.services["webhooks"].accept("ci", headers, b"deploy failed"))
    assert [int(v) for v in verdicts] == [202, 202]
    await first.gw.idle()  # idle covers the automation run each delivers in the background
    await second.gw.idle()
    runs = await first.gw.services["automations"].history(user, rec.id)
    assert [(r.status, r.output) for r in runs] == [("delivered", "🔔 deploy failed")]


async def test_the_secret_is_never_posted_into_a_group_chat(store: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:


    monkeypatch.setenv(KEY_ENV, KEY)
    service = AutomationService(store, ZoneInfo("UTC"), Outbox(store).enqueue)
    webhooks = WebhookService(store, tmp_path, service.fire_event)
    group = Origin(surface="telegram", chat_id="-100")
    ctx = RecordingContext(store, user_key="telegram:1", origin=group, session_id=f"{group.key()}#1",
                           services={"automations": service, "webhooks": webhooks})
    [tool] = [t for t in TOOLSET.tools if t.name == "automation_create"]
    args = {"name": "ci", "schedule": {"type": "webhook", "name": "ci"}, "action": {"kind": "reminder"}}
    view = await tool.call(ctx, tool.args_model.model_validate(args))
    assert ctx.sent == [] and "anyy automations secret" in view["secret"]
    assert await webhooks.secrets.has(view["id"])  # issued: the CLI replaces it and shows the new one
    direct = Origin(surface="telegram", chat_id="1")
    ctx = RecordingContext(store, user_key="telegram:1", origin=direct, session_id=direct.key(),
                           services={"automations": service, "webhooks": webhooks})
    args["schedule"] = {"type": "webhook", "name": "deploy"}
    view = await tool.call(ctx, tool.args_model.model_validate(args))
    [(text, to)] = ctx.sent
    assert to == direct and "whsec_" in text and "whsec_" not in str(view)


async def test_a_captured_signed_request_replayed_under_any_delivery_id_fires_nothing(start_console: Any,
                                                                                      make_config: Any) -> None:
    """The signature covers only the body, so the delivery id header is the replayer's to choose: a signed
    body names its own delivery."""
    h = await start_console(make_config())
    user, webhooks = f"console:{h.gw.config.console.user_id}", h.gw.services["webhooks"]
    rec = await h.gw.services["automations"].create(
        user, Origin(surface="console", chat_id=CHAT_ID), "ci", parse_schedule({"type": "webhook", "name": "ci"}),
        parse_action({"kind": "reminder", "text": "🔔 {summary}"}))
    secret = await webhooks.issue(rec.id)
    body = b'{"status": "failed"}'
    signed = {"X-Hub-Signature-256": signature(secret, body)}
    assert await webhooks.accept("ci", {**signed, "X-GitHub-Delivery": "d-1"}, body) == 202
    assert await webhooks.accept("ci", {**signed, "X-GitHub-Delivery": "d-2"}, body) == 202  # replayed
    assert await webhooks.accept("ci", {**signed, "Idempotency-Key": "other"}, body) == 202
    assert await webhooks.accept("ci", signed, body) == 202
    other = b'{"status": "passed"}'
    assert await webhooks.accept("ci", {"X-Hub-Signature-256": signature(secret, other)}, other) == 202
    await h.gw.idle()
    runs = await h.gw.services["automations"].history(user, rec.id)
    assert sorted(r.output for r in runs) == ['🔔 {"status": "failed"}', '🔔 {"status": "passed"}']


async def test_more_proven_requests_than_the_limit_a_minute_get_429(store: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    now = [1000.0]
    service = AutomationService(store, ZoneInfo("UTC"), Outbox(store).enqueue)
    webhooks = WebhookService(store, tmp_path, service.fire_event, RateLimit(2, clock=lambda: now[0]))
    rec = await service.create("telegram:1", Origin(surface="telegram", chat_id="1"), "ci",
                               parse_schedule({"type": "webhook", "name": "ci"}), parse_action({"kind": "reminder"}))
    bearer = {"Authorization": f"Bearer {await webhooks.issue(rec.id)}"}
    assert [await webhooks.accept("ci", bearer, f"run {n}".encode()) for n in range(3)] == [202, 202, 429]
    assert await webhooks.accept("ci", {"Authorization": "Bearer wrong"}, b"x") == 404  # refusals are not counted
    now[0] += 59
    assert await webhooks.accept("ci", bearer, b"later") == 429
    now[0] += 1  # a minute after the first
    assert await webhooks.accept("ci", bearer, b"later") == 202
