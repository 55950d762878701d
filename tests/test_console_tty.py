"""`anyy chat` at a real terminal (a pty): prompt_toolkit's prompt, a spinner while the model works, a
progress line per tool, the next prompt only after the reply, history kept, logs in a file; a reminder that
arrives while the person types is printed above the prompt and leaves their half-typed line alone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import re
from collections.abc import AsyncIterator
from pathlib import Path

from tests.fixtures.model import reply, tool_call
from tests.support.cli import ANYY, SUBPROCESS_S, model_config
from tests.support.terminal import Terminal

# No cursor-position request: the pty has no terminal emulator to answer it.
TTY_ENV = {"TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "100", "LINES": "30"}


@contextlib.asynccontextmanager
async def chat_at_a_terminal(tmp_path: Path, home: dict[str, str], model) -> AsyncIterator[Terminal]:
    """`anyy chat` on a pty; the test ends it with Ctrl-D (it is killed if the test fails first)."""
    master, slave = pty.openpty()
    process = await asyncio.create_subprocess_exec(*ANYY, "chat", "--config", model_config(tmp_path, model),
                                                   env={**home, **TTY_ENV}, stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    try:
        yield Terminal(master, process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)


async def quit_chat(term: Terminal) -> None:
    term.type("\x04")  # Ctrl-D, at the prompt (typed before it is drawn, the terminal's own line editing takes it)
    assert await asyncio.wait_for(term.process.wait(), SUBPROCESS_S) == 0


async def test_a_person_at_a_terminal_sees_progress_then_the_reply(tmp_path: Path, home, model):
    async with chat_at_a_terminal(tmp_path, home, model) as term:
        await term.expect(r"Logs: .*chat\.log")
        await term.expect(r"you>")  # prompt_toolkit draws the trailing space as a cursor move
        model.pace.first_token_s = 0.6  # long enough for the spinner to turn
        model.script(tool_call("task_create", {"title": "milk"}), reply("Added milk."))
        term.type("add task milk\r")
        out = await term.expect(r"anyy> Added milk\.")
        answered = out.index("anyy> Added milk.")
        after_typing = out[out.rindex("add task milk", 0, answered):]  # the last redraw of the typed line
        assert re.search(f"[{'⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏'}] working", after_typing), after_typing
        assert "· task_create" in after_typing
        # the prompt comes back after the reply, not before it
        assert "you>" not in after_typing[:after_typing.index("anyy> Added milk.")]
        out = await term.expect(r"anyy> Added milk\..*you>")
        assert "WARNING" not in out and "Traceback" not in out
        await quit_chat(term)
    assert "add task milk" in (Path(home["ANYY_HOME"]) / "chat_history").read_text()
    assert (Path(home["ANYY_HOME"]) / "logs" / "chat.log").exists()


async def test_a_reminder_arriving_while_the_person_types_goes_above_the_prompt(tmp_path: Path, home, model):
    async with chat_at_a_terminal(tmp_path, home, model) as term:
        await term.expect(r"you>")
        model.script(tool_call("automation_create", {
            "name": "stretch", "schedule": {"type": "every", "mode": "interval", "interval": "2s"},
            "action": {"kind": "reminder", "text": "stand up and stretch"}}), reply("Set."))
        term.type("remind me to stretch every 2 seconds\r")
        await term.expect(r"anyy> Set\..*you>")
        term.type("half typ")
        # printed on a line of its own above the prompt, which comes back below it with what was typed
        await term.expect(r"anyy> ⏰ stand up and stretch\n+you> half typ")
        model.script(reply("Noted."))
        term.type("ed\r")  # the line typed around the reminder is sent whole
        await term.expect(r"anyy> Noted\.\n+you>")
        assert model.requests[-1].said[-1] == {"role": "user", "content": "half typed"}
        await quit_chat(term)
