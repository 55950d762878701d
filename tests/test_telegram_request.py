"""The Telegram surface's Bot API transport (gateway/surfaces/telegram/request.py) with the real
python-telegram-bot on top, against real local servers: an answer that does not come in time is PTB's
`TimedOut` (a delivery in doubt, retried), a server that is not there is `NetworkError`, parameters
(nested ones too) arrive as one JSON body, and files as a multipart form."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup
from telegram.error import NetworkError, TimedOut

from gateway.surfaces.telegram.delivery import delivery_error
from gateway.surfaces.telegram.request import AiohttpRequest

TOKEN = "123:TEST"
ME = {"id": 123, "is_bot": True, "first_name": "Anyy", "username": "anyy_bot"}


class BotApi:
    """A Bot API server that records each request's content type and body; sendMessage stalls
    `stall_s` first."""

    def __init__(self) -> None:
        self.stall_s = 0.0
        self.requests: list[tuple[str, str, bytes]] = []  # (method, content type, body)
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/bot{token}/{method}", self._api)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/bot"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        self.requests.append((method, request.content_type, await request.read()))
        if method == "getMe":
            return web.json_response({"ok": True, "result": ME})
        await asyncio.sleep(self.stall_s)
        return web.json_response({"ok": True, "result": {
            "message_id": len(self.requests), "date": 0, "chat": {"id": 42, "type": "private"}, "from": ME,
            "text": "hi"}})


@pytest.fixture
async def api() -> AsyncIterator[BotApi]:
    server = BotApi()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def bot(api: BotApi) -> AsyncIterator[Bot]:
    bot = Bot(TOKEN, base_url=api.url, request=AiohttpRequest(2), get_updates_request=AiohttpRequest(1))
    await bot.initialize()
    try:
        yield bot
    finally:
        await bot.shutdown()


async def test_parameters_nested_ones_too_arrive_as_one_json_body(api: BotApi, bot: Bot) -> None:
    markup = InlineKeyboardMarkup([[InlineKeyboardButton("Yes", callback_data="y")]])
    message = await bot.send_message(42, "<b>hi</b>", parse_mode="HTML", reply_markup=markup)
    assert message.message_id == 2  # PTB read the answer into its Message
    method, content_type, body = api.requests[-1]
    assert (method, content_type) == ("sendMessage", "application/json")
    sent: dict[str, Any] = json.loads(body)
    assert sent["chat_id"] == 42 and sent["text"] == "<b>hi</b>" and sent["parse_mode"] == "HTML"
    assert sent["reply_markup"] == {"inline_keyboard": [[{"text": "Yes", "callback_data": "y"}]]}


async def test_a_file_goes_as_a_multipart_form(api: BotApi, bot: Bot) -> None:
    await bot.send_document(42, b"%PDF-1.4 data", filename="a.pdf", caption="the file")
    method, content_type, body = api.requests[-1]
    assert (method, content_type) == ("sendDocument", "multipart/form-data")
    assert b'filename="a.pdf"' in body and b"%PDF-1.4 data" in body and b"the file" in body


async def test_an_answer_later_than_the_read_timeout_is_timed_out_and_in_doubt(api: BotApi, bot: Bot) -> None:
    api.stall_s = 2.0
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimedOut) as caught:
        await bot.send_message(42, "hi", read_timeout=0.3)
    assert asyncio.get_running_loop().time() - started < 1.5
    error = delivery_error(caught.value)
    assert error.transient  # the outbox tries again


async def test_a_server_that_is_not_there_is_a_network_error() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    request = AiohttpRequest(1)
    await request.initialize()
    try:
        with pytest.raises(NetworkError) as caught:
            await request.post(f"http://127.0.0.1:{port}/bot{TOKEN}/getMe")
        assert not isinstance(caught.value, TimedOut)
    finally:
        await request.shutdown()


async def test_a_request_before_initialize_or_after_shutdown_is_refused() -> None:
    request = AiohttpRequest(1)
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request("http://127.0.0.1:9/", "POST")
    await request.initialize()
    await request.shutdown()
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request("http://127.0.0.1:9/", "POST")
