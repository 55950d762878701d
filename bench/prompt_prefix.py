"""How much of each request a provider's prompt cache can serve: the share of a turn's first request that
repeats the request before it as a prefix (what OpenAI, DeepSeek and Gemini cache by themselves, and what
Anthropic's breakpoints cover), over one `anyy chat` session on the local fake model.

Messages and replies have typical chat lengths (~80 and ~400 characters); every fourth turn calls a tool
first. Measured on the messages as sent (JSON per message, compared message by message, then character by
character within the first that differs). Beside it, what a layout with the clock in the system prompt
could reuse once the minute has changed (in a real chat, almost every turn): the system prompt's part
before the clock. The summariser's requests (compaction) are left out: they are not the chat's.

    .venv/bin/python bench/prompt_prefix.py [--turns 60]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fixtures.model import reply, start_fake_model, tool_call

SUMMARISER = "You maintain the memory"  # gateway/turns/compaction.py's requests are not the chat's
REPLY = ("Sure. " + "Here is what I found and what I would do next, in short. " * 7).strip()


def _chars(messages: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(m, ensure_ascii=False) for m in messages]


def reused(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    """Characters at the start of `after` that `before` sent in the same place."""
    done = 0
    for a, b in zip(_chars(before), _chars(after), strict=False):
        if a == b:
            done += len(b)
            continue
        return done + sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], zip(a, b, strict=False)))
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=60)
    args = ap.parse_args()
    fake = start_fake_model()
    steps = []
    for i in range(args.turns):
        if i % 4 == 0:
            steps.append(tool_call("task_create", {"title": f"errand {i}"}))
        steps.append(reply(f"{REPLY} ({i})"))
    fake.script(*steps)
    lines = "".join(f"message {i}: could you look into the errand we spoke about and tell me more?\n"
                    for i in range(args.turns))
    try:
        with tempfile.TemporaryDirectory(prefix="anyy-prefix-") as tmp:
            cfg = Path(tmp) / "config.toml"
            cfg.write_text(f'[model]\nbase_url = "{fake.url_openai}"\nmodel = "m"\nmax_retries = 0\n'
                           f'[store]\npath = "{tmp}/anyy.db"\n[dashboard]\nenabled = false\n', encoding="utf-8")
            env = {**os.environ, "HOME": tmp, "ANYY_HOME": f"{tmp}/data"}
            subprocess.run([sys.executable, "-m", "gateway.cli", "chat", "--config", str(cfg)], input=lines,
                           text=True, env=env, check=True, capture_output=True, timeout=600)
        requests = fake.requests
    finally:
        fake.stop()
    requests = [r for r in requests if not str(r.messages[0]["content"]).startswith(SUMMARISER)]
    firsts = [i for i, r in enumerate(requests) if r.messages[-1]["role"] == "user"]
    shares, clock_shares = [], []
    for i in firsts[1:]:
        before, after = requests[i - 1].messages, requests[i].messages
        total = sum(len(c) for c in _chars(after))
        shares.append(reused(before, after) / total)
        system = after[0]["content"]
        clock = system.find("Current time:")
        clock_shares.append((clock if clock >= 0 else len(system)) / total)
    print(f"{len(requests)} requests, {len(firsts)} turns; a turn's first request, share repeating the one before:")
    missed = [n + 1 for n, share in enumerate(shares) if share < 0.5]
    print(f"  this layout:              p50 {statistics.median(shares):.1%}  min {min(shares):.1%}  "
          f"last {shares[-1]:.1%}; under half at turns {missed} (the window's start changed)")
    print(f"  clock in the system prompt: p50 {statistics.median(clock_shares):.1%}  (once the minute changed)")


if __name__ == "__main__":
    main()
