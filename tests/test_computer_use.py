"""Issue 29: computer use on a real X display (a session Xvfb, a tiny Tk app on it) through the real
gateway, console surface and fake vision model: a screenshot is a PNG of the display's size, every
action is held for the owner and runs exactly once after Approve, nothing after Deny."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from PIL import Image

from store.approvals import Approvals
from tests.fixtures.desktop import DISPLAY_SIZE, TkApp
from tests.fixtures.model import FakeModel, reply, tool_call


@pytest.fixture
def screen_config(make_config: Any, x_display: str) -> Any:
    def make(**sections: Any) -> Any:
        cu = {"enabled": True, "display": x_display, "xvfb": False, **sections.pop("computer_use", {})}
        return make_config(computer_use=cu, **sections)
    return make


@pytest.fixture
async def screen(start_console: Any, screen_config: Any) -> Any:
    return await start_console(screen_config(model={"vision": True}))


async def held(harness: Any, model: FakeModel, args: dict[str, Any], text: str = "click it on my screen") -> str:
    """Ask for one computer_use action; returns the id of the approval it is held under."""
    model.script(tool_call("computer_use", args), reply("Waiting for your approval."))
    out = await harness.say(text)
    found = re.search(r"/approve (\w+)", out)
    assert found, (out, model.requests[-1].messages[-2:])
    return found.group(1)


async def test_a_screenshot_reaches_the_vision_model_as_a_png_of_the_display_size(screen, model, tk_app):
    model.script(tool_call("computer_use", {"action": "screenshot"}), reply("I see a button."))
    out = await screen.say("take a screenshot of my screen")
    assert "I see a button." in out
    first, second = model.requests
    assert "computer_use" in first.tool_names  # selected by the message's own words
    [(mime, data)] = second.images
    img = Image.open(io.BytesIO(data))
    assert mime == "image/png" and img.format == "PNG" and img.size == DISPLAY_SIZE
    assert img.getpixel((0, 0)) != img.getpixel((DISPLAY_SIZE[0] - 1, DISPLAY_SIZE[1] - 1))  # the app is on it
    [result] = [m["content"] for m in second.messages if m["role"] == "tool"]
    assert f"{DISPLAY_SIZE[0]}x{DISPLAY_SIZE[1]} pixels" in result and "scaled" not in result
    assert "untrusted" in result  # what the screen shows is outside content
    assert await Approvals(screen.gw.store).list(None) == []  # a read: nothing to approve


async def test_a_click_is_held_deny_clicks_nothing_and_approve_clicks_exactly_once(screen, model, tk_app: TkApp):
    x, y = tk_app.button
    approval_id = await held(screen, model, {"action": "left_click", "coordinate": [x, y]})
    rec = await Approvals(screen.gw.store).get(approval_id)
    assert rec is not None and rec.state == "pending"
    assert rec.preview.startswith(f"left click at ({x}, {y}) on display {tk_app.display}")
    assert await tk_app.settled_log() == []  # held: nothing reached the app
    out = await screen.say(f"/deny {approval_id}")
    assert "Denied" in out
    assert await tk_app.settled_log() == []

    approval_id = await held(screen, model, {"action": "left_click", "coordinate": [x, y]})
    await screen.say(f"/approve {approval_id}")
    await screen.say(f"/approve {approval_id}")  # a second tap finds it decided
    assert await tk_app.settled_log() == ["click"]
    assert (await Approvals(screen.gw.store).get(approval_id)).state == "succeeded"  # type: ignore[union-attr]


async def test_the_prompt_comes_with_the_screen_the_action_is_planned_on(screen, model, tk_app: TkApp):
    await held(screen, model, {"action": "left_click", "coordinate": tk_app.button})
    artifacts = await screen.gw.services["artifacts"].for_session(
        (await Approvals(screen.gw.store).list(("pending",)))[0].session_id)
    shown = [a for a in artifacts if a.name == "screen-before.png"]
    assert len(shown) == 1 and shown[0].type == "image/png"
    assert Image.open(shown[0].path).size == DISPLAY_SIZE
    assert Image.open(shown[0].path).convert("RGB").getpixel(tuple(tk_app.button)) is not None


async def test_click_on_the_entry_type_and_return_submit_the_text_exactly_once(screen, model, tk_app: TkApp):
    for args in ({"action": "left_click", "coordinate": tk_app.entry}, {"action": "type", "text": "hello world"},
                 {"action": "key", "key": "Return"}):
        approval_id = await held(screen, model, args, "type hello world into the field on my screen")
        await screen.say(f"/approve {approval_id}")
    assert await tk_app.settled_log() == ["submit:hello world"]


@pytest.mark.parametrize(("args", "logged"), [
    ({"action": "double_click"}, ["click", "click"]),
    ({"action": "right_click"}, ["right click"]),
    ({"action": "scroll", "direction": "down", "amount": 2}, ["wheel down", "wheel down"]),
    ({"action": "scroll", "direction": "up"}, ["wheel up"] * 3),
])
async def test_each_pointer_action_reaches_the_app_once_approved(screen, model, tk_app: TkApp, args, logged):
    approval_id = await held(screen, model, {**args, "coordinate": tk_app.button})
    assert await tk_app.settled_log() == []
    await screen.say(f"/approve {approval_id}")
    assert await tk_app.settled_log() == logged


async def test_a_pinned_computer_use_is_offered_without_its_words(screen, model):
    await screen.say("/toolsets pin computer_use")
    model.script(reply("ok"))
    await screen.say("hello there")
    assert "computer_use" in model.requests[-1].tool_names


async def test_the_preview_shows_control_characters_and_keys_exactly(screen, model, tk_app: TkApp):
    await held(screen, model, {"action": "type", "text": "rm -rf ~\n\u202etxt.exe\x1b"}, "type it in the app window")
    (rec,) = await Approvals(screen.gw.store).list(("pending",))
    assert rec.preview.splitlines()[1] == "text: “rm -rf ~⏎\\n\\u202etxt.exe\\u001b”"
    assert await tk_app.settled_log() == []


@pytest.mark.parametrize(("args", "problem"), [
    ({"action": "left_click", "coordinate": [DISPLAY_SIZE[0], 10]}, "outside the screen: x must be 0..1023"),
    ({"action": "left_click", "coordinate": [5, -1]}, "greater than or equal to 0"),
    ({"action": "left_click"}, "left_click needs coordinate"),
    ({"action": "type", "text": "x", "coordinate": [1, 1]}, "type takes no coordinate"),
    ({"action": "key", "key": "ctrl+a; rm"}, "should match pattern"),
    ({"action": "wait", "amount": 11}, "wait at most 10 seconds"),
])
async def test_bad_actions_are_tool_errors_and_ask_nobody(screen, model, args, problem):
    model.script(tool_call("computer_use", args), reply("ok"))
    await screen.say("use my screen")
    [result] = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert problem in result, result
    assert await Approvals(screen.gw.store).list(None) == []


async def test_cursor_position_is_a_direct_read(screen, model, tk_app: TkApp):
    from tests.fixtures.desktop import xdotool

    await xdotool(tk_app.display, "mousemove", "123", "45")
    model.script(tool_call("computer_use", {"action": "cursor_position"}), reply("ok"))
    await screen.say("where is the mouse cursor?")
    [result] = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert result == "cursor at x=123, y=45 (screenshot pixels)"


async def test_without_vision_a_screenshot_is_an_artifact_path(start_console, screen_config, model, tk_app):
    harness = await start_console(screen_config())
    model.script(tool_call("computer_use", {"action": "screenshot"}), reply("ok"))
    await harness.say("take a screenshot of my screen")
    [result] = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    path = re.search(r"saved as artifact \w+ at (\S+) ", result)
    assert path, result
    assert Image.open(path.group(1)).size == DISPLAY_SIZE and model.requests[-1].images == []
