"""The terminal prompt of `anyy chat` on a TTY: prompt_toolkit's line editing and history.

Output written while the prompt is shown (a reminder firing) is printed above it, not into the line
being typed (`patch_stdout`). Ctrl-C clears the line; Ctrl-D on an empty line ends the chat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.patch_stdout import patch_stdout

PROMPT = "you> "


async def prompt_lines(history: Path | None) -> AsyncIterator[str]:
    """The lines the person types, until Ctrl-D; `history` is the file that keeps them across chats."""
    if history is not None:
        history.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)) if history is not None else InMemoryHistory())
    with patch_stdout(raw=True):
        while True:
            try:
                yield await session.prompt_async(PROMPT)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return
