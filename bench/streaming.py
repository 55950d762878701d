"""Streaming replies on Telegram: how soon the first text is visible, how many edits a long answer costs.

The real Gateway with the Telegram surface (python-telegram-bot) against the fake Bot API, and the fake
model streaming at a realistic pace: the first token after 400 ms, then 40 tokens a second, a 600-token
answer (one word per token). For each run the owner sends a message and the bench records, from the
moment the update is queued on the fake Bot API:

- time to first visible text: the first successful sendMessage the fake receives;
- time to the final text: the last write (send or edit) of the reply;
- writes of the reply (sendMessage + editMessageText) and the shortest gap between two of them, against
  Telegram's limit of about one message a second per chat.

The same is measured once with `[runtime] stream = false` for comparison. Polling delay is included
(the fake answers getUpdates as soon as the update is queued).

    .venv/bin/python bench/streaming.py [--runs 3] [--tokens 600]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.surfaces.telegram import TelegramSurface
from tests.fixtures.model import reply, start_fake_model
from tests.fixtures.telegram import FakeTelegram
from tests.support.model_stream import Pace
from tests.support.telegram_api import OWNER_ID, FakeBot

SENTENCES = ["Streaming shows the answer while the model is still writing it.",
             "A long reply on a phone is then readable almost at once.",
             "The message grows about once a second, inside Telegram's limits.",
             "When the model is done, a last edit shows the complete **formatted** text."]


def answer(tokens: int) -> str:
    words: list[str] = []
    paragraph = 0
    while len(words) < tokens:
        for sentence in SENTENCES:
            words.extend(sentence.split())
        paragraph += 1
        words[-1] += "\n\n" if paragraph % 2 == 0 else ""
    return " ".join(words[:tokens]).replace("\n\n ", "\n\n")


async def one_run(telegram: FakeTelegram, model_url: str, text: str, stream: bool, tmp: str) -> dict[str, float]:
    bot: FakeBot = telegram.new_bot()
    cfg = parse_config({"model": {"base_url": model_url, "model": "bench", "timeout_s": 30},
                        "store": {"path": f"{tmp}/anyy-{bot.id}.db"}, "runtime": {"stream": stream},
                        "telegram": {"base_url": bot.base_url, "base_file_url": bot.base_file_url,
                                     "poll_timeout_s": 10, "allowed_users": [OWNER_ID]}}, "bench")
    assert cfg.telegram is not None
    gw = Gateway(cfg, surfaces=[TelegramSurface(cfg.telegram, bot.token, Path(tmp))])
    await gw.start()
    try:
        await bot.wait_calls("getUpdates", timeout=30)
        t0 = time.monotonic()
        bot.message("tell me about streaming")
        await bot.wait_calls("sendMessage", timeout=60)  # the turn is running ...
        await gw.idle()  # ... and now it is over, its reply delivered
    finally:
        await gw.stop()
    writes = [c for c in bot.sent() if c.method in ("sendMessage", "editMessageText")]
    gaps = [b.at - a.at for a, b in pairwise(writes)]
    return {"first": writes[0].at - t0, "final": writes[-1].at - t0, "writes": len(writes),
            "edits": sum(c.method == "editMessageText" for c in writes), "min_gap": min(gaps) if gaps else 0.0}


async def main(runs: int, tokens: int) -> None:
    model = start_fake_model()
    telegram = FakeTelegram().start()
    text = answer(tokens)
    model.responder = lambda body: reply(text)
    model.pace = Pace(first_token_s=0.4, tokens_per_s=40)
    results: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(runs):
                results.append(await one_run(telegram, model.url_openai, text, True, tmp))
            whole = await one_run(telegram, model.url_openai, text, False, tmp)
    finally:
        telegram.stop()
        model.stop()
    print(f"answer: {tokens} tokens, {len(text)} characters; first token after 0.4 s, then 40 tokens/s")
    for i, r in enumerate(results, 1):
        print(f"streamed run {i}: first visible {r['first']:.3f} s, final {r['final']:.2f} s, "
              f"writes {r['writes']:.0f} (edits {r['edits']:.0f}), shortest gap {r['min_gap']:.3f} s")
    print(f"streamed median: first visible {statistics.median(r['first'] for r in results):.3f} s")
    print(f"not streamed: first visible {whole['first']:.2f} s, writes {whole['writes']:.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=600)
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.tokens))
