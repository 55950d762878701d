"""Skills on disk: folders holding a `SKILL.md` (YAML front matter `name`, `description`, then Markdown),
the format of the Agent Skills ecosystem, with optional files beside it.

The library reads one managed root (writable, in the data directory) and any configured read-only roots.
Each skill is parsed once and cached; a lookup re-checks the roots' folder and file modification times,
so a skill edited on disk is seen at the next turn without a restart. Nothing here knows about models
or chats.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SKILL_FILE = "SKILL.md"
# The Agent Skills rules: 1-64 lower-case letters, digits and single hyphens, not at either end.
NAME_RE = re.compile(r"^(?=.{1,64}$)[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_SKILL_BYTES = 100_000
MAX_DESCRIPTION = 1024
_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.DOTALL)


class SkillError(Exception):
    """A skill that cannot be read, found or written, phrased for the reader."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    body: str
    folder: Path
    managed: bool  # in the managed root (may be changed by skill_manage)


def parse_skill(text: str, folder: Path, managed: bool) -> Skill:
    """Parse a SKILL.md; raises SkillError naming what is wrong."""
    import yaml  # with the first skill: a library with no skills (the default) never needs it

    m = _FRONT.match(text)
    if not m:
        raise SkillError(f"{folder / SKILL_FILE}: no YAML front matter (--- name/description ---)")
    try:
        meta = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as exc:
        raise SkillError(f"{folder / SKILL_FILE}: front matter is not valid YAML ({exc})") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{folder / SKILL_FILE}: front matter must be a mapping")
    name, description = str(meta.get("name") or "").strip(), str(meta.get("description") or "").strip()
    if not NAME_RE.match(name):
        raise SkillError(f"{folder / SKILL_FILE}: name {name!r} must be 1-64 lower-case letters, digits and "
                         "single '-' (not first or last)")
    if name != folder.name:
        raise SkillError(f"{folder / SKILL_FILE}: name {name!r} must be the folder's name, {folder.name!r}")
    if not description:
        raise SkillError(f"{folder / SKILL_FILE}: description is missing")
    return Skill(name=name, description=description[:MAX_DESCRIPTION], body=text[m.end():].strip(),
                 folder=folder, managed=managed)


def render_skill(name: str, description: str, body: str) -> str:
    """The SKILL.md text for a managed skill."""
    import yaml

    front = yaml.safe_dump({"name": name, "description": description}, allow_unicode=True, sort_keys=False)
    return f"---\n{front}---\n\n{body.strip()}\n"


class SkillLibrary:
    """The skills of one managed root and some read-only roots. A managed skill shadows nothing: a name
    found in several roots is taken from the first root (managed first, then config order)."""

    def __init__(self, managed_root: Path, read_only_roots: list[Path]) -> None:
        self.managed_root = managed_root
        self.roots = [(managed_root, True), *((r, False) for r in read_only_roots)]
        self._stamp: tuple[tuple[str, float], ...] = ()
        self._skills: dict[str, Skill] = {}
        self.problems: list[str] = []

    # -- reading ----------------------------------------------------------------------------------

    def _current_stamp(self) -> tuple[tuple[str, float], ...]:
        """Modification times of every root, skill folder and SKILL.md: cheap to take, and it changes
        whenever a skill is added, removed or edited."""
        out: list[tuple[str, float]] = []
        for root, _ in self.roots:
            try:
                out.append((str(root), root.stat().st_mtime))
                with os.scandir(root) as entries:
                    for entry in entries:
                        if entry.is_dir():
                            skill_md = Path(entry.path) / SKILL_FILE
                            try:
                                out.append((str(skill_md), skill_md.stat().st_mtime))
                            except OSError:
                                continue
            except OSError:
                continue
        return tuple(sorted(out))

    def skills(self) -> dict[str, Skill]:
        """Every readable skill by name, reloaded when a file changed. Blocking: call off the event loop."""
        stamp = self._current_stamp()
        if stamp != self._stamp:
            self._skills, self.problems = self._load()
            self._stamp = stamp
        return self._skills

    def _load(self) -> tuple[dict[str, Skill], list[str]]:
        found: dict[str, Skill] = {}
        problems: list[str] = []
        for root, managed in self.roots:
            if not root.is_dir():
                continue
            for folder in sorted(p for p in root.iterdir() if p.is_dir() and (p / SKILL_FILE).is_file()):
                try:
                    raw = (folder / SKILL_FILE).read_bytes()[:MAX_SKILL_BYTES]
                    skill = parse_skill(raw.decode("utf-8", errors="replace"), folder, managed)
                except (OSError, SkillError) as exc:
                    problems.append(str(exc))
                    log.warning("skill_unreadable path=%s problem=%s", folder / SKILL_FILE, exc)
                    continue
                found.setdefault(skill.name, skill)
        return found, problems

    def get(self, name: str) -> Skill:
        skill = self.skills().get(name)
        if skill is None:
            known = ", ".join(sorted(self.skills())) or "(none)"
            raise SkillError(f"no skill named {name!r}; known: {known}")
        return skill

    def read_file(self, name: str, file: str, max_chars: int) -> str:
        """A file inside the skill's folder; paths that leave the folder are refused."""
        skill = self.get(name)
        folder = skill.folder.resolve()
        target = (folder / file).resolve()
        if not target.is_relative_to(folder):
            raise SkillError(f"{file!r} is outside the skill folder")
        if not target.is_file():
            files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
            raise SkillError(f"no file {file!r} in skill {name}; files: {', '.join(files)}")
        text = target.read_bytes()[: max_chars * 4].decode("utf-8", errors="replace")
        return text[:max_chars]

    # -- writing (managed root only) --------------------------------------------------------------

    def _managed_folder(self, name: str) -> Path:
        if not NAME_RE.match(name):
            raise SkillError(f"skill name {name!r} must be 1-64 lower-case letters, digits and single '-' "
                             "(not first or last)")
        existing = self.skills().get(name)
        if existing is not None and not existing.managed:
            raise SkillError(f"skill {name!r} lives in a read-only root ({existing.folder.parent}); it cannot be "
                             "changed here")
        return self.managed_root / name

    def write(self, name: str, description: str, body: str) -> Path:
        """Create or replace a managed skill's SKILL.md (atomically)."""
        text = render_skill(name, description, body)
        parse_skill(text, self.managed_root / name, True)  # what we write must read back
        if len(text.encode()) > MAX_SKILL_BYTES:
            raise SkillError(f"a skill is at most {MAX_SKILL_BYTES} bytes")
        folder = self._managed_folder(name)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = folder / f".{SKILL_FILE}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / SKILL_FILE)
        self._stamp = ()
        return folder / SKILL_FILE

    def delete(self, name: str) -> None:
        folder = self._managed_folder(name)
        if not (folder / SKILL_FILE).is_file():
            raise SkillError(f"no managed skill named {name!r}")
        shutil.rmtree(folder)
        self._stamp = ()

    def reload(self) -> int:
        self._stamp = ()
        return len(self.skills())
