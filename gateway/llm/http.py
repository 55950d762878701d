"""The part of a model client every HTTP provider shares: one httpx client, one POST per attempt, the
classification of failures into retryable and not, and error messages written for a person.

A provider subclasses `HttpModelClient` and supplies only its wire format: the endpoint, the headers,
the request body for a model, and the reading of the response, whole or streamed.

Streaming keeps the retry semantics of a plain call up to the first piece of text: a failure before it is
an ordinary failed attempt (retried, then the fallback model); a failure after it raises ModelCutOff,
never a silent restart. `timeout_s` bounds the wait for the response and for each piece after it, and
`stream_max_s` the whole stream: a long answer arriving steadily is not a stuck one, one dripping forever
is. What is read is bounded too (gateway/llm/bounds.py): past a bound the answer is refused, not retried.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import http
import json
import logging
import socket
import ssl
import urllib.request
from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, Self

import httpx

from connectors.bodies import read_at_most
from connectors.http1 import Http1Transport
from gateway.limits import escape_surrogates, replace_surrogates
from gateway.llm.bounds import MAX_ANSWER_BYTES, MAX_ERROR_BYTES, STREAM_MAX_S, AnswerTooLarge, too_large
from gateway.llm.errors import ErrorEvent, provider_words
from gateway.llm.retry import RetryPolicy, TransientError, parse_retry_after, with_retries
from gateway.llm.sse import EventTooLarge, sse_events, sse_lines
from gateway.llm.types import ChatMessage, ModelCutOff, ModelReply, ModelUnavailable, Restart, TextSink, ToolSchema
from gateway.llm.wire import WireCache, encode

log = logging.getLogger(__name__)

# 408 (request timeout) and 409 (conflict, e.g. a lock held by another request) are worth a retry;
# every other 4xx says the request or the credentials are wrong and will stay wrong.
_RETRYABLE_4XX = frozenset({408, 409, 429})
_REASONS = {529: "Overloaded"}  # Anthropic's status for an overloaded API; not in http.HTTPStatus
_MAX_SERVER_MESSAGE = 300


class StreamReader(Protocol):
    """Reads one provider's stream events into a reply."""

    complete: bool  # the stream said the reply is finished (a stream that ends before is cut)

    def feed(self, event: str, data: str) -> str:
        """Take one event; return the text it adds ("" for none; a `Restart` when the text so far is
        withdrawn). Raises ErrorEvent for an error event, AnswerTooLarge past the answer's bound,
        KeyError/TypeError/ValueError for one of the wrong shape."""
        ...

    def reply(self) -> ModelReply:
        """The complete reply, once `complete`."""
        ...


class HttpModelClient(abc.ABC):
    """A ModelClient over httpx. Subclasses implement the wire-format hooks.

    `api_key_env` only names where the key came from, for error hints ("check the API key in
    $OPENAI_API_KEY"); the key itself never appears in a message or a log line.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout_s: float,
        max_retries: int,
        max_tokens: int,
        fallback_model: str = "",
        *,
        api_key_env: str = "",
        backoff_base_s: float = 0.5,
        stream_max_s: float = STREAM_MAX_S,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.fallback_model = fallback_model
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.stream_max_s = stream_max_s
        self._api_key = api_key or None
        self._api_key_env = api_key_env
        self._policy = RetryPolicy(max_retries=max_retries, backoff_base_s=backoff_base_s)
        self._http = _http_client(self.base_url, timeout_s)
        self._where = _display_url(self.base_url)
        self._wire = WireCache()
        self._url: tuple[str, httpx.URL] | None = None  # the endpoint, parsed once

    @abc.abstractmethod
    def endpoint(self) -> str:
        """The URL to POST to."""

    @abc.abstractmethod
    def headers(self) -> dict[str, str]:
        """Request headers, authentication included."""

    @abc.abstractmethod
    def request_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str) -> dict[str, Any]:
        """The JSON body asking `model` for one completion."""

    def encoded_body(self, messages: list[ChatMessage], tools: list[ToolSchema], model: str, *,
                     stream: bool) -> bytes:
        """The request body as sent: `request_body` (through `stream_body` when streaming) as JSON. A
        provider may override this to reuse encodings kept in `self._wire` (the same bytes)."""
        body = self.request_body(messages, tools, model)
        return encode(self.stream_body(body) if stream else body)

    @abc.abstractmethod
    def read_reply(self, data: dict[str, Any], model: str) -> ModelReply:
        """The reply in a successful response body. May raise KeyError/TypeError/ValueError on a body of
        the wrong shape; the caller turns that into ModelUnavailable."""

    @abc.abstractmethod
    def stream_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` (from request_body) asking for a streamed reply."""

    @abc.abstractmethod
    def stream_reader(self, model: str) -> StreamReader:
        """A fresh reader for one streamed reply of `model`."""

    async def complete(self, messages: list[ChatMessage], tools: list[ToolSchema],
                       on_text: TextSink | None = None) -> ModelReply:
        """One completion, with retries and the fallback model; streamed to `on_text` when given.
        Raises ModelUnavailable (ModelCutOff for a stream that failed after its first text)."""
        models = [self.model]
        if self.fallback_model and self.fallback_model != self.model:
            models.append(self.fallback_model)

        async def attempt(model: str) -> ModelReply:
            try:
                if on_text is not None:
                    reply = await self._stream(self.encoded_body(messages, tools, model, stream=True), model, on_text)
                else:
                    reply = self.read_reply(await self._post(self.encoded_body(messages, tools, model, stream=False)),
                                            model)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise ModelUnavailable(
                    f"the model at {self._where} sent a response this client cannot read "
                    f"({type(exc).__name__}: {self._redact(str(exc))[:_MAX_SERVER_MESSAGE]})"
                ) from None
            reply = _valid_unicode(reply)
            log.debug("model_reply url=%s model=%s tool_calls=%d in=%d out=%d", self._where, reply.model,
                      len(reply.tool_calls), reply.usage.input_tokens, reply.usage.output_tokens)
            return reply

        return await with_retries(attempt, models, self._policy, self._where)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _request(self, body: bytes) -> httpx.Request:
        """The POST of an encoded JSON body, with the headers httpx gives a `json=` one."""
        endpoint = self.endpoint()
        if self._url is None or self._url[0] != endpoint:
            self._url = endpoint, httpx.URL(endpoint)
        return self._http.build_request("POST", self._url[1], content=body,
                                        headers={**self.headers(), "Content-Type": "application/json"})

    async def _stream(self, body: bytes, model: str, on_text: TextSink) -> ModelReply:
        """One streamed POST: text goes to `on_text` as it arrives. Raises TransientError or
        ModelUnavailable before the first text, ModelCutOff after it."""
        reader = self.stream_reader(model)
        started = False
        request = self._request(body)
        try:
            async with asyncio.timeout(self.stream_max_s) as whole:
                try:
                    async with asyncio.timeout(self.timeout_s):
                        response = await self._http.send(request, stream=True)
                except (TimeoutError, httpx.TimeoutException):
                    raise TransientError(f"timed out after {self.timeout_s:g}s") from None
                except httpx.TransportError as exc:
                    raise TransientError(_describe_transport_error(exc)) from None
                try:
                    await self._check_stream_status(response)
                    async for event, data in self._events(response):
                        try:
                            text = reader.feed(event, data)
                        except ErrorEvent as exc:
                            raise TransientError(f"an error in the stream{self._words(exc.body.encode())}") from None
                        started = started or bool(text)
                        if text or isinstance(text, Restart):
                            await on_text(text)
                finally:
                    await response.aclose()
            if not reader.complete:
                raise TransientError("the stream ended before the reply was complete")
        except TransientError as exc:
            if started:
                log.warning("model_stream_cut url=%s model=%s cause=%r", self._where, model, exc.cause)
                raise ModelCutOff(exc.cause) from None
            raise
        except (TimeoutError, EventTooLarge, AnswerTooLarge) as exc:  # a bound of the answer: refused, not retried
            if isinstance(exc, TimeoutError) and not whole.expired():
                raise
            cause = str(exc) if not isinstance(exc, TimeoutError) else \
                f"the streamed answer took longer than {self.stream_max_s:g}s ([model] stream_max_s)"
            log.warning("model_stream_bound url=%s model=%s cause=%r", self._where, model, cause)
            raise ModelCutOff(cause) if started else ModelUnavailable(too_large(self._where, cause)) from None
        return reader.reply()

    async def _check_stream_status(self, response: httpx.Response) -> None:
        """Raise for an error status, as `_post` does (the body is read first: it holds the message)."""
        status = response.status_code
        if status < 400:
            return
        content = b""
        with contextlib.suppress(httpx.HTTPError):
            content, _ = await read_at_most(response, MAX_ERROR_BYTES)
        if status >= 500 or status in _RETRYABLE_4XX:
            raise TransientError(self._status_text(response, content), parse_retry_after(response.headers), status)
        raise ModelUnavailable(f"the model at {self._where} refused the request: "
                               f"{self._status_text(response, content)}{self._hint(status)}", status)

    async def _events(self, response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
        """The response's events; a broken or silent connection becomes a TransientError."""
        try:
            async for item in sse_events(sse_lines(response.aiter_bytes())):
                yield item
        except httpx.TimeoutException:
            raise TransientError(f"no data for {self.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            raise TransientError(_describe_transport_error(exc)) from None

    async def _post(self, body: bytes) -> dict[str, Any]:
        """One POST. Returns the JSON body of a 2xx; raises TransientError or ModelUnavailable."""
        try:
            # httpx's timeout bounds each read; this bounds the whole exchange, so a server trickling
            # bytes cannot hold a turn past timeout_s either. The body is read as it arrives, up to its
            # bound (an error's message is at its start).
            async with asyncio.timeout(self.timeout_s):
                response = await self._http.send(self._request(body), stream=True)
                try:
                    limit = MAX_ANSWER_BYTES if response.status_code < 400 else MAX_ERROR_BYTES
                    content, whole = await read_at_most(response, limit)
                finally:
                    await response.aclose()
        except (TimeoutError, httpx.TimeoutException):
            raise TransientError(f"timed out after {self.timeout_s:g}s") from None
        except httpx.TransportError as exc:
            raise TransientError(_describe_transport_error(exc)) from None
        status = response.status_code
        if status >= 500 or status in _RETRYABLE_4XX:
            raise TransientError(self._status_text(response, content), parse_retry_after(response.headers), status)
        if status >= 400:
            raise ModelUnavailable(f"the model at {self._where} refused the request: "
                                   f"{self._status_text(response, content)}{self._hint(status)}", status)
        if not whole:
            raise ModelUnavailable(too_large(self._where, f"it sent an answer larger than "
                                                          f"{MAX_ANSWER_BYTES // (1024 * 1024)} MB"))
        try:
            data = json.loads(content)
        except ValueError:
            # A 2xx that is not JSON is usually a proxy or captive portal in the way; it may pass.
            raise TransientError(f"HTTP {status} with a body that is not JSON") from None
        if not isinstance(data, dict):
            raise TransientError(f"HTTP {status} with a JSON body that is not an object")
        return data

    def _status_text(self, response: httpx.Response, content: bytes) -> str:
        """Like "HTTP 503 Service Unavailable", then the server's own message if it gave one."""
        reason = response.reason_phrase or _REASONS.get(response.status_code, "")
        if not reason:
            try:
                reason = http.HTTPStatus(response.status_code).phrase
            except ValueError:
                reason = ""
        return f"HTTP {response.status_code} {reason}".rstrip() + self._words(content, reason)

    def _words(self, content: bytes, reason: str = "") -> str:
        """The provider's message in an error body, marked as theirs ('; the provider says: "..."'), or ""
        when it holds none beyond `reason`. A provider may echo the key or the URL it was called at."""
        message = provider_words(content, (self._api_key or "", self.base_url, self._where))
        if message and message.lower() != reason.lower():
            return f'; the provider says: "{message}"'
        return ""

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            where = f" in ${self._api_key_env}" if self._api_key_env else ""
            return f" (check the API key{where})"
        if status == 404:
            return f" (check base_url {self._where!r} and model {self.model!r})"
        return ""

    def _redact(self, text: str) -> str:
        """Servers sometimes echo the key they were given; it must not reach a chat or a log."""
        return text.replace(self._api_key, "***") if self._api_key else text


def _describe_transport_error(exc: BaseException) -> str:
    """A short cause for a failed connection, from the innermost OS error httpx wraps."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, socket.gaierror):
            return "the host name does not resolve"
        if isinstance(seen, ssl.SSLError):
            return f"TLS error: {seen.reason or seen}"
        if isinstance(exc, httpx.RemoteProtocolError) and isinstance(seen, ValueError):
            return f"the response is not valid HTTP: {exc}"  # connectors/http1 parsed or framed it
        seen = seen.__cause__ or seen.__context__
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed before a complete response"
    return f"connection failed: {exc or type(exc).__name__}"


def _http_client(base_url: str, timeout_s: float) -> httpx.AsyncClient:
    """The model's httpx client, on the lean HTTP/1.1 transport (connectors/http1.py). httpx routes the
    environment's proxies (HTTP(S)_PROXY, ALL_PROXY, NO_PROXY) only for a client built without
    `transport=`, so when one is set for the model's scheme the client keeps httpx's own transport."""
    timeout = httpx.Timeout(timeout_s)
    verify = _tls_for(base_url)
    proxies = urllib.request.getproxies()
    if proxies.get(base_url.split(":", 1)[0].lower()) or proxies.get("all"):
        return httpx.AsyncClient(timeout=timeout, verify=verify)
    tls = httpx.create_ssl_context() if verify is True else verify
    return httpx.AsyncClient(timeout=timeout, transport=Http1Transport(ssl_context=tls))


def _tls_for(base_url: str) -> ssl.SSLContext | Literal[True]:
    """Verify certificates as httpx does (its CA bundle) for an https model. A plain-http model never
    speaks TLS: its client gets a context that trusts no certificate, which fails closed and spares
    every start the ~20 ms of reading the CA bundle."""
    if base_url.lower().startswith("https:"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def _display_url(base_url: str) -> str:
    """The base URL without credentials or query string, which may carry a key on some gateways."""
    try:
        url = httpx.URL(base_url)
    except httpx.InvalidURL:
        return "(invalid base_url)"
    return str(url.copy_with(query=None, fragment=None, username=None, password=None))


def _valid_unicode(reply: ModelReply) -> ModelReply:
    """A JSON ``\\udXXX`` escape decodes to a lone surrogate, which SQLite (UTF-8 only) cannot store:
    the text gets U+FFFD, the arguments keep it as an escape so the tool call reports it to the model."""
    calls = [c.model_copy(update={"id": replace_surrogates(c.id), "name": replace_surrogates(c.name),
                                  "arguments": escape_surrogates(c.arguments)}) for c in reply.tool_calls]
    return reply.model_copy(update={"text": replace_surrogates(reply.text), "tool_calls": calls})
