"""Issue 27: `[store] url` / `password_env` in the config, and `anyy doctor`'s database line."""

from __future__ import annotations

import argparse

import pytest

from gateway.cli.doctor import doctor
from gateway.config import ConfigError, parse_config
from store.claims import Claims
from tests.support.postgres import PW_PASSWORD, PW_USER


def test_a_store_url_must_be_postgresql():
    with pytest.raises(ConfigError, match="postgresql://"):
        parse_config({"store": {"url": "mysql://u@h/db"}}, "test")
    assert parse_config({}, "test").new_store().dialect == "sqlite"  # no url: the SQLite file as before


def test_a_password_in_the_url_is_never_shown():
    store = parse_config({"store": {"url": f"postgresql://{PW_USER}:{PW_PASSWORD}@127.0.0.1:1/db"}}, "test").new_store()
    assert PW_PASSWORD not in store.where and store.where == f"postgresql://{PW_USER}:***@127.0.0.1:1/db"


async def test_doctor_says_the_database_is_reachable_migrated_and_who_polls(pg_cluster, tmp_path, capsys):
    url = pg_cluster.url(pg_cluster.database())
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db"), "url": url}}, "test")
    store = await cfg.new_store(owner="host-b/4242/1").open()
    try:
        assert await Claims(store).take("poll:telegram") is None
        await doctor(cfg, argparse.Namespace())
    finally:
        await store.close()
    line = next(x for x in capsys.readouterr().out.splitlines() if " store: " in x)
    where = url.split("@", 1)[1]  # doctor redacts any user name in a URL too
    assert line.startswith("✓") and "postgresql postgresql://" in line and f"{where}: reachable, migrated" in line
    assert "telegram polled by host-b/4242/1" in line


async def test_doctor_names_an_unreachable_database(tmp_path, capsys):
    cfg = parse_config({"store": {"path": str(tmp_path / "anyy.db"),
                                  "url": f"postgresql://{PW_USER}:{PW_PASSWORD}@127.0.0.1:9/db"}}, "test")
    await doctor(cfg, argparse.Namespace())
    line = next(x for x in capsys.readouterr().out.splitlines() if " store: " in x)
    assert line.startswith("✗") and "check that the server is up" in line and PW_PASSWORD not in line
