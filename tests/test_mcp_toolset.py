"""Building `mcp-<server>` toolsets from a server's tool list: descriptors from annotations and the
server's policy, selection words, deferral of big servers, guests, and how results are rendered.

The tool lists are `mcp_types.Tool` objects as the SDK parses them from a server; the end-to-end tests
(test_mcp_e2e.py) cover the same code against real servers."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest
from pydantic import ValidationError

from gateway.selection.selector import select_toolsets
from toolsets.base import ExecutionPolicy, Risk
from toolsets.loader import loader_tool
from toolsets.mcp import DEFERRED_OVER, ServerSpec, fill, new_toolset, render_result
from toolsets.registry import TOOLSETS

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def remote(name: str, description: str = "", read_only: bool | None = None, destructive: bool | None = None,
           schema: dict | None = None) -> types.Tool:
    annotations = None if read_only is None else types.ToolAnnotations(read_only_hint=read_only,
                                                                       destructive_hint=destructive)
    return types.Tool(name=name, description=description, input_schema=schema or SCHEMA, annotations=annotations)


def built(spec: ServerSpec, tools: list[types.Tool]):  # type: ignore[no-untyped-def]
    ts = new_toolset(spec)
    fill(ts, spec, tools, {})
    return ts


def test_descriptors_follow_annotations_and_the_servers_policy():
    ts = built(ServerSpec("notes", policy=ExecutionPolicy.AUDIT), [
        remote("list", read_only=True), remote("add", read_only=False, destructive=False), remote("wipe")])
    by = {t.name: t.descriptor for t in ts.tools}
    assert (by["mcp_notes_list"].risk, by["mcp_notes_list"].execution) == (Risk.READ, ExecutionPolicy.DIRECT)
    assert (by["mcp_notes_add"].risk, by["mcp_notes_add"].execution) == (Risk.RUNTIME_LOW, ExecutionPolicy.AUDIT)
    assert (by["mcp_notes_wipe"].risk, by["mcp_notes_wipe"].execution) == (Risk.RUNTIME_HIGH, ExecutionPolicy.AUDIT)
    default = built(ServerSpec("n"), [remote("add")])
    assert default.tools[0].descriptor.execution is ExecutionPolicy.CONFIRM  # not read-only: confirm by default
    assert ts.requires == "mcp" and ts.guests is False
    assert built(ServerSpec("shared", guests=True), []).guests is True


def test_the_servers_schema_is_sent_as_is_and_validates_arguments():
    tool = built(ServerSpec("n"), [remote("add", schema=SCHEMA)]).tools[0]
    assert tool.schema()["parameters"] == SCHEMA
    assert tool.args_model.model_validate({"text": "hi"}).model_dump(mode="json") == {"text": "hi"}
    for bad in ({}, {"text": 3}):
        with pytest.raises(ValidationError):
            tool.args_model.model_validate(bad)
    again = tool.args_model.model_validate_json('{"text": "hi"}')  # as approvals re-read the stored call
    assert again.model_dump(mode="json") == {"text": "hi"}


def test_a_tool_with_a_broken_schema_is_left_out_and_the_rest_kept():
    ts = built(ServerSpec("n"), [remote("ok"), remote("bad", schema={"type": "object", "properties": 5})])
    assert [t.name for t in ts.tools] == ["mcp_n_ok"]


def test_selected_by_name_keywords_and_tool_words():
    ts = built(ServerSpec("home-lab", keywords=("notes", "笔记")), [
        remote("set_thermostat", "Set the heating thermostat to a temperature. Long detail."),
        remote("list_lights", "List every light.")])
    available = [*TOOLSETS, ts]

    def picks(text: str) -> bool:
        return ts.name in select_toolsets(text, has_attachments=False, recent=[], pins=None, available=available).names

    for text in ("ask home lab", "home-lab status", "my notes please", "看看我的笔记", "turn the thermostat up",
                 "is the heating on", "dim the lights"):
        assert picks(text), text
    for text in ("hello there", "what is the current status", "homelabs", "list my tasks"):
        assert not picks(text), text


def test_a_big_server_is_deferred_to_a_catalog_entry():
    tools = [remote(f"thermostat_{i}", "Set a thermostat.") for i in range(DEFERRED_OVER + 1)]
    ts = built(ServerSpec("house", keywords=("heating",)), tools)
    assert len(ts.tools) == DEFERRED_OVER + 1
    assert ts.description == f"MCP server 'house' ({DEFERRED_OVER + 1} tools; load it to see them)"
    available = [*TOOLSETS, ts]
    pick = lambda text: select_toolsets(text, has_attachments=False, recent=[], pins=None, available=available).names  # noqa: E731
    assert ts.name not in pick("set the thermostat")  # tool words do not select a deferred server
    assert ts.name in pick("the house is cold") and ts.name in pick("heating please")
    assert f"- mcp-house: MCP server 'house' ({DEFERRED_OVER + 1} tools" in loader_tool(available).description


def test_a_name_taken_by_another_server_is_skipped():
    spec = ServerSpec("a_b")
    ts = new_toolset(spec)
    fill(ts, spec, [remote("c"), remote("d")], {"mcp_a_b_c": "mcp-a"})
    assert [t.name for t in ts.tools] == ["mcp_a_b_d"]


def test_results_describe_images_and_resources():
    png = base64.b64encode(b"x" * 300).decode()
    result = types.CallToolResult(content=[
        types.TextContent(text="Here:"), types.ImageContent(data=png, mime_type="image/png"),
        types.AudioContent(data=png, mime_type="audio/wav"),
        types.ResourceLink(name="report", uri="file:///r.pdf", mime_type="application/pdf"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="notes://1", text="note one")),
        types.EmbeddedResource(resource=types.BlobResourceContents(uri="notes://2", blob=png, mime_type="image/png")),
    ])
    assert render_result(result).splitlines() == [
        "Here:", "[image image/png, 300 bytes; not shown]", "[audio audio/wav, 300 bytes; not shown]",
        "[resource link report: file:///r.pdf, application/pdf]", "[resource notes://1]", "note one",
        "[resource notes://2, image/png, 300 bytes of binary data; not shown]"]
    structured = types.CallToolResult(content=[], structured_content={"temp": 21})
    assert render_result(structured) == '{"temp": 21}'
    assert render_result(types.CallToolResult(content=[])) == "(the tool returned no content)"


async def test_a_servers_protocol_error_reaches_the_model_as_external_content(store):
    """The real time server rejects a tool it does not have (JSON-RPC -32602): the tool error quotes it
    inside the untrusted block."""
    import sys
    from pathlib import Path

    from connectors.mcp import McpManager, McpServerSettings
    from tests.support.context import RecordingContext
    from toolsets.base import ToolError

    command = str(Path(sys.executable).parent / "mcp-server-time")
    manager = McpManager([McpServerSettings(name="time", command=command, args=["--local-timezone", "UTC"])])
    await manager.start()
    try:
        ts = built(ServerSpec("time"), [remote("get_future_time", read_only=True)])  # not on the server
        ctx = RecordingContext(store=store, services={"mcp": manager})
        tool = ts.tools[0]
        with pytest.raises(ToolError) as err:
            await tool.call(ctx, tool.args_model.model_validate({"text": "x"}))
        assert str(err.value).startswith('<untrusted source="mcp:time/get_future_time"')
        assert "refused get_future_time: Unknown tool: get_future_time" in str(err.value)
        assert ctx.external_sources == ["mcp:time/get_future_time"]
    finally:
        await manager.aclose()
