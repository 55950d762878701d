"""Speech connectors and the tts toolset: the transcription client against the fake server (multipart as
the OpenAI API shapes it), espeak-ng + ffmpeg producing a real Ogg/Opus file, the OpenAI-compatible
speech endpoint, and `text_to_speech` existing only with an engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connectors.speech import EspeakEngine, OpenAISpeechEngine, SpeechError, Transcriber
from gateway.config import ConfigError, parse_config
from gateway.services.factory import speech_engine
from store.artifacts import Artifacts
from store.db import Store
from tests.fixtures.speech import FakeSpeech
from tests.support.audio import is_ogg_opus, voice_note
from tests.support.context import RecordingContext
from toolsets import tts
from toolsets.base import Tool, ToolError


async def call(tool: Tool, ctx: RecordingContext, **args: Any) -> Any:
    return await tool.call(ctx, tool.args_model.model_validate(args))


async def test_transcription_is_a_multipart_upload_of_the_audio(speech: FakeSpeech, tmp_path: Path) -> None:
    audio = voice_note("buy milk on the way home")
    path = tmp_path / "voice-1.ogg"
    path.write_bytes(audio)
    speech.transcript = "Buy milk on the way home."
    client = Transcriber(speech.url + "/", "whisper-large-v3", "sk-speech", 10)
    try:
        assert await client.transcribe(path, "audio/ogg") == "Buy milk on the way home."
    finally:
        await client.aclose()
    [upload] = speech.uploads.items()
    assert upload.fields == {"model": "whisper-large-v3", "response_format": "json"}
    assert (upload.filename, upload.content_type, upload.data) == ("voice-1.ogg", "audio/ogg", audio)
    assert upload.headers["Authorization"] == "Bearer sk-speech"


async def test_a_refusing_or_missing_server_is_a_clear_error(speech: FakeSpeech, tmp_path: Path) -> None:
    path = tmp_path / "v.ogg"
    path.write_bytes(b"OggS")
    speech.status = 401
    client = Transcriber(speech.url, "whisper-1", "sk-secret-key", 10)
    try:
        with pytest.raises(SpeechError, match=r"answered HTTP 401 \(check the API key\)") as err:
            await client.transcribe(path, "audio/ogg")
        assert "sk-secret-key" not in str(err.value)
    finally:
        await client.aclose()
    gone = Transcriber("http://127.0.0.1:9", "whisper-1", None, 5)
    try:
        with pytest.raises(SpeechError, match=r"127.0.0.1:9/audio/transcriptions cannot be reached"):
            await gone.transcribe(path, "audio/ogg")
    finally:
        await gone.aclose()


async def test_espeak_ng_makes_a_real_ogg_opus_voice_note() -> None:
    engine = EspeakEngine("en", 60)
    audio = await engine.synthesize("-v this starts with a dash and is still text")
    assert is_ogg_opus(audio) and len(audio) > 1000
    slow = EspeakEngine("en", 0.001)
    with pytest.raises(SpeechError, match="took longer than"):
        await slow.synthesize("a long sentence " * 200)


async def test_openai_speech_endpoint_is_asked_for_opus(speech: FakeSpeech) -> None:
    engine = OpenAISpeechEngine(speech.url, "tts-1", "alloy", None, 30)
    try:
        audio = await engine.synthesize("hello there", voice="nova")
    finally:
        await engine.aclose()
    assert is_ogg_opus(audio)
    assert speech.speech_requests.items() == [{"model": "tts-1", "input": "hello there", "voice": "nova",
                                               "response_format": "opus"}]


def test_the_engine_follows_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert speech_engine(parse_config({})) is None  # default "none": the toolset is absent
    assert isinstance(speech_engine(parse_config({"tts": {"engine": "espeak-ng"}})), EspeakEngine)
    assert speech_engine(parse_config({"tts": {"engine": "openai"}})) is None  # no url
    monkeypatch.setenv("PATH", "/nonexistent")
    assert speech_engine(parse_config({"tts": {"engine": "espeak-ng"}})) is None  # programs missing


async def test_text_to_speech_saves_an_artifact_and_sends_it(store: Store, tmp_path: Path) -> None:
    artifacts = Artifacts(store, tmp_path / "artifacts", max_file_bytes=10**7, max_daily_bytes=10**8)
    ctx = RecordingContext(store, services={"tts": EspeakEngine("en", 60), "artifacts": artifacts})
    out = await call(tts.text_to_speech, ctx, text="Your next meeting is at three.")
    [rec] = await artifacts.for_session(ctx.session_id)
    assert out["artifact"] == rec.id and rec.origin == "produced" and rec.type == "audio/ogg"
    assert rec.meta == {"transcript": "Your next meeting is at three."}
    [attachment] = ctx.files
    assert attachment.path == rec.path and is_ogg_opus(Path(rec.path).read_bytes())
    with pytest.raises(ToolError, match="text is empty"):
        await call(tts.text_to_speech, ctx, text="  ")
    tiny = Artifacts(store, tmp_path / "artifacts", max_file_bytes=100, max_daily_bytes=10**8)
    ctx.services["artifacts"] = tiny
    with pytest.raises(ToolError, match="max_file_mb"):
        await call(tts.text_to_speech, ctx, text="too long for the tiny limit, surely")
    assert len(ctx.files) == 1


async def test_tts_toolset_exists_only_with_an_engine(start_console: Any, make_config: Any) -> None:
    without = await start_console()
    assert "tts" not in {ts.name for ts in without.gw.runtime.available()}
    assert "artifact" in {ts.name for ts in without.gw.runtime.available()}
    await without.gw.stop()
    with_engine = await start_console(make_config(tts={"engine": "espeak-ng"}))
    assert "tts" in {ts.name for ts in with_engine.gw.runtime.available()}


async def test_the_console_says_where_the_voice_note_was_saved(start_console: Any, make_config: Any,
                                                               model: Any) -> None:
    from tests.fixtures.model import reply, tool_call

    console = await start_console(make_config(tts={"engine": "espeak-ng"}))
    model.script(tool_call("text_to_speech", {"text": "Hello from the terminal."}), reply("Done."))
    out = await console.say("say it out loud")
    [rec] = await console.gw.services["artifacts"].for_session("console:local")
    assert f"[voice.ogg saved at {rec.path}]" in out and out.rstrip().endswith("Done.")
    assert is_ogg_opus(Path(rec.path).read_bytes())


async def test_the_gateway_sweeps_expired_artifacts_at_start(start_console: Any) -> None:
    console = await start_console()
    artifacts: Artifacts = console.gw.services["artifacts"]
    rec = await artifacts.add_bytes(b"old", session_id="console:local", user_key="console:owner", name="old.txt",
                                    mime_type="text/plain")
    await console.gw.store.run(lambda db: db.execute("UPDATE artifacts SET created_at = '2000-01-01T00:00:00+00:00'"))
    await console.gw.stop()
    again = await start_console()
    assert await again.gw.services["artifacts"].for_session("console:local") == []
    assert not Path(rec.path).exists()


def test_the_issue_config_keys_are_accepted_and_checked() -> None:
    cfg = parse_config({
        "model": {"vision": True},
        "speech": {"transcribe_url": "http://127.0.0.1:9100/v1", "transcribe_model": "whisper-1",
                   "api_key_env": "ANYY_SPEECH_KEY"},
        "tts": {"engine": "espeak-ng", "url": "", "voice": "en"},
        "artifacts": {"retention_days": 30, "max_file_mb": 20},
    })
    assert cfg.model.vision and cfg.speech.transcribe_url.endswith("/v1") and cfg.tts.engine == "espeak-ng"
    assert (cfg.artifacts.retention_days, cfg.artifacts.max_file_mb) == (30, 20)
    with pytest.raises(ConfigError, match=r"\[tts.engine\] Input should be 'espeak-ng', 'openai' or 'none'"):
        parse_config({"tts": {"engine": "festival"}})
    with pytest.raises(ConfigError, match=r"\[speech.transcribe_uri\] unknown key"):
        parse_config({"speech": {"transcribe_uri": "x"}})


async def test_doctor_reports_speech_and_tts(tmp_path: Path, home: dict[str, str], model: Any) -> None:
    from tests.support.cli import anyy, write_config

    config = write_config(tmp_path, f'[model]\nbase_url = "{model.url_openai}"\nmodel = "fake-1"\nmax_retries = 0\n'
                                    '[tts]\nengine = "openai"\n')
    code, out, _ = await anyy("doctor", "--config", config, env=home)
    assert "! speech: voice notes are not transcribed: set [speech] transcribe_url" in out
    assert "✗ tts: engine openai needs [tts] url" in out and code == 1


async def test_the_tools_catalog_shows_tts_only_with_an_engine(tmp_path: Path, home: dict[str, str]) -> None:
    import json

    from tests.support.cli import anyy, write_config

    for engine, available in (("none", False), ("espeak-ng", True)):
        config = write_config(tmp_path, f'[tts]\nengine = "{engine}"\n')
        code, out, _ = await anyy("tools", "--json", "--config", config, env=home)
        rows = {r["tool"]: r for r in json.loads(out)}
        assert code == 0 and rows["text_to_speech"]["available"] is available
        assert rows["artifact_inspect"]["available"] is True
