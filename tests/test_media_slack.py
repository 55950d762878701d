"""Media on Slack end to end: the real Gateway with the Slack surface (Socket Mode) on the fake Slack, the
fake model and the fake transcription server. An audio file is transcribed; `text_to_speech` arrives as
a file upload (files_upload_v2) in the conversation's thread."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from PIL import Image

from gateway.app import Gateway
from tests.fixtures.model import FakeModel, last_user_text, reply, tool_call
from tests.fixtures.slack import FakeSlack, is_post
from tests.fixtures.speech import FakeSpeech
from tests.support.audio import is_ogg_opus, voice_note
from tests.support.slack_events import dm, event_body


@pytest_asyncio.fixture(loop_scope="function")
async def gateway(slack_gateway: Any, speech: FakeSpeech) -> AsyncIterator[Gateway]:
    async with slack_gateway(speech={"transcribe_url": speech.url}, tts={"engine": "espeak-ng"},
                             model={"vision": True, "image_max_side": 640}) as gw:
        yield gw


async def test_an_audio_file_is_transcribed_into_the_turn(gateway: Gateway, slack_fake: FakeSlack,
                                                          speech: FakeSpeech, model: FakeModel) -> None:
    audio = voice_note("what is on my calendar tomorrow")
    speech.transcript = "What is on my calendar tomorrow?"
    memo = slack_fake.add_file("audio_message.m4a", audio, "audio/mp4")
    await slack_fake.send_envelope("events_api", event_body(dm("", subtype="file_share", files=[memo])))
    answer = (await slack_fake.calls.wait(is_post))[0].args
    await gateway.idle()
    [upload] = speech.uploads.items()
    assert upload.data == audio and upload.content_type == "audio/mp4"
    assert last_user_text(model.requests[0].body).startswith("What is on my calendar tomorrow?\n\n[attachments]")
    assert answer["text"].startswith("🎙️ Heard: “What is on my calendar tomorrow?”")


async def test_text_to_speech_is_uploaded_as_a_file_in_the_thread(gateway: Gateway, slack_fake: FakeSlack,
                                                                   model: FakeModel) -> None:
    model.script(tool_call("text_to_speech", {"text": "Three meetings tomorrow."}), reply("Here it is as audio."))
    event = dm("read my agenda aloud", ts="1710000000.000700", thread_ts="1710000000.000600")
    await slack_fake.send_envelope("events_api", event_body(event))
    await slack_fake.calls.wait(is_post)
    await gateway.idle()
    [asked] = slack_fake.posted("files.getUploadURLExternal")
    [complete] = slack_fake.posted("files.completeUploadExternal")
    assert asked["filename"] == "voice.ogg"
    [file_id] = slack_fake.uploads
    assert is_ogg_opus(slack_fake.uploads[file_id]) and int(asked["length"]) == len(slack_fake.uploads[file_id])
    assert complete["channel_id"] == "D0001" and complete["thread_ts"] == "1710000000.000600"
    assert [f["id"] for f in complete["files"]] == [file_id]
    assert [p["text"] for p in slack_fake.posted()] == ["Here it is as audio."]


async def test_a_shared_image_reaches_the_vision_model_downscaled(gateway: Gateway, slack_fake: FakeSlack,
                                                                  model: FakeModel) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (1920, 1080), (250, 250, 250)).save(buf, "PNG")
    board = slack_fake.add_file("whiteboard.png", buf.getvalue(), "image/png")
    await slack_fake.send_envelope("events_api", event_body(dm("what did we decide?", subtype="file_share",
                                                                files=[board])))
    await slack_fake.calls.wait(is_post)
    await gateway.idle()
    [(mime, data)] = model.requests[0].images
    assert mime == "image/jpeg" and Image.open(io.BytesIO(data)).size == (640, 360)
