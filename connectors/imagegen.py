"""The image-generation client: an OpenAI-compatible `POST {url}/images/generations`.

The request carries `model`, `prompt`, `size` and `n = 1`, the key as `Authorization: Bearer`. The
answer's first image is taken as `b64_json` or as a `url`: a URL on the provider's own host (scheme, host
and port) is fetched with the provider's client, any other through the web fetcher, so the private-network
guard and host rules apply to it. Either way the image is capped at `max_bytes` and must be a PNG, JPEG or
WebP that Pillow can read (checked in a worker thread). The answer itself is read as it arrives and cut
at what an image of `max_bytes` takes in base64 inside its JSON (`answer_cap`): a provider sending
hundreds of megabytes costs a few, never the whole body in memory.

What the provider writes (its error message, `revised_prompt`, the URL it chose) is outside content:
`ImageGenError.remote` says when a message quotes it, so the caller shows it as such.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import logging
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from connectors.bodies import read_at_most
from connectors.web.fetch import FetchError, WebFetcher

log = logging.getLogger(__name__)

FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
_ERROR_CHARS = 300
_ERROR_BYTES = 64 * 1024  # of an error answer's body: its message is in the first few hundred
_JSON_SLACK = 64 * 1024  # the answer's JSON around its base64 image (created, revised_prompt, ...)


class ImageGenError(Exception):
    """The provider refused or failed, or its answer is not an image; the message says which. `remote`:
    the message quotes what the provider sent (its error text, a URL it chose), which is outside content."""

    def __init__(self, message: str, *, remote: bool = False) -> None:
        super().__init__(message)
        self.remote = remote


def answer_cap(max_bytes: int) -> int:
    """The most an answer carrying an image of `max_bytes` may take: base64 is 4/3 of the image, and a
    JSON encoder may escape its slashes ("\\/"); half again covers both, plus the JSON around it."""
    return max_bytes * 3 // 2 + _JSON_SLACK


@dataclass(frozen=True)
class GeneratedImage:
    data: bytes
    mime_type: str
    width: int
    height: int
    revised_prompt: str | None = None


class ImageGenerator:
    """One provider; `aclose()` at exit."""

    def __init__(self, url: str, model: str, api_key: str | None, *, size: str, fetcher: WebFetcher,
                 timeout_s: float = 120, max_bytes: int = 20_000_000) -> None:
        self.url = url.rstrip("/")
        self.model = model
        self.size = size
        self.fetcher = fetcher
        self.max_bytes = max_bytes
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), headers=headers, trust_env=False)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def generate(self, prompt: str, size: str | None = None) -> GeneratedImage:
        body = {"model": self.model, "prompt": prompt, "size": size or self.size, "n": 1}
        cap = answer_cap(self.max_bytes)
        try:
            async with self._client.stream("POST", f"{self.url}/images/generations", json=body) as response:
                if response.status_code >= 400:
                    error, _ = await read_at_most(response, _ERROR_BYTES)
                    raise ImageGenError(f"the image provider answered HTTP {response.status_code}: "
                                        f"{_error_text(error, response.reason_phrase)}", remote=True)
                raw, whole = await read_at_most(response, cap)
        except httpx.HTTPError as exc:
            raise ImageGenError(f"the image provider at {self.url} cannot be reached ({type(exc).__name__})") from None
        if not whole:
            raise ImageGenError(f"the image provider's answer is larger than {cap} bytes (an image is larger than "
                                f"{self.max_bytes} bytes)")
        try:
            first = (await asyncio.to_thread(json.loads, raw))["data"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ImageGenError("the image provider's answer has no image (expected data[0])") from None
        if not isinstance(first, dict):
            raise ImageGenError("the image provider's answer has no image (expected data[0])")
        if first.get("b64_json"):
            data = self._decode(str(first["b64_json"]))
        elif first.get("url"):
            data = await self._download(str(first["url"]))
        else:
            raise ImageGenError("the image provider's answer has neither b64_json nor url")
        mime, width, height = await asyncio.to_thread(_identify, data)
        log.info("image_generated model=%s size=%s bytes=%d from=%s", self.model, body["size"], len(data),
                 "b64" if first.get("b64_json") else "url")
        revised = first.get("revised_prompt")
        return GeneratedImage(data, mime, width, height, str(revised) if revised else None)

    def _decode(self, b64: str) -> bytes:
        if len(b64) * 3 // 4 > self.max_bytes + 3:
            raise ImageGenError(f"the image is larger than {self.max_bytes} bytes")
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise ImageGenError("the image provider's b64_json is not valid base64") from None

    async def _download(self, url: str) -> bytes:
        url = urljoin(self.url + "/", url)
        if _origin(url) == _origin(self.url):
            try:
                async with self._client.stream("GET", url) as response:
                    if response.status_code >= 400:  # the URL is the provider's words
                        raise ImageGenError(f"the image at {url} answered HTTP {response.status_code}", remote=True)
                    data, whole = await read_at_most(response, self.max_bytes)
                    if not whole:
                        raise ImageGenError(f"the image is larger than {self.max_bytes} bytes")
                    return data
            except httpx.HTTPError as exc:
                raise ImageGenError(f"the image at {url} cannot be fetched ({type(exc).__name__})",
                                    remote=True) from None
        try:
            data, _ = await self.fetcher.fetch_bytes(url, max_bytes=self.max_bytes)
        except FetchError as exc:  # it names the URL the provider chose
            raise ImageGenError(f"the image cannot be fetched: {exc}", remote=True) from None
        return data


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


def _identify(data: bytes) -> tuple[str, int, int]:
    from PIL import Image, UnidentifiedImageError  # with the first generated image

    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt, size = img.format, img.size
            img.verify()
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise ImageGenError(f"the provider's answer is not a readable image ({exc})") from None
    if fmt not in FORMATS:
        raise ImageGenError(f"the provider sent a {fmt} image; only PNG, JPEG and WebP are accepted")
    return FORMATS[fmt], size[0], size[1]


def _error_text(body: bytes, reason: str) -> str:
    try:
        message = json.loads(body)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = body.decode("utf-8", "replace")
    return str(message).strip()[:_ERROR_CHARS] or reason
