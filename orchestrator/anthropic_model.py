"""The real model: the ``anthropic`` SDK streaming the Messages API behind the Model protocol.

``ANTHROPIC_API_KEY`` (sent as ``x-api-key``) or ``ANTHROPIC_AUTH_TOKEN`` (sent as a bearer
token) and ``ANTHROPIC_BASE_URL`` reach the SDK, so any Messages-API endpoint works, the package's
own loopback test server included. Connecting and waiting for bytes have their own timeouts, so
a host that accepts and never answers fails in ``read_timeout`` seconds, not ``timeout``. A
gateway that answers a streaming request with one plain JSON message is read as that message.
The SDK retries 408, 409, 429 and 5xx (529 among them) before a response starts; a stream cut
after it started is retried here, because the SDK cannot know whether a half-read stream is safe
to repeat and we do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import anthropic
import httpx2

from orchestrator.protocols import (
    ContextTooLong,
    ModelError,
    ModelLimits,
    ModelTurn,
    UnknownModel,
)

#: With these, an endpoint that accepts and never answers fails in about three minutes: three
#: tries of 60 s each (and a second of back-off), after a model lookup of at most about 10 s.
DEFAULT_MAX_RETRIES = 2
DEFAULT_TIMEOUT = 600.0
DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_READ_TIMEOUT = 60.0
#: Each of the (at most two) tries of the Models-API lookup of a window: a start is not held up.
LOOKUP_TIMEOUT = 5.0
#: Error events inside a started stream that are worth asking again, as a 529 or 5xx would be.
_RETRYABLE_STREAM_ERRORS = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
#: The beta a request with server-side compaction (``context_management``) must name.
COMPACTION_BETA = "compact-2026-01-12"
#: How the service words a refusal of a request longer than the window (a 400).
_TOO_LONG = "prompt is too long"
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


class AnthropicModel:
    """Streams each request with ``messages.stream`` and returns the final message as a turn."""

    def __init__(
        self,
        *,
        client: anthropic.Anthropic | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        api_key: str | None = None,
        auth_token: str | None = None,
        base_url: str | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
        self.max_retries = max_retries
        # ``timeout`` bounds every wait, so a short one also shortens connecting and reading.
        limits = httpx2.Timeout(
            timeout, connect=min(connect_timeout, timeout), read=min(read_timeout, timeout)
        )
        self.read_timeout = min(read_timeout, timeout)
        self.connect_timeout = min(connect_timeout, timeout)
        self.client = client or anthropic.Anthropic(
            api_key=api_key,
            auth_token=None if api_key else auth_token,
            base_url=base_url,
            max_retries=max_retries,
            timeout=limits,
        )
        self._limits: dict[str, ModelLimits] = {}

    @property
    def name(self) -> str:
        return "anthropic"

    def limits(self, model: str) -> ModelLimits:
        """The model's window, output cap and capabilities from ``models.retrieve``, cached.

        Raises :class:`ModelError` saying why when the endpoint fails or does not know the
        model, or answers without a window.
        """
        if model in self._limits:
            return self._limits[model]
        bounded = self.client.with_options(
            # One retry of 5 s at most: a gateway without the Models API (or a silent one)
            # should not delay the start; the fallback window is logged and good enough.
            max_retries=min(1, self.max_retries),
            timeout=httpx2.Timeout(
                min(LOOKUP_TIMEOUT, self.read_timeout),
                connect=min(self.connect_timeout, LOOKUP_TIMEOUT),
            ),
        )
        try:
            info = bounded.models.retrieve(model)
        except anthropic.APIStatusError as error:
            kind, message = _error_detail(error)
            problem = ModelError if error.status_code != 404 else UnknownModel
            raise problem(
                f"models.retrieve({model!r}) answered {error.status_code} ({kind}): {message}"
            ) from None
        except anthropic.APIConnectionError as error:
            raise ModelError(f"models.retrieve({model!r}) failed: {error}") from None
        if not info.max_input_tokens:
            raise ModelError(f"models.retrieve({model!r}) gave no max_input_tokens")
        capabilities = info.capabilities.model_dump(mode="json") if info.capabilities else {}
        limits = ModelLimits(
            max_input_tokens=info.max_input_tokens,
            max_tokens=info.max_tokens,
            capabilities=capabilities,
        )
        self._limits[model] = limits
        return limits

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        for attempt in range(self.max_retries + 1):
            try:
                return self._stream_once(request, on_text)
            except _StreamCut as cut:
                if attempt == self.max_retries:
                    raise ModelError(
                        f"the API response broke off {attempt + 1} times ({cut}); giving up"
                    ) from None
                on_text("\n[the response broke off; asking again]\n")
            except anthropic.APIStatusError as error:
                model = str(request.get("model", ""))
                if error.status_code in (400, 413) and _TOO_LONG in _error_detail(error)[1]:
                    raise ContextTooLong(_describe_status(error, self.max_retries, model)) from None
                raise ModelError(_describe_status(error, self.max_retries, model)) from None
            except anthropic.APIConnectionError as error:
                raise ModelError(
                    _describe_connection(error, self.max_retries, self.read_timeout)
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _stream_once(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        beta = "context_management" in request
        try:
            opened: Any = (
                self.client.beta.messages.stream(**request, betas=[COMPACTION_BETA])
                if beta
                else self.client.messages.stream(**request)
            )
            with opened as stream:
                kind = stream.response.headers.get("content-type", "")
                if "text/event-stream" not in kind:
                    final = _plain_message(stream.response.read(), kind)
                    on_text(_text_of(final))
                else:
                    for text in stream.text_stream:
                        on_text(text)
                    final = stream.get_final_message()
        except UnicodeEncodeError as error:
            # Not the network: a text in the request cannot be sent as UTF-8 (half a UTF-16
            # surrogate pair an endpoint sent earlier). Asking again would fail the same way.
            raise ModelError(
                f"the request cannot be sent: {error.reason} in a text of the conversation "
                "(half a UTF-16 surrogate pair, which an earlier response held)"
            ) from None
        except (httpx2.TransportError, ValueError) as error:
            # A cut stream or a body that is not JSON: the SDK does not retry these.
            raise _StreamCut(f"{type(error).__name__}: {error}") from error
        except anthropic.APIStatusError as error:
            kind, message = _error_detail(error)
            if error.status_code < 400 and kind in _RETRYABLE_STREAM_ERRORS:
                # An error event inside a stream that began with 200 (overloaded mid-answer):
                # the SDK raises it after the response started, so only we can ask again.
                raise _StreamCut(f"{kind}: {message}") from error
            raise
        usage = final.usage.model_dump(exclude_none=True)
        return ModelTurn(
            content=tuple(_block_json(b) for b in final.content),
            stop_reason=str(final.stop_reason),
            usage={k: int(usage[k]) for k in _USAGE_KEYS if isinstance(usage.get(k), int)},
            model=final.model,
        )


def _plain_message(body: bytes, kind: str) -> anthropic.types.Message:
    """A whole message sent where a stream was asked for (some gateways do), or a clear error."""
    try:
        data = json.loads(body)
        if not isinstance(data, dict) or data.get("type") != "message":
            raise ValueError("not a message object")
        return anthropic.types.Message.model_validate(data)
    except ValueError as error:
        raise ModelError(
            f"the endpoint answered a streaming request with {kind or 'no content type'} "
            f"that is not a Messages-API message ({error}); check ANTHROPIC_BASE_URL points at "
            "a Messages API that supports streaming"
        ) from None


def _text_of(message: anthropic.types.Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def _block_json(block: Any) -> dict[str, Any]:
    """A content block as plain JSON; a compaction block exactly as it came, nulls included."""
    if block.type == "compaction":
        return dict(block.model_dump(mode="json", exclude_unset=True))
    return dict(block.model_dump(mode="json", exclude_none=True))


class _StreamCut(Exception):
    """The response broke after it started, or was not JSON: worth asking again."""


def _error_detail(error: anthropic.APIStatusError) -> tuple[str, str]:
    """The error's ``type`` and the first line of its message, from the body when it has one."""
    body = error.body if isinstance(error.body, Mapping) else {}
    detail = body.get("error", {}) if isinstance(body.get("error"), Mapping) else {}
    message = str(detail.get("message") or error.message or "no message")
    return str(detail.get("type", "error")), message.splitlines()[0]


def _describe_status(error: anthropic.APIStatusError, retries: int, model: str = "") -> str:
    kind, message = _error_detail(error)
    if error.status_code < 400:
        return f"API error inside the response stream ({kind}): {message}"
    line = f"API error {error.status_code} ({kind}): {message}"
    if error.status_code == 401:
        return line + "; check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
    if error.status_code == 404:
        return (
            line + f"; the endpoint does not know model {model!r}: pick another with --model "
            "(or ANTHROPIC_MODEL), or check ANTHROPIC_BASE_URL"
        )
    if error.status_code in (408, 409, 429) or error.status_code >= 500:
        return line + f" (after {retries} retries)"
    return line


def _describe_connection(
    error: anthropic.APIConnectionError, retries: int, read_timeout: float = DEFAULT_READ_TIMEOUT
) -> str:
    if isinstance(error, anthropic.APITimeoutError):
        return (
            f"the API sent nothing for {read_timeout:g} s (after {retries} retries); raise "
            "--read-timeout for a slow endpoint, or check ANTHROPIC_BASE_URL"
        )
    return (
        f"the API could not be reached (after {retries} retries): {error}; check ANTHROPIC_BASE_URL"
    )
