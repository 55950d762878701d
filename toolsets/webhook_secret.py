"""A new webhook automation's secret goes to the person who made it, in their chat, once; never to the model,
and never into a group chat (the CLI shows it there instead).

The tool result only says where the secret went, so no model context, transcript or audit entry holds it.
"""

from __future__ import annotations

from typing import Any

from store.records import AutomationRecord
from toolsets.base import ToolContext

SENT = "the secret was sent to the user's chat directly (shown once; `anyy automations secret ID` replaces it)"
NOT_IN_GROUP = ("this is a shared chat, so the secret was not posted here: the owner gets it by running "
                "`anyy automations secret ID` on the Anyy machine")


async def hand_out_secret(ctx: ToolContext, rec: AutomationRecord, view: dict[str, Any]) -> dict[str, Any]:
    """For a webhook automation without a secret yet: issue one, send it, and note that in `view`."""
    webhooks: Any = ctx.service("webhooks")
    if rec.schedule.get("type") != "webhook" or webhooks is None or await webhooks.secrets.has(rec.id):
        return view
    secret = await webhooks.issue(rec.id)
    name = rec.schedule.get("name")
    if ctx.session_id != ctx.origin.key():  # a group's session is per member: everyone there would read it
        return {**view, "webhook_url_path": f"/hooks/{name}", "secret": NOT_IN_GROUP}
    await ctx.send(f"🔑 Webhook “{rec.name}”: POST to /hooks/{name} with\n"
                   f"Authorization: Bearer {secret}\n"
                   "or sign the body (X-Hub-Signature-256: sha256=HMAC-SHA256 of the body with this secret). "
                   "This is the only time it is shown.")
    return {**view, "webhook_url_path": f"/hooks/{name}", "secret": SENT}
