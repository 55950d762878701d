"""The model step: a provider, a model, its key, and one live request that asks for a tool call, whose
outcome is said in words ("works, calls tools", "works, but does not call tools", the error made plain)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from gateway.config import ModelConfig
from gateway.setup.ask import Ask, SetupError, env_value

OLLAMA = "http://127.0.0.1:11434"
CALLS_TOOLS = "works, calls tools"
NO_TOOLS = "works, but does not call tools — Anyy needs a model that does"


@dataclass(frozen=True)
class Provider:
    label: str
    wire: str  # [model] provider
    base_url: str
    key_env: str  # "" = no key (a local server)
    model: str  # a sensible first choice


PROVIDERS = {
    "openai": Provider("OpenAI", "openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-5-mini"),
    "anthropic": Provider("Anthropic", "anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY",
                          "claude-sonnet-4-5"),
    "openrouter": Provider("OpenRouter", "openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY",
                           "openai/gpt-5-mini"),
    "ollama": Provider("a local Ollama", "openai", f"{OLLAMA}/v1", "", ""),
    "custom": Provider("any OpenAI-compatible server (a URL)", "openai", "", "ANYY_MODEL_API_KEY", ""),
}

# What the test request sends: a tool the model is asked to call, so the answer shows whether it can.
CHECK_TOOL = {"name": "setup_check", "description": "Report that the setup check worked.",
              "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}
CHECK_PROMPT = "This is a connection test. Call the tool setup_check with ok=true, and say nothing else."


@dataclass
class ModelAnswer:
    provider: str
    config: ModelConfig
    key: str | None
    verdict: str  # CALLS_TOOLS, NO_TOOLS, or the error in plain words
    works: bool


async def ollama_models(base: str = OLLAMA) -> list[str] | None:
    """The models pulled into the Ollama at `base` (GET /api/tags), or None when none answers there."""
    try:
        async with httpx.AsyncClient(timeout=1.5) as http:
            r = await http.get(f"{base.rstrip('/')}/api/tags")
            r.raise_for_status()
            return [m["name"] for m in r.json().get("models", []) if isinstance(m, dict) and "name" in m]
    except (httpx.HTTPError, ValueError, AttributeError):
        return None


def plain_error(message: str, status: int | None, cfg: ModelConfig) -> str:
    """The provider's refusal in words: a bad key, an unknown model, no credit, nothing answering.
    `status` is the HTTP status of the answer (None without one); providers word the rest their own way."""
    low = message.lower()
    if status == 402 or any(w in low for w in ("credit", "quota", "billing", "balance", "payment")):
        return f"no credit: the account behind this key has no credit left (add some at the provider). ({message})"
    if status in (401, 403) or "api key not valid" in low:  # Gemini says it with a 400
        return f"bad key: the provider refused the key in ${cfg.api_key_env}. ({message})"
    if status == 404 or "model_not_found" in low or "does not exist" in low:
        return f"unknown model: {cfg.model!r} is not a model at {cfg.base_url}. ({message})"
    if "connection refused" in low or "does not resolve" in low:
        return f"nothing answers at {cfg.base_url}. ({message})"
    return message


async def live_test(cfg: ModelConfig, key: str | None) -> tuple[bool, str]:
    """One request that asks for a tool call; (works, verdict in words)."""
    from gateway.llm import make_client
    from gateway.llm.types import ChatMessage, ModelUnavailable, ToolSchema

    client = make_client(cfg.model_copy(update={"max_retries": 0, "timeout_s": min(cfg.timeout_s, 60)}), key)
    try:
        reply = await client.complete([ChatMessage(role="user", content=CHECK_PROMPT)],
                                      [ToolSchema.model_validate(CHECK_TOOL)])
    except ModelUnavailable as exc:
        return False, plain_error(str(exc), exc.status, cfg)
    finally:
        await client.aclose()
    return True, CALLS_TOOLS if any(c.name == CHECK_TOOL["name"] for c in reply.tool_calls) else NO_TOOLS


async def model_step(ask: Ask, args: Any, current: ModelConfig, secrets: dict[str, str]) -> ModelAnswer:
    """Ask, test, and return the answer."""
    local = await ollama_models(args.model_url or OLLAMA) if args.model_provider in (None, "ollama") else None
    options = [(name, p.label + (f" — found, {len(local)} model(s) pulled" if name == "ollama" and local is not None
                                 else "")) for name, p in PROVIDERS.items()]
    default = "ollama" if local else "openai"
    name = await ask.choose("Which model provider?", options, flag="--model-provider", given=args.model_provider,
                            default=default if args.model_provider or ask.interactive else None)
    provider = PROVIDERS[name]
    base_url = provider.base_url
    if name == "custom" or (args.model_url and name != "ollama"):
        base_url = await ask.text("Its base URL (e.g. http://host:8000/v1)", flag="--model-url", given=args.model_url)
    elif name == "ollama" and args.model_url:
        base_url = args.model_url.rstrip("/") + "/v1"
    if name == "ollama" and local:
        ask.say("Pulled in Ollama: " + ", ".join(local))
    model = await ask.text("Which model", flag="--model", given=args.model,
                           default=(local[0] if name == "ollama" and local else provider.model) or None)
    key_env = args.model_key_env or provider.key_env
    key: str | None = None
    if key_env:
        current_key = secrets.get(key_env) or env_value(key_env)
        if name == "custom" and not args.model_key_env and ask.interactive:
            needs = await ask.confirm("Does this server need an API key?", default=bool(current_key))
            key_env = key_env if needs else ""
        if key_env:
            key = await ask.secret(f"API key (kept in secrets.env as {key_env})", flag="--model-key-env",
                                   env_name=args.model_key_env, current=current_key)
    cfg = ModelConfig(provider=provider.wire, base_url=base_url, model=model, api_key_env=key_env or "")  # type: ignore[arg-type]
    ask.say(f"Testing {model} at {base_url} …")
    works, verdict = await live_test(cfg, key)
    ask.say(f"Model: {verdict}")
    return ModelAnswer(name, cfg, key, verdict, works)



def write_model(answer: ModelAnswer, write: Any) -> None:
    """The keys of [model] this step owns (`write(key, value, comment)`)."""
    cfg = answer.config
    write("provider", cfg.provider, "the wire format: openai (any OpenAI-compatible server) or anthropic")
    write("base_url", cfg.base_url, f"{PROVIDERS[answer.provider].label}")
    write("model", cfg.model, "the model every turn uses")
    write("api_key_env", cfg.api_key_env, "the variable in secrets.env holding the key")


__all__ = ["CALLS_TOOLS", "NO_TOOLS", "PROVIDERS", "ModelAnswer", "SetupError", "live_test", "model_step",
           "ollama_models", "plain_error", "write_model"]
