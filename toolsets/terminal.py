"""The terminal toolset: `bash` and `process` (the background processes `bash` started).

`bash` is ChangePlan-gated, with a call policy that classifies the command (connectors/shellrules.py):
a read-only allowlisted command runs at once (audited), without a shell; a destructive one is
`force_change_plan`, which no policy hook can wave through; anything else waits for the owner, who sees
the exact command, working directory, timeout and sandbox. `process kill` needs approval too; the other
`process` actions only look at or feed processes this session started. Command output reaches the model
as external content.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from connectors.gitguard import disarmed
from connectors.processes import ProcessError, hit_file_limit, read_output
from connectors.sandbox import SandboxError
from connectors.shellrules import ShellClass, Verdict, classify
from store.records import ProcessRecord
from toolsets.base import ApprovalPolicy, ExecutionPolicy, Policy, Preview, Risk, ToolContext, ToolError, Toolset
from toolsets.jobs import Terminal

TOOLSET = Toolset(
    "terminal",
    "the owner's machine: run shell commands (after approval unless read-only) and manage background processes",
    keywords=(
        r"\bbash\b", r"\bshell\b", r"\bterminal\b", r"\bcommand\b", r"\brun (?:the |my |a )?(?:\w{1,30} )?script\b",
        r"\bscripts?\b", r"\bdisk (?:space|usage)\b", r"\bdisk is left\b", r"\bfree space\b", r"\bdf\b", r"\bdu\b",
        r"\bgit (?:status|log|diff|pull)\b", r"\bprocess(?:es)?\b", r"\bkill\b", r"\bmake test\b", r"\bbackup\b",
        r"\bserver\b", r"\bls\b", r"\buptime\b", r"\bcpu\b",
        r"\b(?:ram|memory|cpu|disk)\b[^.?!\n]{0,20}\b(?:us(?:e|ed|ing|age)|free|left|load)\b", r"\bpip install\b",
        r"\bapt\b", r"\bdocker\b", r"\bsystemctl\b",
        r"\b(?:re)?start (?:the |my )?[\w.-]{1,40} (?:service|server|container|daemon|process)\b", r"命令", r"终端",
        r"脚本", r"磁盘", r"硬盘", r"空间", r"进程", r"备份", r"运行", r"执行", r"服务器", r"内存",
    ),
    requires="terminal",
)

MAX_OUTPUT_BYTES = 100_000
ALLOWLISTED_OUTPUT_BYTES = 64 * 2**20  # every file an allowlisted command writes, its output included
WAIT_S = 30.0
_CONTENT_READERS = {"grep", "rg", "git"}  # descend into a folder and show what the files say
_GATED: Policy = {"risk": Risk.RUNTIME_HIGH, "approval": ApprovalPolicy.HOOK, "execution": ExecutionPolicy.CHANGE_PLAN}
_POLICY = {ShellClass.ALLOW: ExecutionPolicy.AUDIT, ShellClass.CHANGE_PLAN: ExecutionPolicy.CHANGE_PLAN,
           ShellClass.FORCE: ExecutionPolicy.FORCE_CHANGE_PLAN}


def _terminal(ctx: ToolContext) -> Terminal:
    term = ctx.service("terminal")
    if term is None:
        raise ToolError("the terminal is disabled ([terminal] enabled = false)")
    return term


def _classify(term: Terminal, command: str) -> Verdict:
    verdict = classify(command, term.rules, workspace=str(term.settings.workspace), home=term.home)
    if verdict.kind is not ShellClass.ALLOW:
        return verdict
    # A read-only command is still not for running unseen when it reads a process's /proc entry (the
    # resident's environment holds the model key) or Anyy's own files: it is held like any other.
    words = shlex.split(command)
    why = term.private.first_refusal(words[1:], term.settings.workspace, recursive=words[0] in _CONTENT_READERS)
    return Verdict(ShellClass.CHANGE_PLAN, why) if why else verdict


async def _argv(term: Terminal, verdict: Verdict, command: str) -> list[str]:
    # What the allowlist approved runs as an argument vector, so no shell can read more into it; an
    # allowlisted git also gets the repository's own filter and diff drivers switched off.
    if verdict.kind is not ShellClass.ALLOW:
        return ["bash", "-c", command]
    if verdict.argv[0] == "git":
        return await disarmed(verdict.argv, term.settings.workspace, term.settings.env())
    return verdict.argv


@TOOLSET.tool(**_GATED, visible_chars=8000, stored_chars=100_000)
async def bash(ctx: ToolContext, command: str, timeout_s: Annotated[float | None, Field(gt=0, le=3600)] = None,
               background: bool = False) -> str:
    """Run a shell command in the workspace. Read-only commands (ls, cat, head, tail, wc, df, du, grep, rg,
    find, git status/diff/log, without shell metacharacters) run at once; anything else waits for the
    owner's approval of the exact command.

    Args:
        command: the command line, run with bash -c.
        timeout_s: stop it after this many seconds (default from config; in the background: none).
        background: start it and return a process id at once; follow it with the process tool.
    """
    term = _terminal(ctx)
    verdict = _classify(term, command)
    try:
        argv = await _argv(term, verdict, command)
        # A command nobody approved only prints: its output file is bounded, so it cannot fill the disk.
        limit = ALLOWLISTED_OUTPUT_BYTES if verdict.kind is ShellClass.ALLOW else None
        if background:
            rec = await term.start(ctx.session_id, ctx.user_key, command, argv, timeout_s=timeout_s,
                                   max_file_bytes=limit)
            return (f"started process {rec.id} (pid {rec.pid}) in {rec.cwd}; {_background_timeout(timeout_s)}. "
                    f"Follow it with process(action='poll', id='{rec.id}'); 'log', 'wait', 'write', 'kill' also work.")
        res = await term.run(argv, timeout_s or term.timeout_s, MAX_OUTPUT_BYTES, max_file_bytes=limit)
    except (ProcessError, SandboxError) as exc:
        raise ToolError(str(exc)) from None
    except (OSError, TimeoutError) as exc:  # git's config could not be listed: nothing ran
        raise ToolError(f"cannot prepare git safely ({type(exc).__name__}); nothing ran") from None
    status = f"exit code {res.exit_code}" if not res.timed_out else \
        f"timed out after {timeout_s or term.timeout_s:g} s and was stopped (exit code {res.exit_code})"
    if hit_file_limit(res.exit_code):
        status = f"stopped at the output limit of {ALLOWLISTED_OUTPUT_BYTES // 2**20} MB"
    facts = [status, f"duration {res.duration_s:.2f} s", f"output {res.output.total_bytes} bytes"]
    if res.output.truncated:
        facts.append("output truncated (the middle is omitted)")
    body = ctx.external("command output", res.output.text) if res.output.text else "(no output)"
    return "; ".join(facts) + "\n" + body


@bash.call_policy
def _bash_policy(ctx: ToolContext, args: BaseModel) -> ExecutionPolicy:
    term = ctx.service("terminal")
    if term is None:
        return ExecutionPolicy.CHANGE_PLAN  # the handler reports the missing terminal
    return _POLICY[_classify(term, args.command).kind]  # type: ignore[attr-defined]


@bash.preview
async def _bash_preview(ctx: ToolContext, args: BaseModel) -> Preview:
    term = _terminal(ctx)
    command: str = args.command  # type: ignore[attr-defined]
    verdict = _classify(term, command)
    s = term.settings
    sandbox = ("bwrap, " + ("with network" if s.network else "no network")) if s.sandbox else "none"
    timeout_s: float | None = args.timeout_s  # type: ignore[attr-defined]
    if args.background:  # type: ignore[attr-defined]
        timeout = (f"{timeout_s:g} s" if timeout_s else "none, runs until stopped") + " · in the background"
    else:
        timeout = f"{(timeout_s or term.timeout_s):g} s"
    lines = [f"$ {command}", "", f"directory: {s.workspace}", f"timeout: {timeout}", f"sandbox: {sandbox}"]
    if verdict.kind is ShellClass.FORCE:
        lines.insert(0, f"⚠️ DESTRUCTIVE ({verdict.reason}): read it twice.")
    else:
        lines.append(f"needs approval: {verdict.reason}")
    return Preview(text="\n".join(lines))


def _background_timeout(timeout_s: float | None) -> str:
    return f"it is stopped after {timeout_s:g} s" if timeout_s else "it runs until stopped"


# -- process ----------------------------------------------------------------------------------------

Action = Literal["list", "poll", "log", "wait", "kill", "write", "submit", "close"]


def _line(rec: ProcessRecord) -> str:
    code = f", exit code {rec.exit_code}" if rec.exit_code is not None else ""
    if hit_file_limit(rec.exit_code):
        code += f", stopped at the output limit of {ALLOWLISTED_OUTPUT_BYTES // 2**20} MB"
    return f"{rec.id} [{rec.state}{code}] pid {rec.pid}, started {rec.started_at[:19]}Z: {rec.command[:200]}"


async def _own(ctx: ToolContext, term: Terminal, process_id: str | None) -> ProcessRecord:
    if not process_id:
        raise ToolError("give the process id (see process(action='list'))")
    rec = await term.repo.get(ctx.session_id, process_id)
    if rec is None:  # another session's process is as good as none: process is not a host process viewer
        raise ToolError(f"no process {process_id} was started in this conversation")
    return rec


@TOOLSET.tool(**_GATED, visible_chars=8000, stored_chars=100_000)
async def process(ctx: ToolContext, action: Action, id: str | None = None, input: str | None = None) -> str:
    """Follow and control background processes this conversation started with bash(background=true).
    Only those: this is not a viewer of other processes on the machine. kill needs the owner's approval.

    Args:
        action: list | poll (state and output since the last poll) | log (all output) | wait (up to 30 s
            for it to end) | kill (stop it) | write (send input) | submit (send input and a newline) |
            close (close its input).
        id: the process id from bash or list.
        input: the text for write and submit.
    """
    term = _terminal(ctx)
    if action == "list":
        recs = await term.repo.list(ctx.session_id)
        return "\n".join(_line(r) for r in recs) if recs else "No background processes in this conversation."
    rec = await _own(ctx, term, id)
    job = term.job(rec.id)
    if action in ("write", "submit", "close"):
        if job is None or rec.state != "running":
            raise ToolError(f"process {rec.id} is {rec.state}; it takes no input")
        try:
            if action == "close":
                job.close_input()
                return f"closed the input of {rec.id}"
            await job.write(((input or "") + ("\n" if action == "submit" else "")).encode("utf-8"))
        except ProcessError as exc:
            raise ToolError(f"cannot write to {rec.id}: {exc}") from None
        return f"sent {len(input or '')} characters to {rec.id}"
    if action == "kill":
        if job is None:
            lost = " Anyy no longer supervises it (it was running when Anyy restarted)." if rec.state == "lost" else ""
            return f"process {rec.id} is {rec.state}; nothing to stop.{lost}"
        code = await term.stop(rec.id)
        return f"stopped {rec.id} (exit code {code})"
    if action == "wait" and job is not None:
        await job.wait(WAIT_S)
    rec = await _own(ctx, term, rec.id)  # the state may have moved on
    path = Path(rec.log_path)
    if action == "poll":
        out = await asyncio.to_thread(term.new_output, rec.id, path, MAX_OUTPUT_BYTES)
    else:
        out = await asyncio.to_thread(read_output, path, MAX_OUTPUT_BYTES)
    note = " (output truncated: the middle is omitted)" if out.truncated else ""
    state = _line(rec) + (" — Anyy restarted while it ran; it is no longer supervised" if rec.state == "lost" else "")
    body = ctx.external(f"output of process {rec.id}", out.text) if out.text else "(no new output)"
    return f"{state}{note}\n{body}"


@process.call_policy
def _process_policy(ctx: ToolContext, args: BaseModel) -> ExecutionPolicy:
    # kill changes the machine; the other actions only read or feed a process the owner already let run.
    return ExecutionPolicy.CHANGE_PLAN if args.action == "kill" else ExecutionPolicy.AUDIT  # type: ignore[attr-defined]


@process.preview
async def _process_preview(ctx: ToolContext, args: BaseModel) -> Preview:
    term = _terminal(ctx)
    rec = await _own(ctx, term, args.id)  # type: ignore[attr-defined]
    return Preview(text=f"Stop process {rec.id} (TERM, then KILL after a few seconds):\n{_line(rec)}")
