"""Images for a vision model: read, turned upright, downscaled to a maximum side and re-encoded until
they fit a maximum size (Pillow, in a worker thread so the event loop never waits on it).

An image is measured from its header before any pixel is decoded: one over `max_pixels` (`[artifacts]
max_image_pixels`, 40 MP by default: a 50 KB PNG can declare 20000x20000 pixels, 400 MP, and decoding even
a 100 MP one costs about a gigabyte) is refused with a sentence saying so, never loaded."""

from __future__ import annotations

import asyncio
import base64
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Pillow is imported by the worker-thread functions that read an image: a process that is sent no
# image never loads it.
if TYPE_CHECKING:
    from PIL import Image

log = logging.getLogger(__name__)

_QUALITIES = (85, 75, 60, 45)
MAX_PIXELS = 40_000_000


class ImageError(Exception):
    """The file is not an image Pillow can read, or it is too large to decode."""


@dataclass(frozen=True)
class Prepared:
    """An image ready to send: JPEG (or PNG when it has transparency) bytes and its size."""

    data: bytes
    mime_type: str
    width: int
    height: int
    original_width: int
    original_height: int


async def prepare(path: Path, max_side: int, max_bytes: int, max_pixels: int = MAX_PIXELS) -> Prepared:
    """The image at `path`, at most `max_side` pixels on its longer side and about `max_bytes` encoded.
    Raises ImageError when it is not an image or has more than `max_pixels` pixels."""
    return await asyncio.to_thread(_prepare, path, max_side, max_bytes, max_pixels)


async def image_part(path: Path, name: str, artifact_id: str, max_side: int, max_bytes: int,
                     max_pixels: int = MAX_PIXELS) -> dict[str, Any] | str:
    """The image downscaled as the part a message stores for a vision model (base64 data, MIME type,
    name, artifact id), or a sentence saying why it cannot be read."""
    try:
        img = await prepare(path, max_side, max_bytes, max_pixels)
    except TooLarge as exc:
        return str(exc)
    except (ImageError, FileNotFoundError) as exc:
        return f"not readable as an image ({exc})"
    log.info("image_prepared artifact=%s from=%dx%d to=%dx%d bytes=%d", artifact_id, img.original_width,
             img.original_height, img.width, img.height, len(img.data))
    return {"mime_type": img.mime_type, "data": base64.b64encode(img.data).decode("ascii"), "name": name,
            "artifact": artifact_id}


async def dimensions(path: Path) -> tuple[int, int] | None:
    """(width, height) of an image file, or None when it is not one."""
    return await asyncio.to_thread(_dimensions, path)


async def oversized(path: Path, max_pixels: int = MAX_PIXELS) -> str | None:
    """A sentence saying the image at `path` is too large to decode, or None (also for a non-image)."""
    return await asyncio.to_thread(_oversized, path, max_pixels)


class TooLarge(ImageError):
    """The image declares more pixels than may be decoded."""


def _dimensions(path: Path) -> tuple[int, int] | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            return img.size
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError):
        return None


def _oversized(path: Path, max_pixels: int) -> str | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            _check(img, path, max_pixels)
    except TooLarge as exc:
        return str(exc)
    except Image.DecompressionBombError:
        return str(_bomb())
    except (UnidentifiedImageError, OSError):
        pass
    return None


def _bomb() -> TooLarge:
    """Pillow's own limit, far above ours, refuses in the header too: it names no size."""
    from PIL import Image

    return TooLarge(f"too large to look at: more than {2 * (Image.MAX_IMAGE_PIXELS or 0) / 1e6:.0f} megapixels")


def _check(img: Image.Image, path: Path, max_pixels: int) -> None:
    width, height = img.size  # from the header: nothing is decoded yet
    if width * height > max_pixels:
        raise TooLarge(f"too large to look at: {width}x{height} pixels is over the {max_pixels / 1e6:g}-megapixel "
                       "limit ([artifacts] max_image_pixels)")


def _prepare(path: Path, max_side: int, max_bytes: int, max_pixels: int) -> Prepared:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            _check(opened, path, max_pixels)
            original = opened.size
            img = ImageOps.exif_transpose(opened)
            img.load()
    except Image.DecompressionBombError:
        raise _bomb() from None
    except (UnidentifiedImageError, OSError) as exc:
        raise ImageError(f"{path.name} is not an image I can read ({exc})") from None
    alpha = img.mode in ("RGBA", "LA") or (img.mode == "P" and "transparency" in img.info)
    img = img.convert("RGBA" if alpha else "RGB")
    side = max_side
    while True:
        img.thumbnail((side, side), Image.Resampling.LANCZOS)
        for quality in (None,) if alpha else _QUALITIES:
            data = _encode(img, quality)
            if len(data) <= max_bytes:
                return Prepared(data, "image/png" if alpha else "image/jpeg", *img.size, *original)
        if side <= 64:
            return Prepared(data, "image/png" if alpha else "image/jpeg", *img.size, *original)
        side = max(64, int(max(img.size) * 0.75))  # still too big at the lowest quality: fewer pixels


def _encode(img: Image.Image, quality: int | None) -> bytes:
    buf = io.BytesIO()
    if quality is None:
        img.save(buf, "PNG", optimize=True)
    else:
        img.save(buf, "JPEG", quality=quality, optimize=True)
    return buf.getvalue()
