"""An allowlisted `git status|diff|log` runs at once, without approval, so a repository must not be able
to make it run a program: each vector a repository's config offers, in a real repository, through the
real gateway and the terminal toolset. A program that runs leaves a marker file; none may appear."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.host import call, pending


@pytest.fixture(autouse=True)
def fake_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return home


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def program(tmp_path: Path, name: str) -> Path:
    """A script that leaves `<tmp>/ran-<name>` when anything runs it, then passes its input through."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f'#!/bin/sh\ntouch "{tmp_path}/ran-{name}"\ncat "$@"\n')
    script.chmod(0o755)
    return script


def ran(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("ran-*"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The workspace is a repository with one signed-looking commit and a modified file (same size, new
    mtime: git must read its content, through any clean filter, to know whether it changed)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    git(ws, "config", "user.email", "o@example.test")
    git(ws, "config", "user.name", "Owner")
    (ws / "a.txt").write_text("one\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-qm", "first")
    tree, parent = git(ws, "rev-parse", "HEAD^{tree}").strip(), git(ws, "rev-parse", "HEAD").strip()
    body = (f"tree {tree}\nparent {parent}\nauthor O <o@example.test> 1700000000 +0000\n"
            "committer O <o@example.test> 1700000000 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEz\n"
            " -----END PGP SIGNATURE-----\n\nsigned\n")
    signed = subprocess.run(["git", "-C", str(ws), "hash-object", "-t", "commit", "-w", "--stdin"], input=body,
                            check=True, capture_output=True, text=True).stdout.strip()
    git(ws, "update-ref", "HEAD", signed)
    (ws / "a.txt").write_text("two\n")
    return ws


def _filter(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "filter.evil.clean", str(program(tmp_path, "clean")))
    git(repo, "config", "filter.evil.smudge", str(program(tmp_path, "smudge")))
    git(repo, "config", "filter.evil.required", "true")
    (repo / ".gitattributes").write_text("* filter=evil\n")


def _included_filter(repo: Path, tmp_path: Path) -> None:
    included = tmp_path / "included.cfg"
    included.write_text(f'[filter "inc"]\n\tclean = {program(tmp_path, "clean")}\n\tprocess = '
                        f'{program(tmp_path, "process")}\n')
    git(repo, "config", "include.path", str(included))
    (repo / ".git" / "info" / "attributes").write_text("* filter=inc\n")


def _conditional_include(repo: Path, tmp_path: Path) -> None:
    included = tmp_path / "when.cfg"
    included.write_text(f'[filter "when"]\n\tclean = {program(tmp_path, "clean")}\n[core]\n\tfsmonitor = '
                        f'{program(tmp_path, "fsmonitor")}\n')
    git(repo, "config", f"includeIf.gitdir:{repo}/.git.path", str(included))
    (repo / ".gitattributes").write_text("*.txt filter=when\n")


def _fsmonitor(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "core.fsmonitor", str(program(tmp_path, "fsmonitor")))


def _diff_drivers(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "diff.external", str(program(tmp_path, "external")))
    git(repo, "config", "diff.evil.command", str(program(tmp_path, "command")))
    git(repo, "config", "diff.evil.textconv", str(program(tmp_path, "textconv")))
    (repo / ".gitattributes").write_text("* diff=evil\n")


def _gpg(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "gpg.program", str(program(tmp_path, "gpg")))
    git(repo, "config", "gpg.openpgp.program", str(program(tmp_path, "gpg")))
    git(repo, "config", "log.showSignature", "true")


def _pager_and_hooks(repo: Path, tmp_path: Path) -> None:
    git(repo, "config", "core.pager", str(program(tmp_path, "pager")))
    git(repo, "config", "pager.log", str(program(tmp_path, "pager")))
    git(repo, "config", "pager.status", str(program(tmp_path, "pager")))
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "post-index-change").write_text(f'#!/bin/sh\ntouch "{tmp_path}/ran-hook"\n')
    (hooks / "post-index-change").chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))


VECTORS = {"filter": _filter, "included filter": _included_filter, "includeIf": _conditional_include,
           "fsmonitor": _fsmonitor, "diff drivers": _diff_drivers, "gpg": _gpg, "pager and hooks": _pager_and_hooks}
COMMANDS = ["git status", "git diff", "git log -p -1", "git log --show-signature -1", "git log '--format=%G?%n%s' -1",
            "git status --short"]


@pytest.mark.parametrize("vector", list(VECTORS))
async def test_an_allowlisted_git_runs_no_program_the_repository_names(start_console, make_config, model,
                                                                       tmp_path: Path, repo: Path, vector: str) -> None:
    VECTORS[vector](repo, tmp_path)
    host = await start_console(make_config(workspace={"root": str(repo)}))
    results = {c: await call(host, model, "bash", {"command": c}) for c in COMMANDS}
    assert await pending(host) == []  # all of them ran at once: the allowlist still holds them read-only
    assert ran(tmp_path) == [], results
    assert "a.txt" in results["git status"] and "-one" in results["git diff"] and "+two" in results["git diff"]
    assert "signed" in results["git log -p -1"]


@pytest.mark.parametrize("vector", [v for v in VECTORS if v != "pager and hooks"])
def test_the_vectors_are_real(tmp_path: Path, repo: Path, vector: str) -> None:
    """The control: plain git, without the terminal's overrides, does run the repository's programs (a pager
    runs only on a terminal, and status runs no hook: those two held on plain git already)."""
    VECTORS[vector](repo, tmp_path)
    for args in (["status"], ["diff", "--ext-diff"], ["diff", "--textconv"], ["log", "-1"]):
        subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    assert ran(tmp_path) != []
