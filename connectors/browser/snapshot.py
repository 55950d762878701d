"""A page as text for a model: Playwright's AI-mode ARIA snapshot, trimmed, each actionable element
keeping its `[ref=eN]`.

Playwright's snapshot (`page.aria_snapshot(mode="ai")`) is YAML-like: one line per node, `- role "name"
[attributes] [ref=e7]: text`, children indented below. Refs are stable while the element lives, so a
ref printed now names the same element later (or none, once the page changed). Only elements one can
act on (links, buttons, form fields, options, tabs, ...) keep their refs; wrapper nodes without a name or
text are dropped, and the result is cut at a character budget.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

ACTIONABLE = frozenset({
    "link", "button", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option", "menuitem",
    "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "treeitem",
})
TYPABLE = frozenset({"textbox", "searchbox", "combobox", "spinbutton"})

_NODE = re.compile(r'^(?P<indent>\s*)- (?P<role>[a-z]+)(?: (?P<name>"(?:[^"\\]|\\.)*"))?(?P<rest>.*)$')
_REF = re.compile(r" \[ref=(?P<ref>[a-z0-9]+)\]")
_NOISE = re.compile(r" \[(?:cursor=pointer|active)\]")
# A node YAML had to quote (its name holds ": " or similar): `- 'link "a: b" [ref=e3]'`.
_QUOTED = re.compile(r"^(?P<indent>\s*)- '(?P<inner>(?:[^']|'')*)'(?P<rest>.*)$")
_BARE_WRAPPER = re.compile(r"^\s*- (?:generic|group|none|presentation)(?: \[[^\]]*\])*:?$")


@dataclass(frozen=True)
class Element:
    """An actionable element as the snapshot printed it."""

    ref: str
    role: str
    name: str

    def describe(self) -> str:
        return f'{self.role} "{self.name}"' if self.name else self.role


@dataclass(frozen=True)
class Snapshot:
    text: str  # what the model reads
    elements: dict[str, Element]  # ref -> element, for every ref in `text`
    chars_total: int  # length before the cut

    @property
    def truncated(self) -> bool:
        return self.chars_total > len(self.text)


def _name(quoted: str | None) -> str:
    if not quoted:
        return ""
    try:
        return str(json.loads(quoted))
    except json.JSONDecodeError:
        return quoted[1:-1]


def parse(raw: str, max_chars: int) -> Snapshot:
    """The trimmed snapshot of a raw AI-mode ARIA snapshot, cut at `max_chars`."""
    lines: list[str] = []
    elements: dict[str, Element] = {}
    for line in raw.splitlines():
        quoted = _QUOTED.match(line)
        if quoted:
            line = quoted["indent"] + "- " + quoted["inner"].replace("''", "'") + quoted["rest"]
        if _BARE_WRAPPER.match(_REF.sub("", line)):
            continue
        line = _NOISE.sub("", line)
        node = _NODE.match(line)
        found = _REF.search(line)
        if node and found:
            role = node.group("role")
            if role in ACTIONABLE:
                ref = found.group("ref")
                elements[ref] = Element(ref, role, _name(node.group("name")))
            else:
                line = _REF.sub("", line)
        lines.append(line)
    text = "\n".join(lines)
    total = len(text)
    if total > max_chars:
        text = text[:max_chars].rsplit("\n", 1)[0]
    shown = {ref: el for ref, el in elements.items() if f"[ref={ref}]" in text}
    return Snapshot(text=text, elements=shown, chars_total=total)
