"""The media step of a turn: what a message's attachments become before the model sees it.

Runs inside the turn, after the access check and after the inbound was recorded, so a stranger's file
is never processed and a crash part-way re-runs the step once (each attachment's artifact row is found
again by its source key, and a transcript already made is kept in the artifact's metadata).

- Every downloaded attachment becomes an artifact (within the size limits; over a limit the person is
  told and nothing is stored).
- Audio is transcribed; the transcript is the turn's text and the reply starts by saying what was heard.
  Without `[speech] transcribe_url` the person is told how to turn it on.
- Images go to a vision model as image parts (downscaled), otherwise as a line describing them.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.images import dimensions, image_part, oversized
from connectors.speech import SpeechError, Transcriber
from gateway.config import Config
from store.artifacts import ArtifactLimit, Artifacts
from store.records import ArtifactRecord, Attachment, Inbound

log = logging.getLogger(__name__)

HEARD_CHARS = 200
AUDIO_SUFFIXES = (".ogg", ".oga", ".opus", ".mp3", ".m4a", ".wav", ".webm", ".flac")
SPEECH_HINT = ("I got a voice note but cannot transcribe it: no transcription server is configured. Set "
               "[speech] transcribe_url in {source} (a local whisper.cpp or speaches server, or OpenAI/Groq; "
               "see docs/media.md) and send it again.")


def is_audio(mime_type: str, name: str) -> bool:
    return mime_type.startswith("audio/") or name.lower().endswith(AUDIO_SUFFIXES)


def is_image(mime_type: str) -> bool:
    return mime_type.startswith("image/")


@dataclass
class PreparedTurn:
    """The user message for the model, and what to tell the person around it."""

    text: str
    images: list[dict[str, Any]] = field(default_factory=list)  # stored in the message's meta (see history)
    heard: str = ""  # prefix for the reply: what the voice notes said, so a mis-hearing shows
    notices: list[str] = field(default_factory=list)  # sent before the model turn (limits, hints, failures)

    @property
    def empty(self) -> bool:
        """Nothing left for the model (e.g. only a voice note that could not be transcribed)."""
        return not self.text.strip() and not self.images


class Media:
    """Turns an inbound's attachments into artifacts, transcripts and image parts."""

    def __init__(self, config: Config, artifacts: Artifacts | None, transcriber: Transcriber | None) -> None:
        self.config = config
        self.artifacts = artifacts
        self.transcriber = transcriber

    async def prepare(self, inbound: Inbound, session_id: str, user_key: str, turn_id: str) -> PreparedTurn:
        turn = PreparedTurn(text=inbound.text)
        if not inbound.attachments:
            return turn
        lines: list[str] = []
        transcripts: list[str] = []
        understood = 0  # attachments that give the model something: a stored file, a transcript
        for index, attachment in enumerate(inbound.attachments):
            record = await self._artifact(attachment, session_id, user_key, f"{turn_id}:{index}", turn)
            if record is None:
                state = "not stored" if attachment.path else "not downloaded"
                lines.append(f"- {attachment.name} ({attachment.mime_type}, {attachment.size} bytes) {state}")
                continue
            described = f"- {record.name} ({record.type}, {record.size} bytes) artifact {record.id}"
            if is_audio(record.type, record.name):
                transcript = await self._transcript(record, turn)
                if transcript:
                    transcripts.append(transcript)
                    understood += 1
                    described += ", a voice note transcribed as the text above"
            else:
                understood += 1
                if is_image(record.type):
                    described += await self._image(record, turn)
            lines.append(described)
        if transcripts:
            quoted = " / ".join(transcripts)
            if len(quoted) > HEARD_CHARS:
                quoted = quoted[:HEARD_CHARS - 1] + "…"
            turn.heard = f"🎙️ Heard: “{quoted}”\n\n"
        body = "\n".join(p for p in (inbound.text, *transcripts) if p)
        if not body and not understood and turn.notices:
            turn.text = ""  # nothing usable, and the notices already told the person why: no model turn
        else:
            turn.text = (body + "\n\n" if body else "") + "[attachments]\n" + "\n".join(lines)
        return turn

    async def _artifact(self, attachment: Attachment, session_id: str, user_key: str, source_key: str,
                        turn: PreparedTurn) -> ArtifactRecord | None:
        if self.artifacts is None:
            return None
        if not attachment.path:
            return None
        path = Path(attachment.path)
        try:  # a re-run after a crash gets the row recorded the first time (the file was moved already)
            return await self.artifacts.add_file(path, session_id=session_id, user_key=user_key,
                                                 name=attachment.name, mime_type=attachment.mime_type,
                                                 source_key=source_key)
        except ArtifactLimit as exc:
            turn.notices.append(str(exc))
            await asyncio.to_thread(path.unlink, True)  # over the limit: nothing is kept
        except FileNotFoundError:
            log.warning("attachment_missing source=%s", source_key)
        return None

    async def _transcript(self, record: ArtifactRecord, turn: PreparedTurn) -> str:
        if "transcript" in record.meta:
            return str(record.meta["transcript"])
        if self.transcriber is None:
            hint = SPEECH_HINT.format(source=self.config.source)
            if hint not in turn.notices:
                turn.notices.append(hint)
            return ""
        try:
            text = await self.transcriber.transcribe(Path(record.path), record.type)
        except SpeechError as exc:
            turn.notices.append(f"I could not transcribe {record.name}: {exc}")
            return ""
        assert self.artifacts is not None
        await self.artifacts.update_meta(record.id, {"transcript": text})
        if not text:
            turn.notices.append(f"I could not hear any words in {record.name}.")
        return text

    async def _image(self, record: ArtifactRecord, turn: PreparedTurn) -> str:
        """The image as an image part for a vision model; the words describing it either way."""
        cfg = self.config.model
        max_pixels = self.config.artifacts.max_image_pixels
        if not cfg.vision:
            size = await dimensions(Path(record.path))
            shape = f", {size[0]}x{size[1]} pixels" if size else ""
            too_large = await oversized(Path(record.path), max_pixels)
            return f"{shape}; {too_large or 'an image this model cannot see'} (artifact_inspect gives its details)"
        part = await image_part(Path(record.path), record.name, record.id, cfg.image_max_side, cfg.image_max_kb * 1024,
                                max_pixels)
        if isinstance(part, str):
            return f"; {part}"
        turn.images.append(part)
        return ", shown to you with this message"
