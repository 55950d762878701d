"""Policy: from a tool's descriptor and the governance overrides, decide what happens to a call.

Overrides can only tighten a tool's policy, never loosen it: a config typo must not turn a
confirm-gated tool into a direct one.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from gateway.config import ApprovalsConfig, GovernanceConfig
from toolsets.base import ApprovalPolicy, Descriptor, ExecutionPolicy, Tool

log = logging.getLogger(__name__)

_EXEC_ORDER = list(ExecutionPolicy)
_APPROVAL_ORDER = list(ApprovalPolicy)


class Verdict(StrEnum):
    RUN = "run"  # execute now
    RUN_AUDITED = "run_audited"  # execute now and write an audit event
    HOLD = "hold"  # create an approval and wait for the owner
    REFUSE = "refuse"  # the policy hook said no


class PolicyHookError(Exception):
    """The configured hook could not be loaded or failed."""


def effective_descriptor(tool: Tool, governance: GovernanceConfig, call: Descriptor | None = None) -> Descriptor:
    """The tool's descriptor (or this call's, from `Tool.descriptor_for`) tightened by
    `tool_governance.overrides`."""
    d = call or tool.descriptor
    ov = governance.overrides.get(tool.name)
    if ov is None:
        return d
    execution, approval = d.execution, d.approval
    if ov.execution and _EXEC_ORDER.index(ExecutionPolicy(ov.execution)) > _EXEC_ORDER.index(execution):
        execution = ExecutionPolicy(ov.execution)
    if ov.approval and _APPROVAL_ORDER.index(ApprovalPolicy(ov.approval)) > _APPROVAL_ORDER.index(approval):
        approval = ApprovalPolicy(ov.approval)
    return d.model_copy(update={"execution": execution, "approval": approval})


HookFn = Callable[[str, dict[str, Any], str], Any]


def load_hook(spec: str) -> HookFn | None:
    """Import `module:function` from `[approvals] hook`; None when no hook is configured."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise PolicyHookError(f"[approvals] hook {spec!r} cannot be loaded: {exc}") from None
    if not callable(fn):
        raise PolicyHookError(f"[approvals] hook {spec!r} is not callable")
    return fn


class Policy:
    def __init__(self, governance: GovernanceConfig, approvals: ApprovalsConfig) -> None:
        self.governance = governance
        self.hook = load_hook(approvals.hook)

    async def decide(self, tool: Tool, args: dict[str, Any], user_key: str,
                     call: Descriptor | None = None,
                     external: Sequence[str] = ()) -> tuple[Verdict, Descriptor, str]:
        """Return the verdict, the effective descriptor and a reason (for refusals and the audit).

        `call` is the descriptor for these arguments when the tool has a call policy. `external` names
        the outside content the turn has read so far: a steering write (memory, automations) after it is
        held for the owner, whatever its own policy or the hook says."""
        verdict, d, reason = await self._decide(tool, args, user_key, call)
        if external and d.steering and verdict in (Verdict.RUN, Verdict.RUN_AUDITED):
            return Verdict.HOLD, d, f"steering write after external content ({', '.join(external)})"
        return verdict, d, reason

    async def _decide(self, tool: Tool, args: dict[str, Any], user_key: str,
                      call: Descriptor | None) -> tuple[Verdict, Descriptor, str]:
        d = effective_descriptor(tool, self.governance, call)
        gated = d.execution.needs_approval or d.approval is ApprovalPolicy.ALWAYS
        if d.approval is ApprovalPolicy.HOOK and d.execution is not ExecutionPolicy.FORCE_CHANGE_PLAN:
            answer = await self._ask_hook(tool.name, args, user_key)
            if answer == "deny":
                return Verdict.REFUSE, d, "refused by the policy hook"
            if answer == "allow":
                return Verdict.RUN_AUDITED, d, "allowed by the policy hook"
            gated = True  # "ask" (or anything unexpected) means a human decides
        if gated:
            return Verdict.HOLD, d, f"execution policy {d.execution}"
        if d.execution is ExecutionPolicy.AUDIT:
            return Verdict.RUN_AUDITED, d, "audited"
        return Verdict.RUN, d, "direct"

    async def _ask_hook(self, tool: str, args: dict[str, Any], user_key: str) -> str:
        if self.hook is None:
            return "ask"
        try:
            result = self.hook(tool, args, user_key)
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, timeout=10)
        except Exception:  # a broken hook must not run the call: a human decides instead
            log.exception("policy_hook_failed tool=%s", tool)
            return "ask"
        return str(result).lower() if str(result).lower() in ("allow", "deny", "ask") else "ask"
