"""The file tools run the payload the owner approved through `@effect`, like every other effect: the
approval row holds the path, the file's hash and the exact new content, and Approve writes that content
only over that hash — no fresh plan (not even the session's read record is consulted again)."""

from __future__ import annotations

import json

import pytest

from store.approvals import Approvals
from store.file_reads import FileReads
from tests.support.host import call, pending

pytestmark = pytest.mark.usefixtures("fake_home")  # commands run for real: never in the real home


async def test_an_approved_patch_writes_its_stored_payload(start_console, make_config, model, tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "todo.md").write_text("buy milk\nbuy egs\n")
    host = await start_console(make_config(workspace={"root": str(ws)}))
    await call(host, model, "read_file", {"path": "todo.md"})
    await call(host, model, "patch", {"path": "todo.md", "old_text": "egs", "new_text": "eggs"})
    [rec] = await pending(host)
    payload = json.loads(rec.payload_json or "null")
    assert payload["path"] == str((ws / "todo.md").resolve()) and payload["content"] == "buy milk\nbuy eggs\n"
    assert rec.binding_sha256 is None  # the payload is the binding
    # What the session last read no longer matters: Approve does not plan again, it writes what was shown.
    await FileReads(host.gw.store).record("console:local", payload["path"], "0" * 64)
    await host.say(f"/approve {rec.id}")
    assert (ws / "todo.md").read_text() == "buy milk\nbuy eggs\n"
    assert (await Approvals(host.gw.store).get(rec.id)).state == "succeeded"


async def test_a_payload_whose_file_moved_on_writes_nothing(start_console, make_config, model, tmp_path) -> None:
    ws = tmp_path / "ws"
    host = await start_console(make_config(workspace={"root": str(ws)}))
    await call(host, model, "write_file", {"path": "new.md", "content": "mine\n"})
    [rec] = await pending(host)
    assert json.loads(rec.payload_json or "null")["sha256"] is None  # only where nothing exists
    (ws / "new.md").write_text("someone else's\n")
    out = await host.say(f"/approve {rec.id}")
    assert "appeared since" in out and (ws / "new.md").read_text() == "someone else's\n"
