"""The automation toolset through its argument models, against a real (admin-mode) service."""

import re
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from gateway.automations.scheduler import AutomationService
from store.audit import Audit
from store.outbox import Outbox
from store.records import Origin
from tests.support.context import RecordingContext
from toolsets.automation import TOOLSET
from toolsets.base import ExecutionPolicy, Risk, ToolError
from toolsets.registry import toolset
from toolsets.schedule import CANONICAL_FORMS

TOOLS = {t.name: t for t in TOOLSET.tools}
BERLIN = ZoneInfo("Europe/Berlin")
CREATE = {"name": "call mum", "schedule": {"type": "every", "mode": "cron", "cron": "0 9 * * 1-5"},
          "action": {"kind": "reminder", "text": "call mum"}}


async def call(ctx: RecordingContext, tool_name: str, **args: Any) -> Any:
    tool = TOOLS[tool_name]
    return await tool.call(ctx, tool.args_model.model_validate(args))


@pytest.fixture
def service(store) -> AutomationService:
    return AutomationService(store, BERLIN, Outbox(store).enqueue)


@pytest.fixture
def alice(store, service) -> RecordingContext:
    return RecordingContext(store, user_key="telegram:1", origin=Origin(surface="telegram", chat_id="100"), tz=BERLIN,
                            services={"automations": service})


def test_the_toolset_is_registered_with_the_documented_policies():
    assert toolset("automation") is TOOLSET
    assert list(TOOLS) == ["automation_list", "automation_create", "automation_update", "automation_briefing",
                           "automation_delete", "automation_run", "automation_history"]
    for name in ("automation_create", "automation_update", "automation_briefing", "automation_delete"):
        assert TOOLS[name].descriptor.execution is ExecutionPolicy.AUDIT
        assert TOOLS[name].descriptor.risk is Risk.RUNTIME_LOW
    assert TOOLS["automation_list"].descriptor.risk is Risk.READ
    schema = TOOLS["automation_create"].schema()["parameters"]
    assert set(schema["properties"]) == {"name", "schedule", "action"}
    kinds = schema["$defs"]["ActionSpec"]["properties"]["kind"]["enum"]
    assert kinds == ["reminder", "prompt"]  # script jobs are never exposed to the model


@pytest.mark.parametrize("text", [
    "remind me at 9 to call mum", "every day at 8 send me the news", "in 10 minutes tell me to stretch",
    "tomorrow at 7 wake me", "schedule a weekly summary", "明天早上8点提醒我开会", "每天提醒我喝水", "设置一个闹钟",
    "10分钟后叫我", "每周一定时发报告", "ping me in an hour to stretch", "stop reminding me about the plants",
    "下午三点叫我开会",
])
def test_keywords_select_the_toolset(text):
    assert any(re.search(k, text, re.IGNORECASE) for k in TOOLSET.keywords)


@pytest.mark.parametrize("text", ["what is the capital of France", "summarize this email", "翻译这段话"])
def test_keywords_stay_quiet_otherwise(text):
    assert not any(re.search(k, text, re.IGNORECASE) for k in TOOLSET.keywords)


@pytest.mark.parametrize("legacy", [{"when": "tomorrow 9am"}, {"every": "30m"}, {"cron": "0 9 * * *"},
                                    {"recurring": True}])
def test_legacy_top_level_fields_are_rejected_with_the_canonical_form(legacy):
    for name, args in (("automation_create", {**CREATE, **legacy}), ("automation_update", {"id": "x", **legacy})):
        with pytest.raises(ValidationError) as info:
            TOOLS[name].args_model.model_validate(args)
        assert CANONICAL_FORMS in str(info.value)


async def test_create_list_update_history_delete(alice, store):
    created = await call(alice, "automation_create", **CREATE)
    assert created["next_run"].endswith(("T09:00:00+01:00", "T09:00:00+02:00"))
    assert created["schedule"]["timezone"] == "Europe/Berlin"
    listed = await call(alice, "automation_list")
    assert [a["id"] for a in listed] == [created["id"]]
    updated = await call(alice, "automation_update", id=created["id"], name="call mum and dad",
                         schedule={"type": "every", "mode": "interval", "interval": "2h"})
    assert updated["name"] == "call mum and dad" and updated["schedule"]["interval"] == "2h"
    ran = await call(alice, "automation_run", id=created["id"])
    assert ran["status"] == "delivered" and ran["output"] == "⏰ call mum"
    history = await call(alice, "automation_history", id=created["id"], limit=5)
    assert [(h["status"], h["late"]) for h in history] == [("delivered", False)]
    assert await call(alice, "automation_delete", id=created["id"]) == f"deleted {created['id']} (call mum and dad)"
    assert await call(alice, "automation_list") == []
    actions = [e.action for e in await Audit(store).list() if e.action.startswith("automation.")]
    assert actions == ["automation.create", "automation.update", "automation.delete"]


async def test_another_users_calls_cannot_touch_the_automation(alice, store, service):
    created = await call(alice, "automation_create", **CREATE)
    bob = RecordingContext(store, user_key="slack:U2", tz=BERLIN, services={"automations": service})
    assert await call(bob, "automation_list") == []
    for name in ("automation_update", "automation_delete", "automation_run", "automation_history"):
        args = {"id": created["id"], **({"enabled": False} if name == "automation_update" else {})}
        with pytest.raises(ToolError, match=f"no automation {created['id']}"):
            await call(bob, name, **args)
    assert [a["enabled"] for a in await call(alice, "automation_list")] == [True]


async def test_errors_reach_the_model_as_tool_errors(alice, store):
    with pytest.raises(ToolError, match="is in the past"):
        await call(alice, "automation_create", name="old", schedule={"type": "once", "at": "2020-01-01T09:00:00"},
                   action={"kind": "reminder", "text": "x"})
    without = RecordingContext(store)
    with pytest.raises(ToolError, match="not available"):
        await call(without, "automation_list")
