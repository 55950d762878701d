"""Drives Hermes (PyPI hermes-agent) for bench/peers.py, under the Python of Hermes's own venv: one
`run_agent.AIAgent` kept across turns, as its interactive CLI does, calling `run_conversation(message,
conversation_history=...)` with the history it returned last time and its SQLite session store
(`hermes_state.SessionDB`) so every turn is persisted. The model is a custom OpenAI-compatible base URL
pointing at the fake. A `task_create` tool is registered in Hermes's tool registry next to its default
tools so the fake's tool calls run a real (trivial) tool, as they do in anyy.

    <venv>/bin/python bench/peers/hermes_turns.py URL TURNS WARMUP WORKDIR OUT.json

Hermes keeps its config and state in HERMES_HOME, set to WORKDIR/hermes-home here, with a config.yaml
that turns off what would call the model between turns: the memory and user-profile review and the
skill-creation nudge. Everything else is Hermes's default (its default toolsets included).
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mix import Lockstep, cpu_now, message, now, write_result

created: list[str] = []

TASK_CREATE = {"name": "task_create", "description": "Create a task with a title.",
               "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}


def task_create(args: dict[str, Any], **_: Any) -> str:
    """The tool the fake asks for on "add a task …" turns: notes the title, says it is done."""
    created.append(args["title"])
    return json.dumps({"created": args["title"]})


CONFIG = """\
memory:
  memory_enabled: false
  user_profile_enabled: false
skills:
  creation_nudge_interval: 0
"""


def main(url: str, turns: int, warmup: int, out: Path, work: Path) -> None:
    home = work / "hermes-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(CONFIG)
    os.environ["HERMES_HOME"] = str(home)  # read when Hermes's modules load, so before importing them
    from hermes_state import SessionDB
    from run_agent import AIAgent
    from tools.registry import registry

    registry.register(name="task_create", toolset="bench", schema=TASK_CREATE, handler=task_create)
    agent = AIAgent(base_url=url, api_key="k", model="bench", quiet_mode=True, session_db=SessionDB(),
                    session_id="bench-peers", platform="cli")
    history: list[dict[str, Any]] = []
    spans: list[tuple[float, float]] = []
    replies: list[str] = []
    cpu0 = 0.0
    step = Lockstep()
    for i in range(turns + warmup):
        step.before_turn()
        if i == warmup:
            cpu0 = cpu_now()
        t0 = now()
        result = agent.run_conversation(message(i), conversation_history=history, task_id="bench-peers")
        t1 = now()
        step.after_turn()
        history = result["messages"]
        if i >= warmup:
            spans.append((t0, t1))
        replies.append(result.get("final_response") or "")
    cpu_s = cpu_now() - cpu0
    tools = sorted(t["function"]["name"] for t in agent.tools or [])
    write_result(out, spans, cpu_s, agent="hermes", version=version("hermes-agent"), tools=tools,
                 tasks_created=len(created), last_replies=replies[-2:])


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[5]), Path(sys.argv[4]))
