"""Toolset-selection benchmark: tools-array bytes on the first request as sent, recall, and selection time.

Every registered toolset counts as available (all connectors configured), plus one MCP server: the real
`mcp-server-time` (a test dependency), started and listed the way the gateway does it, as toolset
`mcp-time` with the keywords an owner might configure. The session has no recent use and no pins, so
each figure is what a fresh conversation's first model request would carry.
`selection_corpus.jsonl` is the labelled corpus keywords are tuned on; `selection_heldout.jsonl` is not
tuned on, so its recall shows how well they generalize (`git show c172a5c:docs/benchmarks.md` says which of its lines
were written before which tuning round). `selection_unseen.jsonl` (issue 25) was written and committed before
the meaning layer existed; its misses were read while tuning it, so it is no longer strictly held out.
`selection_unseen2.jsonl` (issue 25, second pass) was written and committed, with its baseline, before the
second round of tuning, and is never tuned on; `selection_unseen3.jsonl` (issue 25, third pass) likewise,
before the vector layer was tuned; `selection_unseen4.jsonl` (fourth pass) before the vector layer was
rebuilt on GloVe, which then trained on unseen2 and unseen3; `selection_unseen5.jsonl` (fifth pass) before
the vector layer was retrained on unseen2-4 and three sets of training requests by other writers
(`selection_train_en/zh/hard.jsonl`). unseen2-4 are now tunable (trained on); only unseen5 is held out.
It is read only with `--held-out`, which prints its totals, never its misses (`--misses` lists
those of the tunable sets only); timings are over the tunable sets either way. Bytes are those of the
`tools` array in the provider's request body (OpenAI chat-completions; Anthropic's median too), not the
neutral schemas. Each set also reports, per toolset, labels found/needed and wrong picks, and its wrong
picks by the layer that made them.

    .venv/bin/python bench/selection.py [--held-out [SET ...]] [--misses] [--leaks]

`--leaks` audits the examples against the second held-out set: it lists the example words whose index
terms occur in `selection_unseen2.jsonl` and nowhere that predates it (the earlier labelled sets, the
toolsets' and tools' descriptions, the examples as they were at BASE_COMMIT). The same session wrote that
set and the examples after it, and such words were dropped, so the held-out figure does not flatter.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gateway.config import McpServerConfig
from gateway.llm.anthropic import AnthropicClient
from gateway.llm.openai import OpenAIClient
from gateway.llm.types import ToolSchema
from gateway.selection.examples import EXAMPLES
from gateway.selection.selector import schema_bytes, select_toolsets, tools_for
from gateway.selection.terms import terms
from gateway.services.mcp import McpTools
from toolsets.base import Tool, Toolset
from toolsets.loader import loader_tool
from toolsets.registry import TOOLSETS as BUILT_IN

HERE = Path(__file__).parent
TUNABLE = ("selection_corpus.jsonl", "selection_heldout.jsonl", "selection_unseen.jsonl",
           "selection_unseen2.jsonl", "selection_unseen3.jsonl", "selection_unseen4.jsonl",
           "selection_train_en.jsonl", "selection_train_zh.jsonl", "selection_train_hard.jsonl")
HELD_OUT_SETS = ("selection_unseen5.jsonl",)
CORPORA = TUNABLE + HELD_OUT_SETS
TIMING_ROUNDS = 50
HELD_OUT = "selection_unseen2.jsonl"
BASE_COMMIT = "37b3e3d"  # main when selection_unseen2.jsonl was written, before its examples


TIME_SERVER = McpServerConfig(command=str(Path(sys.executable).parent / "mcp-server-time"),
                              args=["--local-timezone", "UTC"], keywords=["几点", "时区", "时差"])


def mcp_time_toolset() -> Toolset:
    """The time server's toolset as the gateway builds it from the server's own tool list."""

    async def listed() -> Toolset:
        mcp = McpTools({"time": TIME_SERVER})
        await mcp.start()
        await mcp.manager.aclose()
        if not mcp.toolsets["time"].tools:
            raise SystemExit(f"mcp-server-time did not start: {mcp.manager.servers['time'].error}")
        return mcp.toolsets["time"]

    return asyncio.run(listed())


TOOLSETS: list[Toolset] = []  # filled in main(): the built-in toolsets and mcp-time
CLIENTS = {"openai": OpenAIClient("http://127.0.0.1:1/v1", "k", "m", 1.0, 0, 1024),
           "anthropic": AnthropicClient("http://127.0.0.1:1", "k", "m", 1.0, 0, 1024)}


def wire_bytes(tools: list[Tool], provider: str = "openai") -> int:
    """Bytes of the `tools` array exactly as the provider's request body carries it (as gateway/llm builds
    it: OpenAI's function wrappers, Anthropic's input_schema and cache marker), compact JSON."""
    body = CLIENTS[provider].request_body([], [ToolSchema(**t.schema()) for t in tools], "m")
    return len(json.dumps(body.get("tools", []), separators=(",", ":"), ensure_ascii=False).encode())


class Example(BaseModel):
    text: str
    needs: list[str]
    attachments: bool = False


def load(name: str) -> list[Example]:
    lines = (HERE / name).read_text("utf-8").splitlines()
    return [Example.model_validate_json(line) for line in lines if line.strip()]


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))]


def select(ex: Example) -> list[str]:
    return select_toolsets(ex.text, has_attachments=ex.attachments, recent=[], pins=None, available=TOOLSETS).names


def layer(reason: str) -> str:
    """Which layer a selection reason names ("keyword 'x'", "meaning (score ...)", "vectors (p ...)")."""
    return reason.split(" ", 1)[0]


def evaluate(examples: list[Example], misses: list[str]) -> dict[str, Any]:
    """Bytes and recall over `examples`; appends a line per missed message to `misses`."""
    loader = loader_tool(TOOLSETS)
    sizes: list[int] = []
    anthropic: list[int] = []
    found = needed = extra = complete = 0
    per_toolset: dict[str, list[int]] = {ts.name: [0, 0, 0] for ts in TOOLSETS}  # found, needed, wrong picks
    by_layer: dict[str, int] = {}  # wrong picks per layer that made them (the first that found the toolset)
    for ex in examples:
        selection = select_toolsets(ex.text, has_attachments=ex.attachments, recent=[], pins=None,
                                    available=TOOLSETS)
        names = selection.names
        sent = tools_for(names, TOOLSETS, loader)
        sizes.append(wire_bytes(sent))
        anthropic.append(wire_bytes(sent, "anthropic"))
        got = set(names) & set(ex.needs)
        for name in ex.needs:
            per_toolset.setdefault(name, [0, 0, 0])
            per_toolset[name][0] += name in got
            per_toolset[name][1] += 1
        for name in set(names) - set(ex.needs):
            per_toolset[name][2] += 1
            by_layer[layer(selection.reasons[name])] = by_layer.get(layer(selection.reasons[name]), 0) + 1
        found += len(got)
        needed += len(ex.needs)
        extra += len(set(names) - set(ex.needs))
        if got == set(ex.needs):
            complete += 1
        else:
            misses.append(f"MISS needs={ex.needs} selected={names}: {ex.text}")
    return {
        "messages": len(examples),
        "chinese": sum(any("\u4e00" <= c <= "\u9fff" for c in ex.text) for ex in examples),
        "needing_none": sum(not ex.needs for ex in examples),
        "needing_two_plus": sum(len(ex.needs) >= 2 for ex in examples),
        "first_request_wire_bytes_median": statistics.median(sizes),
        "first_request_wire_bytes_p90": percentile(sizes, 90),
        "first_request_anthropic_bytes_median": statistics.median(anthropic),
        "recall_messages_pct": round(100 * complete / len(examples), 1),
        "recall_labels_pct": round(100 * found / max(needed, 1), 1),
        "extra_toolsets_per_message": round(extra / len(examples), 2),
        # "found/needed +wrong": label recall and false picks, so a toolset's trade-off shows on its own
        "per_toolset": {name: f"{f}/{n} +{w}" for name, (f, n, w) in per_toolset.items() if n or w},
        "wrong_picks_by_layer": dict(sorted(by_layer.items())),
    }


def timing(examples: list[Example]) -> dict[str, float]:
    """Microseconds per `select_toolsets` call: each message's best of many runs (its own cost, without
    the scheduler noise of a shared machine), then median, p99 and max over the messages."""
    best = [float("inf")] * len(examples)
    for _ in range(TIMING_ROUNDS):
        for i, ex in enumerate(examples):
            start = time.perf_counter_ns()
            select(ex)
            best[i] = min(best[i], (time.perf_counter_ns() - start) / 1000)
    return {"median": round(statistics.median(best), 1), "p99": round(percentile(best, 99), 1),
            "max": round(max(best), 1)}


def leaks() -> list[str]:
    """Example words whose terms only the held-out set and no earlier text has (see the module doc)."""
    source = subprocess.run(["git", "show", f"{BASE_COMMIT}:gateway/selection/examples.py"], cwd=HERE,
                            capture_output=True, text=True, check=True).stdout
    base = ast.literal_eval(source[source.index("{", source.index("EXAMPLES: dict") + 20):])
    earlier = [ex.text for name in TUNABLE[:3] for ex in load(name)]  # the sets written before HELD_OUT
    earlier += [text for texts in base.values() for text in texts]
    earlier += [d for ts in BUILT_IN for d in (ts.description, *(t.description for t in ts.tools))]
    known = {term for text in earlier for term in terms(text)}
    only_held_out = {term for ex in load(HELD_OUT) for term in terms(ex.text)} - known
    return [f"{name}: {word}" for name, texts in EXAMPLES.items() for text in texts for word in text.split()
            if set(terms(word)) & only_held_out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the messages whose needed toolsets were missed")
    parser.add_argument("--leaks", action="store_true", help="list example words only the held-out set has")
    parser.add_argument("--held-out", nargs="*", choices=HELD_OUT_SETS, metavar="SET",
                        help="also report the totals of these held-out sets (of all when none is named)")
    args = parser.parse_args()
    if args.leaks:
        print("\n".join(leaks()) or "no example word occurs only in the held-out set")
        return
    TOOLSETS[:] = [*BUILT_IN, mcp_time_toolset()]

    held_out = () if args.held_out is None else args.held_out or HELD_OUT_SETS
    corpora = {name: load(name) for name in (*TUNABLE, *held_out)}
    everything = [ex for name in TUNABLE for ex in corpora[name]]
    registered = [ts.name for ts in TOOLSETS]
    long_paste = Example(text=" ".join(ex.text for ex in everything)[:4000], needs=[])
    misses: list[str] = []
    report = {
        "registered_toolsets": registered,
        "labelled_but_not_registered": sorted({n for examples in corpora.values() for ex in examples
                                               for n in ex.needs} - set(registered)),
        "all_tools_wire_bytes": wire_bytes(tools_for(registered, TOOLSETS, loader_tool(TOOLSETS))),
        "all_tools_neutral_bytes": schema_bytes(tools_for(registered, TOOLSETS, loader_tool(TOOLSETS))),
        "loader_wire_bytes": wire_bytes([loader_tool(TOOLSETS)]),
        "toolset_wire_bytes": {ts.name: wire_bytes(ts.tools) for ts in TOOLSETS},
        **{name.removesuffix(".jsonl"): evaluate(examples, misses if name in TUNABLE else []) for name, examples
           in corpora.items()},
        "selection_us": timing(everything),
        "selection_us_4000_char_message": timing([long_paste])["median"],
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))
    if args.misses:
        print("\n".join(misses))


if __name__ == "__main__":
    main()
