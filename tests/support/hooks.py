"""Policy hooks for tests: `[approvals] hook = "tests.support.hooks:by_note"`."""


def by_note(tool: str, args: dict, user_key: str) -> str:
    """allow / deny / ask, read from the call's `note` argument."""
    return str(args.get("note", "ask"))


def allow_all(tool: str, args: dict, user_key: str) -> str:
    """A hook that waves every call through (what force_change_plan must resist)."""
    return "allow"
