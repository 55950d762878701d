"""MCP servers as toolsets: server `<server>` is toolset `mcp-<server>`, its tool `<tool>` is
`mcp_<server>_<tool>` (names made valid by `connectors.mcp_names`), with the server's JSON schema sent
as is and checked with `jsonschema` before a call.

Policy: a tool the server annotates `readOnlyHint: true` is `read` / `direct`; every other tool gets the
server's configured `policy` (`confirm` by default), and its approval preview shows the server, the tool
and the exact arguments. Results are external content: they reach the model inside the untrusted block,
with images, audio and resources described rather than dropped. A tool's description is the server's
words too: it opens with `[MCP server <name>]`, which the system prompt says describes, never instructs;
so does every description and title inside its input schema (`_marked`), and all of them show control
and bidi characters as escapes, as do `default` and `examples` values. What the model must send exactly
(property names, `required`, `enum` and `const` values) cannot be shown otherwise than it is: a tool
whose schema has control or bidi characters there, or a name or value past `_MAX_EXACT`, is left out.

Selection: the server's name, its configured keywords, and words from its tool names and descriptions.
A server with more than `DEFERRED_OVER` tools is deferred: only its name and configured keywords select
it, and the loader lists it with a one-line entry, so its schemas are sent only when asked for.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from jsonschema.exceptions import SchemaError

from connectors.mcp import McpFailure, McpRefused
from connectors.mcp_names import tool_names, toolset_name
from toolsets.base import (
    Descriptor,
    ExecutionPolicy,
    Preview,
    Risk,
    Tool,
    ToolContext,
    ToolError,
    Toolset,
    json_schema_args,
)
from toolsets.controls import visible

log = logging.getLogger(__name__)

SERVICE = "mcp"  # the connector manager's service name
DEFERRED_OVER = 20  # tools; a bigger server is only a catalog entry until loaded
_MAX_DESCRIPTION = 1024
MARK = "[MCP server {server}] "  # opens every MCP tool's description
_MAX_TOOL_WORDS = 40
_WORD = re.compile(r"[A-Za-z][a-z]{3,}")  # also splits camelCase and snake_case
# Words too common in tool names and descriptions to say which server a message is about.
_STOP = frozenset([
    "about", "after", "also", "based", "before", "between", "call", "calls", "could", "create", "current", "data",
    "default", "delete", "does", "each", "etc", "fetch", "find", "from", "given", "have", "here", "information",
    "input", "into", "item", "items", "like", "list", "make", "more", "must", "name", "names", "none", "number",
    "object", "only", "optional", "other", "over", "provide", "provided", "read", "result", "results", "return",
    "returns", "search", "should", "some", "specific", "string", "such", "than", "that", "their", "them", "then",
    "there", "these", "they", "this", "those", "tool", "tools", "type", "update", "used", "user", "using", "value",
    "values", "what", "when", "which", "will", "with", "within", "without", "would", "write", "your", "given",
    "specified", "available", "multiple", "single",
])


@dataclass(frozen=True)
class ServerSpec:
    """What the owner configured about a server, beyond how to reach it."""

    name: str
    policy: ExecutionPolicy = ExecutionPolicy.CONFIRM
    keywords: tuple[str, ...] = ()
    guests: bool = False


def new_toolset(spec: ServerSpec) -> Toolset:
    """The server's toolset before its tool list is known (filled by `fill`)."""
    ts = Toolset(toolset_name(spec.name), f"MCP server '{spec.name}' (not connected yet)", requires=SERVICE,
                 guests=spec.guests)
    ts.keywords = _keywords(spec, [], deferred=False)
    return ts


def fill(toolset: Toolset, spec: ServerSpec, tools: Sequence[types.Tool], taken: Mapping[str, str]) -> None:
    """Replace the toolset's tools (and description and keywords) with the server's current list.
    `taken` maps tool names already used by other toolsets to those toolsets; a clash skips the tool."""
    names = tool_names(spec.name, [t.name for t in tools])
    built: list[Tool] = []
    for remote in tools:
        name = names[remote.name]
        if taken.get(name, toolset.name) != toolset.name:
            log.error("mcp_tool_name_taken server=%s tool=%s name=%s by=%s", spec.name, remote.name, name, taken[name])
            continue
        try:
            built.append(_tool(spec, remote, name, toolset.name))
        except SchemaError as exc:
            log.error("mcp_tool_schema_invalid server=%s tool=%s error=%s", spec.name, remote.name, exc.message)
        except UnsafeSchema as exc:
            log.error("mcp_tool_schema_refused server=%s tool=%s reason=%s", spec.name, visible(remote.name), exc)
    deferred = len(built) > DEFERRED_OVER
    toolset.tools[:] = built  # in place: the gateway's toolset list holds this object
    toolset.keywords = _keywords(spec, tools, deferred=deferred)
    if deferred:
        toolset.description = f"MCP server '{spec.name}' ({len(built)} tools; load it to see them)"
    else:
        listed = ", ".join(t.name for t in tools)
        toolset.description = f"MCP server '{spec.name}': " + (listed[:200] if listed else "(no tools)")


def _tool(spec: ServerSpec, remote: types.Tool, name: str, toolset: str) -> Tool:
    schema = dict(remote.input_schema)
    schema.setdefault("type", "object")
    annotations = remote.annotations
    if annotations is not None and annotations.read_only_hint:
        descriptor = Descriptor(risk=Risk.READ, execution=ExecutionPolicy.DIRECT)
    else:
        # The spec's default for a tool that is not read-only is destructive.
        destructive = annotations is None or annotations.destructive_hint is not False
        descriptor = Descriptor(risk=Risk.RUNTIME_HIGH if destructive else Risk.RUNTIME_LOW, execution=spec.policy)
    # A third party's words, marked as such (the system prompt's rule about `[MCP server …]`).
    description = MARK.format(server=spec.name) + visible((remote.description or remote.title or remote.name)
                                                          [:_MAX_DESCRIPTION])
    tool = Tool(name=name, toolset=toolset, description=description, given_args=json_schema_args(schema),
                handler=_handler(spec.name, remote.name), descriptor=descriptor,
                parameters=_marked(schema, MARK.format(server=spec.name)))
    tool.preview(_previewer(spec.name, remote.name))
    return tool


# Values, not words about the schema: examples the model is shown, and what it must send exactly.
_HINTS = frozenset({"default", "examples"})
_EXACT = frozenset({"const", "enum", "required"})
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_MAX_EXACT = 256  # characters of a property name or an enum/const value: real ones are a few words


class UnsafeSchema(ValueError):
    """An input schema holds a name or value the model must send exactly but cannot be shown as it is."""


def _marked(schema: Any, mark: str, *, names: bool = False) -> Any:
    """A copy of a JSON schema (as sent to the model) whose every `description` and `title` string opens
    with `mark` and shows its control characters, and whose `default` and `examples` strings show them
    too (cut like a description). Property names, `enum`, `const` and `required` are what the model must
    send byte for byte: kept, or UnsafeSchema when one has such a character or is past `_MAX_EXACT`.
    Every other keyword is kept, so the schema means what the server said; validation uses the server's
    own copy. `names`: `schema` maps names to subschemas (the value of `properties`)."""
    if isinstance(schema, list):
        return [_marked(item, mark) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if names:
        return {_exact(name, "property name"): _marked(sub, mark) for name, sub in schema.items()}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("description", "title") and isinstance(value, str):
            out[key] = mark + visible(value[:_MAX_DESCRIPTION])
        elif key in _HINTS:
            out[key] = _shown(value)
        elif key in _EXACT:
            out[key] = _exact(value, f"{key} value")
        else:
            out[key] = _marked(value, mark, names=key in _NAMED_SCHEMAS)
    return out


def _shown(value: Any) -> Any:
    """A JSON value with its strings (object keys too) cut and their control characters shown."""
    if isinstance(value, str):
        return visible(value[:_MAX_DESCRIPTION])
    if isinstance(value, list):
        return [_shown(item) for item in value]
    if isinstance(value, dict):
        return {_shown(k): _shown(v) for k, v in value.items()}
    return value


def _exact(value: Any, what: str) -> Any:
    """`value` as it is, when each of its strings can be shown to the model as it is; else UnsafeSchema."""
    if isinstance(value, str):
        if len(value) > _MAX_EXACT or visible(value) != value:
            raise UnsafeSchema(f"a {what} the model would have to send exactly has "
                               + (f"{len(value)} characters" if len(value) > _MAX_EXACT else
                                  f"control or bidi characters: {visible(value)[:80]!r}"))
    elif isinstance(value, list):
        for item in value:
            _exact(item, what)
    elif isinstance(value, dict):
        for k, v in value.items():
            _exact(k, what)
            _exact(v, what)
    return value


def _handler(server: str, remote: str) -> Any:
    source = f"mcp:{server}/{remote}"

    async def call(ctx: ToolContext, /, **arguments: Any) -> str:
        manager = ctx.service(SERVICE)
        if manager is None:
            raise ToolError("MCP servers are not running in this process")
        try:
            result = await manager.call(server, remote, arguments)
        except McpRefused as exc:  # quotes the server: external content too
            raise ToolError(ctx.external(source, str(exc))) from None
        except McpFailure as exc:  # down, restarting, timed out: our own words
            raise ToolError(str(exc)) from None
        text = ctx.external(source, render_result(result))
        if result.is_error:
            raise ToolError(f"the MCP tool reported an error:\n{text}")
        return text

    return call


def _previewer(server: str, remote: str) -> Any:
    async def preview(ctx: ToolContext, args: Any) -> Preview:
        shown = json.dumps(args.model_dump(mode="json"), ensure_ascii=False, indent=2, sort_keys=True)
        return Preview(text=f"MCP server: {server}\nTool: {remote}\nArguments:\n{shown}")

    return preview


def render_result(result: types.CallToolResult) -> str:
    """A tool result as text: text blocks as they are, every other block described in one line."""
    parts = [_describe(block) for block in result.content]
    if result.structured_content is not None and not any(isinstance(b, types.TextContent) for b in result.content):
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts) or "(the tool returned no content)"


def _describe(block: Any) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes; not shown]"
    if isinstance(block, types.ResourceLink):
        extra = f", {block.mime_type}" if block.mime_type else ""
        return f"[resource link {block.name}: {block.uri}{extra}]"
    if isinstance(block, types.EmbeddedResource):
        res = block.resource
        mime = f", {res.mime_type}" if res.mime_type else ""
        if isinstance(res, types.TextResourceContents):
            return f"[resource {res.uri}{mime}]\n{res.text}"
        return f"[resource {res.uri}{mime}, {len(res.blob) * 3 // 4} bytes of binary data; not shown]"
    return f"[{getattr(block, 'type', 'unknown')} content; not shown]"


def _literal(word: str) -> str:
    """A keyword regex for a literal word: whole-word for ASCII words, anywhere for other scripts."""
    body = re.escape(word)
    return rf"(?<![a-z0-9]){body}(?![a-z0-9])" if word.isascii() else body


def _keywords(spec: ServerSpec, tools: Sequence[types.Tool], *, deferred: bool) -> tuple[str, ...]:
    name_words = [w for w in re.split(r"[\s_.\-]+", spec.name) if w]
    out = [r"(?<![a-z0-9])" + r"[\s_.\-]?".join(map(re.escape, name_words)) + r"(?![a-z0-9])", r"\bmcp\b"]
    out += [_literal(k) for k in spec.keywords if k.strip()]
    if not deferred:
        words: dict[str, None] = {}
        for t in tools:
            first_sentence = (t.description or "").split(". ")[0]
            for w in _WORD.findall(f"{t.name} {first_sentence}"):
                if w.lower() not in _STOP:
                    words.setdefault(w.lower())
        named = {n.lower() for n in name_words}  # already a keyword
        singular = [w for w in words if not (w.endswith("s") and w[:-1] in words) and w not in named]
        out += [rf"\b{re.escape(w)}(?:s|es)?\b" for w in singular[:_MAX_TOOL_WORDS]]
    return tuple(dict.fromkeys(out))
