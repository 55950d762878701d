"""The dashboard's buttons (POST, CSRF-checked by the guard): decide an approval, pause, resume or
delete an automation. Each goes through the same service as chat, as the owner, and the answer is shown
once on the page the browser is sent back to."""

from __future__ import annotations

import logging

from aiohttp import web

from gateway.dashboard.auth import COOKIE, PREFIX
from gateway.dashboard.context import SESSION, SESSIONS, gateway_of, see_other
from toolsets.schedule import AutomationError

log = logging.getLogger(__name__)

# Who decided, in approvals and the audit log. The dashboard runs on the owner's machine, behind the
# token in the owner's data directory, so its user is the owner.
ACTOR = "dashboard:owner"
_REASON_CHARS = 500


async def decide(request: web.Request) -> web.Response:
    """Approve or deny through `ApprovalService.decide`: one atomic decision, the chat prompt edited."""
    form = await request.post()
    decision = form.get("decision")
    if decision not in ("approve", "deny"):
        raise web.HTTPBadRequest(text="decision must be approve or deny")
    reason = str(form.get("reason") or "").strip()[:_REASON_CHARS] or None
    approval_id = request.match_info["approval_id"]
    gw = gateway_of(request)
    rec = await gw.approvals.repo.get(approval_id)
    answer = await gw.approvals.decide(approval_id, ACTOR, decision == "approve", reason, owner=True)
    log.info("dashboard_decision id=%s decision=%s", approval_id, decision)
    # The tool, which the owner recognises, not only the id they never typed.
    request[SESSION].flash = f"{rec.tool} ({approval_id}): {answer}" if rec is not None else f"{approval_id}: {answer}"
    return see_other(f"{PREFIX}/approvals")


async def automation(request: web.Request) -> web.Response:
    """Pause, resume or delete through the automation service, so the row and the job change together."""
    service = gateway_of(request).services["automations"]
    automation_id, op = request.match_info["automation_id"], request.match_info["op"]
    rec = await service.repo.get(automation_id)
    try:
        if rec is None:
            raise AutomationError(f"no automation {automation_id}")
        if op == "delete":
            await service.admin_delete(automation_id, actor=ACTOR)
            answer = f"Deleted {rec.name!r}."
        else:
            await service.update(rec.user_key, automation_id, enabled=op == "resume", actor=ACTOR)
            answer = f"{'Resumed' if op == 'resume' else 'Paused'} {rec.name!r}."
    except AutomationError as exc:
        answer = str(exc)
    log.info("dashboard_automation id=%s op=%s", automation_id, op)
    request[SESSION].flash = answer
    return see_other(f"{PREFIX}/automations")


async def pairing(request: web.Request) -> web.Response:
    """Admit or ignore someone asking to pair, as `anyy pairing approve` (the dashboard user is the owner)."""
    gw = gateway_of(request)
    surface, code = request.match_info["surface"], request.match_info["code"]
    decision = await gw.access.settle_pairing(surface, code, admit=request.match_info["op"] == "admit", by=ACTOR)
    await decision.deliver(gw.outbox)
    request[SESSION].flash = decision.answer
    back = (await request.post()).get("back")
    return see_other(f"{PREFIX}/" if back == "home" else f"{PREFIX}/pairing")  # the page the button was on


async def logout(request: web.Request) -> web.Response:
    """End this browser's session; the login link from `anyy dashboard url` starts a new one."""
    request.app[SESSIONS].end(request.cookies.get(COOKIE))
    response = web.Response(text="Logged out. Run `anyy dashboard url` for a new login link.",
                            content_type="text/plain")
    response.del_cookie(COOKIE, path=PREFIX)
    log.info("dashboard_logout")
    return response


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_post(f"{PREFIX}/approvals/{{approval_id}}/decide", decide)
    router.add_post(f"{PREFIX}/automations/{{automation_id}}/{{op:pause|resume|delete}}", automation)
    router.add_post(f"{PREFIX}/pairing/{{surface:telegram|slack}}/{{code}}/{{op:admit|ignore}}", pairing)
    router.add_post(f"{PREFIX}/logout", logout)
