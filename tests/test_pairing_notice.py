"""A stranger writes; each owner is told, with Admit / Ignore buttons — through `anyy run` on the fake
Telegram, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.access import MAX_NOTICES_PER_HOUR, Access
from gateway.config import parse_config
from store.records import Inbound
from tests.fixtures.model import FakeModel
from tests.support.cli import SUBPROCESS_S
from tests.support.resident import resident, run_config
from tests.support.telegram_api import OWNER_ID, FakeBot

STRANGER_ID = 2002
SECOND_OWNER = 1002


def buttons(call: Any) -> list[tuple[str, str]]:
    markup = call.params.get("reply_markup")
    markup = json.loads(markup) if isinstance(markup, str) else markup or {}
    return [(b["text"], b["callback_data"]) for row in markup.get("inline_keyboard", []) for b in row]


async def test_the_owners_are_asked_and_admit_pairs_the_stranger(tg: FakeBot, model: FakeModel,
                                                                 tmp_path: Path) -> None:
    config = run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}, {SECOND_OWNER}]
poll_timeout_s = 10
""")
    async with resident(tmp_path, config, {"TELEGRAM_BOT_TOKEN": tg.token}) as anyy:
        tg.message("hello?", user_id=STRANGER_ID, user_name="Mallory [click](https://evil.example)")

        def notices() -> list[Any]:
            found = [c for c in tg.sent("sendMessage") if int(c.params["chat_id"]) in (OWNER_ID, SECOND_OWNER)]
            return found if len(found) == 2 else []

        sent = await tg.wait(notices, timeout=SUBPROCESS_S, what="a notice to each owner")
        first = next(c for c in sent if int(c.params["chat_id"]) == OWNER_ID)
        text = first.params["text"]
        assert f"Mallory clickhttpsevil.example (user {STRANGER_ID}) wants to talk to Anyy" in text, text
        code = text.split("Code ")[1][:8]
        assert buttons(first) == [("Admit", f"p:{code}"), ("Ignore", f"i:{code}")]
        # A guest or a stranger pressing would be refused; the owner's tap admits.
        with tg.lock:
            [message_id] = [m for (chat, m), body in tg.messages.items()
                            if chat == OWNER_ID and code in (body.get("text") or "")]
        tg.press(message_id, f"p:{code}")

        def welcomed() -> list[Any]:
            return [c for c in tg.sent("sendMessage") if int(c.params["chat_id"]) == STRANGER_ID
                    and "the owner admitted you" in c.params["text"]]

        await tg.wait(welcomed, timeout=SUBPROCESS_S, what="the welcome")
        answered = [c for c in tg.sent("answerCallbackQuery") if "Admitted" in (c.params.get("text") or "")]
        assert answered, tg.sent("answerCallbackQuery")

        def rewritten() -> list[Any]:  # both owners' notices now say what happened, without buttons
            found = [c for c in tg.sent("editMessageText")
                     if "admitted as a guest by telegram:1001" in c.params["text"]]
            return found if len(found) == 2 else []

        edits = await tg.wait(rewritten, timeout=SUBPROCESS_S, what="the notices rewritten")
        assert all(not buttons(c) for c in edits)
        tg.message("now?", user_id=STRANGER_ID, user_name="Mallory")
        await model.wait_for_requests(1, timeout=SUBPROCESS_S)  # a guest now: their message reaches the model
        assert await anyy.terminate() == 0, anyy.output()


async def test_ignore_leaves_them_unpaired_and_notices_are_rate_limited(store) -> None:
    config = parse_config({"telegram": {"allowed_users": [OWNER_ID]}})
    access = Access(store, config)
    answers = [await access.pairing_reply(Inbound(surface="telegram", chat_id=str(9000 + n), user_id=str(9000 + n),
                                                  text="hi", user_name=f"s{n}"))
               for n in range(MAX_NOTICES_PER_HOUR + 2)]
    assert [len(a.notices) for a in answers] == [1] * MAX_NOTICES_PER_HOUR + [0, 0]
    assert all(a.reply and "pairing code" in a.reply for a in answers)  # each stranger still gets a code
    notice, key = answers[0].notices[0]
    code = notice.buttons[1].value
    ignored = await access.decide_pairing("telegram", str(OWNER_ID), code, admit=False)
    assert "Ignored" in ignored.answer and ignored.welcome is None and await access.role("telegram", "9000") is None
    [(edit, edit_key)] = ignored.edits  # the notice is rewritten in place, without its buttons
    assert edit_key == key and edit.buttons == [] and "ignored by telegram:1001" in edit.text
    refused = await access.decide_pairing("telegram", "9001", code, admit=True)  # not an owner
    assert "Only the owner" in refused.answer and not refused.edits and await access.role("telegram", "9000") is None
    admitted = await access.decide_pairing("telegram", str(OWNER_ID), code, admit=True)
    assert admitted.answer.startswith("Admitted s0") and admitted.welcome is not None
    assert await access.role("telegram", "9000") == "guest"
    again = await access.decide_pairing("telegram", str(OWNER_ID), code, admit=True)
    assert "already used" in again.answer and again.welcome is None
