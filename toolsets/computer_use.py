"""The computer_use toolset: one tool, `computer_use`, that sees and drives an X display.

Its shape is the widely used computer-use tool's (an `action` plus `coordinate`, `text`, `key`,
`direction`, `amount`), so models already know it. `screenshot`, `cursor_position` and `wait` read the
screen and run at once (audited); the screen is outside content, like a web page. Every other action is
held for the owner: the preview names the action, the point and the text or keys (control characters
shown visibly) and sends the current screen with the point marked; the approval stores the exact action
in screen pixels (`Preview.payload`) and Approve runs that, once (`@computer_use.effect`), refusing if the
screen changed size or the preview is older than `[computer_use] stale_after_s`.

Screenshots go to a vision model as PNG at the screen's own size when it fits 1280x800, otherwise
scaled down to fit (still PNG: text on screen must stay legible); coordinates are always in the
screenshot's pixels and mapped back to the screen by the same factor. Without vision the model gets the
screenshot's artifact path. The driver (connectors.desktop) knows nothing of tools.
"""

from __future__ import annotations

import asyncio
import base64
import io
import unicodedata
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from connectors.desktop import Desktop, DesktopError, Direction, Shot, fit_scale
from store.artifacts import ArtifactLimit, Artifacts
from store.records import ArtifactRecord, Attachment, iso, parse_iso, utcnow
from toolsets.base import ApprovalPolicy, ExecutionPolicy, Preview, Risk, ToolContext, ToolError, Toolset, configured

TOOLSET = Toolset(
    "computer_use",
    "the owner's computer screen (an X display): look at it, click, type, press keys, scroll; each action "
    "waits for the owner's approval",
    keywords=(
        r"\b(?:my|the|your|this) (?:screen|desktop|display|monitor)\b", r"\bon (?:the )?screen\b",
        r"\b(?:take|grab|make) an? screen ?shot\b", r"\bscreen ?shot (?:of )?(?:my|the) (?:screen|desktop)\b",
        r"\b(?:double[- ]?|right[- ]?|left[- ]?)?click(?:s|ed|ing)?\b", r"\bmouse\b", r"\bcursor\b", r"\bpointer\b",
        r"\bscroll(?:s|ed|ing)? (?:up|down|left|right)\b", r"\bkeyboard\b", r"\bkeystrokes?\b",
        r"\bpress (?:the )?(?:enter|return|escape|esc|tab|space|backspace|ctrl|alt|shift|f\d{1,2})\b",
        r"\b(?:gui|xvfb|x11|vnc)\b", r"\b(?:app|application|program)(?:'s)? window\b", r"\bcomputer use\b",
        r"\btype\b[^.?!\n]{0,40}?\bin(?:to)? (?:the |a |my |that )?(?:[\w-]+ )?(?:field|box|form|entry|bar|window"
        r"|app)\b", r"\b(?:ctrl|alt|shift|super|cmd) ?\+ ?\w",
        r"屏幕", r"截屏", r"截个屏", r"截图看看", r"点击", r"点一下", r"双击", r"右键", r"鼠标", r"光标",
        r"桌面", r"键盘", r"按回车", r"滚动", r"往下翻", r"窗口", r"按钮", r"输入框",
    ),
    requires="computer_use",
    owners_only=True,  # it drives the owner's screen: never a guest's, whatever [access] guest_toolsets says
)

SHOWN_WIDTH, SHOWN_HEIGHT = 1280, 800  # the largest screenshot a model is shown; larger screens are scaled
MAX_TEXT = 1000
MAX_WAIT_S = 10
KEY_NAMES = r"^[A-Za-z0-9_]+(?:\+[A-Za-z0-9_]+)*(?: [A-Za-z0-9_]+(?:\+[A-Za-z0-9_]+)*)*$"
READS = frozenset({"screenshot", "cursor_position", "wait"})
POINTED = frozenset({"mouse_move", "left_click", "right_click", "double_click"})

Action = Literal["screenshot", "cursor_position", "mouse_move", "left_click", "right_click", "double_click",
                 "type", "key", "scroll", "wait"]
Coordinate = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]


@dataclass
class ComputerUse:
    """The "computer_use" service: the display's driver and how long an approval's preview stays valid."""

    desktop: Desktop
    stale_after_s: float = 900.0

    async def aclose(self) -> None:
        await self.desktop.aclose()


def _service(ctx: ToolContext) -> ComputerUse:
    found: ComputerUse = configured(ctx, "computer_use", "computer use ([computer_use] enabled)")
    return found


@TOOLSET.tool(risk=Risk.RUNTIME_HIGH, approval=ApprovalPolicy.HOOK, execution=ExecutionPolicy.CONFIRM,
              visible_chars=2000)
async def computer_use(ctx: ToolContext, action: Action, coordinate: Coordinate | None = None,
                       text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT)] | None = None,
                       key: Annotated[str, Field(max_length=200, pattern=KEY_NAMES)] | None = None,
                       direction: Direction | None = None,
                       amount: Annotated[int, Field(ge=1, le=30)] | None = None) -> str:
    """Use the owner's computer screen: look at it, move the mouse, click, type, press keys, scroll.
    Take a screenshot first and give coordinates in its pixels. screenshot, cursor_position and wait run
    at once; every other action waits for the owner's approval and its result arrives later.

    Args:
        action: screenshot | cursor_position | mouse_move, left_click, right_click, double_click (at
            coordinate) | type (text, into the focused field; a newline presses Return) | key (key) |
            scroll (direction, amount clicks, at coordinate or where the pointer is) | wait (amount
            seconds, at most 10, then a screenshot).
        coordinate: [x, y] in pixels of the screenshot, from its top left corner.
        text: what to type, for type.
        key: xdotool key names for key, e.g. "Return", "ctrl+a", "alt+F4"; several separated by spaces.
        direction: up | down | left | right, for scroll.
        amount: wheel clicks for scroll (default 3); seconds for wait (default 1).
    """
    service = _service(ctx)
    if action == "screenshot":
        return await _screenshot(ctx, service.desktop)
    if action == "cursor_position":
        x, y = await _read(service.desktop.cursor())
        width, height = await _read(service.desktop.size())
        scale = fit_scale(width, height, SHOWN_WIDTH, SHOWN_HEIGHT)
        return f"cursor at x={round(x * scale)}, y={round(y * scale)} (screenshot pixels)"
    if action == "wait":
        if (amount or 1) > MAX_WAIT_S:
            raise ToolError(f"wait at most {MAX_WAIT_S} seconds at a time")
        await asyncio.sleep(amount or 1)
        return await _screenshot(ctx, service.desktop)
    plan = await _plan(service.desktop, action, coordinate, text, key, direction, amount)
    return await _act(ctx, None, plan)


@computer_use.call_policy
def _policy(ctx: ToolContext, args: Any) -> ExecutionPolicy:
    # Reading the screen changes nothing: it runs at once (audited). Anything else is the owner's to approve.
    return ExecutionPolicy.AUDIT if args.action in READS else ExecutionPolicy.CONFIRM


@computer_use.preview
async def _preview(ctx: ToolContext, args: BaseModel) -> Preview:
    service = _service(ctx)
    a: Any = args
    plan = await _plan(service.desktop, a.action, a.coordinate, a.text, a.key, a.direction, a.amount)
    await _send_screen(ctx, service.desktop, plan)
    return Preview(text=describe(plan), payload=plan)


@computer_use.effect
async def _act(ctx: ToolContext, args: BaseModel | None, plan: dict[str, Any]) -> str:
    """Perform exactly the planned action, or refuse having done nothing."""
    service = _service(ctx)
    desktop = service.desktop
    if plan["display"] != desktop.display:
        raise ToolError(f"this action was for display {plan['display']}, now {desktop.display} is used; nothing "
                        "was done")
    age = utcnow() - parse_iso(plan["planned_at"])
    if age > timedelta(seconds=service.stale_after_s):
        raise ToolError(f"approved {int(age.total_seconds())} s after its screenshot, more than the "
                        f"{service.stale_after_s:g} s allowed ([computer_use] stale_after_s): the screen may have "
                        "changed. Nothing was done; take a new screenshot and ask again.")
    size = list(await _read(desktop.size()))
    if size != plan["screen"]:
        raise ToolError(f"the screen is {size[0]}x{size[1]} now, not {plan['screen'][0]}x{plan['screen'][1]} as when "
                        "this was shown; nothing was done. Take a new screenshot.")
    action, at = plan["action"], plan["at"]
    if action == "mouse_move":
        await _read(desktop.move(*at))
    elif action in ("left_click", "right_click", "double_click"):
        x, y = at  # a click's plan always has its point (`_plan` requires the coordinate)
        await _read(desktop.click(x, y, button="right" if action == "right_click" else "left",
                                  count=2 if action == "double_click" else 1))
    elif action == "type":
        await _read(desktop.type(plan["text"]))
    elif action == "key":
        await _read(desktop.key(plan["key"]))
    else:
        await _read(desktop.scroll(plan["direction"], plan["amount"], tuple(at) if at else None))
    return f"done: {describe(plan).splitlines()[0]}. Take a screenshot to see the result."


async def _read(step: Any) -> Any:
    """Await a driver call; its failure is a tool error the model can read."""
    try:
        return await step
    except DesktopError as exc:
        raise ToolError(str(exc)) from None


async def _plan(desktop: Desktop, action: str, coordinate: list[int] | None, text: str | None,
                key: str | None, direction: str | None, amount: int | None) -> dict[str, Any]:
    """The exact action in screen pixels, checked against the screen as it is now."""
    given = {"coordinate": coordinate, "text": text, "key": key, "direction": direction, "amount": amount}
    allowed = {"type": {"text"}, "key": {"key"}, "scroll": {"direction", "amount", "coordinate"}}.get(
        action, {"coordinate"})
    extra = sorted(k for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        raise ToolError(f"{action} takes no {' or '.join(extra)}")
    needed = {"type": "text", "key": "key", "scroll": "direction"}.get(action, "coordinate")
    if given[needed] is None:
        raise ToolError(f"{action} needs {needed}")
    width, height = await _read(desktop.size())
    scale = fit_scale(width, height, SHOWN_WIDTH, SHOWN_HEIGHT)
    at = None
    if coordinate is not None:
        shown = (round(width * scale), round(height * scale))
        x, y = coordinate
        if x >= shown[0] or y >= shown[1]:
            raise ToolError(f"coordinate [{x}, {y}] is outside the screen: x must be 0..{shown[0] - 1} and y "
                            f"0..{shown[1] - 1} (screenshot pixels)")
        at = [min(width - 1, round(x / scale)), min(height - 1, round(y / scale))]
    return {"action": action, "display": desktop.display, "screen": [width, height], "scale": scale,
            "coordinate": coordinate, "at": at, "text": text, "key": key, "direction": direction,
            "amount": (amount or 3) if action == "scroll" else None, "planned_at": iso(utcnow())}


def describe(plan: dict[str, Any]) -> str:
    """What the owner reads: the action, where, and exactly what it types or presses."""
    action, at = plan["action"], plan["at"]
    where = ""
    if at is not None:
        x, y = plan["coordinate"]
        where = f" at ({x}, {y})" + (f" = screen pixel ({at[0]}, {at[1]})" if plan["scale"] < 1 else "")
    head = {"type": f"type {len(plan['text'] or '')} character(s)", "key": "press keys",
            "scroll": f"scroll {plan['direction']} {plan['amount']} click(s)"}.get(action, action.replace("_", " "))
    lines = [f"{head}{where} on display {plan['display']}"]
    if action == "type":
        lines.append(f"text: “{visible(plan['text'])}”")
    elif action == "key":
        lines.append(f"keys: {plan['key']}")
    return "\n".join(lines)


def visible(text: str) -> str:
    """`text` with every control, format and separator character written out (a newline as ⏎\\n, a tab
    as \\t, a bidi override as \\u202e), so nothing typed is hidden from the owner."""
    out = []
    for ch in text:
        if ch == "\n":
            out.append("⏎\\n")
        elif ch == "\t":
            out.append("\\t")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cn"):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


async def _screenshot(ctx: ToolContext, desktop: Desktop) -> str:
    shot = await _read(desktop.screenshot(SHOWN_WIDTH, SHOWN_HEIGHT))
    rec = await _keep(ctx, shot.png, "screen.png", shot)
    facts = f"screenshot of display {desktop.display}: {shot.width}x{shot.height} pixels"
    if shot.scale < 1:
        facts += (f", the screen scaled by {shot.scale:.4g} (give coordinates in the screenshot's pixels; they "
                  "are mapped back to the screen)")
    # The screen shows whatever an app, a page or a message put there: information, never instructions.
    note = ctx.external(f"screen of display {desktop.display}", "What the screenshot shows came from outside.")
    vision = ctx.service("vision")
    if vision is None:
        return f"{facts}; saved as artifact {rec.id} at {rec.path} (this model cannot see images)\n{note}"
    ctx.show_image({"mime_type": "image/png", "data": base64.b64encode(shot.png).decode("ascii"),
                    "name": rec.name, "artifact": rec.id})
    return f"{facts}; the image follows this result\n{note}"


async def _keep(ctx: ToolContext, data: bytes, name: str, shot: Shot) -> ArtifactRecord:
    artifacts: Artifacts = configured(ctx, "artifacts", "artifacts")
    try:
        return await artifacts.add_bytes(data, session_id=ctx.session_id, user_key=ctx.user_key, name=name,
                                         mime_type="image/png",
                                         meta={"width": shot.width, "height": shot.height, "scale": shot.scale})
    except ArtifactLimit as exc:
        raise ToolError(str(exc)) from None


async def _send_screen(ctx: ToolContext, desktop: Desktop, plan: dict[str, Any]) -> None:
    """The owner sees the screen the action is planned on, the point marked, beside the prompt."""
    shot = await _read(desktop.screenshot(SHOWN_WIDTH, SHOWN_HEIGHT))
    png = shot.png if plan["coordinate"] is None else await asyncio.to_thread(_mark, shot.png, plan["coordinate"])
    rec = await _keep(ctx, png, "screen-before.png", shot)
    caption = f"The screen now; {plan['action'].replace('_', ' ')} is waiting for your approval" + (
        " at the red mark." if plan["coordinate"] is not None else ".")
    await ctx.send(caption, attachment=Attachment(name=rec.name, mime_type=rec.type, size=rec.size, path=rec.path))


def _mark(png: bytes, point: list[int]) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(img)
    x, y = point
    for radius, width in ((14, 3), (3, 3)):
        draw.ellipse((x - radius, y - radius, x + radius, y + radius), outline=(255, 0, 0), width=width)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()
