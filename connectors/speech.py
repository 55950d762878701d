"""Speech: transcription (audio -> text) and synthesis (text -> an OGG/Opus voice note).

- `Transcriber`: an OpenAI-compatible `POST {url}/audio/transcriptions` (multipart: file, model), as
  whisper.cpp's server, speaches / faster-whisper-server, OpenAI and Groq accept it.
- `EspeakEngine`: `espeak-ng` on this machine renders WAV, `ffmpeg` encodes it to Opus in Ogg (the
  format Telegram plays as a voice note); both run as asyncio subprocesses, never blocking the loop.
- `OpenAISpeechEngine`: an OpenAI-compatible `POST {url}/audio/speech` asked for `opus` (Ogg/Opus).

Nothing here knows about chats or models. Errors are `SpeechError`s phrased for a person, never
carrying a key.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Protocol

import httpx

log = logging.getLogger(__name__)

VOICE_MIME = "audio/ogg"
_MAX_ERROR = 200


class SpeechError(Exception):
    """Transcription or synthesis failed; the message names the endpoint or program and the cause."""


def _auth(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _refusal(what: str, response: httpx.Response, api_key: str | None) -> SpeechError:
    body = response.text.strip()[:_MAX_ERROR]
    if api_key:
        body = body.replace(api_key, "***")
    hint = " (check the API key)" if response.status_code in (401, 403) else ""
    return SpeechError(f"{what} answered HTTP {response.status_code}{hint}: {body}")


class Transcriber:
    """Client of an OpenAI-compatible transcription endpoint."""

    def __init__(self, url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self.endpoint = f"{url.rstrip('/')}/audio/transcriptions"
        self.model = model
        self._api_key = api_key
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s))

    async def transcribe(self, path: Path, mime_type: str) -> str:
        """The text spoken in the audio file at `path`. Raises SpeechError."""
        data = await asyncio.to_thread(path.read_bytes)
        try:
            response = await self._http.post(
                self.endpoint, headers=_auth(self._api_key),
                data={"model": self.model, "response_format": "json"},
                files={"file": (path.name, data, mime_type)})
        except httpx.HTTPError as exc:
            raise SpeechError(f"the transcription server at {self.endpoint} cannot be reached "
                              f"({type(exc).__name__})") from None
        if response.status_code >= 400:
            raise _refusal(f"the transcription server at {self.endpoint}", response, self._api_key)
        try:
            text = response.json()["text"]
        except (ValueError, KeyError, TypeError):
            raise SpeechError(f"the transcription server at {self.endpoint} sent no 'text' in its answer") from None
        log.info("transcribed bytes=%d chars=%d", len(data), len(text))
        return str(text).strip()

    async def aclose(self) -> None:
        await self._http.aclose()


class SpeechEngine(Protocol):
    """Text to an OGG/Opus voice note."""

    name: str

    async def synthesize(self, text: str, voice: str | None = None) -> bytes:
        """The speech as OGG/Opus bytes. Raises SpeechError."""
        ...

    async def aclose(self) -> None: ...


class EspeakEngine:
    """Local speech: espeak-ng (WAV on stdout) piped through ffmpeg (Ogg/Opus on stdout)."""

    name = "espeak-ng"

    def __init__(self, voice: str, timeout_s: float) -> None:
        self.voice = voice
        self.timeout_s = timeout_s

    @staticmethod
    def missing_programs() -> list[str]:
        """Which of the programs this engine needs are not on PATH."""
        return [p for p in ("espeak-ng", "ffmpeg") if shutil.which(p) is None]

    async def synthesize(self, text: str, voice: str | None = None) -> bytes:
        # The text goes on stdin, never as an argument: a text starting with "-" stays text.
        wav = await self._run(["espeak-ng", "--stdin", "--stdout", "-v", voice or self.voice], text.encode())
        return await self._run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "wav", "-i", "pipe:0",
                                "-c:a", "libopus", "-b:a", "32k", "-ar", "48000", "-f", "ogg", "pipe:1"], wav)

    async def _run(self, argv: list[str], stdin: bytes) -> bytes:
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                        stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.PIPE)
        except FileNotFoundError:
            raise SpeechError(f"{argv[0]} is not installed (apt-get install espeak-ng ffmpeg)") from None
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), self.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise SpeechError(f"{argv[0]} took longer than {self.timeout_s:g}s") from None
        if proc.returncode != 0 or not out:
            raise SpeechError(f"{argv[0]} failed (exit {proc.returncode}): "
                              f"{err.decode(errors='replace').strip()[:_MAX_ERROR]}")
        return out

    async def aclose(self) -> None:
        return None


class OpenAISpeechEngine:
    """An OpenAI-compatible `/audio/speech` endpoint (OpenAI, speaches, Kokoro-FastAPI...)."""

    name = "openai"

    def __init__(self, url: str, model: str, voice: str, api_key: str | None, timeout_s: float) -> None:
        self.endpoint = f"{url.rstrip('/')}/audio/speech"
        self.model = model
        self.voice = voice
        self._api_key = api_key
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s))

    async def synthesize(self, text: str, voice: str | None = None) -> bytes:
        body = {"model": self.model, "input": text, "voice": voice or self.voice, "response_format": "opus"}
        try:
            response = await self._http.post(self.endpoint, json=body, headers=_auth(self._api_key))
        except httpx.HTTPError as exc:
            raise SpeechError(f"the speech server at {self.endpoint} cannot be reached "
                              f"({type(exc).__name__})") from None
        if response.status_code >= 400:
            raise _refusal(f"the speech server at {self.endpoint}", response, self._api_key)
        if not response.content.startswith(b"OggS"):
            raise SpeechError(f"the speech server at {self.endpoint} did not send Ogg/Opus audio")
        return response.content

    async def aclose(self) -> None:
        await self._http.aclose()
