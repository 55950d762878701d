"""Email triggers against real servers: mail sent by SMTP is filed into the IMAP server, the resident's
IDLE watch wakes, filters run on the headers, and the automation fires once per message. In-process
Gateway with the console surface; tests/test_trigger_mail_run.py drives `anyy run` with Telegram."""

from __future__ import annotations

import asyncio
import imaplib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from store.records import Origin
from store.triggers import TriggerEvents
from tests.fixtures.mail import PASSWORD, USER
from tests.fixtures.model import reply, tool_call
from tests.support.mail_drop import AUTHSERV, MailDrop
from toolsets.registry import TOOLSETS
from toolsets.schedule import Reminder, parse_action, parse_schedule

OWNER = "console:owner"
CONSOLE = Origin(surface="console", chat_id="local")


@pytest.fixture(scope="session")
def mail_drop(mail_servers: Any) -> Iterator[MailDrop]:
    drop = MailDrop(mail_servers.imap_port, USER, PASSWORD)
    drop.start()
    yield drop
    drop.stop()


@pytest.fixture
def start(start_console: Any, email_config: Any) -> Any:
    config = email_config(auth_serv_id=AUTHSERV)

    async def go(**kwargs: Any) -> Any:  # resident=False: a gateway as `anyy chat` or the CLI has it
        return await start_console(config=config, toolsets=TOOLSETS, **kwargs)

    return go


async def watching(h: Any, folder: str, schedule: dict[str, Any] | None = None,
                   action: dict[str, Any] | None = None) -> str:
    """Create an email trigger on `folder` and wait until its watch has looked at the folder once."""
    rec = await h.gw.services["automations"].create(
        OWNER, CONSOLE, "mail", parse_schedule({"type": "email", "folder": folder, **(schedule or {})}),
        parse_action(action) if action else Reminder(kind="reminder"))
    await h.gw.triggers.mail.refresh()
    await h.gw.triggers.mail.folders[("default", folder)].swept.wait()
    return str(rec.id)


async def test_new_mail_fires_a_reminder_trigger_once_with_no_model_call(start: Any, mail_drop: MailDrop,
                                                                          model: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    automation = await watching(h, folder)
    await mail_drop.asend(folder, subject="Statement for March")
    out = await h.wait_for("📧 Ann <ann@bank.example>: Statement for March")  # escapes resolved
    await h.gw.idle()
    assert (out + h.new_output()).count("📧") == 1
    assert model.requests == []
    [run] = await h.gw.services["automations"].history(OWNER, automation)
    assert run.status == "delivered"


async def test_a_filter_that_does_not_match_costs_no_model_call(start: Any, mail_drop: MailDrop, model: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    await watching(h, folder, {"from": ["*@bank.example"], "subject": "statement"},
                   {"kind": "prompt", "prompt": "Summarise the statement."})
    model.script(reply("Summary: you are rich."))
    await mail_drop.asend(folder, sender="Spam <offers@shop.example>", subject="Your statement of offers")
    await mail_drop.asend(folder, subject="Weekly newsletter")  # the right sender, not the subject
    await mail_drop.asend(folder, subject="Your statement")
    await h.wait_for("Summary: you are rich.")
    await h.gw.idle()
    assert len(model.requests) == 1
    assert "Subject: Your statement" in model.requests[0].messages[-1]["content"]


async def test_verified_sender_reads_only_the_receiving_servers_header(start: Any, mail_drop: MailDrop,
                                                                        model: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    await watching(h, folder, {"from": ["*@bank.example"], "verified_sender": True})
    # The sender's own header, passed on by a server that adds none: another authserv-id, not trusted.
    await mail_drop.asend(folder, subject="forged, no server header", auth=None, headers={
        "Authentication-Results": "mx.bank.example; dmarc=pass header.from=bank.example"})
    forged = {"Authentication-Results": f"{AUTHSERV}; dmarc=pass header.from=bank.example"}
    await mail_drop.asend(folder, subject="forged", auth="dmarc=fail header.from=bank.example", headers=forged)
    await mail_drop.asend(folder, subject="unaligned", auth="dkim=pass header.d=evil.example")
    await mail_drop.asend(folder, subject="dkim aligned", auth="dkim=pass (good) header.d=bank.example")
    await mail_drop.asend(folder, subject="dmarc", auth="spf=fail; dmarc=pass (p=reject) header.from=bank.example")
    out = await h.wait_for(": dmarc")
    await h.gw.idle()
    lines = [line for line in (out + h.new_output()).splitlines() if "📧" in line]
    assert [line.rsplit(": ", 1)[1] for line in lines] == ["dkim aligned", "dmarc"]


async def test_mail_while_down_fires_at_most_fifty_and_counts_the_rest(start: Any, mail_drop: MailDrop,
                                                                      model: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    await watching(h, folder, action={"kind": "reminder", "text": "📧 {subject}"})
    await h.gw.stop()
    for n in range(53):
        await mail_drop.asend(folder, subject=f"late {n:02d}")
    h = await start()
    out = await h.wait_for("📧 late 52", timeout=60)
    await h.gw.idle()
    out += h.new_output()
    fired = [line.split("📧 ")[1] for line in out.splitlines() if "📧 late" in line]
    assert fired == [f"late {n:02d}" for n in range(3, 53)]
    assert out.count("📭 3 older message(s) arrived") == 1
    assert model.requests == []


async def test_a_new_uidvalidity_rebaselines_without_replaying(start: Any, mail_drop: MailDrop, model: Any,
                                                              mail_servers: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    await watching(h, folder, action={"kind": "reminder", "text": "📧 {subject}"})
    before = await TriggerEvents(h.gw.store).watermark("default", folder)
    await h.gw.stop()
    with imaplib.IMAP4("127.0.0.1", mail_servers.imap_port, timeout=10) as client:  # the folder rebuilt
        client.login(USER, PASSWORD)
        assert client.delete(folder)[0] == "OK" and client.create(folder)[0] == "OK"
        client.logout()
    for n in range(3):
        await mail_drop.asend(folder, subject=f"old {n}")
    h = await start()
    await h.gw.triggers.mail.folders[("default", folder)].swept.wait()
    after = await TriggerEvents(h.gw.store).watermark("default", folder)
    assert before is not None and after is not None and after[0] != before[0] and after[1] >= 3
    await mail_drop.asend(folder, subject="after the change")
    out = await h.wait_for("📧 after the change")
    await h.gw.idle()
    assert "📧 old" not in out + h.new_output()


def file_old(mail_servers: Any, folder: str, subject: str, hours_ago: float = 1) -> None:
    """File a message the server received `hours_ago` (its INTERNALDATE): mail from before a trigger that
    lands after the folder's watermark, as mail that came while the resident was down does."""
    raw = f"From: Ann <ann@bank.example>\r\nSubject: {subject}\r\n\r\nold\r\n".encode()
    with imaplib.IMAP4("127.0.0.1", mail_servers.imap_port, timeout=10) as client:
        client.login(USER, PASSWORD)
        when = imaplib.Time2Internaldate(time.time() - hours_ago * 3600)
        assert client.append(folder, "", when, raw)[0] == "OK"
        client.logout()


async def create_while_down(start: Any, folder: str, text: str) -> None:
    """Make an email trigger on `folder` from a non-resident gateway (the resident is not running)."""
    cli = await start(resident=False)
    schedule = parse_schedule({"type": "email", "folder": folder})
    await cli.gw.services["automations"].create(OWNER, CONSOLE, "late", schedule,
                                                parse_action({"kind": "reminder", "text": text}))
    await cli.gw.stop()


async def test_a_trigger_made_while_down_does_not_fire_for_older_mail(start: Any, mail_drop: MailDrop, model: Any,
                                                                     mail_servers: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    await watching(h, folder, action={"kind": "reminder", "text": "1️⃣ {subject}"})
    await h.gw.stop()
    file_old(mail_servers, folder, "before the second")  # arrived while down, before the second trigger
    await create_while_down(start, folder, "2️⃣ {subject}")
    await mail_drop.asend(folder, subject="after the second")
    h = await start()
    out = await h.wait_for("2️⃣ after the second")
    await h.gw.idle()
    out += h.new_output()
    assert "1️⃣ after the second" in out  # the folder's watermark held; the first trigger fires as before
    assert "2️⃣ before the second" not in out


async def test_mail_between_a_new_triggers_creation_and_its_first_look_fires(start: Any, mail_drop: MailDrop,
                                                                            model: Any, mail_servers: Any) -> None:
    folder = mail_drop.new_folder()
    file_old(mail_servers, folder, "a day old", hours_ago=24)
    file_old(mail_servers, folder, "an hour old")
    await create_while_down(start, folder, "📧 {subject}")
    await mail_drop.asend(folder, subject="after creation")  # before any resident looked at the folder
    file_old(mail_servers, folder, "filed late, older")  # a higher UID, an INTERNALDATE before the trigger
    h = await start()
    out = await h.wait_for("📧 after creation")
    await h.gw.idle()
    out += h.new_output()
    assert [line for line in out.splitlines() if "📧" in line] == ["📧 after creation"]
    await mail_drop.asend(folder, subject="next")  # the folder is baselined past all of them
    out = await h.wait_for("📧 next")
    await h.gw.idle()
    assert [line for line in (out + h.new_output()).splitlines() if "📧" in line] == ["📧 next"]


async def test_an_automation_turned_into_an_email_trigger_does_not_replay_the_folder(start: Any, mail_drop: MailDrop,
                                                                                     model: Any) -> None:
    folder = mail_drop.new_folder()
    cli = await start(resident=False)
    service = cli.gw.services["automations"]
    rec = await service.create(OWNER, CONSOLE, "daily", parse_schedule({"type": "every", "mode": "interval",
                                                                        "interval": "1d"}),
                               parse_action({"kind": "reminder", "text": "📧 {subject}"}))
    await mail_drop.asend(folder, subject="before the change")  # after its creation, before its change
    start_second = int(time.time())
    while int(time.time()) == start_second:  # INTERNALDATE has whole seconds: the change a second later
        await asyncio.sleep(0.05)
    await service.update(OWNER, rec.id, schedule=parse_schedule({"type": "email", "folder": folder}))
    await cli.gw.stop()
    await mail_drop.asend(folder, subject="after the change")
    h = await start()
    out = await h.wait_for("📧 after the change")
    await h.gw.idle()
    assert [line for line in (out + h.new_output()).splitlines() if "📧" in line] == ["📧 after the change"]


async def test_a_trigger_of_a_user_without_email_access_is_not_watched(start: Any, mail_drop: MailDrop,
                                                                       model: Any) -> None:
    h = await start()
    folder = mail_drop.new_folder()
    service = h.gw.services["automations"]
    guest_chat = Origin(surface="console", chat_id="guest-chat")
    await service.create("telegram:5005", guest_chat, "peek", parse_schedule({"type": "email", "folder": folder}),
                         Reminder(kind="reminder", text="GUEST SAW {subject}"))
    await watching(h, folder, action={"kind": "reminder", "text": "📧 {subject}"})
    await mail_drop.asend(folder, subject="private")
    out = await h.wait_for("📧 private")
    await h.gw.idle()
    assert "GUEST SAW" not in out + h.new_output()
    assert [t for t in h.gw.triggers.mail.folders[("default", folder)].watched.triggers
            if t[0].user_key == "telegram:5005"] == []


async def test_a_trigger_on_an_unknown_account_is_refused_when_created(start: Any, model: Any) -> None:
    h = await start()
    model.script(tool_call("automation_create", {"name": "bank", "schedule": {"type": "email", "account": "nope"},
                                                 "action": {"kind": "reminder"}}),
                 tool_call("automation_create", {"name": "meet", "schedule": {"type": "before_event", "minutes": 5},
                                                 "action": {"kind": "reminder"}}),
                 reply("Could not."))
    await h.say("create an automation for mail from the bank")
    results = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert "there is no account 'nope'; the accounts are: default" in results[0]
    assert "no calendar is configured, so this trigger could never fire" in results[1]
    assert await h.gw.services["automations"].list(OWNER) == []


async def test_without_a_trusted_authserv_id_no_sender_is_verified_and_creating_says_so(
        start_console: Any, email_config: Any, mail_drop: MailDrop, model: Any) -> None:
    h = await start_console(config=email_config(), toolsets=TOOLSETS)  # no auth_serv_id configured
    folder = mail_drop.new_folder()
    model.script(tool_call("automation_create", {"name": "bank", "schedule": {
        "type": "email", "folder": folder, "verified_sender": True}, "action": {"kind": "reminder"}}), reply("Made."))
    await h.say("tell me when the bank writes")
    [result] = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert "sender verification is not available on account 'default'" in result
    await h.gw.triggers.mail.refresh()
    await h.gw.triggers.mail.folders[("default", folder)].swept.wait()
    # A forged header alone (the server adds none) would be the topmost one; nothing is trusted here.
    await mail_drop.asend(folder, subject="forged", auth=None, headers={
        "Authentication-Results": f"{AUTHSERV}; dmarc=pass header.from=bank.example"})
    await mail_drop.asend(folder, subject="real", auth="dmarc=pass header.from=bank.example")
    watcher, events = h.gw.triggers.mail.folders[("default", folder)], TriggerEvents(h.gw.store)

    async def both_seen() -> None:
        while (mark := await events.watermark("default", folder)) is None or mark[1] < 2:
            watcher.swept.clear()
            await watcher.swept.wait()  # each look at the folder (pushed, or the sweep) ends in one

    await asyncio.wait_for(both_seen(), 30)
    await h.gw.idle()
    assert "📧" not in h.new_output()
