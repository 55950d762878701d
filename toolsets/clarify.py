"""The clarify toolset: ask the user a question, optionally with answer buttons."""

from __future__ import annotations

from toolsets.base import ToolContext, ToolError, Toolset

TOOLSET = Toolset(
    "clarify",
    "ask the user a question with answer buttons",
    keywords=(
        r"\bask me\b", r"\b(?:check|confirm) with me\b", r"\b(?:options?|choices|buttons?|poll|multiple choice)\b",
        r"\b(?:let me|help me) (?:choose|pick|decide)\b", r"\b(?:not sure|can'?t decide|undecided)\b",
        r"\bwhich (?:one|should)\b",
        r"问我", r"选项", r"让我选", r"选一下", r"帮我选", r"不确定", r"拿不定", r"纠结", r"先问",
    ),
)

MAX_OPTION_CHARS = 64


def _options(options: list[str] | None) -> list[str]:
    if options is None:
        return []
    cleaned = [o.strip() for o in options]
    if not 2 <= len(cleaned) <= 4:
        raise ToolError(f"give 2 to 4 options (got {len(cleaned)}), or none for a free-text answer")
    if any(not o for o in cleaned) or len(set(cleaned)) != len(cleaned):
        raise ToolError("options must be non-empty and different from each other")
    if any(len(o) > MAX_OPTION_CHARS for o in cleaned):
        raise ToolError(f"options become buttons: keep each under {MAX_OPTION_CHARS} characters")
    return cleaned


@TOOLSET.tool()
async def clarify(ctx: ToolContext, question: str, options: list[str] | None = None) -> str:
    """Ask the user a question when you cannot proceed without their answer.

    Args:
        question: The question.
        options: 2-4 short answers shown as buttons; omit for free text.
    """
    if not question.strip():
        raise ToolError("question is empty")
    choices = _options(options)
    await ctx.ask(question.strip(), choices)
    return ("Question posted. The user's answer will arrive as their next message; end this turn now "
            "without guessing the answer.")
