"""Output budgets: a result longer than its tool's visible budget is persisted whole, and the model
sees a short `<persisted-output>` preview instead (the Anyy tool reference's contract)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolsets.base import OutputBudget

log = logging.getLogger(__name__)

PREVIEW_CHARS = 1200
DEFAULT_DIR = Path("/tmp/anyy-results")
_warned: set[str] = set()  # refused directories already logged (once per process is enough)


@dataclass
class BudgetedResult:
    visible: str  # what the model sees this turn
    stored: str  # what the transcript keeps (cut to stored_chars)
    meta: dict[str, Any]


def results_dir(default: Path | None = None) -> Path:
    """Where persisted outputs go: `ANYY_TOOL_RESULTS_DIR` when set (created 0700 if missing, used as
    it is otherwise: the owner chose it), else `default` if it is private to this user.

    The default sits in a shared /tmp, so another user may have created it first (to read what we
    write, or to swap files under us): a directory that is a symlink, belongs to someone else or is
    open to group/others is refused, with a warning, for a per-user one beside it, and if that is
    taken too, for a fresh private temporary directory.
    """
    chosen = os.environ.get("ANYY_TOOL_RESULTS_DIR")
    if chosen:
        path = Path(chosen)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path
    default = default or DEFAULT_DIR
    for candidate in (default, default.with_name(f"{default.name}-{os.geteuid()}")):
        problem = _claim_private(candidate)
        if problem is None:
            return candidate
        _warn_once(candidate, problem)
    return Path(tempfile.mkdtemp(prefix=f"{default.name}-"))


def _claim_private(path: Path) -> str | None:
    """Create `path` 0700, or check that the existing one is ours and private; the problem, or None."""
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        info = path.lstat()  # lstat: a symlink planted in /tmp is judged itself, not its target
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "is not a directory (a symlink or a file)"
    if info.st_uid != os.geteuid():
        return f"belongs to uid {info.st_uid}, not to this user ({os.geteuid()})"
    if info.st_mode & 0o077:
        return f"is open to other users (mode {stat.S_IMODE(info.st_mode):o}, needs 700)"
    return None


def _warn_once(path: Path, problem: str) -> None:
    if str(path) not in _warned:
        _warned.add(str(path))
        log.warning("results_dir_refused path=%s problem=%r: using a private directory instead", path, problem)


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` readable by this user only (0600), never following a symlink at `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # an existing file keeps its old mode through O_CREAT
        f.write(data)


def apply_budget(text: str, budget: OutputBudget, *, call_id: str, ok: bool) -> BudgetedResult:
    """Cut `text` to the budget. Only successful results are persisted (errors are short by nature
    and are better shown in full up to the budget)."""
    stored = text[: budget.stored_chars]
    if len(text) <= budget.visible_chars:
        return BudgetedResult(visible=text, stored=stored, meta={})
    if not ok:
        return BudgetedResult(visible=text[: budget.visible_chars] + "…", stored=stored, meta={})
    data = text.encode("utf-8")
    name = f"{_safe(call_id)}-{hashlib.sha256(data).hexdigest()[:12]}.txt"
    try:
        path = results_dir() / name
        _write_private(path, data)
    except OSError as exc:  # a full disk or a planted symlink costs the saved copy, not the turn
        log.warning("result_not_persisted call_id=%s error=%r", call_id, exc.strerror or str(exc))
        return BudgetedResult(visible=f"{text[: budget.visible_chars]}…\n(output was {len(text)} characters; "
                                      "cut here, and it could not be saved whole)", stored=stored, meta={})
    preview_len = min(PREVIEW_CHARS, max(200, budget.visible_chars - 300))
    visible = (
        f'<persisted-output path="{path}" bytes="{len(data)}">\n'
        f"{text[:preview_len]}\n…\n"
        f"(output was {len(text)} characters; the first {preview_len} are shown, "
        "the whole is saved at the path above)\n"
        "</persisted-output>"
    )
    return BudgetedResult(visible=visible, stored=stored,
                          meta={"persisted_output_path": str(path), "persisted_output_bytes": len(data)})


def _safe(call_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in call_id)[:64] or "call"
