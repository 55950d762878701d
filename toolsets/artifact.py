"""The artifact toolset: the files this session received or produced (attachments, voice notes).

`artifact_inspect` gives what a file holds in the form the model can use: a text file's content (as
external content: a document someone sent may carry instructions that are not the owner's), an image
shown to a vision model (else its metadata), an audio file's transcript. Turns with attachments get this
toolset automatically (gateway.selection.selector).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from connectors.images import dimensions, image_part
from connectors.speech import SpeechError
from store.artifacts import Artifacts, mb
from store.records import ArtifactRecord
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "artifact",
    "files of this conversation: attachments and voice notes received, audio produced; list, inspect, pin",
    # Only what this conversation received or produced: a file on disk in general is the file toolset's.
    keywords=(
        r"\b(?:artifacts?|attachments?|attached|screenshots?|voice (?:notes?|memos?)|recordings?)\b",
        r"\b(?:the|that|this|these|those) (?:document|photo|picture|image|scan|recording)s?\b",
        r"\b(?:the|that|this) pdf\b",
        r"\b(?:pdf|document|photo|picture|image|pic|scan|file|video|receipt)s? (?:i|you) (?:just |have "
        r"|had )?(?:sent|attached|uploaded|shared|made|created|generated|produced|recorded)\b",
        r"附件", r"图片", r"照片", r"截图", r"录音", r"语音(?:消息|留言|条)", r"(?:这|那)(?:段|条)语音",
        r"(?:发给你|发你|发的)的?(?:文件|文档|表格|图)",
    ),
    requires="artifacts",
    guests=True,  # a guest's artifacts are their own session's files; nothing acts through the owner
)

TEXT_TYPES = ("text/", "application/json", "application/xml", "application/x-yaml", "application/csv")
_INSPECT_CHARS = 12_000


def _artifacts(ctx: ToolContext) -> Artifacts:
    service = ctx.service("artifacts")
    if service is None:
        raise ToolError("artifacts are not available in this runtime")
    return service


def _view(rec: ArtifactRecord) -> dict[str, Any]:
    return {"id": rec.id, "name": rec.name, "type": rec.type, "size": rec.size, "pinned": rec.pinned,
            "origin": rec.origin, "created_at": rec.created_at}


async def _get(ctx: ToolContext, artifact_id: str) -> ArtifactRecord:
    rec = await _artifacts(ctx).get(ctx.session_id, artifact_id)
    if rec is None:
        raise ToolError(f"no artifact {artifact_id!r} in this conversation; artifact_list shows the ids")
    if not await asyncio.to_thread(Path(rec.path).is_file):
        # Residents sharing a database keep files on their own disks (docs/scale.md): say so, never guess.
        raise ToolError(f"the file of {rec.name} ({artifact_id}) is not on this machine: it was stored by another "
                        "Anyy resident sharing this database, or deleted; send the file again to use it here")
    return rec


@TOOLSET.tool()
async def artifact_list(ctx: ToolContext) -> list[dict[str, Any]]:
    """The files of this conversation, newest first: attachments received and audio produced."""
    return [_view(r) for r in await _artifacts(ctx).for_session(ctx.session_id)]


@TOOLSET.tool(visible_chars=_INSPECT_CHARS + 1000)
async def artifact_inspect(ctx: ToolContext, artifact_id: str) -> dict[str, Any]:
    """What a file holds: a text file's content, an image (shown to you when you can see images, else
    its size), an audio file's transcript.

    Args:
        artifact_id: The artifact's id, from artifact_list or the attachment line of a message.
    """
    rec = await _get(ctx, artifact_id)
    out = _view(rec)
    path = Path(rec.path)
    if rec.type.startswith(TEXT_TYPES):
        text = (await asyncio.to_thread(path.read_bytes)).decode("utf-8", errors="replace")
        cut = len(text) > _INSPECT_CHARS
        out["content"] = ctx.external(f"file {rec.name}", text[:_INSPECT_CHARS])
        if cut:
            out["truncated"] = f"the first {_INSPECT_CHARS} of {len(text)} characters"
    elif rec.type.startswith("image/"):
        size = await dimensions(path)
        if size:
            out["width"], out["height"] = size
        vision = ctx.service("vision")
        if vision is None:
            out["note"] = "this model cannot see images; only the metadata is available"
        else:
            part = await image_part(path, rec.name, rec.id, vision.max_side, vision.max_bytes, vision.max_pixels)
            if isinstance(part, str):
                raise ToolError(f"{rec.name} is {part}")
            ctx.show_image(part)
            out["note"] = "the image follows this result"
    elif rec.type.startswith("audio/") or "transcript" in rec.meta:
        out["transcript"] = ctx.external(f"transcript of {rec.name}", await _transcript(ctx, rec))
    else:
        out["note"] = f"a binary file ({mb(rec.size)}); its content cannot be shown"
    return out


async def _transcript(ctx: ToolContext, rec: ArtifactRecord) -> str:
    if "transcript" in rec.meta:
        return str(rec.meta["transcript"])
    transcriber = ctx.service("speech")
    if transcriber is None:
        raise ToolError("no transcript, and no transcription server is configured ([speech] transcribe_url)")
    try:
        text = await transcriber.transcribe(Path(rec.path), rec.type)
    except SpeechError as exc:
        raise ToolError(str(exc)) from None
    await _artifacts(ctx).update_meta(rec.id, {"transcript": text})
    return text


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def artifact_pin(ctx: ToolContext, artifact_id: str, pinned: bool = True) -> dict[str, Any]:
    """Keep a file beyond the retention period (unpinned files are deleted after [artifacts] retention_days).

    Args:
        artifact_id: The artifact's id.
        pinned: False to let it expire again.
    """
    rec = await _artifacts(ctx).pin(ctx.session_id, artifact_id, pinned)
    if rec is None:
        raise ToolError(f"no artifact {artifact_id!r} in this conversation; artifact_list shows the ids")
    return _view(rec)
