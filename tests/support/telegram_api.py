"""One bot on the fake Telegram Bot API: its state (pending updates, chat messages, files, webhook, every
call made with its token), what its users do (messages, photos, button taps), and the semantics of the Bot
API methods the surface uses. The HTTP server, long polling and the pytest fixtures are in
tests/fixtures/telegram.py; the JSON objects and the HTML check in tests/support/telegram_wire.py.

Everything here runs under the server's lock: tests call the user-side methods from their own thread and
event loop while the server thread answers requests.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tests.support import telegram_wire as wire

T = TypeVar("T")
OWNER_ID = 1001
GROUP_ID = -100777


class ApiError(Exception):
    """A Bot API error answer: HTTP status, description, and for 429 the retry_after parameter."""

    def __init__(self, status: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.retry_after = retry_after


@dataclass
class Call:
    """One Bot API request as the fake saw it: parameters decoded, and the HTTP status it answered."""

    method: str
    params: dict[str, Any]
    status: int = 200
    at: float = field(default_factory=time.monotonic)  # when it arrived (throttling tests)

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class _Waiter:
    check: Callable[[], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


@dataclass(eq=False)
class FakeBot:
    """One bot (one token) on the fake."""

    token: str
    id: int
    username: str
    port: int
    lock: threading.RLock
    wake: Callable[[], None]  # tells the server that updates arrived (ends long polls)
    calls: list[Call] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)  # not yet confirmed by an offset
    messages: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    webhook: dict[str, Any] = field(default_factory=dict)
    commands: list[dict[str, str]] = field(default_factory=list)
    failures: dict[str, list[ApiError | None]] = field(default_factory=dict)  # None: let one call pass
    _update_ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: Iterator[int] = field(default_factory=lambda: itertools.count(500))
    _waiters: list[_Waiter] = field(default_factory=list)

    # -- configuration for the code under test ------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/file/bot"

    def config(self, **overrides: Any) -> Any:
        """A TelegramConfig pointing at this bot on the fake."""
        from gateway.config import TelegramConfig  # here, so the fake itself needs no gateway code

        return TelegramConfig(**{"base_url": self.base_url, "base_file_url": self.base_file_url,
                                 "poll_timeout_s": 10, **overrides})

    # -- what users do --------------------------------------------------------------------------------

    def message(self, text: str | None = "", *, user_id: int = OWNER_ID, user_name: str = "owner",
                chat_id: int | None = None, chat_type: str = "private", thread_id: int | None = None,
                reply_to: int | None = None, update_id: int | None = None, inject: bool = True,
                **extra: Any) -> dict[str, Any]:
        """A user's message as an update, queued for the bot unless inject=False; returns the update.
        `thread_id` makes it a forum topic message, `reply_to` a reply to that message id of the chat,
        `extra` adds Message fields (caption, photo, document, voice...)."""
        if chat_id is None:
            chat_id = user_id if chat_type == "private" else GROUP_ID
        chat_json, sender = wire.chat(chat_id, chat_type), wire.user(user_id, user_name)
        with self.lock:
            message_id = next(self._message_ids)
            if thread_id is not None:
                extra.update(message_thread_id=thread_id, is_topic_message=True,
                             reply_to_message=wire.topic_opener(thread_id, chat_json, sender))
            if reply_to is not None:
                extra["reply_to_message"] = self.messages[(chat_id, reply_to)]
            body = wire.message(message_id, chat_json, sender, text or None, **extra)
            self.messages[(chat_id, message_id)] = body
            update = {"update_id": update_id or next(self._update_ids), "message": body}
        return self.inject(update) if inject else update

    def photo(self, data: bytes, caption: str | None = None, **kwargs: Any) -> dict[str, Any]:
        """A photo message: a thumbnail and the full size, as Telegram sends both."""
        sizes = [self.add_file(b"thumbnail", width=90, height=60), self.add_file(data, width=1280, height=853)]
        return self.message(None, photo=sizes, caption=caption, **kwargs)

    def press(self, message_id: int, data: str, *, chat_id: int = OWNER_ID, user_id: int = OWNER_ID,
              user_name: str = "owner", update_id: int | None = None) -> dict[str, Any]:
        """A tap on an inline button of message `message_id` carrying `data`; queued, and returned."""
        with self.lock:
            shown = self.messages[(chat_id, message_id)]
            query = {"id": f"q{time.monotonic_ns()}", "from": wire.user(user_id, user_name),
                     "chat_instance": "ci", "message": shown, "data": data}
            update = {"update_id": update_id or next(self._update_ids), "callback_query": query}
        return self.inject(update)

    def inject(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue an update for getUpdates (the same update_id again is a redelivery)."""
        with self.lock:
            self.updates.append(update)
            self.changed()
        self.wake()
        return update

    def add_file(self, data: bytes, **fields: Any) -> dict[str, Any]:
        """Store a downloadable file; returns its PhotoSize/Document-style JSON."""
        with self.lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = data
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(data), **fields}

    def fail(self, method: str, *, times: int = 1, after: int = 0, status: int = 429, description: str = "",
             retry_after: int | None = None) -> None:
        """Answer `times` calls of `method`, after the next `after` ones, with an error. 429 carries
        retry_after (default 1); the default 400 is Telegram's formatting rejection."""
        if status == 429:
            retry_after = retry_after or 1
            description = description or f"Too Many Requests: retry after {retry_after}"
        description = description or "Bad Request: can't parse entities: unsupported start tag \"x\""
        with self.lock:
            queue = self.failures.setdefault(method, [])
            queue.extend([None] * after + [ApiError(status, description, retry_after) for _ in range(times)])

    # -- inspection -----------------------------------------------------------------------------------

    def sent(self, method: str | None = None, *, ok: bool = True) -> list[Call]:
        """Calls so far (of `method`), only the successful ones unless ok=False."""
        with self.lock:
            return [c for c in self.calls if (method is None or c.method == method) and (c.ok or not ok)]

    def shown(self, chat_id: int, message_id: int) -> dict[str, Any]:
        """A message as the chat shows it now: "text" as visible, "reply_markup" absent once removed."""
        with self.lock:
            return dict(self.messages[(chat_id, message_id)])

    @property
    def pending(self) -> list[int]:
        """update_ids the bot has not confirmed yet (no getUpdates offset past them)."""
        with self.lock:
            return [u["update_id"] for u in self.updates]

    async def wait(self, check: Callable[[], T | None], timeout: float = 30.0, what: str = "a condition") -> T:
        """Wait until `check()`, evaluated under the lock after every change, returns something truthy;
        returns it. Raises AssertionError after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        with self.lock:
            value = check()
            if value:
                return value
            waiter = _Waiter(check, loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            raise AssertionError(f"fake Telegram: timed out waiting for {what}; "
                                 f"calls so far: {[c.method for c in self.sent(ok=False)]}") from None
        finally:
            with self.lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def wait_calls(self, method: str, count: int = 1, timeout: float = 30.0,
                         where: Callable[[Call], bool] = lambda c: True) -> list[Call]:
        """Wait for `count` successful calls of `method` (matching `where`); returns all such calls."""
        def check() -> list[Call] | None:
            found = [c for c in self.calls if c.method == method and c.ok and where(c)]
            return found if len(found) >= count else None

        return await self.wait(check, timeout, f"{count} x {method}")

    def changed(self) -> None:
        """Re-evaluate the waiters (called under the lock after every change)."""
        for waiter in list(self._waiters):
            value = waiter.check()
            if value:
                self._waiters.remove(waiter)
                waiter.loop.call_soon_threadsafe(_resolve, waiter.future, value)

    # -- the Bot API --------------------------------------------------------------------------------

    def answer(self, method: str, params: dict[str, Any]) -> Any:
        """Record the call and answer it (the result object), or raise ApiError. getUpdates is answered
        by `take_updates`, which the server calls after its long-poll wait."""
        with self.lock:
            call = Call(method, params)
            self.calls.append(call)
            try:
                queued = self.failures.get(method)
                failure = queued.pop(0) if queued else None
                if failure is not None:
                    raise failure
                handler = getattr(self, f"_api_{method}", None)
                if handler is None:
                    raise ApiError(404, "Not Found: method not found")
                return handler(params)
            except ApiError as exc:
                call.status = exc.status
                raise
            finally:
                self.changed()

    def take_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """getUpdates: confirm everything below `offset`, return what is left (up to `limit`)."""
        with self.lock:
            if self.webhook.get("url"):
                raise ApiError(409, "Conflict: can't use getUpdates method while webhook is active")
            offset = int(params.get("offset") or 0)
            self.updates = [u for u in self.updates if u["update_id"] >= offset]
            self.changed()
            return self.updates[:int(params.get("limit") or 100)]

    def _api_getUpdates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.take_updates(params)

    def _api_getMe(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**wire.user(self.id, self.username, is_bot=True), "can_join_groups": True,
                "can_read_all_group_messages": False, "supports_inline_queries": False}

    def _api_deleteWebhook(self, params: dict[str, Any]) -> bool:
        if params.get("drop_pending_updates"):
            self.updates.clear()
        self.webhook = {}
        return True

    def _api_setWebhook(self, params: dict[str, Any]) -> bool:
        if params.get("drop_pending_updates"):
            self.updates.clear()
        self.webhook = {"url": params["url"], "secret_token": params.get("secret_token")}
        return True

    def _api_getWebhookInfo(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.webhook.get("url", ""), "has_custom_certificate": False,
                "pending_update_count": len(self.updates)}

    def _api_setMyCommands(self, params: dict[str, Any]) -> bool:
        self.commands = params["commands"]
        return True

    def _api_sendChatAction(self, params: dict[str, Any]) -> bool:
        return True

    def _api_answerCallbackQuery(self, params: dict[str, Any]) -> bool:
        return True

    def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        known = next((m["chat"] for (c, _), m in self.messages.items() if c == chat_id), None)
        body = wire.message(next(self._message_ids), known or wire.chat(chat_id, "private"),
                            wire.user(self.id, self.username, is_bot=True), self._visible(params),
                            message_thread_id=params.get("message_thread_id"),
                            reply_markup=params.get("reply_markup"))
        self.messages[(chat_id, body["message_id"])] = body
        return body

    def _api_sendVoice(self, params: dict[str, Any]) -> dict[str, Any]:
        """A voice note upload: the OGG/Opus bytes arrive as the multipart field `voice`."""
        return self._file_message(params, "voice", {"duration": 1, "mime_type": "audio/ogg"})

    def _api_sendDocument(self, params: dict[str, Any]) -> dict[str, Any]:
        return self._file_message(params, "document", {"file_name": "file"})

    def _api_sendPhoto(self, params: dict[str, Any]) -> dict[str, Any]:
        """A photo upload: the image bytes arrive as the multipart field `photo`; shown as one size."""
        return self._file_message(params, "photo", {"width": 1024, "height": 1024})

    def _file_message(self, params: dict[str, Any], field: str, fields: dict[str, Any]) -> dict[str, Any]:
        data = params.get(field)
        if not isinstance(data, bytes) or not data:
            raise ApiError(400, f"Bad Request: there is no {field} in the request")
        if params.get("caption") is not None and len(self._caption(params)) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        chat_id = int(params["chat_id"])
        media = {**self.add_file(data), **fields}
        known = next((m["chat"] for (c, _), m in self.messages.items() if c == chat_id), None)
        body = wire.message(next(self._message_ids), known or wire.chat(chat_id, "private"),
                            wire.user(self.id, self.username, is_bot=True), None,
                            message_thread_id=params.get("message_thread_id"),
                            caption=self._caption(params) if params.get("caption") else None,
                            **{field: [media] if field == "photo" else media})
        self.messages[(chat_id, body["message_id"])] = body
        return body

    def _caption(self, params: dict[str, Any]) -> str:
        return self._visible({"text": params.get("caption", ""), "parse_mode": params.get("parse_mode")})

    def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        shown = self._existing(params)
        text, markup = self._visible(params), params.get("reply_markup")
        if text == shown.get("text") and markup == shown.get("reply_markup"):
            raise ApiError(400, "Bad Request: message is not modified: specified new message content and "
                                "reply markup are exactly the same as a current content and reply markup")
        shown["text"] = text
        shown.pop("reply_markup", None)  # an edit without a keyboard removes it, as on Telegram
        if markup:
            shown["reply_markup"] = markup
        return shown

    def _api_editMessageReplyMarkup(self, params: dict[str, Any]) -> dict[str, Any]:
        shown = self._existing(params)
        shown.pop("reply_markup", None)
        if params.get("reply_markup"):
            shown["reply_markup"] = params["reply_markup"]
        return shown

    def _api_getFile(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = params["file_id"]
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "file_size": len(self.files[file_id]),
                "file_path": f"documents/{file_id}.bin"}

    def download(self, path: str) -> bytes | None:
        with self.lock:
            return self.files.get(path.removeprefix("documents/").removesuffix(".bin"))

    def _existing(self, params: dict[str, Any]) -> dict[str, Any]:
        shown = self.messages.get((int(params["chat_id"]), int(params["message_id"])))
        if shown is None or shown["from"]["id"] != self.id:
            raise ApiError(400, "Bad Request: message to edit not found")
        return shown

    @staticmethod
    def _visible(params: dict[str, Any]) -> str:
        text = str(params.get("text", ""))
        if params.get("parse_mode") == "HTML":
            try:
                text = wire.visible_text(text)
            except wire.ParseError as exc:
                raise ApiError(400, str(exc)) from None
        elif params.get("parse_mode"):
            raise ApiError(400, f"Bad Request: the fake only speaks HTML, not {params['parse_mode']}")
        if not text.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text) > 4096:
            raise ApiError(400, "Bad Request: message is too long")
        return text


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)
