"""Output budgets: a result longer than its tool's visible budget is persisted whole, and the model
sees a short `<persisted-output>` preview instead (the Anyy tool reference's contract)."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsets.base import OutputBudget

PREVIEW_CHARS = 1200


@dataclass
class BudgetedResult:
    visible: str  # what the model sees this turn
    stored: str  # what the transcript keeps (cut to stored_chars)
    meta: dict[str, Any]


def results_dir() -> Path:
    return Path(os.environ.get("ANYY_TOOL_RESULTS_DIR") or "/tmp/anyy-results")


def apply_budget(text: str, budget: OutputBudget, *, call_id: str, ok: bool) -> BudgetedResult:
    """Cut `text` to the budget. Only successful results are persisted (errors are short by nature
    and are better shown in full up to the budget)."""
    stored = text[: budget.stored_chars]
    if len(text) <= budget.visible_chars:
        return BudgetedResult(visible=text, stored=stored, meta={})
    if not ok:
        return BudgetedResult(visible=text[: budget.visible_chars] + "…", stored=stored, meta={})
    data = text.encode("utf-8")
    directory = results_dir()
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{_safe(call_id)}-{hashlib.sha256(data).hexdigest()[:12]}.txt"
    path = directory / name
    path.write_bytes(data)
    preview_len = min(PREVIEW_CHARS, max(200, budget.visible_chars - 300))
    visible = (
        f'<persisted-output path="{path}" bytes="{len(data)}">\n'
        f"{text[:preview_len]}\n…\n"
        f"(output was {len(text)} characters; the first {preview_len} are shown, the whole is saved at the path above)\n"
        "</persisted-output>"
    )
    return BudgetedResult(visible=visible, stored=stored,
                          meta={"persisted_output_path": str(path), "persisted_output_bytes": len(data)})


def _safe(call_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:64] or "call"
