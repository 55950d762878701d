"""The sessions toolset: full-text search over the current user's past conversations."""

from __future__ import annotations

import json

from store.messages import Messages
from store.records import parse_iso
from toolsets.base import ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "sessions",
    "search past conversations with the user",
    keywords=(
        r"\bwe (?:talked|spoke|discussed|said|decided|agreed|chatted)\b",
        r"\bwhat did (?:we|i|you) (?:say|decide|talk|tell|agree|suggest)", r"\b(?:i|you) (?:told|mentioned)\b",
        r"\b(?:did|have) i (?:ever |already )?(?:tell|told|mention)",
        r"\byou (?:gave|recommended|suggested|helped)\b",
        r"\b(?:a while|(?:a few|a couple of|\d{1,3}) (?:days|weeks|months)) (?:ago|back)\b",
        r"\b(?:old|past|previous|earlier|our) (?:chats?|conversations?|messages?)\b",
        r"\b(?:conversation|discussion)\b", r"\blook back\b", r"\bhave we\b",
        r"\b(?:what|when|where|which|how) (?:did|had) we\b",
        r"\b(?:we|you) (?:concluded|figured out|worked out|came up with|settled on)\b", r"之前", r"上次", r"上回",
        r"以前", r"前几天", r"前阵子", r"聊过", r"说过", r"提过", r"讨论过", r"聊天记录", r"历史", r"你给我的",
        r"你说的",
    ),
)

MAX_RESULTS = 20


@TOOLSET.tool()
async def session_search(ctx: ToolContext, query: str, limit: int = 5) -> str:
    """Search the user's past messages (all chats) for words; newest first, with snippets and dates.

    Args:
        query: Words that must all appear, e.g. "dentist friday". Plain text.
        limit: Max results, up to 20.
    """
    if not query.strip():
        raise ToolError("query is empty; give a few words the messages contain")
    # The store quotes every term as a literal phrase, so quotes or FTS operators in `query` are just text.
    wanted = min(max(limit, 1), MAX_RESULTS)
    hits = await Messages(ctx.store).search(ctx.user_key, query, wanted + 1)
    # The message being answered contains the words too; it is not "the past".
    hits = [h for h in hits if h.turn_id != ctx.turn_id][:wanted]
    found = [
        {
            "date": parse_iso(h.created_at).astimezone(ctx.tz).strftime("%Y-%m-%d %H:%M"),
            "session": "this chat" if h.session_id == ctx.session_id else h.session_id,
            "role": h.role,
            "snippet": h.snippet,
        }
        for h in hits
    ]
    # Old messages include pasted mail and tool results: quoted as data, like any outside content.
    return ctx.external("session_search", json.dumps(found, ensure_ascii=False))
