"""Named steps of a turn and of an approval where a test can stop or interleave the process.

`await reached("tool.ran")` costs a dict lookup when nothing listens. Two listeners exist, both for tests:

- `ANYY_PAUSE_AT=<step>` in a child process's environment: at that step the process writes
  "anyy: paused at <step>" to stderr and waits forever, so a test can `kill -9` it at exactly that point
  (no sleeps, no races).
- `intercept(step, hook)`: in-process, `hook()` runs at the step, to force an interleaving (e.g. the
  draft revised between the approval's claim and its send).

Steps: `model.before_call`, `tool.ran` (a direct tool returned, its result not stored yet),
`approval.held` (the approval and its prompt stored, the tool result not yet), `approval.claimed` (an
approved call claimed for execution, its effect not started), `approval.ran` (its effect done, the
outcome not recorded yet), `outbox.before_send` (a row handed to its chat's lane, its send not begun),
`account.before_refresh` (an account's refresh claimed and its row read, the token endpoint not asked),
`trigger.claimed` (a trigger's event recorded and its run claimed, nothing delivered yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Iterator

PAUSE_AT = os.environ.get("ANYY_PAUSE_AT")
_hooks: dict[str, Callable[[], Awaitable[None]]] = {}


async def reached(step: str) -> None:
    """Mark that the process is at `step`."""
    hook = _hooks.get(step)
    if hook is not None:
        await hook()
    if step == PAUSE_AT:
        print(f"anyy: paused at {step}", file=sys.stderr, flush=True)
        await asyncio.Event().wait()


@contextlib.contextmanager
def intercept(step: str, hook: Callable[[], Awaitable[None]]) -> Iterator[None]:
    """Run `hook()` whenever `step` is reached, inside the block."""
    _hooks[step] = hook
    try:
        yield
    finally:
        _hooks.pop(step, None)
