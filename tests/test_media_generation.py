"""Image generation against a local fake images endpoint: the request, the answer forms (b64, URL on the
provider's host, URL elsewhere through the web guard), bad answers as tool errors, the artifact, the photo
reaching the fake Telegram through the real gateway (sendPhoto with a valid PNG), audited and counted, and
the file upload on Slack."""

from __future__ import annotations

import asyncio
import io
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from connectors.imagegen import ImageGenerator
from connectors.web import Guard, WebFetcher
from store.artifacts import Artifacts
from store.audit import Audit
from store.db import Store
from tests.fixtures.images import FakeImages
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.fixtures.slack import FakeSlack, is_post
from tests.support.cli import SUBPROCESS_S
from tests.support.context import RecordingContext
from tests.support.slack_events import dm, event_body
from tests.support.telegram_api import OWNER_ID, FakeBot
from toolsets import media_generation
from toolsets.base import ToolError


@pytest.fixture
async def ctx(tmp_path: Path, images_api: FakeImages) -> AsyncIterator[RecordingContext]:
    async with Store(tmp_path / "anyy.db") as store:
        fetcher = WebFetcher(Guard(), timeout_s=5)  # the web guard as configured by default: public only
        generator = ImageGenerator(images_api.url, "gpt-image-1", "img-key", size="1024x1024", fetcher=fetcher,
                                   timeout_s=5, max_bytes=200_000)
        artifacts = Artifacts(store, tmp_path / "artifacts", max_file_bytes=10_000_000, max_daily_bytes=50_000_000)
        yield RecordingContext(store=store, services={"images": generator, "artifacts": artifacts})
        await generator.aclose()
        await fetcher.aclose()


async def generate(ctx: RecordingContext, **args: Any) -> dict[str, Any]:
    return await media_generation.image_generate.handler(ctx, **{"prompt": "a fox reading a newspaper", "size": None,
                                                                 **args})


async def test_the_request_carries_prompt_model_size_and_key_and_the_png_becomes_an_artifact(
        ctx: RecordingContext, images_api: FakeImages) -> None:
    out = await generate(ctx)
    [(body, auth)] = images_api.requests
    assert body == {"model": "gpt-image-1", "prompt": "a fox reading a newspaper", "size": "1024x1024", "n": 1}
    assert auth == "Bearer img-key"
    [rec] = await ctx.services["artifacts"].for_session(ctx.session_id)
    assert (rec.id, rec.type, rec.name) == (out["artifact"], "image/png", "image.png")
    assert Path(rec.path).read_bytes() == images_api.image
    assert rec.meta["prompt"] == "a fox reading a newspaper" and rec.meta["generated_by"] == "gpt-image-1"
    assert (out["width"], out["height"]) == (64, 48)
    # The provider's rewording is its own words: outside content, in its block (issue 39).
    assert out["revised_prompt"].startswith('<untrusted source="image provider"')
    assert "\na fox, watercolour\n" in out["revised_prompt"] and ctx.external_sources == ["image provider"]
    [attachment] = ctx.files
    assert (attachment.path, attachment.mime_type) == (rec.path, "image/png")
    await generate(ctx, size="1536x1024")
    assert images_api.requests[-1][0]["size"] == "1536x1024"


async def test_a_url_on_the_providers_host_is_fetched_and_any_other_goes_through_the_guard(
        ctx: RecordingContext, images_api: FakeImages) -> None:
    images_api.answer = "url"
    await generate(ctx)
    assert images_api.hits["/files/generated.png"] == 1
    images_api.answer = "foreign"
    with pytest.raises(ToolError, match=re.escape("refused: 127.0.0.2 is a loopback address")):
        await generate(ctx)
    assert images_api.hits["/files/generated.png"] == 1  # the other host was never asked
    assert len(await ctx.services["artifacts"].for_session(ctx.session_id)) == 1


@pytest.mark.parametrize(("answer", "message", "quoted"), [
    ("error", "HTTP 400: Your prompt was rejected by the safety system.", True),
    ("text", "not a readable image", False),
])
async def test_a_bad_answer_is_a_tool_error_and_nothing_is_stored(
        ctx: RecordingContext, images_api: FakeImages, answer: str, message: str, quoted: bool) -> None:
    images_api.answer = answer
    with pytest.raises(ToolError, match=message) as raised:
        await generate(ctx)
    assert await ctx.services["artifacts"].for_session(ctx.session_id) == [] and ctx.files == []
    # The provider's error text is its own words: outside content, in its block (issue 39).
    assert str(raised.value).startswith('<untrusted source="image provider"') is quoted
    assert ctx.external_sources == (["image provider"] if quoted else [])


async def test_an_image_over_the_size_cap_is_refused(ctx: RecordingContext, images_api: FakeImages) -> None:
    images_api.image = _noise_png()
    for answer in ("b64", "url"):
        images_api.answer = answer
        with pytest.raises(ToolError, match="larger than 200000 bytes"):
            await generate(ctx)


def _noise_png() -> bytes:
    """A PNG that does not compress below the 200 kB cap."""
    buf = io.BytesIO()
    Image.frombytes("RGB", (300, 300), os.urandom(300 * 300 * 3)).save(buf, "PNG")
    assert len(buf.getvalue()) > 200_000
    return buf.getvalue()


async def test_the_image_reaches_telegram_as_a_photo_audited_and_counted(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any, images_api: FakeImages) -> None:
    model.script(tool_call("image_generate", {"prompt": "a fox reading a newspaper"}), reply("Here is your fox."))
    async with telegram_gateway(images={"url": images_api.url}) as gw:
        tg.message("generate an image of a fox reading a newspaper")
        [sent] = await tg.wait_calls("sendPhoto")
        await tg.wait_calls("sendMessage")
        await gw.idle()
        assert "image_generate" in model.requests[0].tool_names  # selected from the message alone
        [event] = await Audit(gw.store).list(tool="image_generate")
        assert event.action == "tool.run" and event.actor == f"telegram:{OWNER_ID}"
        tg.message("/usage")
        [_, usage] = await tg.wait_calls("sendMessage", count=2)
    with Image.open(io.BytesIO(sent.params["photo"])) as img:
        assert (img.format, img.size) == ("PNG", (64, 48))
    assert "Images generated (last 30 days): 1" in usage.params["text"]


async def test_on_slack_the_image_is_uploaded_as_a_file_in_the_thread(
        slack_gateway: Any, slack_fake: FakeSlack, model: FakeModel, images_api: FakeImages) -> None:
    model.script(tool_call("image_generate", {"prompt": "a cosy cabin in the snow"}), reply("Here you go."))
    async with slack_gateway(images={"url": images_api.url}) as gw:
        event = dm("make a picture of a cosy cabin in the snow", ts="1710000000.000900",
                   thread_ts="1710000000.000800")
        await slack_fake.send_envelope("events_api", event_body(event))
        await slack_fake.calls.wait(is_post)
        await gw.idle()
    [asked] = slack_fake.posted("files.getUploadURLExternal")
    [complete] = slack_fake.posted("files.completeUploadExternal")
    [file_id] = slack_fake.uploads
    assert asked["filename"] == "image.png" and slack_fake.uploads[file_id] == images_api.image
    assert complete["thread_ts"] == "1710000000.000800"


# The connector in a process of its own, whose peak RSS (ru_maxrss) is measured around the call.
_GENERATE_IN_A_PROCESS = """
import asyncio, resource, sys
from connectors.imagegen import ImageGenerator, ImageGenError
from connectors.web import Guard, WebFetcher

async def main():
    generator = ImageGenerator(sys.argv[1], "m", None, size="1024x1024", fetcher=WebFetcher(Guard(), timeout_s=5),
                               timeout_s=60, max_bytes=1_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        await generator.generate("a fox")
        print("generated")
    except ImageGenError as exc:
        print(f"error: {exc}")
    print(f"grew_kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}")

asyncio.run(main())
"""


async def test_a_huge_answer_is_cut_while_read_and_the_process_stays_small(images_api: FakeImages) -> None:
    """Issue 39: 400 MB from the provider with max_mb = 1 once grew the process by ~900 MB."""
    images_api.answer, images_api.huge_mb = "huge", 400
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", _GENERATE_IN_A_PROCESS, images_api.url,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), SUBPROCESS_S)
    text = out.decode()
    assert "error: the image provider's answer is larger than" in text, (text, err.decode()[-2000:])
    grew_mb = int(text.split("grew_kb ")[1]) / 1024
    assert grew_mb < 40, f"the process grew by {grew_mb:.0f} MB reading the answer"
