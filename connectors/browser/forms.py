"""The form an action submits, as the owner is shown it and as it must still be when the action runs.

A click on a submit button (or Enter in a field) sends the element's form: to its target, with its
method, with every field, hidden ones included. The snapshot shows the visible fields (and an approved
`browser_type` changes them), but neither the hidden fields nor the target, and a page's script may
change those at any time, behind a button of the same name. So the approval prompt names the target and
the hidden fields, the payload stores them (`Form`), and the action runs only while the form still has
them (`Browser.act`). While it runs, the form submission it causes must match too (`Form.allows`): a
click handler that rewrites a hidden field or adds a field at the last moment sends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# `el`'s form as a submission by `el` (a submit button; or, when `submitting`, a field Enter submits
# from), or null when the action submits no form.
FORM_OF = """(el, submitting) => {
  const form = el.form;
  if (!form) return null;
  const button = (el.tagName === "BUTTON" && (el.getAttribute("type") || "submit").toLowerCase() === "submit")
    || (el.tagName === "INPUT" && ["submit", "image"].includes(el.type));
  if (!button && !submitting) return null;
  const by = button ? el : null;
  const action = by && by.hasAttribute("formaction") ? by.formAction : form.action;
  const method = ((by && by.getAttribute("formmethod")) || form.method || "get").toUpperCase();
  const hidden = [], names = [];
  for (const field of form.elements) {
    if (!field.name || field.disabled) continue;
    names.push(field.name);
    if (field.type === "hidden") hidden.push([field.name, field.value]);
  }
  return {action, method, hidden, names: [...new Set(names)].sort()};
}"""


@dataclass(frozen=True)
class Form:
    """Where a form goes, how, with which hidden fields, and the names of all its fields."""

    action: str
    method: str
    hidden: tuple[tuple[str, str], ...]
    names: tuple[str, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Form:
        return cls(str(data["action"]), str(data["method"]), tuple((str(k), str(v)) for k, v in data["hidden"]),
                   tuple(str(n) for n in data["names"]))

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "method": self.method, "hidden": [list(p) for p in self.hidden],
                "names": list(self.names)}

    def describe(self) -> str:
        hidden = ", ".join(f"{k}={v}" for k, v in self.hidden) if self.hidden else "none"
        return f"sends a form ({self.method}) to {self.action}; hidden fields: {hidden}"

    def allows(self, url: str, method: str, content_type: str, body: bytes | None) -> bool:
        """Whether a form submission request is this form: its target and method, no field it did not
        have, and its hidden fields' values."""
        pairs: list[tuple[str, str]] | None
        if method.upper() == "GET":
            parts = urlsplit(url)
            if url.split("?", 1)[0] != self.action.split("?", 1)[0].split("#", 1)[0]:
                return False
            pairs = parse_qsl(parts.query, keep_blank_values=True)
        elif url != self.action or method.upper() != self.method:
            return False
        else:
            pairs = _fields(content_type, body or b"")
        if pairs is None:
            return False
        sent: dict[str, list[str]] = {}
        for name, value in pairs:
            sent.setdefault(name, []).append(value)
        approved: dict[str, list[str]] = {}
        for name, value in self.hidden:
            approved.setdefault(name, []).append(value)
        return set(sent) <= set(self.names) and all(sent.get(n) == v for n, v in approved.items())


def _fields(content_type: str, body: bytes) -> list[tuple[str, str]] | None:
    """A form body's fields (urlencoded or multipart; a file is its file name), None when unreadable."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True)
    if kind == "multipart/form-data":
        message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
        fields = []
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                return None
            filename = part.get_filename()
            payload = part.get_payload(decode=True)
            raw = payload if isinstance(payload, bytes) else b""
            fields.append((name, filename if filename is not None else raw.decode("utf-8", "replace")))
        return fields
    return None  # text/plain and anything else: not readable as fields, so not the approved form
