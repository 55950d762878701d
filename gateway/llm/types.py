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


class ProviderExtras(BaseModel):
    """What a provider returned with an assistant message for it to get back, kept verbatim and opaque:
    Anthropic's thinking and redacted_thinking blocks (with their signatures), and on the OpenAI wire
    the message's own extra fields (DeepSeek's `reasoning_content`, Gemini's `extra_content`) and each
    tool call's (Gemini's `extra_content.google.thought_signature`). `source` names the provider they
    came from (gateway/llm/extras.py): they are sent back to it alone, never to another one."""

    model_config = ConfigDict(frozen=True)

    source: str
    blocks: list[dict[str, Any]] = Field(default_factory=list)  # Anthropic, in their order
    message: dict[str, Any] = Field(default_factory=dict)  # OpenAI wire: fields of the message
    calls: dict[str, dict[str, Any]] = Field(default_factory=dict)  # OpenAI wire: fields of each call, by id


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
    extras: ProviderExtras | None = None  # assistant only
    # assistant only: the model declined this exchange; it and the message that asked for it are left out
    # of later requests (gateway/llm/refusal.py), since a refused turn kept in view is refused again.
    refused: bool = False


def stored_fields(meta: dict[str, Any]) -> dict[str, Any]:
    """The ChatMessage fields `ModelReply.stored` kept in an assistant row's meta."""
    if "provider_extras" not in meta and "refused" not in meta:  # most rows: nothing to build
        return {}
    extras = meta.get("provider_extras")
    return {"extras": ProviderExtras(**extras) if extras else None, "refused": bool(meta.get("refused"))}


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
    extras: ProviderExtras | None = None
    refused: bool = False  # `text` says so in words

    def stored(self) -> dict[str, Any]:
        """What the assistant message's stored `meta` keeps of this reply besides usage and model (read
        back by `stored_fields`)."""
        kept: dict[str, Any] = {}
        if self.extras is not None:
            kept["provider_extras"] = self.extras.model_dump(exclude_defaults=True)
        if self.refused:
            kept["refused"] = True
        return kept


class ModelUnavailable(Exception):
    """The model could not be reached or kept failing after retries (and fallback). The message is
    written for the person: it names the URL and the cause, never a key. `status` is the HTTP status of
    the last answer when there was one (401 a refused key, 402 no credit, 404 an unknown model, ...), so
    a caller tells the causes apart without reading the words."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ModelCutOff(ModelUnavailable):
    """A streamed reply failed after some of its text was already handed out. Not retried: a restart
    would show the person a second, different beginning. `cause` is phrased for the person."""

    def __init__(self, cause: str) -> None:
        super().__init__(f"the reply was cut off: {cause}")
        self.cause = cause


class Restart(str):
    """A piece of a streamed reply that starts its text over: what was handed out before it is withdrawn
    (it was the model's reasoning, gateway/llm/think.py) and the reply's text is this piece and what
    follows. A sink that cannot withdraw text treats it as an ordinary piece."""

    __slots__ = ()


# Receives each piece of text as a streamed reply produces it (a `Restart` starts the text over).
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


__all__ = ["ChatMessage", "ImagePart", "ModelClient", "ModelCutOff", "ModelReply", "ModelUnavailable",
           "ProviderExtras", "Restart", "TextSink", "ToolCall", "ToolSchema", "Usage", "stored_fields"]
