"""Finding the parts of an outbox row that an earlier, killed process posted to Slack.

Every part is posted with message metadata naming its outbox row and index (and the row's revision, so a
part posted from an older text can be brought up to date). A row left "in doubt" (a send began and its
outcome was never recorded) is looked up before anything is posted again: `conversations.replies` for a
thread, `conversations.history` since the row was written otherwise. Slack types stay in this package.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from store.records import OutboxItem

log = logging.getLogger(__name__)

EVENT_TYPE = "anyy_outbox"
# Slack's clock and ours may differ; the lookup starts this long before the row was written.
_CLOCK_SKEW = timedelta(minutes=5)
_PAGE = 200
_MAX_PAGES = 5  # a DM or a thread rarely has more than a few messages since the row was written


@dataclass(frozen=True)
class Found:
    """A part already on Slack: its ts and the row revision it was posted from (None: not recorded)."""

    ts: str
    revision: int | None


def metadata(item: OutboxItem, index: int) -> dict[str, Any]:
    """The metadata that tags part `index` of `item` as ours, stable across processes."""
    return {"event_type": EVENT_TYPE,
            "event_payload": {"key": f"{item.id}:{index}", "revision": item.revision}}


async def find_parts(client: AsyncWebClient, item: OutboxItem) -> dict[int, Found] | None:
    """The parts of `item` already posted, by index; None when the lookup itself failed (a missing
    history scope, a network error), which the caller answers by posting."""
    origin = item.outbound.origin
    oldest = f"{(datetime.fromisoformat(item.created_at) - _CLOCK_SKEW).timestamp():.6f}"
    found: dict[int, Found] = {}
    cursor: str | None = None
    try:
        for _ in range(_MAX_PAGES):
            if origin.thread_id:
                page = await client.conversations_replies(channel=origin.chat_id, ts=origin.thread_id, oldest=oldest,
                                                          include_all_metadata=True, limit=_PAGE, cursor=cursor)
            else:
                page = await client.conversations_history(channel=origin.chat_id, oldest=oldest,
                                                          include_all_metadata=True, limit=_PAGE, cursor=cursor)
            for message in page.get("messages") or []:
                _collect(found, message, item.id)
            cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                break
    except SlackApiError as exc:
        log.info("slack_lookup_failed item=%d channel=%s error=%s", item.id, origin.chat_id,
                 exc.response.get("error"))
        return None
    except (aiohttp.ClientError, TimeoutError) as exc:
        log.info("slack_lookup_failed item=%d channel=%s error=%s", item.id, origin.chat_id, type(exc).__name__)
        return None
    log.info("slack_lookup item=%d channel=%s found=%d", item.id, origin.chat_id, len(found))
    return found


def _collect(found: dict[int, Found], message: dict[str, Any], item_id: int) -> None:
    meta = message.get("metadata") or {}
    if meta.get("event_type") != EVENT_TYPE:
        return
    payload = meta.get("event_payload") or {}
    row, _, index = str(payload.get("key", "")).partition(":")
    if row != str(item_id) or not index.isdigit():
        return
    revision = payload.get("revision")
    found[int(index)] = Found(str(message["ts"]), revision if isinstance(revision, int) else None)
