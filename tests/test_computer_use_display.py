"""Issue 29: the display's life and who gets it. With `xvfb = true` Anyy starts its own Xvfb of the
configured size (a larger screen is scaled for the model and coordinates mapped back) and none is left
after it stops; a guest is never offered computer_use; an approval that is stale or meant for another
screen does nothing; `anyy doctor` says what works."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from PIL import Image

from connectors.desktop import Desktop, DesktopSettings
from gateway.config import ComputerUseConfig
from gateway.services.factory import computer_use_check
from store.approvals import Approvals
from store.records import iso, utcnow
from tests.fixtures.desktop import TkApp, display_is_up, free_display, xdotool
from tests.fixtures.model import FakeModel, reply, tool_call
from tests.support.context import RecordingContext
from tests.test_authority import guest_replies, pair_guest, say_as_guest
from toolsets.base import ToolError
from toolsets.computer_use import ComputerUse, _act


async def test_anyy_starts_its_own_display_scales_a_large_one_and_leaves_none(start_console, make_config, model):
    display = free_display()
    cfg = make_config(model={"vision": True},
                      computer_use={"enabled": True, "display": display, "xvfb": True, "width": 1600, "height": 1000})
    harness = await start_console(cfg)
    assert display_is_up(display)
    assert await xdotool(display, "getdisplaygeometry") == "1600 1000"
    model.script(tool_call("computer_use", {"action": "screenshot"}), reply("ok"))
    await harness.say("take a screenshot of my screen")
    [(mime, data)] = model.requests[-1].images
    assert mime == "image/png" and Image.open(io.BytesIO(data)).size == (1280, 800)
    [result] = [m["content"] for m in model.requests[-1].messages if m["role"] == "tool"]
    assert "1280x800 pixels, the screen scaled by 0.8 " in result

    model.script(tool_call("computer_use", {"action": "mouse_move", "coordinate": [640, 400]}), reply("asked"))
    out = await harness.say("move the mouse to the middle of the screen")
    approval_id = re.search(r"/approve (\w+)", out).group(1)  # type: ignore[union-attr]
    rec = await Approvals(harness.gw.store).get(approval_id)
    assert rec is not None and "mouse move at (640, 400) = screen pixel (800, 500)" in rec.preview
    await harness.say(f"/approve {approval_id}")
    assert "x:800 y:500 " in await xdotool(display, "getmouselocation")

    await harness.gw.stop()
    assert not display_is_up(display)


async def test_a_display_taken_by_another_server_leaves_computer_use_absent(start_console, make_config, x_display,
                                                                           model, caplog):
    cfg = make_config(computer_use={"enabled": True, "display": x_display, "xvfb": True})
    harness = await start_console(cfg)
    assert "computer_use" not in harness.gw.services
    assert f"display {x_display} is already served by another X server: set xvfb = false" in caplog.text
    assert await xdotool(x_display, "getdisplaygeometry")  # the other server is untouched
    model.script(reply("ok"))
    await harness.say("click the button on my screen")
    assert "computer_use" not in model.requests[-1].tool_names


async def test_disabled_or_unreachable_means_no_toolset(start_console, make_config, model):
    for section in ({}, {"enabled": True, "display": free_display(), "xvfb": False}):
        harness = await start_console(make_config(computer_use=section))
        model.script(reply("ok"))
        await harness.say("click the button on my screen")
        assert "computer_use" not in model.requests[-1].tool_names
        await harness.gw.stop()


@pytest.mark.parametrize("guest_toolsets", [None, ["computer_use", "memory"]], ids=["default", "listed_for_guests"])
async def test_a_guest_is_never_offered_computer_use(start_console, make_config, x_display, model: FakeModel,
                                                     guest_toolsets):
    access = {} if guest_toolsets is None else {"access": {"guest_toolsets": guest_toolsets}}
    h = await start_console(make_config(computer_use={"enabled": True, "display": x_display, "xvfb": False}, **access))
    await pair_guest(h)
    model.script(tool_call("computer_use", {"action": "left_click", "coordinate": [10, 10]}), reply("I can't."))
    await say_as_guest(h, "click the button on my screen and take a screenshot")
    for request in model.requests[-2:]:
        assert "computer_use" not in request.tool_names
    assert "not available in this conversation" in next(m["content"] for m in model.requests[-1].messages
                                                        if m["role"] == "tool")
    await say_as_guest(h, "/toolsets pin computer_use")
    assert (await guest_replies(h))[-1].startswith("Unknown toolsets: computer_use.")
    assert await Approvals(h.gw.store).list(None) == []
    model.script(reply("ok"))
    await h.say("click it on my screen")
    assert "computer_use" in model.requests[-1].tool_names  # the owner's same words get it


def plan(on: str, at: list[int], **changes: Any) -> dict[str, Any]:
    return {"action": "left_click", "display": on, "screen": [1024, 700], "scale": 1.0, "coordinate": at,
            "at": at, "text": None, "key": None, "direction": None, "amount": None, "planned_at": iso(utcnow()),
            **changes}


@pytest.mark.parametrize(("changes", "problem"), [
    ({"planned_at": "2020-01-01T00:00:00+00:00"}, "the screen may have changed. Nothing was done"),
    ({"screen": [1920, 1080]}, "the screen is 1024x700 now, not 1920x1080"),
    ({"display": ":4242"}, "this action was for display :4242"),
])
async def test_a_stale_or_mismatched_approval_does_nothing(tmp_path, x_display, tk_app: TkApp, changes, problem):
    from store.db import Store

    service = ComputerUse(Desktop(DesktopSettings(display=x_display, xvfb=False)), stale_after_s=60)
    async with Store(tmp_path / "s.db") as store:
        ctx = RecordingContext(store=store, services={"computer_use": service})
        with pytest.raises(ToolError, match=re.escape(problem)):
            await _act(ctx, None, plan(x_display, tk_app.button, **changes))
        assert await tk_app.settled_log() == []
        assert (await _act(ctx, None, plan(x_display, tk_app.button))).startswith("done: left click at")
        assert await tk_app.settled_log() == ["click"]


async def test_doctor_says_what_works(x_display):
    [(mark, _, detail)] = await computer_use_check(ComputerUseConfig(enabled=True, display=x_display, xvfb=False))
    assert mark == "✓" and "1024x700" in detail and "screenshots work" in detail
    missing = free_display()
    [(mark, _, detail)] = await computer_use_check(ComputerUseConfig(enabled=True, display=missing, xvfb=False))
    assert mark == "✗" and f"cannot open the X display {missing}" in detail
    [(mark, _, detail)] = await computer_use_check(ComputerUseConfig(enabled=True, display=missing, width=800,
                                                                     height=600))
    assert mark == "✓" and "800x600" in detail and not display_is_up(missing)  # a trial Xvfb, stopped again
    assert await computer_use_check(ComputerUseConfig()) == []
