"""A slash command with a typo gets "did you mean" and costs no model call; a path is still a message."""

from __future__ import annotations

import pytest

from gateway.turns.commands import edit_distance, nearest_command
from tests.support.cli import anyy, model_config


async def test_typos_are_answered_without_the_model(tmp_path, home, model):
    lines = "/aprove x\n/remnd 5m x\n/taks\n/etc/hosts is wrong\n"
    code, out, err = await anyy("chat", "--config", model_config(tmp_path, model), env=home, stdin=lines)
    assert code == 0, err
    assert out.splitlines() == [
        "There is no /aprove. Did you mean /approve? (/help lists the commands.)",
        "There is no /remnd. Did you mean /remind? (/help lists the commands.)",
        "There is no /taks. Did you mean /tasks? (/help lists the commands.)",
        "echo: /etc/hosts is wrong",
    ]
    assert [r.said[-1]["content"] for r in model.requests] == ["/etc/hosts is wrong"]


@pytest.mark.parametrize("name, near", [
    ("aprove", "approve"), ("remnd", "remind"), ("taks", "tasks"), ("hlep", "help"), ("reminder", "reminders"),
    ("no", None), ("x", None), ("etc/hosts", None), ("weather", None), ("usge", "usage"),
])
def test_nearest_command(name, near):
    known = ["approve", "remind", "reminders", "tasks", "help", "new", "usage", "tools"]
    assert nearest_command(name, known) == near


def test_edit_distance_counts_a_swap_as_one():
    assert edit_distance("taks", "task") == 1
    assert edit_distance("kitten", "sitting") == 3
