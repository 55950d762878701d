"""Issue 29 across crashes: a real `anyy chat` child drives the session's Xvfb and is killed with
`kill -9`. A click approved and run, killed before its outcome was recorded, is never clicked again
after the restart (its outcome is reported unknown); an Xvfb Anyy started dies with it."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from tests.fixtures.desktop import TkApp, display_is_up, free_display
from tests.fixtures.model import reply, tool_call
from tests.support.cli import SUBPROCESS_S, model_config
from tests.support.crash import chat_once, start


def config(tmp_path: Path, model: Any, display: str, xvfb: bool) -> str:
    return model_config(tmp_path, model, f"""
[store]
path = "{tmp_path / 'store' / 'anyy.db'}"

[computer_use]
enabled = true
display = "{display}"
xvfb = {str(xvfb).lower()}
""")


async def test_killed_while_an_approved_click_ran_it_is_not_clicked_again(tmp_path, model, home, tk_app: TkApp):
    cfg = config(tmp_path, model, tk_app.display, xvfb=False)
    model.script(tool_call("computer_use", {"action": "left_click", "coordinate": tk_app.button}),
                 reply("Asked for approval."))
    out = await chat_once(cfg, home, "click the button on my screen")
    approval_id = re.search(r"/approve (\w+)", out).group(1)  # type: ignore[union-attr]
    assert await tk_app.settled_log() == []

    child = await start("chat", cfg, home, lines=[f"/approve {approval_id}"], pause_at="approval.ran")
    await child.wait_paused("approval.ran")  # the click is done, its outcome not recorded
    await child.kill()
    assert await tk_app.settled_log() == ["click"]

    out = await chat_once(cfg, home)
    assert f"computer_use (approval {approval_id}) was running when Anyy stopped. Its outcome is unknown" in out
    assert "Already unknown" in await chat_once(cfg, home, f"/approve {approval_id}")
    assert await tk_app.settled_log() == ["click"]  # once, never again


async def test_an_xvfb_anyy_started_does_not_outlive_a_kill_9(tmp_path, model, home):
    display = free_display()
    child = await start("chat", config(tmp_path, model, display, xvfb=True), home, lines=["hello"],
                        pause_at="model.before_call")
    try:
        await child.wait_paused("model.before_call")
        assert display_is_up(display)
    finally:
        await child.kill()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SUBPROCESS_S
    while display_is_up(display):  # Xvfb is told by the kernel (PR_SET_PDEATHSIG) and cleans up
        assert loop.time() < deadline, f"Xvfb on {display} outlived the killed Anyy"
        await asyncio.sleep(0.05)
