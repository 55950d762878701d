"""MCP name rules: sanitising, the 64-character limit with an 8-hex SHA-256 suffix,
collisions inside one server, and two servers that collide (a config error at start)."""

from __future__ import annotations

import hashlib

import pytest

from connectors.mcp_names import MAX_NAME, fit, tool_names, toolset_name
from gateway.config import ConfigError, parse_config


def sha8(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def test_valid_names_are_kept_and_others_sanitised():
    assert tool_names("time", ["get_current_time"]) == {"get_current_time": "mcp_time_get_current_time"}
    assert tool_names("home.lab", ["lights/on", "dim-lights"]) == {
        "lights/on": "mcp_home_lab_lights_on", "dim-lights": "mcp_home_lab_dim-lights"}
    assert toolset_name("home.lab") == "mcp-home_lab"
    assert tool_names("笔记", ["搜索"]) == {"搜索": "mcp______"}


def test_a_70_character_name_keeps_its_prefix_and_gets_a_hash_suffix():
    tool = "t" * 70
    full = f"mcp_notes_{tool}"
    name = tool_names("notes", [tool])[tool]
    assert len(name) == MAX_NAME
    assert name == full[:55] + "_" + sha8(full)
    assert fit("x" * 64) == "x" * 64  # exactly at the limit: unchanged


def test_two_long_names_with_one_prefix_stay_distinct():
    a, b = "a" * 60 + "_one", "a" * 60 + "_two"
    names = tool_names("s", [a, b])
    assert names[a] != names[b] and all(len(n) == MAX_NAME for n in names.values())


def test_tools_that_sanitise_alike_the_valid_one_keeps_the_name():
    names = tool_names("notes", ["find.note", "find_note", "find note"])
    assert names["find_note"] == "mcp_notes_find_note"
    assert names["find.note"] == "mcp_notes_find_note_" + sha8("mcp_notes_find.note")
    assert names["find note"] == "mcp_notes_find_note_" + sha8("mcp_notes_find note")
    assert len(set(names.values())) == 3


def test_when_no_colliding_name_was_valid_all_get_suffixes():
    names = tool_names("n", ["a.b", "a/b"])
    assert names == {"a.b": "mcp_n_a_b_" + sha8("mcp_n_a.b"), "a/b": "mcp_n_a_b_" + sha8("mcp_n_a/b")}


@pytest.mark.parametrize("first,second", [("my.notes", "my_notes"), ("home lab", "home/lab")])
def test_two_servers_that_collide_are_a_config_error(first, second):
    servers = {first: {"command": "x"}, second: {"url": "http://127.0.0.1:1/mcp"}}
    with pytest.raises(ConfigError) as err:
        parse_config({"mcp": {"servers": servers}}, "cfg.toml")
    assert f"[mcp.servers] MCP servers '{first}' and '{second}' both become toolset" in str(err.value)


def test_server_config_names_the_bad_key():
    cases = [({"a": {}}, "[mcp.servers.a] set either command"),
             ({"a": {"command": "x", "url": "http://h/mcp"}}, "[mcp.servers.a] set either command"),
             ({"a": {"url": "http://h/mcp", "env": {"A": "1"}}}, "args and env are for stdio servers"),
             ({"a": {"command": "x", "headers": {"A": "1"}}}, "headers are for HTTP servers"),
             ({"a": {"url": "ftp://h"}}, "url must start with http://"),
             ({"a": {"command": "x", "policy": "yolo"}}, "[mcp.servers.a.policy]"),
             ({"a": {"command": "x", "keywrds": []}}, "[mcp.servers.a.keywrds] unknown key")]
    for servers, message in cases:
        with pytest.raises(ConfigError) as err:
            parse_config({"mcp": {"servers": servers}})
        assert message in str(err.value), servers


def test_the_variables_an_mcp_server_names_are_secrets(monkeypatch):
    from gateway.redaction import configured_secrets

    monkeypatch.setenv("NOTES_TOKEN", "s3cr3t-notes-token")
    cfg = parse_config({"mcp": {"servers": {
        "notes": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}},
        "time": {"command": "x", "env": {"API": "${TIME_KEY}", "PLAIN": "value"}}}}})
    assert {"NOTES_TOKEN", "TIME_KEY"} <= cfg.secret_env_names() and "PLAIN" not in cfg.secret_env_names()
    assert "s3cr3t-notes-token" in configured_secrets(cfg)  # so doctor and the logs redact it
