"""An image bomb never ends the turn: a small PNG that declares 20000x20000 pixels (400 MP) on Telegram
gets a clear note and is never decoded; one over `[artifacts] max_image_pixels` (default 40 MP) but under
Pillow's own bomb limit is refused the same way, before its frame is loaded."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from connectors.images import ImageError, dimensions, image_part, prepare
from tests.fixtures.model import FakeModel, last_user_text
from tests.support.telegram_api import FakeBot


def bomb(width: int, height: int) -> bytes:
    """A 1-bit grayscale PNG of `width`x`height` zeros: tens of KB on disk, `width*height` pixels decoded."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\0" * (1 + (width + 7) // 8)
    packer = zlib.compressobj(9)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


@pytest.fixture(scope="module")
def huge() -> bytes:
    return bomb(20_000, 20_000)


@pytest.mark.parametrize("vision", [True, False])
async def test_an_image_bomb_on_telegram_gets_a_clear_note(tg: FakeBot, model: FakeModel, telegram_gateway: Any,
                                                           huge: bytes, vision: bool) -> None:
    assert len(huge) < 100_000
    async with telegram_gateway(model={"vision": vision}) as gw:
        tg.photo(huge, caption="what is this?")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    [request] = model.requests  # the turn went on: the model was asked, with a note instead of the image
    assert request.images == []
    text = last_user_text(request.body)
    assert "what is this?" in text and "too large" in text and "megapixels" in text
    sent = [str(c.params.get("text")) for c in tg.sent("sendMessage")]
    assert not any("went wrong" in s for s in sent), sent


async def test_over_the_configured_limit_is_refused_before_decoding(tmp_path: Path) -> None:
    path = tmp_path / "wide.png"
    path.write_bytes(bomb(10_000, 5_000))  # 50 MP: under Pillow's bomb error, over the 40 MP default
    with pytest.raises(ImageError, match="10000x5000 pixels is over the 40-megapixel limit"):
        await prepare(path, 1568, 500_000, max_pixels=40_000_000)
    part = await image_part(path, "wide.png", "a1", 1568, 500_000, max_pixels=40_000_000)
    assert isinstance(part, str) and "too large" in part
    assert await dimensions(path) == (10_000, 5_000)  # the header alone: no frame is decoded
    huge = tmp_path / "huge.png"
    huge.write_bytes(bomb(20_000, 20_000))
    assert await dimensions(huge) is None or await dimensions(huge) == (20_000, 20_000)
