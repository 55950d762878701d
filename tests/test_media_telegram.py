"""Media on Telegram end to end: the real Gateway with the Telegram surface on the fake Bot API, the fake
model and the fake transcription server. Voice notes in (transcribed, durable across a crash), photos to
a vision model in both wire formats, voice notes out (sendVoice), limits, and strangers."""

from __future__ import annotations

import io
import signal
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from store.artifacts import Artifacts
from store.db import Store
from tests.fixtures.model import FakeModel, last_user_text, reply, tool_call
from tests.fixtures.speech import FakeSpeech
from tests.support.audio import is_ogg_opus, voice_note
from tests.support.cli import SUBPROCESS_S
from tests.support.resident import resident, run_config
from tests.support.telegram_api import OWNER_ID, FakeBot

STRANGER_ID = 2002


@pytest.fixture(scope="module")
def ogg() -> bytes:
    return voice_note("remind me to buy milk")


def jpeg(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (30, 90, 200)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def bot_messages(tg: FakeBot, chat_id: int = OWNER_ID) -> list[dict[str, Any]]:
    with tg.lock:
        return [m for (c, _), m in sorted(tg.messages.items()) if c == chat_id and m["from"]["id"] == tg.id]


def voice(tg: FakeBot, data: bytes, **kwargs: Any) -> dict[str, Any]:
    return tg.message(None, voice={**tg.add_file(data), "duration": 2, "mime_type": "audio/ogg"}, **kwargs)


async def test_a_voice_note_is_transcribed_and_the_reply_says_what_was_heard(
        tg: FakeBot, model: FakeModel, speech: FakeSpeech, telegram_gateway: Any, ogg: bytes) -> None:
    async with telegram_gateway(speech={"transcribe_url": speech.url}) as gw:
        voice(tg, ogg)
        await tg.wait_calls("sendMessage")
        await gw.idle()
        [upload] = speech.uploads.items()
        assert upload.data == ogg and upload.content_type == "audio/ogg" and upload.filename.endswith(".ogg")
        assert upload.fields["model"] == "whisper-1"
        [request] = model.requests
        assert last_user_text(request.body).startswith("remind me to buy milk\n\n[attachments]\n- voice-")
        [answer] = [m["text"] for m in bot_messages(tg)]
        assert answer.startswith("🎙️ Heard: “remind me to buy milk”\n\necho: remind me to buy milk")
        [rec] = await gw.services["artifacts"].for_session(f"telegram:{OWNER_ID}")
        assert rec.meta["transcript"] == "remind me to buy milk" and Path(rec.path).read_bytes() == ogg
        assert "artifact_list" in request.tool_names  # a turn with an attachment gets the artifact toolset


async def test_without_a_transcription_server_the_user_is_told_how_to_enable_it(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any, ogg: bytes) -> None:
    async with telegram_gateway() as gw:
        voice(tg, ogg)
        await tg.wait_calls("sendMessage")
        await gw.idle()
    [answer] = [m["text"] for m in bot_messages(tg)]
    assert "cannot transcribe" in answer and "[speech] transcribe_url" in answer and "docs/media.md" in answer
    assert model.requests == []  # nothing else in the message: no model turn


async def test_a_strangers_voice_note_is_never_transcribed_or_stored(
        tg: FakeBot, model: FakeModel, speech: FakeSpeech, telegram_gateway: Any, ogg: bytes) -> None:
    async with telegram_gateway(speech={"transcribe_url": speech.url}) as gw:
        voice(tg, ogg, user_id=STRANGER_ID, user_name="stranger")
        [pairing] = await tg.wait_calls("sendMessage", where=lambda c: c.params["chat_id"] == STRANGER_ID)
        await gw.idle()
        assert await gw.services["artifacts"].for_session(f"telegram:{STRANGER_ID}") == []
    assert "pair" in pairing.params["text"].lower()
    assert speech.uploads.items() == [] and model.requests == []


# The access check before downloads is the authority branch's (Gateway.admits); until it is merged the
# surface still fetches the file, so this test is expected to fail, strictly, and runs plainly after.
async def test_a_strangers_voice_note_is_never_downloaded(tg: FakeBot, speech: FakeSpeech, telegram_gateway: Any,
                                                          tmp_path: Path, ogg: bytes) -> None:
    async with telegram_gateway(speech={"transcribe_url": speech.url}) as gw:
        voice(tg, ogg, user_id=STRANGER_ID, user_name="stranger")
        await tg.wait_calls("sendMessage", where=lambda c: c.params["chat_id"] == STRANGER_ID)
        await gw.idle()
    assert [c for c in tg.calls if c.method == "getFile"] == []
    assert not list((tmp_path / "attachments").rglob("*.ogg"))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_photo_reaches_a_vision_model_as_an_image_part_downscaled(
        provider: str, tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    url = model.url_openai if provider == "openai" else model.url_anthropic
    async with telegram_gateway(model={"provider": provider, "base_url": url, "vision": True,
                                    "image_max_side": 1024}) as gw:
        tg.photo(jpeg(3000, 2000), caption="what does the receipt say?")
        await tg.wait_calls("sendMessage")
        await gw.idle()
    [request] = model.requests
    assert request.kind == provider
    [(mime, data)] = request.images
    assert mime == "image/jpeg" and Image.open(io.BytesIO(data)).size == (1024, 683)
    assert "what does the receipt say?" in last_user_text(request.body)
    assert "shown to you with this message" in last_user_text(request.body)


async def test_without_vision_the_model_gets_a_description_of_the_photo(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    async with telegram_gateway() as gw:
        tg.photo(jpeg(1200, 800))
        await tg.wait_calls("sendMessage")
        await gw.idle()
    [request] = model.requests
    assert request.images == []
    text = last_user_text(request.body)
    assert "(image/jpeg," in text and "1200x800 pixels" in text and "cannot see" in text


async def test_text_to_speech_goes_out_as_a_voice_note(tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    model.script(tool_call("text_to_speech", {"text": "Your train leaves at nine."}), reply("Sent you a voice note."))
    async with telegram_gateway(tts={"engine": "espeak-ng"}) as gw:
        tg.message("read it out loud please, I'm driving")
        [sent] = await tg.wait_calls("sendVoice")
        await tg.wait_calls("sendMessage")
        await gw.idle()
        assert "text_to_speech" in model.requests[0].tool_names
    assert is_ogg_opus(sent.params["voice"])
    shown = bot_messages(tg)
    assert [("voice" in m, m.get("text")) for m in shown] == [(True, None), (False, "Sent you a voice note.")]


async def test_an_oversized_attachment_gets_a_clear_reply_and_nothing_is_stored(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any, tmp_path: Path) -> None:
    async with telegram_gateway(artifacts={"max_file_mb": 0.01}) as gw:
        tg.message(None, document=tg.add_file(b"%PDF" + b"x" * 20_000, file_name="scan.pdf",
                                              mime_type="application/pdf"))
        await tg.wait_calls("sendMessage")
        await gw.idle()
        artifacts: Artifacts = gw.services["artifacts"]
        assert await artifacts.for_session(f"telegram:{OWNER_ID}") == []
    [answer] = [m["text"] for m in bot_messages(tg)]
    assert "scan.pdf is 0.0 MB" in answer and "max_file_mb" in answer and "did not store it" in answer
    assert list((tmp_path / "attachments").rglob("*.pdf")) == []  # the download is gone too
    assert model.requests == []


async def test_a_crash_mid_transcription_reruns_it_once(tg: FakeBot, model: FakeModel, speech: FakeSpeech,
                                                        tmp_path: Path, ogg: bytes) -> None:
    config = run_config(tmp_path, model, f"""[telegram]
base_url = "{tg.base_url}"
base_file_url = "{tg.base_file_url}"
allowed_users = [{OWNER_ID}]
poll_timeout_s = 10

[speech]
transcribe_url = "{speech.url}"
""")
    secrets = {"TELEGRAM_BOT_TOKEN": tg.token}
    speech.delay_s = 30
    async with resident(tmp_path, config, secrets) as anyy:
        voice(tg, ogg)
        await speech.uploads.wait(timeout=SUBPROCESS_S)  # mid-transcription...
        anyy.process.send_signal(signal.SIGKILL)  # ...the process dies
        await anyy.process.wait()
    speech.delay_s = 0
    async with resident(tmp_path, config, secrets) as anyy:
        await tg.wait_calls("sendMessage", timeout=SUBPROCESS_S)
        assert await anyy.terminate() == 0
    assert len(speech.uploads.items()) == 2  # transcribed again after the restart, once
    assert len(model.requests) == 1
    [answer] = [m["text"] for m in bot_messages(tg)]
    assert answer.startswith("🎙️ Heard: “remind me to buy milk”")
    store = Store(tmp_path / "anyy.db")
    async with store:
        rows = await store.run(lambda db: list(db["artifacts"].rows))
    assert len(rows) == 1 and Path(rows[0]["path"]).read_bytes() == ogg  # one artifact, not one per run


async def test_artifact_inspect_shows_an_earlier_photo_again_after_the_tool_result(
        tg: FakeBot, model: FakeModel, telegram_gateway: Any) -> None:
    async with telegram_gateway(model={"vision": True, "image_max_side": 512}) as gw:
        tg.photo(jpeg(2000, 1000), caption="keep this")
        await tg.wait_calls("sendMessage")
        await gw.idle()
        [rec] = await gw.services["artifacts"].for_session(f"telegram:{OWNER_ID}")
        model.script(tool_call("artifact_inspect", {"artifact_id": rec.id}), reply("It is the blue one."))
        tg.message("show me that photo again")
        await tg.wait_calls("sendMessage", count=2)
        await gw.idle()
    _first, inspect, after = model.requests
    assert "artifact_inspect" in inspect.tool_names  # used in the last turns / the artifact keyword
    assert len(after.images) == 2  # the photo of the first turn and the one the tool showed
    tool_result = next(i for i, m in enumerate(after.messages) if m["role"] == "tool")
    shown = after.messages[tool_result + 1]
    assert shown["role"] == "user" and shown["content"][0]["text"].startswith("[event] The image(s) you asked to see")
    assert Image.open(io.BytesIO(after.images[1][1])).size == (512, 256)
