"""Real audio for the speech tests, made with the Debian programs .ci/apt-packages installs."""

from __future__ import annotations

import subprocess


def voice_note(text: str) -> bytes:
    """`text` spoken by espeak-ng and encoded by ffmpeg as Ogg/Opus, as a phone's voice note is."""
    wav = subprocess.run(["espeak-ng", "--stdin", "--stdout", "-v", "en"], input=text.encode(), check=True,
                         capture_output=True, timeout=60).stdout
    return subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "wav", "-i", "pipe:0", "-c:a",
                           "libopus", "-b:a", "24k", "-f", "ogg", "pipe:1"], input=wav, check=True,
                          capture_output=True, timeout=60).stdout


def is_ogg_opus(data: bytes) -> bool:
    """An Ogg stream whose first page carries an Opus identification header."""
    return data[:4] == b"OggS" and b"OpusHead" in data[:200]
