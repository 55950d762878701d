"""What a tool is: a typed async function plus the descriptor fields of the Anyy tool reference.

A toolset module creates a `Toolset` and decorates its handlers with `@TOOLSET.tool(...)`. The handler's
signature is the argument schema: pydantic builds the validator and the JSON schema from it, and the
docstring's ``Args:`` section describes each parameter. Handlers receive a `ToolContext` first; it is the
only way a tool reaches the gateway (send a message, schedule, use a connector), which keeps the imports
pointing one way.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Container
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, TypedDict, TypeVar, get_type_hints
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator

from store.db import Store
from store.records import Attachment, Origin
from toolsets.controls import visible


class Risk(StrEnum):
    READ = "read"
    RUNTIME_LOW = "runtime-low"
    RUNTIME_HIGH = "runtime-high"
    CONFIG_LOW = "config-low"
    CONFIG_HIGH = "config-high"
    CREDENTIAL_HIGH = "credential-high"
    DANGEROUS = "dangerous"
    FORCE_REQUIRED = "force-required"


class ApprovalPolicy(StrEnum):
    NONE = "none"
    HOOK = "hook"
    ALWAYS = "always"


class ExecutionPolicy(StrEnum):
    DIRECT = "direct"
    AUDIT = "audit"
    CONFIRM = "confirm"
    CHANGE_PLAN = "change_plan"
    FORCE_CHANGE_PLAN = "force_change_plan"

    @property
    def needs_approval(self) -> bool:
        return self in (ExecutionPolicy.CONFIRM, ExecutionPolicy.CHANGE_PLAN, ExecutionPolicy.FORCE_CHANGE_PLAN)


class Policy(TypedDict, total=False):
    """`Toolset.tool` keywords a toolset's tools share: `_GATED = Policy(risk=..., ...)`, `@tool(**_GATED)`."""

    risk: Risk
    approval: ApprovalPolicy
    execution: ExecutionPolicy


class OutputBudget(BaseModel):
    visible_chars: int = 4000
    stored_chars: int = 200_000


class Descriptor(BaseModel):
    risk: Risk = Risk.READ
    approval: ApprovalPolicy = ApprovalPolicy.NONE
    execution: ExecutionPolicy = ExecutionPolicy.DIRECT
    output_budget: OutputBudget = Field(default_factory=OutputBudget)
    # What this tool writes later reaches the model as instructions (memory, automations, skills): after
    # the turn has read external content, a call is held for the owner's approval.
    steering: bool = False

    def for_call(self, requested: ExecutionPolicy) -> Descriptor:
        """This descriptor for one call whose arguments asked for `requested` (a tool's call policy,
        see `Tool.call_policy`). A call may always be made stricter. The one loosening is
        `confirm`/`change_plan` -> `audit`, for a call its tool classified as having no effect to approve
        (an allowlisted `ls`, a skills reload): it then runs at once, recorded, with no approval of any
        kind. `force_change_plan` and `approval = always` never loosen."""
        order = list(ExecutionPolicy)
        if order.index(requested) > order.index(self.execution):
            return self.model_copy(update={"execution": requested})
        loosenable = self.execution in (ExecutionPolicy.CONFIRM, ExecutionPolicy.CHANGE_PLAN) \
            and self.approval is not ApprovalPolicy.ALWAYS
        if loosenable and requested is ExecutionPolicy.AUDIT:
            return self.model_copy(update={"execution": ExecutionPolicy.AUDIT, "approval": ApprovalPolicy.NONE})
        return self


class ToolError(Exception):
    """A failure the model should read and can recover from (bad input found by the handler, a
    refused recipient, a server that is down). Its message becomes the tool result."""


def configured(ctx: ToolContext, name: str, what: str) -> Any:
    """The service `name` from the tool's context; a ToolError saying "`what` is not configured" without it."""
    found = ctx.service(name)
    if found is None:
        raise ToolError(f"{what} is not configured")
    return found


class Preview(BaseModel):
    """What an approval prompt shows, what it binds, and the exact effect it stands for.

    - `text` is what the owner reads.
    - `payload` (JSON-able) is the complete effect the text shows: for email the whole message (from,
      recipients, subject, body, threading headers, Message-ID); for a calendar change the event data
      and the ETag it applies to; for a file write the content and the file's hash. The approval stores
      it with its SHA-256, and when the tool has an `effect` function, Approve runs that function with
      this stored payload, so no later read can change what goes out. The effect claims its target
      conditionally on the payload (the draft row still holding that message, If-Match on that ETag,
      the file still having that hash) and refuses, having done nothing, when the target moved.
    - `binding`, for a tool without an effect function: hashed into the approval; before executing,
      the preview is built again and the call is refused if the binding changed.

    The text's control and bidirectional characters are shown as escapes (`toolsets.controls`).
    """

    text: str
    binding: Any = None
    payload: Any = None

    @field_validator("text")
    @classmethod
    def _visible(cls, text: str) -> str:
        # The owner sees exactly what will run: no escape sequence or bidi override can hide part of it.
        return visible(text)


class ToolContext(Protocol):
    """The gateway, as a tool sees it. Implemented in `gateway`; tests may implement it too."""

    store: Store
    user_key: str
    session_id: str
    origin: Origin
    tz: ZoneInfo
    turn_id: str
    external_sources: list[str]  # the outside content this turn has read so far (see `external`)

    def now(self) -> datetime:
        """Aware current time in the owner's zone."""

    def service(self, name: str) -> Any | None:
        """A connector or gateway service by name ("email", "calendar", "automations", "surfaces"),
        or None when it is not configured."""

    async def send(self, text: str, origin: Origin | None = None, attachment: Attachment | None = None) -> int:
        """Queue a message to the current origin (or `origin`, which must belong to the current user);
        returns the outbox id. With `attachment` (a file under the data directory) `text` is its caption."""

    def show_image(self, part: dict[str, Any]) -> None:
        """Show the model an image after this tool round (`part` as `gateway.services.media.image_part` makes it);
        only for a vision model (the "vision" service exists)."""

    async def ask(self, question: str, options: list[str]) -> int:
        """Post a question (options become buttons where the surface has them). The answer arrives as
        the user's next message; the current turn ends after this tool round."""

    def load_toolsets(self, names: list[str]) -> list[str]:
        """Make more toolsets visible for the rest of this turn; returns the names now loaded."""

    def external(self, source: str, content: str) -> str:
        """Wrap content that came from outside (an email, a web page, an MCP result) in the untrusted
        block naming `source` (see `toolsets.untrusted`), and record that this turn has read external
        content. Every tool that returns outside content passes it through here."""


Handler = Callable[..., Awaitable[Any]]
PreviewFn = Callable[[ToolContext, BaseModel], Awaitable[Preview]]
EffectFn = Callable[[ToolContext, BaseModel, Any], Awaitable[Any]]
CallPolicyFn = Callable[[ToolContext, BaseModel], ExecutionPolicy]
# The decorators below return the function they register unchanged, with its own signature: an effect
# function is also called directly by its handler, with None for the arguments.
PreviewT = TypeVar("PreviewT", bound=PreviewFn)
EffectT = TypeVar("EffectT", bound=EffectFn)
CallPolicyT = TypeVar("CallPolicyT", bound=CallPolicyFn)


@dataclass
class Tool:
    """One model-visible tool."""

    name: str
    toolset: str
    description: str
    handler: Handler
    descriptor: Descriptor
    previewer: PreviewFn | None = None
    effector: EffectFn | None = None
    requires: str | None = None  # a service without which this one tool is absent (its toolset stays)
    call_policy_fn: CallPolicyFn | None = None
    # A JSON schema given as is (an MCP server's `inputSchema`), sent instead of the args model's; the
    # args model is then `json_schema_args(parameters)`, which validates against it.
    parameters: dict[str, Any] | None = None
    # The arguments' pydantic model when it is given (an MCP tool's `json_schema_args`); otherwise it is
    # built from the handler's signature on first use (`args_model`): a process imports every toolset,
    # and most tools are never offered or called in it (about 30 ms for all of them at start-up).
    given_args: type[BaseModel] | None = field(default=None, repr=False)
    # Models the built args model also derives from (validators a toolset adds to all its tools' arguments).
    args_mixins: tuple[type[BaseModel], ...] = ()
    _schema: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def args_model(self) -> type[BaseModel]:
        """The pydantic model that validates this tool's arguments (built once, on first use)."""
        if self.given_args is None:
            model = args_model_for(self.handler)
            if self.args_mixins:
                model = create_model(model.__name__, __base__=(model, *self.args_mixins))
            self.given_args = model
        return self.given_args

    def schema(self) -> dict[str, Any]:
        """The provider-neutral schema: name, description, JSON-schema parameters. Built once: it is
        sent with every model request, and the same bytes every time keep prompt caches warm."""
        if self._schema is None:
            if self.parameters is not None:
                params = self.parameters
            else:
                params = self.args_model.model_json_schema()
                params.pop("title", None)
                for prop in params.get("properties", {}).values():
                    prop.pop("title", None)
            self._schema = {"name": self.name, "description": self.description, "parameters": params}
        return self._schema

    async def call(self, ctx: ToolContext, args: BaseModel) -> Any:
        # Fields of a typed args model, plus the free-form keys of a `json_schema_args` model.
        fields = {k: getattr(args, k) for k in type(args).model_fields}
        return await self.handler(ctx, **fields, **(args.model_extra or {}))

    def preview(self, fn: PreviewT) -> PreviewT:
        """Decorator: register the approval preview for this tool."""
        self.previewer = fn
        return fn

    def effect(self, fn: EffectT) -> EffectT:
        """Decorator: register `async def fn(ctx, args, payload)`, which performs this tool's side effect
        from the `Preview.payload` the owner approved (and returns the result, like the handler).

        An approved call then runs `fn` with the stored payload instead of the handler; the handler stays
        what a call that needs no approval runs, and usually builds the payload as the preview does and
        passes it to the same function, so there is one code path for the effect:

            @TOOLSET.tool(risk=Risk.RUNTIME_HIGH, approval=ApprovalPolicy.ALWAYS, execution=ExecutionPolicy.CONFIRM)
            async def file_write(ctx, path: str, content: str) -> str:
                return await _write(ctx, None, await _payload(ctx, path, content))

            @file_write.preview
            async def _preview(ctx, args) -> Preview:
                payload = await _payload(ctx, args.path, args.content)  # content + the file's current hash
                return Preview(text=..., payload=payload)

            @file_write.effect
            async def _write(ctx, args, payload) -> str:
                ...  # write payload["content"] only if the file still has payload["sha256"]
        """
        self.effector = fn
        return fn

    def call_policy(self, fn: CallPolicyT) -> CallPolicyT:
        """Decorator: register a function of the validated arguments that returns the execution policy
        this one call needs (`bash` classifies its command: an allowlisted `ls` is `audit`, `rm -rf ~`
        is `force_change_plan`). It is applied by `Descriptor.for_call`, so it can tighten the
        descriptor, and loosen it only from `change_plan` to `audit`; governance overrides still
        tighten the result."""
        self.call_policy_fn = fn
        return fn

    def descriptor_for(self, ctx: ToolContext, args: BaseModel) -> Descriptor:
        """The descriptor that governs this call (the declared one when there is no call policy)."""
        if self.call_policy_fn is None:
            return self.descriptor
        return self.descriptor.for_call(self.call_policy_fn(ctx, args))


@dataclass
class Toolset:
    """A named group of tools, selected together.

    `keywords` are regular expressions (English and Chinese) that make the selector pick this toolset;
    `requires` names the connector or service without which the toolset does not exist for the model.
    `guests` shares the toolset with guests even when `[access] guest_toolsets` does not list it (an MCP
    server configured with `guests = true`); `owners_only` keeps it from guests even when that list names
    it (the browser, which carries the owner's cookies).
    """

    name: str
    description: str
    keywords: tuple[str, ...] = ()
    requires: str | None = None
    tools: list[Tool] = field(default_factory=list)
    guests: bool = False
    owners_only: bool = False

    def tool(
        self,
        *,
        risk: Risk = Risk.READ,
        approval: ApprovalPolicy = ApprovalPolicy.NONE,
        execution: ExecutionPolicy = ExecutionPolicy.DIRECT,
        visible_chars: int = 4000,
        stored_chars: int = 200_000,
        steering: bool = False,
        requires: str | None = None,
    ) -> Callable[[Handler], Tool]:
        """Decorator: turn `async def name(ctx, ...)` into a `Tool` of this toolset. `requires` names a
        service without which this tool is absent while the rest of the toolset exists."""

        def wrap(fn: Handler) -> Tool:
            descriptor = Descriptor(risk=risk, approval=approval, execution=execution, steering=steering,
                                    output_budget=OutputBudget(visible_chars=visible_chars, stored_chars=stored_chars))
            t = Tool(name=fn.__name__, toolset=self.name, description=_summary(fn), handler=fn,
                     descriptor=descriptor, requires=requires)
            self.tools.append(t)
            return t

        return wrap

    def present(self, services: Container[str]) -> Toolset | None:
        """This toolset as it exists with these services: None without the service it requires, and
        without the tools whose own requirement is missing (itself when nothing is missing)."""
        if self.requires is not None and self.requires not in services:
            return None
        tools = [t for t in self.tools if t.requires is None or t.requires in services]
        return self if len(tools) == len(self.tools) else replace(self, tools=tools)


def _summary(fn: Callable[..., Any]) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\nArgs:")[0].strip()


def _arg_docs(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter descriptions from a Google-style ``Args:`` section."""
    doc = inspect.getdoc(fn) or ""
    if "Args:" not in doc:
        return {}
    section = doc.split("Args:", 1)[1]
    out: dict[str, str] = {}
    current = None
    for line in section.splitlines():
        m = re.match(r"^\s{0,8}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if m and (not line.startswith(" " * 9)):
            current = m.group(1)
            out[current] = m.group(2).strip()
        elif current and line.strip():
            out[current] += " " + line.strip()
        elif not line.strip() and out:
            current = None
    return out


def args_model_for(fn: Callable[..., Any]) -> type[BaseModel]:
    """A pydantic model of `fn`'s parameters after the context; unknown fields are rejected."""
    sig = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)
    docs = _arg_docs(fn)
    fields: dict[str, Any] = {}
    for i, (pname, param) in enumerate(sig.parameters.items()):
        if i == 0:
            continue  # the ToolContext
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (hints.get(pname, Any), Field(default, description=docs.get(pname)))
    name = "".join(p.title() for p in fn.__name__.split("_")) + "Args"
    # The validator and JSON schema are built when the tool is first offered or called, not for every
    # registered tool at start-up (most are neither in a process's first turns).
    return create_model(name, __config__=ConfigDict(extra="forbid", defer_build=True), **fields)


def json_schema_args(schema: dict[str, Any]) -> type[BaseModel]:
    """An args model for a tool that brings its own JSON schema: any JSON object that `schema` accepts
    (checked with `jsonschema`; a violation is a pydantic ValidationError, as for typed tools)."""
    import jsonschema  # only MCP tools bring a JSON schema: loaded with the first MCP server's tools

    validator_cls = jsonschema.validators.validator_for(schema)
    validator_cls.check_schema(schema)  # a broken schema is the server's error, found when listing
    validator = validator_cls(schema)

    class JsonSchemaArgs(BaseModel):
        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            error = jsonschema.exceptions.best_match(validator.iter_errors(data))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path)
                raise ValueError(f"{where + ': ' if where else ''}{error.message}")
            return data

    return JsonSchemaArgs
