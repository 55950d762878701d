"""Policy hooks for tests: `[approvals] hook = "tests.support.hooks:by_note"`."""


def by_note(tool: str, args: dict, user_key: str) -> str:
    """allow / deny / ask, read from the call's `note` argument."""
    return str(args.get("note", "ask"))
