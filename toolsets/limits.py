"""Caps on the short text fields tools store: a title or a name is a label, not a document.

Used as argument types, so pydantic refuses an oversized value before the handler runs and the model
reads which field and which cap ("String should have at most 200 characters"). docs/limits.md lists
every bound.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

TITLE_CHARS = 200  # task titles, event titles
NAME_CHARS = 200  # reminder and automation names
NOTES_CHARS = 20_000  # task notes

Title = Annotated[str, StringConstraints(max_length=TITLE_CHARS)]
Name = Annotated[str, StringConstraints(max_length=NAME_CHARS)]
Notes = Annotated[str, StringConstraints(max_length=NOTES_CHARS)]
