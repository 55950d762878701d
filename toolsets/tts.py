"""The tts toolset: `text_to_speech` turns text into a voice note, saved as an artifact and sent to
this chat (a Telegram voice note, a Slack file, a saved path on the console). It exists only when a
speech engine is configured and usable ([tts] engine)."""

from __future__ import annotations

from typing import Any

from connectors.speech import VOICE_MIME, SpeechError
from store.artifacts import ArtifactLimit, Artifacts
from store.records import Attachment
from toolsets.base import ExecutionPolicy, Risk, ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "tts",
    "text to speech: send the user a voice note",
    keywords=(
        r"\b(?:read (?:it|this|that)? ?(?:out|aloud)|aloud|out loud|speak|say it)\b",
        r"\b(?:as|in|with|via|by|send(?: me)?|record(?: me)?) an? (?:voice|audio) (?:note|message|memo|reply"
        r"|version)\b",
        r"\b(?:text to speech|tts|audio (?:version|message)|i'?m driving)\b", r"朗读", r"念给我", r"读出来",
        r"(?:用|发|回)语音", r"语音(?:回复|版|读)", r"开车",
    ),
    requires="tts",
)

MAX_CHARS = 4000


@TOOLSET.tool(risk=Risk.RUNTIME_LOW, execution=ExecutionPolicy.AUDIT)
async def text_to_speech(ctx: ToolContext, text: str, voice: str | None = None) -> dict[str, Any]:
    """Speak `text` as a voice note and send it to the user in this chat (e.g. while they drive).

    Args:
        text: What to say, as plain spoken sentences (no Markdown, no URLs read out).
        voice: The engine's voice, e.g. "en", "de" for espeak-ng; the configured one when omitted.
    """
    if not text.strip():
        raise ToolError("text is empty; give the words to speak")
    if len(text) > MAX_CHARS:
        raise ToolError(f"text is {len(text)} characters; speak at most {MAX_CHARS} at a time")
    engine = ctx.service("tts")
    artifacts: Artifacts | None = ctx.service("artifacts")
    if engine is None or artifacts is None:
        raise ToolError("no speech engine is configured ([tts] engine)")
    try:
        audio = await engine.synthesize(text, voice)
    except SpeechError as exc:
        raise ToolError(str(exc)) from None
    try:
        rec = await artifacts.add_bytes(audio, session_id=ctx.session_id, user_key=ctx.user_key,
                                        name="voice.ogg", mime_type=VOICE_MIME, meta={"transcript": text})
    except ArtifactLimit as exc:
        raise ToolError(str(exc)) from None
    attachment = Attachment(name=rec.name, mime_type=rec.type, size=rec.size, path=rec.path)
    message_id = await ctx.send("", attachment=attachment)
    return {"artifact": rec.id, "bytes": rec.size, "message_id": message_id, "state": "pending"}
