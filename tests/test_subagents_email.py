"""A helper that tries to send mail: the owner gets a normal approval naming the job; one send after approve."""

import re

from store.subagents import SubagentJobs
from tests.fixtures.mail import SmtpRecorder
from tests.fixtures.model import reply, tool_call

TASK = "CHILD-TASK: tell Anna the numbers are ready"


async def test_a_child_calling_email_send_is_held_for_the_owner(start_console, email_config, model,
                                                                  smtp_recorder: SmtpRecorder):
    harness = await start_console(email_config())
    steps = iter([reply("CHILD-SUMMARY: waiting for approval"), reply("The helper asked to send it.")])

    sent: list[str] = []

    def after_draft(body):  # the child reads its draft's id from the tool result and asks to send it
        last = body["messages"][-1]
        if not sent and last.get("role") == "tool":
            found = re.search(r"\b(d[0-9a-f]{10})\b", last["content"])
            assert found, last["content"]
            sent.append(found.group(1))
            return tool_call("email_send", {"draft_id": sent[0]})
        return next(steps)

    model.script(tool_call("delegate_task", {"task": TASK, "toolsets": ["email"]}),
                 tool_call("email_draft", {"to": ["anna@example.net"], "subject": "Numbers", "body": "Ready."}))
    model.responder = after_draft
    out = await harness.say("delegate: email Anna")
    assert smtp_recorder.received == []
    (job,) = await SubagentJobs(harness.gw.store).for_parent("console:local")
    assert "Approval needed: email_send" in out and f"Asked by helper job {job.id}" in out
    approval_id = re.search(r"/approve (\S+)", out).group(1)
    model.responder = lambda body: reply("ok")
    await harness.say(f"/approve {approval_id}")
    assert len(smtp_recorder.received) == 1
    assert smtp_recorder.received[0].rcpt_tos == ["anna@example.net"]
