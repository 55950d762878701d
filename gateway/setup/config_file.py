"""The owner's config file, edited in place with tomlkit: setup changes only the keys it asks about and
keeps every comment, the order and every other key. A key setup adds carries a one-line comment and is
written only when its value differs from the default, so a config setup writes stays short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tomlkit
from pydantic import BaseModel
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

from gateway.config import Config, ConfigError, parse_config
from gateway.config.secrets_file import write_private

HEADER = ("Anyy's configuration, written by `anyy setup` (run it again to change an answer; your own edits "
          "and comments are kept).\nSecrets are not here: they are in secrets.env beside this file. Every key: "
          "config.example.toml.")


def section_model(path: tuple[str, ...]) -> type[BaseModel]:
    """The pydantic class of the table at `path`, e.g. ("model",) or ("accounts", "personal")."""
    cls: Any = Config
    for part in path:
        field = cls.model_fields.get(part)
        if field is None:  # a name inside a dict of tables ([accounts.NAME])
            continue
        annotation = field.annotation
        args = [a for a in getattr(annotation, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        cls = args[-1] if args else annotation  # `X | None` and `dict[str, X]` both end with X
    return cls


class ConfigFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.created = not path.exists()
        if self.created:
            self.doc: TOMLDocument = tomlkit.document()
            for line in HEADER.splitlines():
                self.doc.add(tomlkit.comment(line))
        else:
            try:
                self.doc = tomlkit.parse(path.read_text(encoding="utf-8"))
            except tomlkit.exceptions.ParseError as exc:
                raise ConfigError(f"{path}: not valid TOML: {exc}") from None

    def table(self, path: tuple[str, ...]) -> Table:
        """The table at `path`, added (empty) at the end when missing."""
        node: Any = self.doc
        for depth, part in enumerate(path):
            if part not in node:
                node[part] = tomlkit.table(is_super_table=depth < len(path) - 1)
            node = node[part]
        return node

    def has(self, path: tuple[str, ...]) -> bool:
        node: Any = self.doc
        for part in path:
            if not hasattr(node, "__contains__") or part not in node:
                return False
            node = node[part]
        return True

    def get(self, path: tuple[str, ...], key: str) -> Any:
        node: Any = self.doc
        for part in (*path, key):
            if part not in node:
                return None
            node = node[part]
        return node.unwrap() if hasattr(node, "unwrap") else node

    def set(self, path: tuple[str, ...], key: str, value: Any, comment: str) -> None:
        """Set `key` of the table at `path`. A key already there gets the new value and keeps its comment;
        a new key is added with `comment`, unless `value` is the default (then nothing is written)."""
        table = self.table(path)
        if key in table:
            table[key] = value
            return
        field = section_model(path).model_fields[key]
        if value == field.get_default(call_default_factory=True):
            return
        item = tomlkit.item(value)
        item.comment(comment)
        table[key] = item

    def add(self, path: tuple[str, ...], key: str, value: Any, comment: str) -> None:
        """Add `key` unless the table has it already (the owner's choice stands)."""
        if not (self.has(path) and key in self.table(path)):
            item = tomlkit.item(value)
            item.comment(comment)
            self.table(path)[key] = item

    def check(self) -> Config:
        """The config as `anyy` will read it; raises ConfigError (nothing written) when it is invalid."""
        return parse_config(self.doc.unwrap(), str(self.path))

    def save(self) -> Config:
        """Validate, then replace the file (owner-only, atomically: a crash leaves the old file whole)."""
        config = self.check()
        write_private(self.path, tomlkit.dumps(self.doc))
        return config
