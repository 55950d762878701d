"""Computer-use driver benchmark: Xvfb start-up, a screenshot (as the model gets it), and one input action.

Starts its own Xvfb (connectors.desktop, as `[computer_use] xvfb = true` does) at each size, then times
`screenshot` (grab + PNG, scaled to fit 1280x800 when larger) and `mouse_move` / `click` (one xdotool run
each) over ROUNDS rounds; prints medians and p90 in milliseconds and the PNG sizes.

    .venv/bin/python bench/computer_use.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from connectors.desktop import Desktop, DesktopSettings

ROUNDS = 20
SIZES = ((1280, 800), (1920, 1080))


def free_display() -> str:
    for number in range(700 + os.getpid() % 200, 1000):
        if not Path(f"/tmp/.X{number}-lock").exists() and not Path(f"/tmp/.X11-unix/X{number}").exists():
            return f":{number}"
    raise SystemExit("no free X display number")


def summary(samples: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in samples)
    return {"median_ms": round(statistics.median(ms), 2), "p90_ms": round(ms[int(len(ms) * 0.9) - 1], 2)}


async def timed(step: Any) -> float:
    started = time.perf_counter()
    await step
    return time.perf_counter() - started


async def one_size(width: int, height: int) -> dict[str, Any]:
    desktop = Desktop(DesktopSettings(display=free_display(), xvfb=True, width=width, height=height))
    started = time.perf_counter()
    await desktop.start()
    start_s = time.perf_counter() - started
    try:
        shots, moves, clicks = [], [], []
        png_bytes = 0
        for i in range(ROUNDS):
            t = time.perf_counter()
            shot = await desktop.screenshot(1280, 800)
            shots.append(time.perf_counter() - t)
            png_bytes = len(shot.png)
            moves.append(await timed(desktop.move(10 + i, 10 + i)))
            clicks.append(await timed(desktop.click(200 + i, 200)))
        return {"screen": f"{width}x{height}", "shown": f"{shot.width}x{shot.height}", "xvfb_start_ms":
                round(start_s * 1000, 1), "screenshot": summary(shots), "png_bytes": png_bytes,
                "mouse_move": summary(moves), "click": summary(clicks)}
    finally:
        await desktop.aclose()


async def main() -> None:
    print(json.dumps([await one_size(w, h) for w, h in SIZES], indent=2))


if __name__ == "__main__":
    asyncio.run(main())
