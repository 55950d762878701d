"""The Telegram step: the bot's token checked with getMe, then the owner found by the /start they send
the bot (no numeric id to look up), and answered in Telegram so they see it works.

The Bot API is called over plain HTTP (httpx): three methods, no surface to start. Its URLs hold the
token, so an error is reported by its kind, never with the URL.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.config import TelegramConfig
from gateway.setup.ask import Ask, SetupError, env_value

TOKEN_ENV = TelegramConfig.model_fields["token_env"].default


@dataclass
class TelegramAnswer:
    token_env: str
    token: str
    bot: str  # the bot's @username
    owner: int
    base_url: str


class BotApi:
    def __init__(self, base_url: str, token: str) -> None:
        self.url = f"{base_url}{token}/"
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(10, read=40))

    async def call(self, method: str, **params: Any) -> Any:
        try:
            r = await self.http.post(self.url + method, json=params)
            data = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SetupError(f"cannot reach the Telegram Bot API: {type(exc).__name__}") from None
        if not data.get("ok"):
            raise SetupError(f"Telegram refused {method}: {data.get('description') or r.status_code}")
        return data["result"]

    async def aclose(self) -> None:
        await self.http.aclose()


def start_sender(update: dict[str, Any], since: float) -> dict[str, Any] | None:
    """The sender of a private `/start` sent after `since` (a unix time), or None."""
    message = update.get("message") or {}
    text = (message.get("text") or "").strip()
    if (message.get("chat") or {}).get("type") != "private" or not (text == "/start" or text.startswith("/start ")):
        return None
    if message.get("date", 0) < since:  # a /start left over from before: not the person at this terminal
        return None
    sender = message.get("from") or {}
    return sender if isinstance(sender.get("id"), int) and not sender.get("is_bot") else None


async def wait_for_start(api: BotApi, since: float, timeout_s: float) -> dict[str, Any]:
    """Long-poll getUpdates until a /start arrives; confirms every update read, so the resident does not
    answer the /start again. Raises SetupError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    offset = 0
    while (left := deadline - time.monotonic()) > 0:
        updates = await api.call("getUpdates", offset=offset, timeout=int(min(25, max(1, left))),
                                 allowed_updates=["message"])
        for update in updates:
            offset = max(offset, update["update_id"] + 1)
            sender = start_sender(update, since)
            if sender is not None:
                await api.call("getUpdates", offset=offset, timeout=0)  # confirm: the /start is consumed
                return sender
    raise SetupError(f"no /start arrived within {timeout_s:g} s (run `anyy setup telegram` to try again)")


async def telegram_step(ask: Ask, args: Any, current: TelegramConfig | None,
                        secrets: dict[str, str]) -> TelegramAnswer:
    base_url = args.telegram_api or (current.base_url if current else TelegramConfig().base_url)
    token_env = args.telegram_token_env or (current.token_env if current else TOKEN_ENV)
    if ask.interactive and not args.telegram_token_env:
        ask.say("Create a bot: in Telegram, open @BotFather, send /newbot, pick a name; it gives you a token.")
    existing = secrets.get(token_env) or env_value(token_env)
    token = await ask.secret("The bot's token", flag="--telegram-token-env", env_name=args.telegram_token_env,
                             current=existing)
    api = BotApi(base_url, token)
    try:
        me = await api.call("getMe")
        bot = f"@{me.get('username')}"
        ask.say(f"Telegram: this is {bot}.")
        info = await api.call("getWebhookInfo")
        if info.get("url"):
            raise SetupError(f"{bot} has a webhook set ({info['url']}); it cannot receive /start here. "
                             "Remove it (deleteWebhook) or give --telegram-owner ID")
        owner = args.telegram_owner
        if owner is None:
            since = time.time() - 5  # Telegram's clock and ours may differ by a little
            ask.say(f"Now send /start to {bot} in Telegram (https://t.me/{me.get('username')}). Waiting…")
            sender = await wait_for_start(api, since, args.telegram_wait_s)
            who = " ".join(filter(None, [sender.get("first_name"), sender.get("last_name")])) or "someone"
            handle = f" (@{sender['username']})" if sender.get("username") else ""
            if not await ask.confirm(f"{who}{handle}, id {sender['id']}, sent /start. Make them the owner?",
                                     default=True):
                raise SetupError("no owner chosen (run `anyy setup telegram` to try again)")
            owner = sender["id"]
            await api.call("sendMessage", chat_id=owner,
                           text=f"Hi {sender.get('first_name') or 'there'}! You are my owner now. Setup goes on "
                                "in the terminal; once Anyy runs (`anyy run`), write to me here.")
        ask.say(f"Telegram: the owner is {owner}.")
        return TelegramAnswer(token_env, token, bot, int(owner), base_url)
    finally:
        await api.aclose()


def write_telegram(answer: TelegramAnswer, current: TelegramConfig | None, write: Any) -> None:
    users = list(current.allowed_users) if current else []
    if answer.owner not in users:
        users.append(answer.owner)
    write("allowed_users", users, "who may talk to Anyy: its owners (the ids of who sent /start in setup)")
    write("token_env", answer.token_env, "the variable in secrets.env holding the bot token")
    write("base_url", answer.base_url, "the Bot API server")
    if answer.base_url.endswith("/bot"):
        write("base_file_url", answer.base_url[:-len("bot")] + "file/bot", "where the Bot API serves files")

