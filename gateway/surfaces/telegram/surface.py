"""The Telegram surface: python-telegram-bot's Application running inside Anyy's event loop.

Updates arrive by long polling (default) through PTB's Updater, or by webhook through our own receiver
(`webhook`: it checks the secret before reading a body, which PTB's server does not), and are dispatched
by PTB handlers: messages become `Inbound`s for `GatewayPort.receive`, button presses go to `GatewayPort.press`.
The Updater acknowledges a batch of updates only after their handlers returned (see `handoff`: a batch
is handled side by side, one update at a time per chat), and the dedupe key
"telegram:update:<update_id>" makes a redelivered update a no-op, so neither a crash nor a restart
loses or repeats a message. Pending updates are never dropped at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dtm
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlparse

from telegram import Bot, BotCommand, CallbackQuery, Message, Update
from telegram.constants import ChatAction, ChatType
from telegram.error import BadRequest, Forbidden, InvalidToken, NetworkError, RetryAfter, TelegramError
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from gateway.config import TelegramConfig, secret
from gateway.surfaces.base import DeliveryError, GatewayPort, LiveSettings, Surface
from gateway.surfaces.telegram.delivery import Sender, retry_after_s, target
from gateway.surfaces.telegram.handoff import ChatOrdered, HandoffQueue, PollingBot
from gateway.surfaces.telegram.inbound import SURFACE, addressed_text, download_attachments, thread_of, to_inbound
from gateway.surfaces.telegram.keyboard import decode
from gateway.surfaces.telegram.limits import FloodLimiter
from gateway.surfaces.telegram.request import AiohttpRequest
from gateway.surfaces.telegram.webhook import WebhookReceiver
from store.records import Origin, OutboxItem

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ["message", "callback_query"]
# Telegram's command menu: every slash command (gateway/commands.py) but /start, which Telegram sends
# itself. tests/test_telegram.py checks the two lists match.
COMMANDS = [
    ("help", "What I can do"),
    ("new", "Start a new conversation"),
    ("compact", "Summarise the older part of this conversation"),
    ("tools", "Tools available here"),
    ("toolsets", "Pin or unpin toolsets"),
    ("remind", "Set a reminder: /remind 10m stretch"),
    ("reminders", "List reminders"),
    ("cancel", "Cancel a reminder: /cancel ID"),
    ("briefing", "Daily morning briefing: /briefing 7:30 or off"),
    ("tasks", "List tasks"),
    ("approvals", "Actions waiting for approval"),
    ("approve", "Approve an action: /approve ID"),
    ("deny", "Deny an action: /deny ID [reason]"),
    ("usage", "Tokens used and their cost"),
    ("status", "Model, zone, toolsets, and what a write would wait for"),
]
_SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
_BOOTSTRAP_ATTEMPTS = 3  # setWebhook at start-up
_ANSWER_LIMIT = 200  # characters Telegram shows in a callback answer
# Bot API requests at once: replies into different chats go out side by side. Four keep 30 a second
# (Telegram's limit for a bot) going with up to ~130 ms per request; eight saved no CPU in
# bench/telegram_load.py and slowed the turns running meanwhile (more of them past the typing delay).
CONNECTIONS = 4
CONCURRENT_UPDATES = 64  # updates handled at once (one at a time per chat: handoff.ChatOrdered)
_MESSAGES = filters.UpdateType.MESSAGE & (
    filters.TEXT | filters.CAPTION | filters.PHOTO | filters.Document.ALL | filters.VOICE | filters.AUDIO)


class TelegramSurface(Surface):
    """Telegram through python-telegram-bot, polling or webhook, with inline-keyboard buttons."""

    name = SURFACE
    has_buttons = True
    max_text = 4096
    typing_interval_s = 4.0  # Telegram shows "typing" for 5 s after each chat action
    # A reply that comes sooner needs no "typing…" sign; a backlog of quick turns then costs no chat actions.
    typing_delay_s = 1.0
    # Streamed replies: Telegram allows about one message a second per chat and 20 a minute in a group.
    live_interval_s = 1.0
    live_group_interval_s = 3.0

    def __init__(self, cfg: TelegramConfig, token: str, data_dir: Path) -> None:
        self.cfg = cfg
        self._token = token
        self._attachments = data_dir / "attachments" / "telegram"
        self._app: Application | None = None
        self._queue: HandoffQueue | None = None
        self._sender: Sender | None = None
        self._gateway: GatewayPort | None = None
        self._webhook: WebhookReceiver | None = None

    # -- lifecycle ----------------------------------------------------------------------------------

    async def start(self, gateway: GatewayPort) -> None:
        """Check the token (getMe), set the command menu, and start polling or the webhook server."""
        if not self._token:
            raise RuntimeError(f"telegram: no bot token; set the environment variable {self.cfg.token_env}")
        webhook_secret = self._webhook_secret() if self.cfg.mode == "webhook" else None
        self._gateway = gateway
        self._queue = HandoffQueue()
        # Two getUpdates connections: the long poll that stop() cancels may not have released its
        # connection yet when the Updater's final getUpdates (which confirms handled updates) goes out.
        bot = PollingBot(self._queue, token=self._token, base_url=self.cfg.base_url,
                         base_file_url=self.cfg.base_file_url, request=AiohttpRequest(CONNECTIONS),
                         get_updates_request=AiohttpRequest(2),
                         rate_limiter=FloodLimiter(self.cfg.limits, CONNECTIONS))
        app = (Application.builder().bot(bot).update_queue(self._queue).job_queue(None)
               .concurrent_updates(ChatOrdered(CONCURRENT_UPDATES)).build())
        app.add_handler(MessageHandler(_MESSAGES, self._on_message))
        app.add_handler(CallbackQueryHandler(self._on_press))
        app.add_error_handler(self._on_error)
        self._app = app
        try:
            await app.initialize()
        except InvalidToken:
            raise RuntimeError(f"telegram: the bot token in {self.cfg.token_env} was rejected") from None
        except TelegramError as exc:
            raise RuntimeError(f"telegram: cannot reach the Bot API: {exc}") from None
        self._sender = Sender(app.bot, self.max_text)
        await self._set_commands()
        await app.start()
        assert app.updater is not None  # the builder made one: no .updater(None) above
        if webhook_secret is None:
            if self.pull_on_start:
                await self.start_pulling()
        else:
            self._webhook = WebhookReceiver(app.bot, self._queue, webhook_secret, listen=self.cfg.listen,
                                            port=self.cfg.port, path=urlparse(self.cfg.webhook_url).path)
            await self._webhook.start()  # listening before Telegram is told where to push
            await self._set_webhook(app.bot, webhook_secret)
        log.info("telegram_started mode=%s bot=%s", self.cfg.mode, app.bot.username)

    @property
    def pulls(self) -> bool:
        return self.cfg.mode != "webhook"

    async def start_pulling(self) -> None:
        app = self._app
        if app is not None and app.updater is not None and not app.updater.running:
            await app.updater.start_polling(
                timeout=dtm.timedelta(seconds=self.cfg.poll_timeout_s), bootstrap_retries=3,
                allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False, error_callback=self._on_poll_error)

    async def stop_pulling(self) -> None:
        app = self._app
        if app is not None and app.updater is not None and app.updater.running:
            await app.updater.stop()

    def _webhook_secret(self) -> str:
        if not self.cfg.webhook_url:
            raise RuntimeError("telegram: mode = \"webhook\" needs webhook_url (the public HTTPS address)")
        value = secret(self.cfg.secret_token_env)
        if value is None or not _SECRET_TOKEN.fullmatch(value):
            raise RuntimeError(f"telegram: webhook mode needs a secret token in {self.cfg.secret_token_env} "
                               "(1-256 characters: letters, digits, _ and -)")
        return value

    async def _set_webhook(self, bot: Bot, webhook_secret: str) -> None:
        for attempt in range(1, _BOOTSTRAP_ATTEMPTS + 1):
            try:
                await bot.set_webhook(self.cfg.webhook_url, secret_token=webhook_secret,
                                      allowed_updates=ALLOWED_UPDATES, drop_pending_updates=False)
                return
            except NetworkError as exc:  # a transient failure at start-up: try again shortly
                if attempt == _BOOTSTRAP_ATTEMPTS:
                    raise RuntimeError(f"telegram: cannot set the webhook: {exc}") from None
                await asyncio.sleep(attempt)

    async def _set_commands(self) -> None:
        assert self._app is not None
        try:
            await self._app.bot.set_my_commands([BotCommand(c, d) for c, d in COMMANDS])
        except TelegramError as exc:  # a missing menu is cosmetic; messages still work
            log.warning("telegram_commands_not_set error=%s", exc)

    async def stop(self) -> None:
        """Stop receiving (updates being handled finish first), then close the Bot API connections.
        Deliveries after this fail as transient, so their outbox rows go out at the next start."""
        app, self._app, self._sender = self._app, None, None
        if app is None:
            return
        if self._webhook is not None:  # first, so updates being handled still reach the Application
            await self._webhook.stop()
            self._webhook = None
        if app.updater is not None and app.updater.running:
            await app.updater.stop()
        if app.running:
            await app.stop()
        await app.shutdown()
        log.info("telegram_stopped")

    def status(self) -> str:
        """"up" while polling or the webhook server runs, else "down"."""
        app = self._app
        if app is None:
            return "down"
        polling = app.updater is not None and app.updater.running
        if polling or (self._webhook is not None and self._webhook.running):
            return "up"
        # Sending works; another resident sharing the store polls (gateway/surfaces/pull_lease.py).
        return "standby" if self.pulls and not self.pull_on_start and app.running else "down"

    # -- receiving ----------------------------------------------------------------------------------

    async def _on_message(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message, gateway = update.message, self._gateway
        if message is None or gateway is None or message.from_user is None or message.from_user.is_bot:
            return
        text = addressed_text(message, context.bot.bot)
        if text is None:
            log.debug("telegram_ignored update=%s chat=%s reason=not_addressed", update.update_id, message.chat_id)
            return
        # Check before spending: a stranger's files are never fetched (the pairing reply still goes out).
        admitted = await gateway.admits(self.name, str(message.from_user.id))
        attachments = await download_attachments(message, self._attachments) if admitted else []
        inbound = to_inbound(message, message.from_user, text, attachments)
        accepted = await gateway.receive(inbound, f"telegram:update:{update.update_id}")
        log.info("telegram_inbound update=%s chat=%s thread=%s attachments=%s duplicate=%s", update.update_id,
                 inbound.chat_id, inbound.thread_id, len(attachments), not accepted)

    async def _on_press(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query, gateway = update.callback_query, self._gateway
        if query is None or gateway is None:
            return
        # An old message may come back as InaccessibleMessage: chat and id only, no keyboard or topic.
        message = query.message
        shown = message if isinstance(message, Message) else None
        decoded = decode(query.data or "", shown.reply_markup if shown else None)
        if message is None or decoded is None:
            await self._answer(query, "This button is no longer active.")
            return
        action, value = decoded
        origin = Origin(surface=self.name, chat_id=str(message.chat.id), thread_id=thread_of(shown) if shown else None)
        log.info("telegram_press update=%s chat=%s action=%s", update.update_id, origin.chat_id, action)
        is_group = message.chat.type != ChatType.PRIVATE
        await self._answer(query, await gateway.press(self.name, str(query.from_user.id), action, value, origin,
                                                      is_group))

    @staticmethod
    async def _answer(query: CallbackQuery, text: str) -> None:
        if len(text) > _ANSWER_LIMIT:
            text = text[:_ANSWER_LIMIT - 1] + "…"
        try:
            await query.answer(text)
        except TelegramError as exc:  # e.g. a redelivered press whose query expired: the decision stands
            log.debug("telegram_answer_failed error=%s", exc)

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        update_id = update.update_id if isinstance(update, Update) else None
        log.error("telegram_update_failed update=%s error=%s", update_id, type(context.error).__name__,
                  exc_info=context.error)
        if self._queue is not None:
            self._queue.mark_failed(update)

    @staticmethod
    def _on_poll_error(exc: TelegramError) -> None:
        log.warning("telegram_poll_error error=%s", exc)

    # -- sending ------------------------------------------------------------------------------------

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        """Send the item (split when long; returns the id of the last part, which carries any buttons),
        or edit message `edit_platform_id` to it (no buttons in the item removes the keyboard)."""
        if self._sender is None:
            raise DeliveryError("telegram is not running", transient=True)
        return await self._sender.deliver(item, edit_platform_id)

    def live(self, origin: Origin) -> LiveSettings:
        """Stream by editing the message: once a second in a private chat, every 3 s in a group."""
        group = origin.chat_id.startswith("-")
        # Room for the unfinished mark; Telegram's limit counts the visible text, which Markdown only shortens.
        return LiveSettings(self.live_group_interval_s if group else self.live_interval_s, self.max_text - 8)

    @contextlib.asynccontextmanager
    async def progress(self, origin: Origin, platform_message_id: str | None) -> AsyncIterator[None]:
        """Keep "typing…" showing while the turn runs, once it has run `typing_delay_s`; stopped however
        the turn ends."""
        if self._app is None:
            yield
            return
        task = asyncio.create_task(self._keep_typing(self._app.bot, origin), name=f"telegram-typing:{origin.key()}")
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _keep_typing(self, bot: Bot, origin: Origin) -> None:
        chat, thread = target(origin)
        await asyncio.sleep(self.typing_delay_s)
        while True:
            try:
                await bot.send_chat_action(chat, ChatAction.TYPING, message_thread_id=thread)
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_s(exc))
                continue
            except (BadRequest, Forbidden) as exc:  # chat gone or bot blocked: nobody to show it to
                log.debug("telegram_typing_stopped chat=%s error=%s", origin.chat_id, exc)
                return
            except TelegramError as exc:
                log.debug("telegram_typing_failed chat=%s error=%s", origin.chat_id, exc)
            await asyncio.sleep(self.typing_interval_s)
