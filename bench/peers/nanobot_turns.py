"""Drives nanobot (PyPI nanobot-ai) for bench/peers.py, under the Python of nanobot's own venv: its
Python SDK (`Nanobot(loop).run(message, session_key=...)`, the call its docs give for programmatic use)
on one persistent session, so history is loaded and saved every turn as in its gateway. The model is a
"custom" OpenAI-compatible provider pointing at the fake; it streams every request. A `task_create`
tool is registered next to nanobot's default tools so the fake's tool calls run a real (trivial) tool,
as they do in anyy.

    <venv>/bin/python bench/peers/nanobot_turns.py URL TURNS WARMUP WORKDIR OUT.json
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from loguru import logger
from mix import Lockstep, cpu_now, message, now, write_result
from nanobot import Nanobot
from nanobot.agent.loop import AgentLoop
from nanobot.agent.tools.base import Tool
from nanobot.agent.tools.registry import ToolRegistry
from nanobot.config.loader import load_config


class TaskCreate(Tool):
    """The tool the fake asks for on "add a task …" turns: notes the title, says it is done."""

    created: ClassVar[list[str]] = []  # every instance notes in the one list main() reads

    @property
    def name(self) -> str:
        return "task_create"

    @property
    def description(self) -> str:
        return "Create a task with a title."

    @property
    def parameters(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}

    async def execute(self, **kwargs: Any) -> Any:
        self.created.append(kwargs["title"])
        return f"created task {kwargs['title']!r}"


def write_config(url: str, work: Path) -> Path:
    """A config.json as the docs' custom-provider example, with the background memory job ("dream") and
    the heartbeat off: both would call the model between turns."""
    cfg = {
        "providers": {"custom": {"apiKey": "k", "apiBase": url}},
        "agents": {"defaults": {"model": "bench", "provider": "custom", "workspace": str(work / "workspace"),
                                "timezone": "UTC", "dream": {"enabled": False}}},
        "gateway": {"heartbeat": {"enabled": False}},
    }
    path = work / "config.json"
    path.write_text(json.dumps(cfg))
    return path


async def main(url: str, turns: int, warmup: int, out: Path, work: Path) -> None:
    logger.remove()  # log as nanobot's own CLI and gateway do: INFO and up to stderr (a file here)
    logger.add(sys.stderr, level="INFO")
    config = load_config(write_config(url, work))
    tools = ToolRegistry()
    loop = AgentLoop.from_config(config, tool_registry=tools)
    tools.register(TaskCreate())
    bot = Nanobot(loop, config=config)
    spans: list[tuple[float, float]] = []
    replies: list[str] = []
    cpu0 = 0.0
    step = Lockstep()
    for i in range(turns + warmup):
        step.before_turn()
        if i == warmup:
            cpu0 = cpu_now()
        t0 = now()
        result = await bot.run(message(i), session_key="bench:peers")
        t1 = now()
        step.after_turn()
        if i >= warmup:
            spans.append((t0, t1))
        replies.append(result.content or "")
    cpu_s = cpu_now() - cpu0
    await loop.aclose()
    write_result(out, spans, cpu_s, agent="nanobot", version=version("nanobot-ai"),
                 tools=sorted(tools.tool_names), tasks_created=len(TaskCreate.created),
                 last_replies=replies[-2:])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[5]), Path(sys.argv[4])))
