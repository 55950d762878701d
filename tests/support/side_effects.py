"""A test-only toolset whose tools record every execution: the way approval tests count side effects."""

from __future__ import annotations

from toolsets.base import ApprovalPolicy, ExecutionPolicy, Preview, Risk, ToolContext, Toolset

EXECUTED: list[str] = []  # one entry per real execution, across gateway restarts within a test
BINDING: dict[str, str] = {"version": "1"}  # what the preview binds; tests change it behind the prompt's back

TESTING = Toolset("testing", "Test-only side effects.", keywords=(r"\bside effect\b",))


@TESTING.tool(risk=Risk.RUNTIME_HIGH, approval=ApprovalPolicy.ALWAYS, execution=ExecutionPolicy.CONFIRM)
async def side_effect(ctx: ToolContext, note: str) -> str:
    """Perform a recorded side effect.

    Args:
        note: What to record.
    """
    EXECUTED.append(note)
    return f"recorded {note}"


@side_effect.preview
async def _preview(ctx: ToolContext, args) -> Preview:  # type: ignore[no-untyped-def]
    return Preview(text=f"Record the note: {args.note}", binding=dict(BINDING))


@TESTING.tool(risk=Risk.RUNTIME_LOW)
async def harmless(ctx: ToolContext, note: str) -> str:
    """A direct tool (for governance override tests).

    Args:
        note: What to record.
    """
    EXECUTED.append(f"harmless:{note}")
    return "ok"


@TESTING.tool(risk=Risk.RUNTIME_HIGH, approval=ApprovalPolicy.HOOK, execution=ExecutionPolicy.CONFIRM)
async def hooked(ctx: ToolContext, note: str) -> str:
    """A side effect whose approval a policy hook decides.

    Args:
        note: What to record (the test hook reads it as allow / deny / ask).
    """
    EXECUTED.append(f"hooked:{note}")
    return "ok"


@TESTING.tool(visible_chars=500)
async def dump(ctx: ToolContext, size: int) -> str:
    """Return a long text (for output budget tests).

    Args:
        size: How many characters.
    """
    return "".join(f"line {i:05d}\n" for i in range(size // 11 + 1))[:size]


def reset() -> None:
    EXECUTED.clear()
    BINDING.clear()
    BINDING["version"] = "1"
