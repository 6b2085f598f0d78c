"""Tests for the Anthropic model client, through the real SDK against the loopback Messages API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from orchestrator.anthropic_model import AnthropicModel
from orchestrator.conversation import Conversation
from orchestrator.protocols import ContextTooLong, ModelError
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, ServerLimits, check_request

TEXT = "I will list the files, then read the main module."
TOOL_INPUT: dict[str, Any] = {"command": "ls -la", "timeout": 30}
ANSWER: dict[str, Any] = {
    "text": TEXT,
    "tool_calls": [{"name": "bash", "input": TOOL_INPUT, "id": "toolu_abc"}],
    "usage": {
        "input_tokens": 120,
        "output_tokens": 45,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
    },
}


def _server(*turns: Mapping[str, Any]) -> MessagesServer:
    return MessagesServer(parse_script({"name": "sdk", "turns": list(turns)}, source="test"))


def _model(server: MessagesServer, retries: int = 2) -> AnthropicModel:
    return AnthropicModel(api_key="test-key", base_url=server.base_url, max_retries=retries)


def _request() -> dict[str, Any]:
    conversation = Conversation()
    conversation.add_user_text("List the files.")
    tools = [
        {
            "name": "bash",
            "description": "Run a command.",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ]
    return conversation.request(
        model="claude-test", system="You are a test agent.", tools=tools, max_tokens=512
    )


def _fault(status: int) -> dict[str, Any]:
    return {"fault": "status", "status": status, "retry_after": 0.01}


def _assert_clean(server: MessagesServer) -> None:
    assert server.violations == []
    for request in server.requests:
        assert check_request(request) == []


# --- answers ------------------------------------------------------------------------------


def test_streamed_text_reaches_on_text_in_chunks() -> None:
    chunks: list[str] = []
    with _server(ANSWER) as server:
        turn = _model(server).respond(_request(), chunks.append)
    assert len(chunks) > 1
    assert "".join(chunks) == TEXT
    assert turn.text == TEXT
    assert server.requests[0]["stream"] is True
    _assert_clean(server)


def test_tool_use_blocks_come_back_as_plain_dicts_with_parsed_input() -> None:
    with _server(ANSWER) as server:
        turn = _model(server).respond(_request(), lambda _text: None)
    assert turn.content == (
        {"type": "text", "text": TEXT},
        {"type": "tool_use", "id": "toolu_abc", "name": "bash", "input": TOOL_INPUT},
    )
    assert all(type(block) is dict for block in turn.content)
    assert turn.tool_uses[0]["input"] == TOOL_INPUT
    assert turn.stop_reason == "tool_use"
    assert turn.model == "claude-test"


def test_usage_has_the_four_token_counts_as_ints() -> None:
    with _server(ANSWER) as server:
        turn = _model(server).respond(_request(), lambda _text: None)
    assert dict(turn.usage) == {
        "input_tokens": 120,
        "output_tokens": 45,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 7,
    }


@pytest.mark.parametrize("stop_reason", ["end_turn", "max_tokens", "pause_turn", "refusal"])
def test_the_stop_reason_is_passed_on(stop_reason: str) -> None:
    with _server({"text": "Partial", "stop_reason": stop_reason}) as server:
        turn = _model(server).respond(_request(), lambda _text: None)
    assert turn.stop_reason == stop_reason
    assert turn.tool_uses == ()


def test_the_request_goes_out_as_built_with_its_breakpoints() -> None:
    request = _request()
    with _server(ANSWER) as server:
        _model(server).respond(request, lambda _text: None)
    (received,) = server.requests
    assert {k: v for k, v in received.items() if k != "stream"} == request
    assert "test-key" in str(server.request_headers[0])
    _assert_clean(server)


def test_key_and_endpoint_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with _server(ANSWER) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "env-test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        turn = AnthropicModel(max_retries=0).respond(_request(), lambda _text: None)
    assert turn.text == TEXT
    assert "env-test-key" in str(server.request_headers[0])


def test_negative_retries_are_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        AnthropicModel(api_key="test-key", max_retries=-1)


# --- retries ------------------------------------------------------------------------------


def test_a_529_and_a_429_are_survived() -> None:
    with _server(_fault(529), _fault(429), ANSWER) as server:
        turn = _model(server, retries=2).respond(_request(), lambda _text: None)
    assert turn.text == TEXT
    assert len(server.requests) == 3
    assert server.served == 1
    _assert_clean(server)


def test_a_persistent_529_becomes_one_line_mentioning_it() -> None:
    with _server(_fault(529), _fault(529), _fault(529), ANSWER) as server:
        with pytest.raises(ModelError) as raised:
            _model(server, retries=1).respond(_request(), lambda _text: None)
        assert len(server.requests) == 2
    message = str(raised.value)
    assert "529" in message
    assert "overloaded" in message
    assert "\n" not in message
    assert raised.value.__cause__ is None


def test_no_retries_means_one_request() -> None:
    with _server(_fault(529), ANSWER) as server:
        with pytest.raises(ModelError, match="529"):
            _model(server, retries=0).respond(_request(), lambda _text: None)
        assert len(server.requests) == 1


def test_a_401_names_the_api_key_and_is_not_retried() -> None:
    with _server(_fault(401), ANSWER) as server:
        with pytest.raises(ModelError) as raised:
            _model(server, retries=3).respond(_request(), lambda _text: None)
        assert len(server.requests) == 1
    assert "401" in str(raised.value)
    assert "ANTHROPIC_API_KEY" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_400_is_not_retried_and_keeps_the_service_message() -> None:
    bad = {"fault": "status", "status": 400, "body": "messages.0: bad\nsecond line"}
    with _server(bad, ANSWER) as server:
        with pytest.raises(ModelError) as raised:
            _model(server, retries=3).respond(_request(), lambda _text: None)
        assert len(server.requests) == 1
    assert str(raised.value) == "API error 400 (invalid_request_error): messages.0: bad"


@pytest.mark.parametrize("kind", ["cut_stream", "bad_json"])
def test_a_broken_response_is_asked_again_and_then_succeeds(kind: str) -> None:
    chunks: list[str] = []
    with _server({"fault": kind}, ANSWER) as server:
        turn = _model(server, retries=1).respond(_request(), chunks.append)
    assert turn.text == TEXT
    assert len(server.requests) == 2
    assert server.served == 1
    assert any("broke off" in chunk for chunk in chunks)
    assert "".join(chunks).endswith(TEXT)
    _assert_clean(server)


def test_a_request_that_cannot_be_encoded_is_one_error_and_never_asked_again() -> None:
    # Half a surrogate pair in the conversation (an endpoint sent it in an earlier answer):
    # no attempt can send it, so it is not a cut stream to retry.
    conversation = Conversation()
    conversation.add_user_text("List the files \udc80.")
    request = conversation.request(
        model="claude-test", system="You are a test agent.", tools=[], max_tokens=512
    )
    chunks: list[str] = []
    with _server(ANSWER) as server:
        with pytest.raises(ModelError, match="cannot be sent: surrogates not allowed"):
            _model(server, retries=3).respond(request, chunks.append)
        assert server.served == 0
    assert not any("broke off" in chunk for chunk in chunks)


def test_a_response_that_keeps_breaking_gives_up_with_one_line() -> None:
    with _server({"fault": "cut_stream"}, {"fault": "cut_stream"}, ANSWER) as server:
        with pytest.raises(ModelError) as raised:
            _model(server, retries=1).respond(_request(), lambda _text: None)
        assert len(server.requests) == 2
    assert "broke off 2 times" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_nothing_listening_becomes_a_connection_error() -> None:
    with _server(ANSWER) as server:
        base_url = server.base_url
    model = AnthropicModel(api_key="test-key", base_url=base_url, max_retries=0)
    with pytest.raises(ModelError, match=r"could not be reached .*check ANTHROPIC_BASE_URL"):
        model.respond(_request(), lambda _text: None)


# --- an error event inside a started stream -----------------------------------------------
# The loopback MessagesServer has no fault for this, so a few lines of http.server play it.


def _sse(name: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    },
}
_GOOD_STREAM = b"".join(
    [
        _sse("message_start", _START),
        _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        _sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "Recovered."},
            },
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 3},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
)


@contextmanager
def _stream_error_server(kind: str, failures: int) -> Iterator[tuple[str, list[int]]]:
    """Answer the first ``failures`` requests with an error event after the stream began."""
    seen: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append(len(seen) + 1)
            error = {"type": "error", "error": {"type": kind, "message": "Overloaded"}}
            body = _GOOD_STREAM
            if len(seen) <= failures:
                body = _sse("message_start", _START) + _sse("error", error)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        host, port = httpd.server_address[:2]
        yield f"http://{host!s}:{port}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_an_overloaded_error_inside_the_stream_is_asked_again() -> None:
    chunks: list[str] = []
    with _stream_error_server("overloaded_error", failures=1) as (base_url, seen):
        model = AnthropicModel(api_key="test-key", base_url=base_url, max_retries=2)
        turn = model.respond(_request(), chunks.append)
    assert turn.text == "Recovered."
    assert turn.stop_reason == "end_turn"
    assert len(seen) == 2


def test_an_overloaded_stream_that_never_recovers_gives_up_with_one_line() -> None:
    with _stream_error_server("overloaded_error", failures=5) as (base_url, seen):
        model = AnthropicModel(api_key="test-key", base_url=base_url, max_retries=1)
        with pytest.raises(ModelError) as raised:
            model.respond(_request(), lambda _text: None)
    assert len(seen) == 2
    assert "overloaded_error" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_request_error_inside_the_stream_is_not_asked_again() -> None:
    with _stream_error_server("invalid_request_error", failures=5) as (base_url, seen):
        model = AnthropicModel(api_key="test-key", base_url=base_url, max_retries=3)
        with pytest.raises(ModelError) as raised:
            model.respond(_request(), lambda _text: None)
    assert len(seen) == 1
    assert (
        str(raised.value)
        == "API error inside the response stream (invalid_request_error): Overloaded"
    )


# --- endpoints ------------------------------------------------------------------------------


def test_a_gateway_that_answers_a_stream_with_plain_json_is_read_as_that_message() -> None:
    script = parse_script({"name": "gateway", "turns": [ANSWER]}, source="test")
    chunks: list[str] = []
    with MessagesServer(script, streams=False) as server:
        turn = _model(server, retries=0).respond(_request(), chunks.append)
    assert server.requests[0]["stream"] is True
    assert "".join(chunks) == TEXT
    assert turn.tool_uses[0]["input"] == TOOL_INPUT
    assert turn.usage["cache_read_input_tokens"] == 100


@contextmanager
def _answering(status: int, content_type: str, body: bytes) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_plain_reply_that_is_not_a_message_is_one_clear_error() -> None:
    with _answering(200, "text/html", b"<html>login page</html>") as url:
        model = AnthropicModel(api_key="test-key", base_url=url, max_retries=0)
        with pytest.raises(ModelError) as error:
            model.respond(_request(), lambda _text: None)
    message = str(error.value)
    assert "answered a streaming request with text/html" in message
    assert "ANTHROPIC_BASE_URL" in message
    assert "\n" not in message


def test_an_auth_token_is_sent_as_a_bearer_token() -> None:
    with _server({"text": "hello"}) as server:
        model = AnthropicModel(auth_token="token-123", base_url=server.base_url, max_retries=0)
        assert model.respond(_request(), lambda _text: None).text == "hello"
        headers = server.request_headers[0]
    assert headers["authorization"] == "Bearer token-123"
    assert "x-api-key" not in headers


def test_an_unknown_model_points_at_the_model_flag() -> None:
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-x"}}
    with (
        _server({"fault": "status", "status": 404, "body": body}) as server,
        pytest.raises(ModelError) as error,
    ):
        _model(server, retries=0).respond(_request(), lambda _text: None)
    assert "API error 404 (not_found_error)" in str(error.value)
    assert "does not know model 'claude-test': pick another with --model" in str(error.value)


def test_a_host_that_never_answers_fails_after_the_read_timeout() -> None:
    with _server({"fault": "slow", "seconds": 5}, {"text": "too late"}) as server:
        model = AnthropicModel(
            api_key="test-key", base_url=server.base_url, max_retries=0, read_timeout=0.5
        )
        with pytest.raises(ModelError) as error:
            model.respond(_request(), lambda _text: None)
    assert str(error.value) == (
        "the API sent nothing for 0.5 s (after 0 retries); raise --read-timeout for a slow "
        "endpoint, or check ANTHROPIC_BASE_URL"
    )


# --- the model's limits, and the refusal as too long -----------------------------------------


def _limited(limits: ServerLimits, *turns: Mapping[str, Any]) -> MessagesServer:
    script = parse_script({"name": "sdk", "turns": list(turns) or [{"text": "ok"}]}, source="t")
    return MessagesServer(script, limits=limits)


def test_limits_come_from_models_retrieve_once_per_model() -> None:
    with _limited(ServerLimits(max_input_tokens=123_000, max_tokens=9_000)) as server:
        model = _model(server)
        first = model.limits("claude-a")
        assert (first.max_input_tokens, first.max_tokens, first.source) == (
            123_000,
            9_000,
            "models.retrieve",
        )
        assert first.supports("thinking", "types", "adaptive")
        assert model.limits("claude-a") is first
        model.limits("claude-b")
        assert server.model_lookups == ["claude-a", "claude-b"]


def test_an_unknown_model_is_a_model_error_saying_why() -> None:
    with (
        _limited(ServerLimits(known_models=frozenset({"known"}))) as server,
        pytest.raises(ModelError, match=r"models.retrieve\('nope'\) answered 404"),
    ):
        _model(server, retries=0).limits("nope")


def test_a_prompt_too_long_400_is_a_context_too_long_error() -> None:
    limits = ServerLimits(max_input_tokens=1000)
    with _limited(limits) as server:
        request = Conversation()
        request.add_user_text("x" * 9000)
        body = request.request(model="claude-a", system="s", tools=[], max_tokens=64)
        with pytest.raises(ContextTooLong, match=r"prompt is too long: \d+ tokens > 1000 maximum"):
            _model(server).respond(body, lambda _text: None)
        assert len(server.refusals) == 1  # a 400 is not retried
