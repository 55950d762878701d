"""Provider-neutral chat types. Providers translate these to and from their wire formats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from store.records import ToolCallRecord as ToolCall


class ImagePart(BaseModel):
    """An image the model sees (sent only to a model configured with `vision = true`)."""

    mime_type: str  # image/jpeg | image/png
    data: str  # base64


class ChatMessage(BaseModel):
    """One message of the conversation as the model sees it. Frozen: a client keeps the encoding of the
    messages it sent by their identity (gateway/llm/wire.py), so a message must not change once made
    (`model_copy(update=...)` makes a new one)."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    images: list[ImagePart] = Field(default_factory=list)  # user only
    tool_calls: list[ToolCall] = Field(default_factory=list)  # assistant only
    tool_call_id: str | None = None  # tool only
    name: str | None = None  # tool only: the tool's name
    # system only: the first `stable_chars` characters are the same from turn to turn (the rest, e.g. the
    # current time, is not), so a provider with explicit prompt caching may put a breakpoint there.
    stable_chars: int = 0


class ToolSchema(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class Usage(BaseModel):
    """Tokens of one model call. `input_tokens` counts every input token, cached ones included;
    `cached_tokens` is the part the provider served from its prompt cache (billed at its cached price)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0


class ModelReply(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    model: str = ""


class ModelUnavailable(Exception):
    """The model could not be reached or kept failing after retries (and fallback). The message is
    written for the person: it names the URL and the cause, never a key."""


class ModelCutOff(ModelUnavailable):
    """A streamed reply failed after some of its text was already handed out. Not retried: a restart
    would show the person a second, different beginning. `cause` is phrased for the person."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"the reply was cut off: {cause}")
        self.cause = cause


# Receives each piece of text as a streamed reply produces it.
TextSink = Callable[[str], Awaitable[None]]


class ModelClient(Protocol):
    async def complete(self, messages: list[ChatMessage], tools: list[ToolSchema],
                       on_text: TextSink | None = None) -> ModelReply:
        """One completion. With `on_text` (and streaming enabled) the reply is streamed and its text
        handed to `on_text` piece by piece; the complete reply (tool calls whole) is still returned.
        Raises ModelUnavailable when retries and fallback are exhausted, ModelCutOff when a stream
        failed after its first piece of text."""
        ...

    async def aclose(self) -> None: ...


__all__ = ["ChatMessage", "ImagePart", "ModelClient", "ModelCutOff", "ModelReply", "ModelUnavailable", "TextSink",
           "ToolCall", "ToolSchema", "Usage"]
