"""The terminal prompt of `anyy chat` on a TTY: prompt_toolkit's line editing and history.

While the prompt is shown (the person is typing), output such as a reminder is printed above it through
`run_in_terminal`, not into the line being typed. While it is not shown (a turn runs), output goes
straight to the terminal, in the order it was written, before the next prompt is drawn. (prompt_toolkit's
`patch_stdout` would do both, but its proxy writes from a thread of its own, so a reply could reach the
terminal after the next `you> `.) Ctrl-C clears the line; Ctrl-D on an empty line ends the chat.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.history import FileHistory, InMemoryHistory

PROMPT = "you> "


class Prompt:
    """The person's prompt: the lines they type, and a way to print while it is shown."""

    def __init__(self, history: Path | None) -> None:
        """`history` is the file that keeps typed lines across chats (None: this chat only)."""
        if history is not None:
            history.parent.mkdir(parents=True, exist_ok=True)
        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)) if history is not None else InMemoryHistory())

    @property
    def shown(self) -> bool:
        """Whether the prompt is on the screen, waiting for the person to type."""
        return self._session.app.is_running

    async def lines(self) -> AsyncIterator[str]:
        """The lines the person types, until Ctrl-D."""
        while True:
            try:
                yield await self._session.prompt_async(PROMPT)
            except KeyboardInterrupt:
                continue
            except EOFError:
                return

    async def above(self, write: Callable[[], None]) -> None:
        """Run `write` with the prompt taken off the screen; it is drawn again below what was written."""
        await run_in_terminal(write)
