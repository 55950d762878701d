"""The Slack surface: a slack-bolt AsyncApp in Socket Mode (default) or HTTP mode.

Inbound: a DM or a mention becomes an `Inbound`, recorded by the gateway before Slack is acknowledged
(Bolt runs with process_before_response, so the ack is the listener's return). A button press is
acknowledged at once and forwarded to the gateway; what it answers is shown to the presser alone.
Outbound: Markdown rendered as mrkdwn, split to Slack's limits, buttons as Block Kit; errors mapped to
transient (retried by the dispatcher) or permanent `DeliveryError`s. Every post carries metadata naming
its outbox row, so a row a killed process was sending is looked up before it is posted again (`sent.py`).
Slack types stay in this package.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltRequest
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.config import SlackConfig
from gateway.surfaces.base import DeliveryError, GatewayPort, LiveSettings, Surface
from gateway.surfaces.slack.blocks import ACTION_ID, SECTION_LIMIT, message_blocks
from gateway.surfaces.slack.events import (
    COMMAND,
    SURFACE,
    Press,
    command_inbound,
    dedupe_key,
    is_turn,
    to_inbound,
    to_press,
)
from gateway.surfaces.slack.files import FileFetcher
from gateway.surfaces.slack.format import escape, mrkdwn_chunks, to_mrkdwn
from gateway.surfaces.slack.health import SocketConnection
from gateway.surfaces.slack.http import HttpReceiver
from gateway.surfaces.slack.sent import find_parts, metadata
from gateway.surfaces.text import split_text
from store.records import Attachment, Origin, Outbound, OutboxItem

log = logging.getLogger(__name__)

TEXT_LIMIT = 3900  # Slack advises at most 4,000 characters per message text
PROGRESS_REACTION = "hourglass_flowing_sand"
_PRESS_GRACE_S = 5.0
_TRANSIENT_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


class SlackSurface(Surface):
    """Anyy on Slack. `app_token` is needed in Socket Mode, `signing_secret` in HTTP mode."""

    name = SURFACE
    has_buttons = True
    max_text = TEXT_LIMIT
    live_interval_s = 1.0  # chat.update is a Tier 3 method (about 50 a minute); one edit a second fits

    def __init__(self, cfg: SlackConfig, bot_token: str, app_token: str | None, signing_secret: str | None,
                 data_dir: Path) -> None:
        self.cfg = cfg
        self._bot_token = bot_token
        self._app_token = app_token
        self._signing_secret = signing_secret
        self._attachments_dir = data_dir / "attachments" / SURFACE
        self._files: FileFetcher | None = None
        self._state = "down"
        self._client: AsyncWebClient | None = None
        self._gateway: GatewayPort | None = None
        self._bot_user_id = ""
        self._socket: SocketConnection | None = None
        self._http: HttpReceiver | None = None
        self._bolt: AsyncApp | None = None  # kept to open a new Socket Mode connection (start_pulling)
        self._presses: set[asyncio.Task[None]] = set()
        self._posted: dict[int, list[str]] = {}  # outbox id -> ts of the parts an interrupted delivery sent
        self._hourglasses: list[dict[str, str]] = []  # left by a dead process, for `start` to remove

    @property
    def http_port(self) -> int | None:
        """The port HTTP mode listens on (useful with `port = 0`), None in Socket Mode or when stopped."""
        return self._http.port if self._http else None

    @property
    def socket_connections(self) -> int:
        """How many websockets Socket Mode has opened (1 plus the reconnects)."""
        return self._socket.connections if self._socket else 0

    async def start(self, gateway: GatewayPort) -> None:
        self._state = "starting"
        try:
            await self._start(gateway)
        except BaseException:
            self._state = "down"
            raise
        self._state = "up"
        log.info("slack_started mode=%s bot_user=%s", self.cfg.mode, self._bot_user_id)

    async def _start(self, gateway: GatewayPort) -> None:
        if self.cfg.mode == "socket" and not self._app_token:
            raise RuntimeError(f"slack: Socket Mode needs an app-level token in ${self.cfg.app_token_env}")
        if self.cfg.mode == "http" and not self._signing_secret:
            raise RuntimeError(f"slack: HTTP mode needs the signing secret in ${self.cfg.signing_secret_env}")
        self._gateway = gateway
        # No retry handlers: the outbox dispatcher is the one place that decides about retrying. No shared
        # HTTP session either (one per call): nothing to close, so deliveries still work after stop().
        self._client = AsyncWebClient(token=self._bot_token, base_url=self.cfg.base_url, retry_handlers=[],
                                      logger=log, timeout=self.cfg.api_timeout_s)
        self._bot_user_id = await self._who_am_i(self._client)
        while self._hourglasses:  # recovered turns that ended before the client existed (`progress`)
            await _reaction(self._client.reactions_remove(**self._hourglasses.pop()), "remove")
        self._files = FileFetcher(self._bot_token, self.cfg.base_url, self._attachments_dir)
        app = AsyncApp(client=self._client, signing_secret=self._signing_secret or "", process_before_response=True,
                       logger=logging.getLogger(f"{__name__}.bolt"))
        app.event("message")(self._on_event)
        app.event("app_mention")(self._on_event)
        app.action(ACTION_ID)(self._on_action)
        app.command(COMMAND)(self._on_command)
        self._bolt = app
        if self.cfg.mode == "socket":
            if self.pull_on_start:
                await self.start_pulling()
        else:
            self._http = HttpReceiver(app, self.cfg.listen, self.cfg.port)
            await self._http.start()

    @property
    def pulls(self) -> bool:
        return self.cfg.mode == "socket"

    async def start_pulling(self) -> None:
        if self._socket is None and self._bolt is not None:
            self._socket = SocketConnection(self._bolt, self._app_token or "", self.cfg.socket_stale_s)
            await self._socket.start()

    async def stop_pulling(self) -> None:
        if self._socket is not None:
            await self._socket.stop()
            self._socket = None

    async def stop(self) -> None:
        self._state = "down"
        await self.stop_pulling()
        if self._http is not None:
            await self._http.stop()
            self._http = None
        if self._presses:  # a decision being made finishes; one stuck past the grace period is cut off
            _, stuck = await asyncio.wait(set(self._presses), timeout=_PRESS_GRACE_S)
            for task in stuck:
                task.cancel()
            await asyncio.gather(*stuck, return_exceptions=True)
        log.info("slack_stopped")

    def status(self) -> str:
        if self._state == "up" and self.pulls and self._socket is None:
            return "standby"  # sending; another resident sharing the store holds Socket Mode
        if self._state == "up" and self._socket is not None and not self._socket.connected:
            return "down"
        return self._state

    @staticmethod
    async def _who_am_i(client: AsyncWebClient) -> str:
        try:
            auth = await client.auth_test()
        except SlackApiError as exc:
            raise RuntimeError(f"slack: the bot token was refused by auth.test ({exc.response.get('error')}); "
                               "check the xoxb-… token") from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RuntimeError(f"slack: cannot reach the Web API at {client.base_url}: {exc}") from None
        return str(auth["user_id"])

    # -- inbound ---------------------------------------------------------------------------------------

    async def _on_event(self, event: dict[str, Any], body: dict[str, Any], request: AsyncBoltRequest) -> None:
        if not is_turn(event, self._bot_user_id):
            return
        assert self._gateway is not None and self._files is not None
        # Check before spending: a stranger's files are never fetched (the pairing reply still goes out).
        admitted = await self._gateway.admits(SURFACE, str(event["user"]))
        inbound = to_inbound(event, self._bot_user_id, await self._files.attachments(event) if admitted else [])
        # Returning acknowledges Slack, so the inbound must be durable first; False is a redelivery.
        accepted = await self._gateway.receive(inbound, dedupe_key(event))
        log.info("slack_inbound type=%s channel=%s ts=%s event_id=%s retry=%s accepted=%s", event.get("type"),
                 inbound.chat_id, inbound.platform_message_id, body.get("event_id"),
                 request.headers.get("x-slack-retry-num", ["0"])[0], accepted)

    async def _on_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """`/anyy …`: acknowledged at once (Slack allows 3 s), answered like a message in a DM; typed in a
        channel, answered in the DM instead, which the acknowledgement (shown to that person only) says."""
        found = command_inbound(body)
        if found is None or found[0].chat_id == body.get("channel_id"):
            await ack()
        else:
            await ack(text="I answer `/anyy` in our direct messages, not in the channel.")
        if found is None:
            return
        assert self._gateway is not None
        inbound, key = found
        accepted = await self._gateway.receive(inbound, key)
        log.info("slack_command channel=%s accepted=%s", inbound.chat_id, accepted)

    async def _on_action(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()  # within Slack's 3 s; the gateway's decision may take longer
        press = to_press(body)
        if press is not None:
            task = asyncio.create_task(self._press(press), name="slack-press")
            self._presses.add(task)
            task.add_done_callback(self._presses.discard)

    async def _press(self, press: Press) -> None:
        assert self._gateway is not None and self._client is not None
        log.info("slack_press action=%s user=%s channel=%s", press.action, press.user_id, press.origin.chat_id)
        try:
            answer = await self._gateway.press(SURFACE, press.user_id, press.action, press.value, press.origin,
                                               press.is_group)
            # Slack has no toast: the answer (a refusal, or the outcome) goes to the presser alone, as plain
            # text like a toast (it may name a stranger as they named themselves: no markup, link or mention).
            if answer:
                await self._client.chat_postEphemeral(
                    channel=press.origin.chat_id, user=press.user_id, text=escape(answer),
                    blocks=message_blocks(answer, [], plain=True), thread_ts=press.origin.thread_id)
        except Exception:
            log.exception("slack_press_failed action=%s user=%s", press.action, press.user_id)

    # -- outbound --------------------------------------------------------------------------------------

    async def deliver(self, item: OutboxItem, edit_platform_id: str | None) -> str | None:
        client = self._require_client()
        out = item.outbound
        if edit_platform_id is not None:
            return await self._edit(client, edit_platform_id, out)
        if out.attachment is not None:
            return await self._upload(client, out, out.attachment)
        if out.preformatted:  # plain_text sections: no link syntax, no markup, shown exactly as written
            chunks = split_text(out.text, SECTION_LIMIT, verbatim=True)
        else:
            chunks = mrkdwn_chunks(out.text, SECTION_LIMIT if out.buttons else TEXT_LIMIT)
        # A retry after a failure mid-way (say, ratelimited on part 3) resumes; parts 1-2 are not re-sent.
        posted = self._posted.setdefault(item.id, [])
        # A row in doubt (a killed process, or a call that got no answer, was sending it): the parts that
        # reached Slack are there, tagged; they count as sent, whichever attempt posted them.
        found = (await find_parts(client, item) or {}) if item.in_doubt else {}
        try:
            for index in range(len(posted), len(chunks)):
                last = index == len(chunks) - 1
                buttons = out.buttons if last else []
                blocks = message_blocks(chunks[index], buttons, plain=out.preformatted) \
                    if buttons or out.preformatted else None
                text = _fallback(chunks[index], out)
                earlier = found.get(index)
                with _delivery_errors():
                    if earlier is None:
                        response = await client.chat_postMessage(channel=out.origin.chat_id, text=text, blocks=blocks,
                                                                 thread_ts=out.origin.thread_id,
                                                                 metadata=metadata(item, index))
                        ts = str(response["ts"])
                    else:
                        ts = earlier.ts
                        if earlier.revision != item.revision:  # posted from an older text of the row
                            await client.chat_update(channel=out.origin.chat_id, ts=ts, text=text, blocks=blocks)
                posted.append(ts)
        except DeliveryError as exc:
            if not exc.transient:
                del self._posted[item.id]
            raise
        del self._posted[item.id]
        log.info("slack_delivered item=%d channel=%s parts=%d found=%d", item.id, out.origin.chat_id, len(chunks),
                 len(found))
        return f"{out.origin.chat_id}:{posted[-1]}"

    async def _upload(self, client: AsyncWebClient, out: Outbound, attachment: Attachment) -> str:
        """A file upload (files_upload_v2) into the conversation, the text as its comment."""
        try:
            data = await asyncio.to_thread(Path(attachment.path).read_bytes)
        except OSError as exc:  # the artifact was deleted meanwhile: nothing to retry
            raise DeliveryError(f"attachment {attachment.name} cannot be read: {exc.strerror}",
                                transient=False) from None
        try:
            with _delivery_errors():
                response = await client.files_upload_v2(
                    channel=out.origin.chat_id, thread_ts=out.origin.thread_id, file=data, filename=attachment.name,
                    title=attachment.name, initial_comment=to_mrkdwn(out.text) if out.text.strip() else None)
        except SlackRequestError as exc:  # the upload step itself failed (not a Web API answer)
            raise DeliveryError(f"slack: file upload failed: {exc}", transient=True) from exc
        file_id = str((response.get("file") or {}).get("id", ""))
        log.info("slack_uploaded channel=%s file=%s bytes=%d", out.origin.chat_id, file_id, len(data))
        return f"{out.origin.chat_id}:{file_id}"

    async def _edit(self, client: AsyncWebClient, platform_id: str, out: Outbound) -> str:
        channel, _, ts = platform_id.partition(":")
        if not ts:
            raise DeliveryError(f"not a slack message id: {platform_id!r}", transient=False)
        # An edit is one message: a text too long for it is cut at a good boundary and marked.
        if out.preformatted:
            chunks = split_text(out.text, SECTION_LIMIT - 1, verbatim=True)
        else:
            chunks = mrkdwn_chunks(out.text, SECTION_LIMIT - 1)
        text = chunks[0] + ("…" if len(chunks) > 1 else "")
        with _delivery_errors():
            await client.chat_update(channel=channel, ts=ts, text=_fallback(text, out),
                                     blocks=message_blocks(text, out.buttons, plain=out.preformatted))
        log.info("slack_edited channel=%s ts=%s buttons=%d", channel, ts, len(out.buttons))
        return platform_id

    def live(self, origin: Origin) -> LiveSettings:
        """Stream by chat.update; one message holds what an edit can (a section block, with room for
        the escaping of &, < and >)."""
        return LiveSettings(self.live_interval_s, SECTION_LIMIT * 9 // 10)

    @contextlib.asynccontextmanager
    async def progress(self, origin: Origin, platform_message_id: str | None) -> AsyncIterator[None]:
        """An hourglass reaction on the user's message while the turn runs (Slack bots cannot type).

        A turn recovered at start-up runs before the surface is connected: it shows no hourglass, but the
        process that died mid-turn may have left one, so it removes it at the end, or, when it ended
        before the surface started, the start removes it."""
        if platform_message_id is None:
            yield
            return
        target = {"channel": origin.chat_id, "timestamp": platform_message_id, "name": PROGRESS_REACTION}
        client = self._client
        added = client is None or await _reaction(client.reactions_add(**target), "add")
        try:
            yield
        finally:
            if added:
                client = self._client  # looked up again: the surface may have started while the turn ran
                if client is None:
                    self._hourglasses.append(target)
                else:
                    # Shielded so a second cancellation of the turn cannot leave the hourglass behind.
                    await asyncio.shield(_reaction(client.reactions_remove(**target), "remove"))

    def _require_client(self) -> AsyncWebClient:
        if self._client is None:
            raise DeliveryError("slack surface is not started", transient=True)
        return self._client


def _fallback(chunk: str, out: Outbound) -> str:
    """The message's `text` (notifications, and the whole message when there are no blocks). Escaped
    when preformatted, so not even a notification turns `<url|label>` into a link."""
    return escape(chunk) if out.preformatted else chunk


async def _reaction(call: Awaitable[Any], verb: str) -> bool:
    """Run a reactions.add/remove call; progress is decoration, so failures are logged, never raised."""
    try:
        await call
        return True
    except SlackApiError as exc:
        error = exc.response.get("error")
        log.info("slack_reaction_failed verb=%s error=%s", verb, error)
        return error == "already_reacted"
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("slack_reaction_failed verb=%s error=%s", verb, type(exc).__name__)
        return False


@contextlib.contextmanager
def _delivery_errors() -> Iterator[None]:
    """Translate Web API failures to DeliveryError: rate limits, 5xx and network trouble are transient."""
    try:
        yield
    except SlackApiError as exc:
        status = exc.response.status_code
        error = str(exc.response.get("error") or f"http_{status}")
        retry_after = exc.response.headers.get("Retry-After") if status == 429 or error == "ratelimited" else None
        transient = status == 429 or status >= 500 or error in _TRANSIENT_ERRORS
        raise DeliveryError(f"slack: {error}", transient=transient,
                            retry_after=float(retry_after) if retry_after else None) from exc
    except (aiohttp.ClientError, TimeoutError) as exc:  # no answer: Slack may have taken the call all the same
        raise DeliveryError(f"slack: network error {type(exc).__name__}", transient=True, in_doubt=True) from exc
