"""How a setup step asks: at a terminal, a prompt_toolkit prompt (secrets without echo); with `--yes` (or
without a terminal), the answer given as a flag, else the default, else a clear error naming the flag."""

from __future__ import annotations

import os
from collections.abc import Sequence


def env_value(name: str) -> str | None:
    """The value of the variable `name` in this process's environment (secrets.env loaded), or None."""
    return os.environ.get(name, "").strip() or None


class SetupError(Exception):
    """A step cannot go on: a missing answer, a refused token. Phrased for the person."""


class Ask:
    def __init__(self, interactive: bool) -> None:
        self.interactive = interactive
        self._session: object | None = None

    def say(self, text: str = "") -> None:
        print(text, flush=True)  # flushed: a person (or a test on a pty) acts on each line

    async def _prompt(self, message: str, *, password: bool = False) -> str:
        from prompt_toolkit import PromptSession  # only at a terminal

        if self._session is None:
            self._session = PromptSession()
        session: PromptSession[str] = self._session  # type: ignore[assignment]
        return (await session.prompt_async(message, is_password=password)).strip()

    async def text(self, question: str, *, flag: str, given: str | None = None, default: str | None = None) -> str:
        """A line of text: `given` (a flag's value) when set, else asked, else `default`."""
        if given is not None:
            return given
        if not self.interactive:
            if default is None:
                raise SetupError(f"{question}: give {flag}")
            return default
        offered = f" [{default}]" if default else ""
        while True:
            answer = await self._prompt(f"{question}{offered}: ")
            if answer or default is not None:
                return answer or default or ""
            self.say("  (an answer is needed here; Ctrl-C skips this step)")

    async def secret(self, question: str, *, flag: str, env_name: str | None, current: str | None) -> str:
        """A secret typed without echo, or taken from the variable a flag names (`env_name`). Enter keeps
        `current` (the value already in the environment or secrets.env) when there is one."""
        if env_name is not None:
            value = os.environ.get(env_name, "").strip()
            if not value:
                raise SetupError(f"{flag} {env_name}: ${env_name} is not set")
            return value
        if not self.interactive:
            if current:
                return current
            raise SetupError(f"{question}: give {flag} NAME (a variable that holds it)")
        keep = " (Enter keeps the one you have)" if current else ""
        while True:
            answer = await self._prompt(f"{question}{keep}, typed without echo: ", password=True)
            if answer or current:
                return answer or current or ""
            self.say("  (nothing typed; paste it and press Enter)")

    async def choose(self, question: str, options: Sequence[tuple[str, str]], *, flag: str,
                     given: str | None = None, default: str | None = None) -> str:
        """One of `options` (value, label), by number or value."""
        values = [value for value, _ in options]
        if given is not None:
            if given not in values:
                raise SetupError(f"{flag} {given}: choose one of {', '.join(values)}")
            return given
        if not self.interactive:
            if default is None:
                raise SetupError(f"{question}: give {flag} ({', '.join(values)})")
            return default
        self.say(question)
        for number, (_, label) in enumerate(options, 1):
            self.say(f"  {number}. {label}")
        start = f" [{values.index(default) + 1}]" if default in values else ""
        while True:
            answer = await self._prompt(f"Choose a number{start}: ") or (default or "")
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return values[int(answer) - 1]
            if answer in values:
                return answer
            self.say(f"  (a number from 1 to {len(options)})")

    async def confirm(self, question: str, *, default: bool, given: bool | None = None) -> bool:
        if given is not None:
            return given
        if not self.interactive:
            return default
        hint = "Y/n" if default else "y/N"
        while True:
            answer = (await self._prompt(f"{question} [{hint}] ")).lower()
            if not answer:
                return default
            if answer in ("y", "yes", "n", "no"):
                return answer.startswith("y")
