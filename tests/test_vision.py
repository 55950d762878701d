"""Images for the model: both wire formats against the fake model (which rejects what the real APIs
reject), downscaling, and images in history counting against the context budget and dropped first."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from connectors.images import image_part, prepare
from gateway.llm import AnthropicClient, ChatMessage, OpenAIClient, ToolCall
from gateway.llm.types import ImagePart
from gateway.turns.history import IMAGE_CHARS, fit_history
from store.records import MessageRecord
from tests.fixtures.model import FakeModel, reply


def png(width: int, height: int, alpha: bool = False) -> bytes:
    buf = io.BytesIO()
    colour = (10, 200, 10, 128) if alpha else (10, 200, 10)
    Image.new("RGBA" if alpha else "RGB", (width, height), colour).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(params=["openai", "anthropic"])
def provider(request: pytest.FixtureRequest) -> str:
    return request.param


def client(provider: str, fake: FakeModel) -> Any:
    cls, url = (OpenAIClient, fake.url_openai) if provider == "openai" else (AnthropicClient, fake.url_anthropic)
    return cls(base_url=url, api_key=None, model="vision-1", timeout_s=5, max_retries=0, max_tokens=64)


async def test_an_image_part_reaches_the_model_in_its_wire_format(provider: str, model: FakeModel,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "whiteboard.png"
    path.write_bytes(png(4000, 1000))
    part = await image_part(path, "whiteboard.png", "a1", max_side=1000, max_bytes=300_000)
    assert isinstance(part, dict)
    model.script(reply("A green board."))
    async with client(provider, model) as c:
        answer = await c.complete([ChatMessage(role="user", content="what is on it?",
                                               images=[ImagePart(mime_type=part["mime_type"], data=part["data"])])], [])
    assert answer.text == "A green board."
    [request] = model.requests
    [(mime, data)] = request.images
    assert mime == "image/jpeg" and Image.open(io.BytesIO(data)).size == (1000, 250)
    content = request.messages[-1]["content"]
    if provider == "openai":
        assert content[0] == {"type": "text", "text": "what is on it?"}
        assert content[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    else:
        assert content[0]["type"] == "image" and content[0]["source"]["type"] == "base64"
        assert content[1] == {"type": "text", "text": "what is on it?"}


async def test_an_image_after_tool_results_is_valid_in_both_formats(provider: str, model: FakeModel) -> None:
    """artifact_inspect's image follows the tool results as a user-side event."""
    image = ImagePart(mime_type="image/png", data=base64.b64encode(png(8, 8)).decode())
    convo = [ChatMessage(role="user", content="look at a1"),
             ChatMessage(role="assistant", tool_calls=[ToolCall(id="c1", name="artifact_inspect", arguments="{}")]),
             ChatMessage(role="tool", content="{}", tool_call_id="c1", name="artifact_inspect"),
             ChatMessage(role="user", content="[event] the image you asked to see", images=[image])]
    model.script(reply("ok"))
    async with client(provider, model) as c:
        assert (await c.complete(convo, [])).text == "ok"
    assert model.requests[0].images == [("image/png", png(8, 8))]


@pytest.mark.parametrize("kind,part,problem", [
    ("openai", {"type": "image_url", "image_url": {"url": "data:image/tiff;base64,AAAA"}}, "invalid image URL"),
    ("openai", {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, "not valid base64"),
    ("anthropic", {"type": "image", "source": {"type": "url", "media_type": "image/png", "data": "AAAA"}},
     "image source needs type 'base64'"),
    ("anthropic", {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}},
     "non-empty base64"),
])
async def test_the_fake_rejects_image_parts_the_real_apis_reject(kind: str, part: dict[str, Any], problem: str,
                                                                model: FakeModel) -> None:
    url = model.url_openai + "/chat/completions" if kind == "openai" else model.url_anthropic + "/v1/messages"
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [part]}]}
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json=body, headers={"anthropic-version": "2023-06-01"})
    assert response.status_code == 400 and problem in response.text


async def test_downscaling_keeps_within_side_and_size_and_keeps_transparency(tmp_path: Path) -> None:
    noisy = Image.effect_noise((3000, 3000), 120).convert("RGB")
    path = tmp_path / "noise.jpg"
    noisy.save(path, "JPEG", quality=95)
    small = await prepare(path, max_side=1568, max_bytes=150_000)
    assert max(small.width, small.height) <= 1568 and len(small.data) <= 150_000
    assert (small.original_width, small.original_height) == (3000, 3000)
    logo = tmp_path / "logo.png"
    logo.write_bytes(png(500, 100, alpha=True))
    kept = await prepare(logo, max_side=200, max_bytes=100_000)
    assert (kept.mime_type, kept.width, kept.height) == ("image/png", 200, 40)
    not_image = tmp_path / "notes.jpg"
    not_image.write_text("hello")
    assert "not readable as an image" in str(await image_part(not_image, "notes.jpg", "a2", 100, 10_000))


def _turn(n: int, text: str, images: int = 0) -> list[MessageRecord]:
    meta = {"images": [{"mime_type": "image/png", "data": "AAAA", "name": f"p{n}", "artifact": f"a{n}"}] * images}
    return [MessageRecord(id=2 * n, session_id="s", turn_id=f"t{n}", role="user", content=text, meta=meta),
            MessageRecord(id=2 * n + 1, session_id="s", turn_id=f"t{n}", role="assistant", content="ok")]


def test_images_in_history_count_against_the_budget_and_go_first() -> None:
    rows = _turn(1, "first photo", images=1) + _turn(2, "second photo", images=1) + _turn(3, "and now?")
    roomy = fit_history(rows, 3 * IMAGE_CHARS)
    assert [len(m.images) for m in roomy] == [1, 0, 1, 0, 0, 0]
    tight = fit_history(rows, IMAGE_CHARS + 500)  # room for every turn's text and one image
    assert len(tight) == 6  # no turn was dropped for the images' sake
    assert [len(m.images) for m in tight] == [0, 0, 1, 0, 0, 0]
    assert "left out of the context" in tight[0].content and tight[0].content.startswith("first photo")
    newest = fit_history(_turn(1, "photo", images=2), 100)  # the newest images always go
    assert len(newest[0].images) == 2
