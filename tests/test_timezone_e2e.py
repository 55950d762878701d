"""The owner's zone without `[runtime] timezone`: the system's ($TZ here), named wherever a time is shown."""

from __future__ import annotations

import re

from tests.support.cli import anyy, model_config


async def test_without_a_configured_zone_the_system_zone_is_used_and_shown(tmp_path, home, model):
    env = {**home, "TZ": "Asia/Tokyo"}
    cfg = model_config(tmp_path, model)
    code, out, err = await anyy("chat", "--config", cfg, env=env, stdin="/remind tomorrow 9:00 standup\n")
    assert code == 0, err
    assert re.search(r"set for \w{3} \d+ \w{3} 09:00 JST: standup", out), out
    code, out, _ = await anyy("automations", "list", "--config", cfg, env=env)
    assert code == 0 and re.search(r"next \d{4}-\d\d-\d\d 09:00 JST  standup", out), out
    _, out, _ = await anyy("doctor", "--config", cfg, env=env)
    assert "✓ time zone: Asia/Tokyo, from the system's zone ($TZ)" in out, out


async def test_a_configured_zone_wins_over_the_system(tmp_path, home, model):
    cfg = model_config(tmp_path, model)
    with open(cfg, "a") as f:
        f.write('[runtime]\ntimezone = "America/New_York"\n')
    _, out, _ = await anyy("doctor", "--config", cfg, env={**home, "TZ": "Asia/Tokyo"})
    assert "✓ time zone: America/New_York, from [runtime] timezone" in out, out
