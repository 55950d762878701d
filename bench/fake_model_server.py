"""The fake model as a separate process for benchmarks, answering by rule instead of by script:
a user message starting "add a task" gets a task_create call, a tool result gets "Added.", anything
else gets a reply of a typical length for a chat assistant (about 400 characters). Prints its OpenAI
base URL, then serves until terminated.

    python bench/fake_model_server.py [--delay 0.3]   # each answer starts after 0.3 s (default: at once)
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.model import start_fake_model  # noqa: E402
from tests.support.model_stream import Pace  # noqa: E402
from tests.support.model_wire import Step, last_user_text, reply, tool_call  # noqa: E402


def by_rule(body: dict[str, Any]) -> Step:
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return reply("Added.")
    text = last_user_text(body) or ""
    if text.startswith("add a task"):
        return tool_call("task_create", {"title": text.removeprefix("add a task ").strip() or "task"})
    return reply(f"About '{text[:40]}': " + "here is a reasonably detailed answer sentence. " * 8)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--delay", type=float, default=0.0, help="seconds before each answer starts (the model's latency)")
    args = ap.parse_args()
    fake = start_fake_model()
    fake.responder = by_rule
    fake.pace = Pace(first_token_s=args.delay)
    print(fake.url_openai, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    fake.stop()


if __name__ == "__main__":
    main()
