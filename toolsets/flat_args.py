"""Optional tool arguments with flat JSON schemas, for the largest toolsets' signatures.

pydantic shows `str | None = None` as `{"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}`;
every optional argument of every tool pays those bytes in each model request. These types validate
exactly as `X | None` (None, the default, still means "not given") but show the model `{"type": "string"}`:
an omitted argument is how a model says None.
"""

from __future__ import annotations

from datetime import date
from typing import Annotated

from pydantic import WithJsonSchema

OptStr = Annotated[str | None, WithJsonSchema({"type": "string"})]
OptInt = Annotated[int | None, WithJsonSchema({"type": "integer"})]
OptDate = Annotated[date | None, WithJsonSchema({"type": "string", "format": "date"})]
OptStrs = Annotated[list[str] | None, WithJsonSchema({"type": "array", "items": {"type": "string"}})]
