"""What the owner approves is what they see: control characters (terminal escapes, carriage returns,
bidirectional overrides, zero-width characters) in a preview are shown as escapes, on every surface, and
the console prints none raw."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.host import call, pending
from toolsets.base import Preview
from toolsets.controls import visible

HIDDEN = "rm -f FILE # \x1b[2K\r$ ls -la"


pytestmark = pytest.mark.usefixtures("fake_home")  # commands run for real: never in the real home


async def test_a_command_hiding_behind_an_escape_sequence_is_shown_whole(start_console, make_config, model,
                                                                        tmp_path: Path) -> None:
    host = await start_console(make_config(workspace={"root": str(tmp_path / "ws")}))
    result = await call(host, model, "bash", {"command": HIDDEN})
    assert "Awaiting approval" in result
    [rec] = await pending(host)
    assert "$ rm -f FILE # \\x1b[2K\\r$ ls -la" in rec.preview and "\x1b" not in rec.preview
    printed = host.out.getvalue()
    assert "rm -f FILE # \\x1b[2K\\r$ ls -la" in printed
    assert "\x1b" not in printed and "\r" not in printed  # the console never prints a control character
    detail = await host.say(f"/approvals {rec.id}")
    assert "\\x1b[2K\\r" in detail


@pytest.mark.parametrize("raw, shown", [
    ("a\x1b[31mb", "a\\x1b[31mb"), ("x\ry", "x\\ry"), ("evil\u202etxt.exe", "evil\\u202etxt.exe"),
    ("to\u200bken", "to\\u200bken"), ("bell\x07", "bell\\x07"), ("c1\x9bq", "c1\\x9bq"), ("del\x7f", "del\\x7f"),
    ("lines\nand\ttabs", "lines\nand\ttabs"), ("nul\x00", "nul\\0"), ("ls\u2028rm", "ls\\u2028rm"),
])
def test_visible_escapes_what_changes_the_display_and_keeps_lines(raw: str, shown: str) -> None:
    assert visible(raw) == shown and Preview(text=raw).text == shown
