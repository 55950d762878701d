"""bench/peers.py's measuring parts: the fake model's per-request model time (ANYY_BENCH_MODEL_TIMES), the
subtraction of that time from a turn, and the guard's verdict from the figures. The peers themselves are
not installed here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from peers import overlap  # noqa: E402
from peers_guard import GUARD_RATIOS, WARM_P50_MS, guard_checks  # noqa: E402

ASK = {"model": "bench", "messages": [{"role": "user", "content": "add a task milk"}]}


def serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fake_model_server.py")], env=env,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


@pytest.fixture
def env() -> Iterator[dict[str, str]]:
    yield {**os.environ, "PYTHONPATH": str(ROOT)}


def test_the_timed_fake_answers_as_before_and_notes_each_request(env: dict[str, str], tmp_path: Path) -> None:
    times = tmp_path / "times.json"
    server, url = serve({**env, "ANYY_BENCH_MODEL_TIMES": str(times)})
    try:
        before = time.monotonic()
        whole = httpx.post(f"{url}/chat/completions", json=ASK, timeout=10)
        streamed = httpx.post(f"{url}/chat/completions", json={**ASK, "stream": True}, timeout=10)
        after = time.monotonic()
    finally:
        server.terminate()
        server.wait(timeout=10)
    call = whole.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("task_create", {"title": "milk"})
    assert "task_create" in streamed.text and streamed.text.rstrip().endswith("[DONE]")
    spans = json.loads(times.read_text())
    assert len(spans) == 2
    assert all(before <= start <= end <= after for start, end in spans)


def test_without_the_variable_the_fake_answers_by_rule_as_before(env: dict[str, str]) -> None:
    env.pop("ANYY_BENCH_MODEL_TIMES", None)
    server, url = serve(env)
    try:
        ask = {**ASK, "messages": [{"role": "user", "content": "hello"}]}
        answer = httpx.post(f"{url}/chat/completions", json=ask, timeout=10).json()
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert answer["choices"][0]["message"]["content"].startswith("About 'hello': here is a reasonably")


def test_model_time_is_what_of_each_request_falls_inside_the_turn() -> None:
    turn = (10.0, 11.0)
    requests = [(9.5, 10.25), (10.5, 10.75), (10.9, 11.5), (11.5, 12.0)]
    seconds, started = overlap(turn, requests)
    assert seconds == pytest.approx(0.25 + 0.25 + 0.1)
    assert started == 2  # the one begun before the turn is not this turn's


def verdict(anyy_p50: float, peers_p50: dict[str, float], warm_p50: float | None) -> dict[str, bool]:
    return {c.what.split()[0]: c.holds for c in guard_checks(anyy_p50, peers_p50, warm_p50)}


def test_the_guard_holds_at_its_bounds_and_fails_past_each() -> None:
    assert (GUARD_RATIOS, WARM_P50_MS) == ({"nanobot": 20.0, "hermes": 15.0}, 3.0)  # issue 36's figures
    assert verdict(4.0, {"nanobot": 80.0, "hermes": 60.0}, 3.0) == {"nanobot": True, "hermes": True, "anyy": True}
    assert verdict(4.0, {"nanobot": 79.9, "hermes": 60.0}, 2.0) == {"nanobot": False, "hermes": True, "anyy": True}
    assert verdict(4.0, {"nanobot": 80.0, "hermes": 59.9}, 2.0) == {"nanobot": True, "hermes": False, "anyy": True}
    assert verdict(4.0, {"nanobot": 200.0, "hermes": 200.0}, 3.01) == {"nanobot": True, "hermes": True,
                                                                      "anyy": False}


def test_a_figure_not_measured_fails_its_check() -> None:
    assert verdict(4.0, {"nanobot": 200.0}, None) == {"nanobot": True, "hermes": False, "anyy": False}
    assert verdict(0.0, {"nanobot": 200.0, "hermes": 200.0}, 1.0) == {"nanobot": False, "hermes": False,
                                                                     "anyy": True}


def test_each_check_prints_its_figure_bound_and_verdict() -> None:
    lines = [c.line() for c in guard_checks(5.0, {"nanobot": 110.0, "hermes": 70.0}, 2.25)]
    assert lines == ["guard nanobot / anyy p50: 22.00x (must be >= 20x): holds",
                     "guard hermes / anyy p50: 14.00x (must be >= 15x): FAILS",
                     "guard anyy warm p50, reply on screen: 2.25 ms (must be <= 3 ms): holds"]
