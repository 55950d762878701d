"""Language-model providers behind one interface, `ModelClient`.

`make_client` builds the client the config asks for; everything else in the gateway speaks only the
provider-neutral types re-exported here.
"""

from __future__ import annotations

from gateway.config import ConfigError, ModelConfig
from gateway.llm.anthropic import AnthropicClient
from gateway.llm.openai import OpenAIClient
from gateway.llm.types import ChatMessage, ModelClient, ModelReply, ModelUnavailable, ToolCall, ToolSchema, Usage


def make_client(cfg: ModelConfig, api_key: str | None, *, backoff_base_s: float = 0.5) -> ModelClient:
    """The client for `cfg.provider`. `api_key` is the value of `$<cfg.api_key_env>` (None when unset:
    local servers often need none). Raises ConfigError when no model is configured."""
    if not cfg.configured:
        raise ConfigError("no model configured: set [model] base_url and model in the config file")
    args = (cfg.base_url, api_key, cfg.model, cfg.timeout_s, cfg.max_retries, cfg.max_tokens, cfg.fallback_model)
    if cfg.provider == "anthropic":
        return AnthropicClient(*args, api_key_env=cfg.api_key_env, backoff_base_s=backoff_base_s,
                               thinking_budget=cfg.thinking.budget_tokens if cfg.thinking else 0,
                               stream_max_s=cfg.stream_max_s)
    return OpenAIClient(*args, api_key_env=cfg.api_key_env, backoff_base_s=backoff_base_s,
                        stream_max_s=cfg.stream_max_s, max_tokens_field=cfg.max_tokens_field or None,
                        reasoning_effort=cfg.reasoning_effort)


__all__ = [
    "AnthropicClient", "ChatMessage", "ModelClient", "ModelReply", "ModelUnavailable", "OpenAIClient",
    "ToolCall", "ToolSchema", "Usage", "make_client",
]
