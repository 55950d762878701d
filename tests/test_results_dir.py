"""Persisted tool outputs are private: the shared default directory is checked, files are 0600."""

import logging
import os
import stat
from pathlib import Path

import pytest

from gateway.turns import results
from toolsets.base import OutputBudget

BUDGET = OutputBudget(visible_chars=100, stored_chars=10_000)
OTHER_UID = 65534  # nobody


@pytest.fixture
def default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default directory, moved into this test's temporary directory."""
    monkeypatch.delenv("ANYY_TOOL_RESULTS_DIR", raising=False)
    monkeypatch.setattr(results, "DEFAULT_DIR", tmp_path / "anyy-results")
    monkeypatch.setattr(results, "_warned", set())
    return tmp_path / "anyy-results"


def persist(text: str = "secret " * 100) -> Path:
    out = results.apply_budget(text, BUDGET, call_id="c1", ok=True)
    path = Path(out.meta["persisted_output_path"])
    assert path.read_text() == text
    return path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_default_directory_is_created_0700_and_files_0600(default: Path) -> None:
    previous = os.umask(0o022)  # the usual umask, which leaves new files world-readable
    try:
        path = persist()
    finally:
        os.umask(previous)
    assert path.parent == default
    assert mode(default) == 0o700 and mode(path) == 0o600


@pytest.mark.parametrize("spoil", ["wide", "foreign", "symlink"])
def test_a_default_directory_that_is_not_private_is_refused_for_a_per_user_one(
        default: Path, tmp_path: Path, spoil: str, caplog: pytest.LogCaptureFixture) -> None:
    if spoil == "symlink":
        (tmp_path / "elsewhere").mkdir(mode=0o700)
        default.symlink_to(tmp_path / "elsewhere")
    else:
        default.mkdir(mode=0o700)
        if spoil == "wide":
            default.chmod(0o755)
        else:
            os.chown(default, OTHER_UID, OTHER_UID)
    with caplog.at_level(logging.WARNING, logger="gateway.turns.results"):
        path = persist()
    assert path.parent == tmp_path / f"anyy-results-{os.geteuid()}"
    assert mode(path.parent) == 0o700 and mode(path) == 0o600
    assert list(default.iterdir()) == []  # nothing written where another user can read or swap it
    assert f"results_dir_refused path={default}" in caplog.text


def test_when_the_per_user_directory_is_taken_too_a_fresh_private_one_is_used(default: Path, tmp_path: Path) -> None:
    default.mkdir(mode=0o777)
    default.chmod(0o777)
    per_user = tmp_path / f"anyy-results-{os.geteuid()}"
    per_user.mkdir()
    os.chown(per_user, OTHER_UID, OTHER_UID)
    path = persist()
    assert path.parent not in (default, per_user) and path.parent.name.startswith("anyy-results-")
    assert mode(path.parent) == 0o700 and mode(path) == 0o600
    path.unlink()
    path.parent.rmdir()


def test_an_existing_file_gets_0600_and_a_planted_symlink_is_not_followed(default: Path, tmp_path: Path) -> None:
    first = persist("same " * 100)
    first.chmod(0o644)
    assert persist("same " * 100) == first and mode(first) == 0o600
    first.unlink()
    target = tmp_path / "target"
    target.write_text("untouched")
    first.symlink_to(target)
    out = results.apply_budget("same " * 100, BUDGET, call_id="c1", ok=True)
    assert out.meta == {} and "could not be saved whole" in out.visible and out.visible.startswith("same same")
    assert target.read_text() == "untouched"


def test_the_environment_variable_still_wins(default: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = tmp_path / "mine" / "results"
    monkeypatch.setenv("ANYY_TOOL_RESULTS_DIR", str(chosen))
    path = persist()
    assert path.parent == chosen and mode(chosen) == 0o700 and mode(path) == 0o600
    assert not default.exists()
