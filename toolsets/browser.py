"""The browser toolset: a real Chromium the model drives over an accessibility snapshot with refs.

Reading (navigate, snapshot, scroll, back, screenshot) runs directly; what it returns is the page's
content, inside an untrusted block naming the page (`ctx.external("browser:<url>", ...)`), so a turn
that has read a page cannot then write memory or automations without the owner. Acting on the page
(click, type, press) is held for the owner by default: the preview names the full page URL, the
element (role and name) and the text, and Approve runs exactly that stored action once, only while the
page is still at that URL and the ref still names that element (`connectors.browser.Browser.act`).
`[browser] trusted_hosts` lets actions on pages of those hosts run audited instead.

Owners only: the browser carries the owner's cookies, so no guest's turn is offered it (`owners_only`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

from connectors.web.hosts import HostRules
from store.artifacts import ArtifactLimit, Artifacts
from toolsets.base import ExecutionPolicy, Preview, Risk, ToolContext, ToolError, Toolset, configured

# The driver is the "browser" service's (absent unless [browser] is enabled): its module is imported by
# the handlers that use it, so registering the toolset does not load it.
if TYPE_CHECKING:
    from connectors.browser import Browser, PageState

TOOLSET = Toolset(
    "browser",
    "a real browser: pages that need JavaScript, forms, clicks, screenshots",
    keywords=(
        # A click, a scroll or a button alone may be on the desktop (computer_use): here only with a page near.
        r"\bbrowser\b", r"\bclick(?:s|ing)?\b(?=[^.?!\n]{0,50}\b(?:page|site|website|link|tab)s?\b)",
        r"\b(?:page|site|website|link)s?\b[^.?!\n]{0,40}\bclick",
        r"\bbutton on (?:the|that|this) (?:web ?)?(?:page|site)\b",
        r"\b(?:press|tap|hit|push)(?:es|ing)? (?:on )?(?:the|that|this) [\w' -]{0,20}button(?![^.?!\n]{0,30}\b(?:window"
        r"|dialog|app|desktop|screen)\b)",
        r"\bscroll(?:ing)? (?:down|up|through) (?:the |that |this )?(?:web ?)?page\b",
        r"\bscreenshots? of (?:the|this|that) (?:web ?)?(?:page|site)\b", r"\bscreenshot of the page\b",
        r"\b(?:fill|filling) (?:in|out)\b(?![^.?!\n]{0,30}\b(?:window|dialog|app)\b)",
        r"\b(?:web ?)?forms?\b(?=[^.?!\n]{0,40}\b(?:on|at|page|site)\b)",
        r"\b(?:log|sign) (?:me )?in(?:to)? (?:on |to )?(?:the |my )?(?:site|page|website|account)\b",
        r"\bcheck (?:me )?in online\b", r"\bcheck-in page\b",
        r"浏览器", r"(?:页面|网页|网站|链接)[^。！？\n]{0,12}(?:点(?:一下|击)|按钮)",
        r"点(?:一下|击)[^。！？\n]{0,12}(?:页面|网页|网站|链接)",
        r"填(?:一下|写)?[^。！？\n]{0,8}表单?", r"网页截图",
    ),
    requires="browser",
    owners_only=True,
)

Ref = Annotated[str, Field(min_length=1, max_length=40)]


@dataclass(frozen=True)
class BrowserPolicy:
    """The "browser_policy" service: hosts whose pages may be acted on audited instead of held."""

    trusted_hosts: tuple[str, ...] = ()

    def trusts(self, url: str | None) -> bool:
        if not url or not self.trusted_hosts:
            return False
        host = (urlsplit(url).hostname or "").lower()
        return bool(host) and HostRules(allowed=self.trusted_hosts).refusal(host) is None


def _browser(ctx: ToolContext) -> Browser:
    return configured(ctx, "browser", "the browser ([browser] enabled)")


def _ref(raw: str) -> str:
    """A ref as the snapshot prints it (`[ref=e7]`), or written `e7`, `@e7`, `ref=e7`."""
    return raw.strip().removeprefix("[").removesuffix("]").removeprefix("ref=").removeprefix("@")


def _page(ctx: ToolContext, state: PageState, body: str, notes: list[str] | None = None) -> str:
    """The page's content inside its untrusted block, our own notes outside it."""
    inner = f"Title: {state.title}\nURL: {state.url}\n\n{body}"
    if state.refused:
        refused = "\n".join(f"- {r.describe()}" for r in state.refused[:10])
        inner += "\n\nRefused requests of this page:\n" + refused
    notes = list(notes or [])
    if sent := [r for r in state.refused if r.sent]:
        notes.append(f"this page tried to send something {len(sent)} time(s) while being read (e.g. "
                     f"{sent[0].describe()}); a read sends nothing, only an approved click, type or press may")
    if guarded := len(state.refused) - len(sent):
        notes.append(f"{guarded} request(s) of this page were refused by the network guard")
    block = ctx.external(f"browser:{state.url}", inner)
    return block + (f"\n[{'; '.join(notes)}]" if notes else "")


async def _view(ctx: ToolContext, state: PageState | None = None) -> str:
    """The page's snapshot now, with what was refused since the page began loading (the status of the
    navigation `state` that led here)."""
    from connectors.browser import PageState

    now, snap = await _call(_browser(ctx).snapshot(ctx.user_key))
    if state is not None:
        now = PageState(url=now.url, title=now.title, status=state.status,
                        refused=now.refused + [r for r in state.refused if r not in now.refused])
    notes = [f"snapshot cut at {len(snap.text)} of {snap.chars_total} characters"] if snap.truncated else []
    return _page(ctx, now, snap.text or "(the page shows nothing)", notes)


async def _call(coro: Any) -> Any:
    """Await a browser operation; its BrowserError becomes the ToolError the model reads."""
    from connectors.browser import BrowserError

    try:
        return await coro
    except BrowserError as exc:
        raise ToolError(str(exc)) from None


@TOOLSET.tool(risk=Risk.READ, visible_chars=12_000)
async def browser_navigate(ctx: ToolContext, url: Annotated[str, Field(min_length=8, max_length=2048)]) -> str:
    """Open a web page in the browser (runs its JavaScript) and return it as a snapshot: title, URL,
    headings, text, links, form fields and buttons, each element one can act on with a ref like
    [ref=e7]. Private and internal network addresses are refused.

    Args:
        url: The page's full URL, starting with http:// or https://.
    """
    state = await _call(_browser(ctx).navigate(ctx.user_key, url))
    return await _view(ctx, state)


@TOOLSET.tool(risk=Risk.READ, visible_chars=12_000)
async def browser_snapshot(ctx: ToolContext) -> str:
    """The open page as it is now (after JavaScript changed it, or after an action), with element refs."""
    return await _view(ctx)


@TOOLSET.tool(risk=Risk.READ, visible_chars=12_000)
async def browser_scroll(ctx: ToolContext, direction: Literal["down", "up", "top", "bottom"] = "down") -> str:
    """Scroll the open page and return the new snapshot.

    Args:
        direction: "down" or "up" by one screen, or to the "top" / "bottom" of the page.
    """
    await _call(_browser(ctx).scroll(ctx.user_key, direction))
    return await _view(ctx)


@TOOLSET.tool(risk=Risk.READ, visible_chars=12_000)
async def browser_back(ctx: ToolContext) -> str:
    """Go back to the previous page (like the browser's Back button) and return its snapshot."""
    state = await _call(_browser(ctx).back(ctx.user_key))
    return await _view(ctx, state)


@TOOLSET.tool(risk=Risk.READ, requires="artifacts")
async def browser_screenshot(ctx: ToolContext) -> dict[str, Any]:
    """A PNG screenshot of the open page, saved as an artifact (artifact_list shows it); shown to you
    when you can see images."""
    state, png = await _call(_browser(ctx).screenshot(ctx.user_key))
    artifacts: Artifacts = configured(ctx, "artifacts", "artifacts")
    try:
        rec = await artifacts.add_bytes(png, session_id=ctx.session_id, user_key=ctx.user_key, name="screenshot.png",
                                        mime_type="image/png", meta={"url": state.url})
    except ArtifactLimit as exc:
        raise ToolError(str(exc)) from None
    out: dict[str, Any] = {"artifact": rec.id, "bytes": rec.size,
                           "page": ctx.external(f"browser:{state.url}", f"Screenshot of {state.title} ({state.url})")}
    vision = ctx.service("vision")
    if vision is not None:
        from connectors.images import image_part

        part = await image_part(Path(rec.path), rec.name, rec.id, vision.max_side, vision.max_bytes)
        if isinstance(part, dict):
            ctx.show_image(part)
            out["note"] = "the screenshot follows this result"
    return out


# -- actions: held for the owner unless the page's host is trusted -------------------------------------

def _policy(ctx: ToolContext, args: BaseModel) -> ExecutionPolicy:
    policy: BrowserPolicy | None = ctx.service("browser_policy")
    browser: Browser | None = ctx.service("browser")
    url = browser.current_url(ctx.user_key) if browser is not None else None
    return ExecutionPolicy.AUDIT if policy is not None and policy.trusts(url) else ExecutionPolicy.CONFIRM


async def _payload(ctx: ToolContext, action: str, ref: str | None, text: str = "",
                   submit: bool = False) -> dict[str, Any]:
    """The action exactly as it will run: the page URL now, the element the ref names now, the text."""
    from connectors.browser import TYPABLE

    browser = _browser(ctx)
    url = browser.current_url(ctx.user_key)
    if url is None:
        raise ToolError("no page is open in the browser; call browser_navigate first")
    payload: dict[str, Any] = {"action": action, "url": url, "text": text, "submit": submit}
    if ref is not None:
        element = await _call(browser.element(ctx.user_key, _ref(ref)))
        if action == "type" and element.role not in TYPABLE:
            raise ToolError(f"{element.ref} is a {element.role}, not a text field; type into a textbox")
        payload |= {"ref": element.ref, "role": element.role, "name": element.name}
    # The form it submits (a key press: the focused field's), target and hidden fields included: shown to
    # the owner, and bound.
    if action in ("click", "press") or submit:
        form = await _call(browser.form(ctx.user_key, payload.get("ref"), submit or action == "press"))
        if form is not None:
            payload["form"] = form.to_json()
    return payload


def _describe(payload: dict[str, Any]) -> str:
    element = f'{payload["role"]} "{payload["name"]}" ({payload["ref"]})' if "ref" in payload else ""
    if payload["action"] == "click":
        what = f"Click {element}"
    elif payload["action"] == "type":
        what = f"Type into {element}: «{payload['text']}»" + (", then press Enter (this submits the form)"
                                                                  if payload["submit"] else " (nothing is submitted)")
    else:
        what = f"Press the key {payload['text']}"
    sends = ""
    if "form" in payload:
        from connectors.browser import Form

        sends = f"\nThis {Form.from_json(payload['form']).describe()}"
    return f"🌐 {what}\non the page {payload['url']}{sends}"


async def _preview(ctx: ToolContext, payload: dict[str, Any]) -> Preview:
    return Preview(text=_describe(payload), payload=payload)


async def _act(ctx: ToolContext, payload: dict[str, Any]) -> str:
    """Run the stored action on the page it was asked for, or refuse having done nothing."""
    from connectors.browser import Element, Form

    element = Element(payload["ref"], payload["role"], payload["name"]) if "ref" in payload else None
    form = Form.from_json(payload["form"]) if "form" in payload else None
    state = await _call(_browser(ctx).act(ctx.user_key, payload["url"], payload["action"], element,
                                          text=payload["text"], submit=payload["submit"], form=form))
    done = _describe(payload).removeprefix("🌐 ").split("\n")[0]
    moved = f" The page is now {state.url}." if state.url != payload["url"] else ""
    blocked = [r for r in state.refused if r.sent]
    guarded = len(state.refused) - len(blocked)
    refused = f" {guarded} request(s) were refused by the network guard." if guarded else ""
    refused += "".join(f" Blocked: {r.describe().removesuffix(': blocked')} ({r.reason})." for r in blocked[:3])
    if state.downloads_refused:
        refused += " The page tried to download a file; downloads are refused."
    return f"Done: {done}.{moved}{refused} Call browser_snapshot to read the page."


async def _direct(ctx: ToolContext, payload: dict[str, Any]) -> str:
    """A call that was not held (its page's host is trusted): check the host again, then act."""
    policy: BrowserPolicy | None = ctx.service("browser_policy")
    if policy is None or not policy.trusts(payload["url"]):
        raise ToolError("the page moved to a host that is not trusted while this was asked; call again")
    return await _act(ctx, payload)


@TOOLSET.tool(risk=Risk.RUNTIME_HIGH, execution=ExecutionPolicy.CONFIRM)
async def browser_click(ctx: ToolContext, ref: Ref) -> str:
    """Click an element of the open page (a link, button, checkbox...). Held for the owner's approval.

    Args:
        ref: The element's ref exactly as the last snapshot printed it, e.g. e7.
    """
    return await _direct(ctx, await _payload(ctx, "click", ref))


@TOOLSET.tool(risk=Risk.RUNTIME_HIGH, execution=ExecutionPolicy.CONFIRM)
async def browser_type(ctx: ToolContext, ref: Ref, text: Annotated[str, Field(max_length=5000)],
                       submit: bool = False) -> str:
    """Type text into a form field of the open page (replacing what it holds). Typing alone submits
    nothing; submit=true presses Enter afterwards. Held for the owner's approval.

    Args:
        ref: The text field's ref exactly as the last snapshot printed it, e.g. e3.
        text: What to type.
        submit: Press Enter after typing (usually submits the form).
    """
    return await _direct(ctx, await _payload(ctx, "type", ref, text, submit))


@TOOLSET.tool(risk=Risk.RUNTIME_HIGH, execution=ExecutionPolicy.CONFIRM)
async def browser_press(ctx: ToolContext, key: Annotated[str, Field(min_length=1, max_length=40,
                                                                    pattern=r"^[A-Za-z0-9+]+$")]) -> str:
    """Press a key on the open page, e.g. Enter, Escape, Tab, ArrowDown, PageDown, Control+a. Held for
    the owner's approval.

    Args:
        key: The key, as Playwright names it (Enter, Escape, Tab, ArrowDown, Control+a).
    """
    return await _direct(ctx, await _payload(ctx, "press", None, key))


# The three actions share one preview and one effect: each builds its payload from its own arguments.
for _tool, _build in ((browser_click, lambda a: ("click", a.ref, "", False)),
                      (browser_type, lambda a: ("type", a.ref, a.text, a.submit)),
                      (browser_press, lambda a: ("press", None, a.key, False))):
    _tool.call_policy(_policy)

    async def _preview_fn(ctx: ToolContext, args: BaseModel, _build: Any = _build) -> Preview:
        return await _preview(ctx, await _payload(ctx, *_build(args)))

    async def _effect_fn(ctx: ToolContext, args: BaseModel, payload: Any) -> str:
        return await _act(ctx, payload)

    _tool.preview(_preview_fn)
    _tool.effect(_effect_fn)
