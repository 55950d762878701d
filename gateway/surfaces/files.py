"""Platform-neutral file helpers for surfaces: where a downloaded attachment may be written, and writing it
off the event loop."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

_UNSAFE_NAME = re.compile(r"[^\w.-]+")


def safe_name(name: str) -> str:
    """A file name that cannot leave its folder: the last path component, unusual characters replaced."""
    cleaned = _UNSAFE_NAME.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip("._")
    return cleaned[:100] or "file"


async def save(path: Path, data: bytes) -> None:
    """Write `data` to `path` (creating its folder) in a worker thread."""
    await asyncio.to_thread(_write, path, data)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
