"""The file toolset: read and search freely; write and patch only inside the workspace, after approval.

`read_file` and `search_files` anchor relative paths to the workspace and read absolute paths wherever
the process may read, except other processes' /proc entries and Anyy's own files (refused).
`write_file` and `patch` are ChangePlan-gated: the owner sees a unified diff (a new file: its content),
and the approval stores the effect itself (`Preview.payload`: the path, the file's
content hash or its absence, the exact new content). Overwriting or patching needs that this session read
the file and that it is unchanged since ("read before overwrite"); Approve runs the stored payload through
`@effect` (no fresh plan), which writes only over that hash, checked right before the atomic rename.
File contents reach the model as external content: a file may have come from anywhere.
"""

from __future__ import annotations

import asyncio
import difflib
import fnmatch
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field

from connectors.workspace import Workspace, WorkspaceError, file_hash, sha256_bytes
from store.file_reads import FileReads
from toolsets.base import (
    ApprovalPolicy,
    ExecutionPolicy,
    Policy,
    Preview,
    Risk,
    ToolContext,
    ToolError,
    Toolset,
    configured,
)

TOOLSET = Toolset(
    "file",
    "files on the owner's machine: read, search, write and patch (writes after approval, in the workspace)",
    keywords=(
        r"\b(?:the|a|an|my|this|that|these|those|new|text|log|which|what|any|some|all|open|read|edit|create|write"
        r"|save|list|find|delete|rename|move|copy) files?\b",
        r"\bfiles? (?:in|under|named|called)\b",
        r"(?<!to )(?<!\bi )(?<!\bwe )(?<!you )\bfiles?\b(?! (?:a|an|my|the|your|our|his|her|their|it|this|that|them"
        r"|for|taxes|expenses|away|under|with|against)\b)",
        r"\bfolders?\b", r"\bdirector(?:y|ies)\b",
        r"\b\w{1,100}(?:\.md|\.txt|\.py|\.json|\.toml|\.yaml|\.yml|\.csv|\.log|\.conf|\.ini|\.sh)\b",
        r"\bnotes? folder\b", r"\bworkspace\b", r"\btypo\b", r"\bpatch\b", r"\bgrep\b",
        r"\bsearch (?:my|the) (?:notes|files|code)\b", r"\bconfig file\b",
        r"\bread (?:the|my) (?:notes?|file|readme)\b", r"\bREADME\b", r"文件", r"文件夹", r"目录", r"笔记", r"改一下",
        r"错别字", r"工作区", r"配置文件",
    ),
    requires="workspace",
)

MAX_READ_BYTES = 20 * 1024 * 1024  # a file larger than this is read with bash head/tail instead
MAX_SHOWN_CHARS = 100_000
MAX_WRITE_BYTES = 8 * 1024 * 1024
# What the approval row keeps of a diff: the prompt shows its first part, `/approvals ID` all of it
# (split into messages by the surface), so the owner can read every line of what Approve writes.
DIFF_CHARS = 200_000
_GATED: Policy = {"risk": Risk.RUNTIME_HIGH, "approval": ApprovalPolicy.HOOK, "execution": ExecutionPolicy.CHANGE_PLAN}


def _workspace(ctx: ToolContext) -> Workspace:
    ws: Workspace = configured(ctx, "workspace", "the workspace")
    return ws


def _read_bytes(path: Path) -> bytes:
    try:
        if path.stat().st_size > MAX_READ_BYTES:
            raise ToolError(f"{path} is larger than {MAX_READ_BYTES // 1024 // 1024} MB; "
                            "read parts with bash head/tail")
        return path.read_bytes()
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{path} is a directory; use search_files to list it") from None
    except PermissionError:
        raise ToolError(f"{path}: permission denied") from None


@TOOLSET.tool(risk=Risk.READ, execution=ExecutionPolicy.DIRECT, visible_chars=20_000, stored_chars=120_000)
async def read_file(ctx: ToolContext, path: str, offset: Annotated[int, Field(ge=1)] = 1,
                    limit: Annotated[int, Field(ge=1, le=10_000)] = 2000) -> str:
    """Read a text file, a range of lines at a time. Reading a file is what allows overwriting or patching it.

    Args:
        path: relative to the workspace, or absolute.
        offset: first line to show (1-based).
        limit: how many lines to show.
    """
    try:
        target = _workspace(ctx).resolve_read(path)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    data = await asyncio.to_thread(_read_bytes, target)
    if b"\0" in data[:8192]:
        raise ToolError(f"{target} looks binary ({len(data)} bytes); it cannot be shown as text")
    await FileReads(ctx.store).record(ctx.session_id, str(target), sha256_bytes(data))
    lines = data.decode("utf-8", "replace").splitlines(keepends=True)
    shown: list[str] = []
    size = 0
    for line in lines[offset - 1: offset - 1 + limit]:  # whole lines, up to MAX_SHOWN_CHARS
        if shown and size + len(line) > MAX_SHOWN_CHARS:
            break
        shown.append(line[:MAX_SHOWN_CHARS])
        size += len(shown[-1])
    last = offset - 1 + len(shown)
    header = f"{target}: lines {offset}-{last} of {len(lines)} ({len(data)} bytes)"
    if last < len(lines):
        header += f"; more follows: read again with offset={last + 1}"
    text = "".join(shown)
    return header + "\n" + ctx.external(f"file {target}", text)


def _search(ws: Workspace, root: Path, pattern: re.Pattern[str] | None, glob: str,
            max_results: int) -> tuple[list[str], bool]:
    """Matching lines (`path:line: text`), or with no pattern matching file names; hidden entries skipped."""
    out: list[str] = []
    if root.is_file():
        files: list[Path] = [root]
        base = root.parent
    else:
        files, base = [], root
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            files.extend(Path(dirpath) / f for f in sorted(filenames) if not f.startswith("."))
            if len(files) > 50_000:
                break
    for f in files:
        rel = str(f.relative_to(base))
        if glob and not (fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(f.name, glob)):
            continue
        if pattern is None:
            out.append(rel)
        elif ws.readable(f):
            try:
                if f.stat().st_size > 2 * 1024 * 1024:
                    continue
                data = f.read_bytes()
            except OSError:
                continue
            if b"\0" in data[:8192]:
                continue
            for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if pattern.search(line):
                    out.append(f"{rel}:{n}: {line[:300]}")
                    if len(out) >= max_results:
                        return out, True
        if len(out) >= max_results:
            return out, True
    return out, False


@TOOLSET.tool(risk=Risk.READ, execution=ExecutionPolicy.DIRECT, visible_chars=12_000)
async def search_files(ctx: ToolContext, pattern: str = "", path: str = ".", glob: str = "",
                       ignore_case: bool = False, max_results: Annotated[int, Field(ge=1, le=1000)] = 100) -> str:
    """Search file contents with a regular expression, or list files by name when no pattern is given.

    Args:
        pattern: regular expression (Python syntax) to find in file contents; empty lists files instead.
        path: directory or file to search, relative to the workspace or absolute.
        glob: only files whose name or relative path matches, e.g. "*.md" or "notes/*.txt".
        ignore_case: match regardless of case.
        max_results: stop after this many matching lines or files.
    """
    try:
        ws = _workspace(ctx)
        root = ws.resolve_read(path, recursive=True)
        regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0) if pattern else None
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    if not root.exists():
        raise ToolError(f"{root} does not exist")
    found, cut = await asyncio.to_thread(_search, ws, root, regex, glob, max_results)
    what = "matching lines" if regex else "files"
    head = f"{len(found)} {what} under {root}" + (f" (stopped at {max_results}; narrow the search)" if cut else "")
    return head + ("\n" + ctx.external(f"files under {root}", "\n".join(found)) if found else "")


# -- writes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What a write would do: the target, its current hash (None: it does not exist), the new bytes."""

    target: str
    old_hash: str | None
    old: bytes | None
    new: bytes


async def _checked_target(ctx: ToolContext, path: str, *, must_exist: bool) -> tuple[Path, bytes | None, str | None]:
    """The write target and its current content, enforcing the roots and "read before overwrite"."""
    try:
        target = _workspace(ctx).resolve_write(path)
        old_hash = await asyncio.to_thread(file_hash, target)
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    if old_hash is None:
        if must_exist:
            raise ToolError(f"{target} does not exist; use write_file to create it")
        return target, None, None
    seen = await FileReads(ctx.store).get(ctx.session_id, str(target))
    if seen is None:
        raise ToolError(f"{target} exists and has not been read in this conversation; read_file it first, "
                        "then write (nothing was written)")
    if seen != old_hash:
        raise ToolError(f"{target} changed since it was last read; read_file it again first (nothing was written)")
    old = await asyncio.to_thread(_read_bytes, target)
    if sha256_bytes(old) != old_hash:
        raise ToolError(f"{target} is changing right now; try again (nothing was written)")
    return target, old, old_hash


async def _write_plan(ctx: ToolContext, path: str, content: str) -> Plan:
    new = content.encode("utf-8")
    if len(new) > MAX_WRITE_BYTES:
        raise ToolError(f"the content is larger than {MAX_WRITE_BYTES // 1024 // 1024} MB (nothing was written)")
    target, old, old_hash = await _checked_target(ctx, path, must_exist=False)
    return Plan(target=str(target), old_hash=old_hash, old=old, new=new)


def _replace(text: str, old_text: str, new_text: str, replace_all: bool) -> str:
    if "\r\n" in text and "\r\n" not in old_text:  # a CRLF file: match and write back CRLF
        old_text, new_text = old_text.replace("\n", "\r\n"), new_text.replace("\n", "\r\n")
    count = text.count(old_text)
    if count == 0:
        raise ToolError("old_text was not found in the file (it must match exactly, whitespace included); "
                        "nothing was changed")
    if count > 1 and not replace_all:
        raise ToolError(f"old_text matches {count} places; include more surrounding text to make it unique, "
                        "or set replace_all=true (nothing was changed)")
    return text.replace(old_text, new_text)


async def _patch_plan(ctx: ToolContext, path: str, old_text: str, new_text: str, replace_all: bool) -> Plan:
    if not old_text:
        raise ToolError("old_text is empty; give the exact text to replace")
    target, old, old_hash = await _checked_target(ctx, path, must_exist=True)
    assert old is not None
    try:
        text = old.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{target} is not UTF-8 text; patch works on text files only") from None
    return Plan(target=str(target), old_hash=old_hash, old=old,
                new=_replace(text, old_text, new_text, replace_all).encode("utf-8"))


def _diff(plan: Plan) -> str:
    """The owner's view of the change: a unified diff (a new file: its content), cut to DIFF_CHARS."""
    new_text = plan.new.decode("utf-8", "replace")
    if plan.old is None:
        body, head = new_text, f"New file {plan.target} ({len(plan.new)} bytes):\n"
    else:
        lines = difflib.unified_diff(plan.old.decode("utf-8", "replace").splitlines(keepends=True),
                                     new_text.splitlines(keepends=True), fromfile=plan.target, tofile=plan.target)
        body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
        head = f"Change {plan.target} ({len(plan.old)} -> {len(plan.new)} bytes):\n"
        if not body:
            body = "(no change to the content)\n"
    if len(body) > DIFF_CHARS:
        rest = body[DIFF_CHARS:].count("\n")
        body = body[:DIFF_CHARS] + f"\n… ({rest} more lines not shown; approving writes the whole change)\n"
    return head + body


def _payload(plan: Plan) -> dict[str, str | None]:
    """The whole effect the preview shows: where, over which content (None: only where nothing exists),
    and the exact new content (text: both tools write UTF-8)."""
    return {"path": plan.target, "sha256": plan.old_hash, "content": plan.new.decode("utf-8")}


async def _apply(ctx: ToolContext, args: object, payload: dict[str, str | None]) -> str:
    """Write the payload's content, only over the hash it was planned on; then the session has seen it,
    so it may change the file again without re-reading. The path is checked against the write roots
    again (a folder on it may have become a symlink since)."""
    path, content = str(payload["path"]), str(payload["content"])
    try:
        if str(_workspace(ctx).resolve_write(path)) != path:
            raise ToolError(f"{path} now leads elsewhere (a symlink changed); nothing was written")
        data = content.encode("utf-8")
        await asyncio.to_thread(Workspace.write_atomic, Path(path), data, payload["sha256"])
    except WorkspaceError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc.strerror or exc}") from None
    await FileReads(ctx.store).record(ctx.session_id, path, sha256_bytes(data))
    return f"{'created' if payload['sha256'] is None else 'wrote'} {path} ({len(data)} bytes)"


@TOOLSET.tool(**_GATED, visible_chars=2000)
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create a file, or overwrite one this conversation has read. Inside the workspace (or a configured
    write root) only; the owner approves the diff first.

    Args:
        path: relative to the workspace, or absolute inside a write root.
        content: the complete new content of the file.
    """
    return await _apply(ctx, None, _payload(await _write_plan(ctx, path, content)))


@write_file.preview
async def _write_preview(ctx: ToolContext, args: BaseModel) -> Preview:
    plan = await _write_plan(ctx, args.path, args.content)  # type: ignore[attr-defined]
    return Preview(text=_diff(plan), payload=_payload(plan))


@TOOLSET.tool(**_GATED, visible_chars=2000)
async def patch(ctx: ToolContext, path: str, old_text: str, new_text: str, replace_all: bool = False) -> str:
    """Replace exact text in a file this conversation has read (line endings kept). The owner approves
    the diff first.

    Args:
        path: relative to the workspace, or absolute inside a write root.
        old_text: the exact text to replace; it must occur once unless replace_all is set.
        new_text: the replacement.
        replace_all: replace every occurrence.
    """
    return await _apply(ctx, None, _payload(await _patch_plan(ctx, path, old_text, new_text, replace_all)))


@patch.preview
async def _patch_preview(ctx: ToolContext, args: BaseModel) -> Preview:
    plan = await _patch_plan(ctx, args.path, args.old_text, args.new_text, args.replace_all)  # type: ignore[attr-defined]
    return Preview(text=_diff(plan), payload=_payload(plan))


write_file.effect(_apply)
patch.effect(_apply)
