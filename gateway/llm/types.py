"""Provider-neutral chat types. Providers translate these to and from their wire formats."""

from __future__ import annotations

from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from store.records import ToolCallRecord as ToolCall


class ImagePart(BaseModel):
    """An image the model sees (sent only to a model configured with `vision = true`)."""

    mime_type: str  # image/jpeg | image/png
    data: str  # base64


class ChatMessage(BaseModel):
    """One message of the conversation as the model sees it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[ImagePart] = Field(default_factory=list)  # user only
    tool_calls: list[ToolCall] = Field(default_factory=list)  # assistant only
    tool_call_id: str | None = None  # tool only
    name: str | None = None  # tool only: the tool's name


class ToolSchema(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class ModelReply(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""


class ModelUnavailable(Exception):
    """The model could not be reached or kept failing after retries (and fallback). The message is
    written for the person: it names the URL and the cause, never a key."""


class ModelClient(Protocol):
    async def complete(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> ModelReply:
        """One completion. Raises ModelUnavailable when retries and fallback are exhausted."""
        ...

    async def aclose(self) -> None: ...


__all__ = ["ChatMessage", "ImagePart", "ToolCall", "ToolSchema", "Usage", "ModelReply", "ModelUnavailable", "ModelClient"]
