"""Tests for the loopback Messages API server and the request rules, driven by the real SDK."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from orchestrator.script import parse_script
from orchestrator.testing import (
    MessagesServer,
    ServerLimits,
    check_request,
    count_tokens,
    default_summary,
)

MODEL = "claude-test"
PROMPT: list[Any] = [{"role": "user", "content": "Plan the work."}]


def _server(*turns: dict[str, Any]) -> MessagesServer:
    return MessagesServer(parse_script({"name": "t", "turns": list(turns)}, source="t.json"))


def _client(server: MessagesServer, retries: int = 0) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=server.base_url, max_retries=retries)


@pytest.fixture
def planning_server() -> Iterator[MessagesServer]:
    with _server(
        {
            "text": "I'll plan first, then read the module.",
            "tool_calls": [
                {"name": "todo", "input": {"items": [{"content": "a", "status": "pending"}]}},
                {"name": "read_file", "input": {"path": "src/app.py"}},
            ],
            "usage": {"input_tokens": 11, "output_tokens": 22},
        }
    ) as server:
        yield server


PLANNING_BLOCKS = [
    {"type": "text", "text": "I'll plan first, then read the module."},
    {
        "type": "tool_use",
        "id": "toolu_01_0",
        "name": "todo",
        "input": {"items": [{"content": "a", "status": "pending"}]},
    },
    {"type": "tool_use", "id": "toolu_01_1", "name": "read_file", "input": {"path": "src/app.py"}},
]


# --- the server through the SDK ------------------------------------------------------------


def test_create_gets_the_scripted_message_as_json(planning_server: MessagesServer) -> None:
    message = _client(planning_server).messages.create(model=MODEL, max_tokens=256, messages=PROMPT)
    assert [block.to_dict() for block in message.content] == PLANNING_BLOCKS
    assert message.id.startswith("msg_")
    assert message.model == MODEL
    assert message.stop_reason == "tool_use"
    assert message.stop_sequence is None
    assert message.usage.input_tokens == 11
    assert message.usage.output_tokens == 22
    assert message.usage.cache_read_input_tokens == 0
    assert planning_server.served == 1
    assert planning_server.requests == [{"model": MODEL, "max_tokens": 256, "messages": PROMPT}]
    assert planning_server.violations == []


def test_request_headers_are_kept_for_inspection(planning_server: MessagesServer) -> None:
    _client(planning_server).messages.create(model=MODEL, max_tokens=256, messages=PROMPT)
    (headers,) = planning_server.request_headers
    assert "test-key" in headers.get("x-api-key", headers.get("authorization", ""))
    assert "anthropic-version" in headers


def test_stream_sends_events_the_sdk_accumulates(planning_server: MessagesServer) -> None:
    with _client(planning_server).messages.stream(
        model=MODEL, max_tokens=256, messages=PROMPT
    ) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == "I'll plan first, then read the module."
    assert [block.to_dict() for block in final.content] == PLANNING_BLOCKS
    assert final.stop_reason == "tool_use"
    assert final.usage.input_tokens == 11
    assert final.usage.output_tokens == 22
    assert planning_server.requests[0]["stream"] is True
    assert planning_server.served == 1


def test_stream_event_sequence_matches_the_service() -> None:
    with (
        _server(
            {"text": "hello", "tool_calls": [{"name": "bash", "input": {"c": "ls"}}]}
        ) as server,
        _client(server).messages.stream(model=MODEL, max_tokens=64, messages=PROMPT) as stream,
    ):
        kinds = [event.type for event in stream]
    raw = [k for k in kinds if k not in ("text", "input_json")]
    assert raw[0] == "message_start"
    assert raw[-2:] == ["message_delta", "message_stop"]
    assert raw.count("content_block_start") == raw.count("content_block_stop") == 2
    assert kinds.count("input_json") >= 1
    assert kinds.count("text") > 1


def test_overloaded_then_answer_succeeds_through_sdk_retries() -> None:
    with _server({"fault": "status", "status": 529, "retry_after": 0.01}, {"text": "ok"}) as server:
        message = _client(server, retries=2).messages.create(
            model=MODEL, max_tokens=64, messages=PROMPT
        )
        assert message.content[0].to_dict() == {"type": "text", "text": "ok"}
        assert server.served == 1
        assert len(server.requests) == 2
        assert [h["x-stainless-retry-count"] for h in server.request_headers] == ["0", "1"]


def test_persistent_overload_raises_after_the_retries() -> None:
    fault = {"fault": "status", "status": 529, "retry_after": 0.01}
    with _server(fault, fault, fault) as server:
        with pytest.raises(anthropic.OverloadedError) as caught:
            _client(server, retries=1).messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert len(server.requests) == 2
        assert server.served == 0
    assert caught.value.status_code == 529


@pytest.mark.parametrize(
    ("status", "error_class", "error_type"),
    [
        (429, anthropic.RateLimitError, "rate_limit_error"),
        (529, anthropic.OverloadedError, "overloaded_error"),
        (500, anthropic.InternalServerError, "api_error"),
        (400, anthropic.BadRequestError, "invalid_request_error"),
    ],
)
def test_status_faults_carry_the_service_error_type(
    status: int, error_class: type[anthropic.APIStatusError], error_type: str
) -> None:
    fault = {"fault": "status", "status": status, "retry_after": 3, "body": "scripted"}
    with _server(fault) as server, pytest.raises(error_class) as caught:
        _client(server).messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": error_type, "message": "scripted"},
    }
    assert caught.value.response.headers["retry-after"] == "3"


def test_status_fault_with_an_object_body_sends_it_verbatim() -> None:
    body = {"type": "error", "error": {"type": "billing_error", "message": "no credit"}}
    fault = {"fault": "status", "status": 402, "body": body}
    with _server(fault) as server, pytest.raises(anthropic.APIStatusError) as caught:
        _client(server).messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
    assert caught.value.status_code == 402
    assert caught.value.body == body


def test_disconnect_surfaces_as_a_connection_error() -> None:
    with _server({"fault": "disconnect"}, {"text": "later"}) as server:
        client = _client(server)
        with pytest.raises(anthropic.APIConnectionError):
            client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert server.served == 0
        later = client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert later.content[0].to_dict() == {"type": "text", "text": "later"}


def test_disconnect_is_retried_by_the_sdk() -> None:
    with _server({"fault": "disconnect"}, {"text": "second try"}) as server:
        message = _client(server, retries=1).messages.create(
            model=MODEL, max_tokens=64, messages=PROMPT
        )
        assert message.content[0].to_dict() == {"type": "text", "text": "second try"}
        assert len(server.requests) == 2


def test_cut_stream_on_a_plain_request_behaves_like_disconnect() -> None:
    with _server({"fault": "cut_stream"}) as server, pytest.raises(anthropic.APIConnectionError):
        _client(server).messages.create(model=MODEL, max_tokens=64, messages=PROMPT)


def test_cut_stream_breaks_the_stream_mid_message() -> None:
    # The SDK does not wrap errors raised while a stream is read: the transport error arrives
    # as is, which is what a model client must be ready to catch.
    with (
        _server({"fault": "cut_stream"}) as server,
        pytest.raises(httpx2.RemoteProtocolError),
        _client(server).messages.stream(model=MODEL, max_tokens=64, messages=PROMPT) as stream,
    ):
        stream.get_final_message()


def test_bad_json_surfaces_as_a_decode_error() -> None:
    # The SDK hands the JSON decoder's error through unwrapped.
    with _server({"fault": "bad_json"}, {"fault": "bad_json"}) as server:
        client = _client(server)
        with pytest.raises(json.JSONDecodeError):
            client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        with (
            pytest.raises(json.JSONDecodeError),
            client.messages.stream(model=MODEL, max_tokens=64, messages=PROMPT) as stream,
        ):
            stream.get_final_message()
        assert server.served == 0


def test_slow_fault_delays_but_does_not_consume_a_request() -> None:
    with _server({"fault": "slow", "seconds": 0.05}, {"text": "eventually"}) as server:
        message = _client(server).messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert message.content[0].to_dict() == {"type": "text", "text": "eventually"}
        assert len(server.requests) == 1
        assert server.served == 1


def test_exhausted_script_answers_500_once_and_records_it() -> None:
    with _server({"text": "only"}) as server:
        client = _client(server, retries=2)
        client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        with pytest.raises(anthropic.InternalServerError) as caught:
            client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert len(server.requests) == 2
        assert server.violations == ["request 2: script 't' has no turn 2; it has 1"]
    assert "has no turn 2" in str(caught.value)


TOOLS: list[Any] = [{"name": "b", "input_schema": {"type": "object"}}]


def test_rule_breaking_request_gets_400_and_keeps_the_script() -> None:
    broken: list[Any] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<reminder>update the plan</reminder>"},
                {"type": "tool_result", "tool_use_id": "a", "content": "done"},
            ],
        },
    ]
    with _server({"text": "fine"}) as server:
        client = _client(server)
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(model=MODEL, max_tokens=64, messages=broken, tools=TOOLS)
        assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
        assert "tool_result" in caught.value.body["error"]["message"]  # type: ignore[index]
        (violation,) = server.violations
        assert violation.startswith("request 1: messages.2.content.0: a text block comes before")
        assert server.served == 0
        message = client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert message.content[0].to_dict() == {"type": "text", "text": "fine"}


def test_expectations_are_checked_across_a_tool_round() -> None:
    with _server(
        {"text": "Reading.", "tool_calls": [{"name": "read_file", "input": {"path": "a"}}]},
        {
            "text": "Done.",
            "expect": [{"is_error": False, "contains": "hello"}],
            "expect_reminder": True,
        },
        {"text": "Again.", "expect": [{"is_error": True}]},
    ) as server:
        client = _client(server)
        first = client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        tool_use = first.content[1].to_dict()
        conversation: list[Any] = [
            *PROMPT,
            {"role": "assistant", "content": [b.to_dict() for b in first.content]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tool_use["id"], "content": "hello"},
                    {"type": "text", "text": "<reminder>keep the plan current</reminder>"},
                ],
            },
        ]
        client.messages.create(model=MODEL, max_tokens=64, messages=conversation, tools=TOOLS)
        assert server.violations == []
        client.messages.create(model=MODEL, max_tokens=64, messages=conversation, tools=TOOLS)
        assert server.violations == [
            "turn 3: expected tool result 1 to be an error, got a success: 'hello'",
        ]
        assert server.served == 3


def test_base_url_needs_a_running_server() -> None:
    server = _server({"text": "x"})
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    with server:
        assert server.base_url.startswith("http://127.0.0.1:")


# --- check_request -------------------------------------------------------------------------


def _tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": "ls"}}


def _tool_result(tool_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text}


VALID: dict[str, Any] = {
    "model": MODEL,
    "max_tokens": 1024,
    "system": [
        {"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}
    ],
    "tools": [
        {"name": "bash", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}
    ],
    "messages": [
        {"role": "user", "content": "Refactor the module."},
        {"role": "assistant", "content": [{"type": "text", "text": "Plan:"}, _tool_use("t1")]},
        {"role": "user", "content": [_tool_result("t1")]},
        {"role": "assistant", "content": [_tool_use("t2"), _tool_use("t3")]},
        {
            "role": "user",
            "content": [
                _tool_result("t3", "Error: nope"),
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "listing"}],
                    "cache_control": {"type": "ephemeral"},
                },
                {"type": "text", "text": "<reminder>update the todos</reminder>"},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "All done."}]},
        {"role": "user", "content": [{"type": "text", "text": "Thanks", "cache_control": {}}]},
    ],
}


def _broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(VALID)
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


_DELETE = object()


def test_a_valid_multi_round_body_has_no_violations() -> None:
    assert check_request(VALID) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_broken(("model",), _DELETE), "model: field required"),
        (_broken(("model",), ""), "model: must be a non-empty string"),
        (_broken(("max_tokens",), _DELETE), "max_tokens: field required"),
        (_broken(("max_tokens",), 0), "max_tokens: must be a whole number of at least 1"),
        (_broken(("messages",), _DELETE), "messages: field required"),
        (_broken(("messages",), []), "messages: must contain at least one message"),
        (
            _broken(("messages", 0), {"role": "assistant", "content": "hi"}),
            "messages.0.role: the first message must be a user message, got 'assistant'",
        ),
        (
            _broken(("messages", 5), {"role": "user", "content": "again"}),
            "messages.5.role: roles must alternate between user and assistant; "
            "messages.4 is also a 'user' message",
        ),
        (
            _broken(("messages", 6, "role"), "system"),
            "messages.6.role: must be 'user' or 'assistant', got 'system'",
        ),
        (
            _broken(("messages", 2, "content"), [{"type": "text", "text": "no results"}]),
            "messages.2: tool_use id 't1' from messages.1 has no tool_result block; "
            "every tool_use needs exactly one",
        ),
        (
            _broken(("messages", 2, "content"), [_tool_result("t1"), _tool_result("t1")]),
            "messages.2: tool_use id 't1' from messages.1 has 2 tool_result blocks; "
            "every tool_use needs exactly one",
        ),
        (
            _broken(("messages", 6), {"role": "user", "content": [_tool_result("t9")]}),
            "messages.6.content.0: tool_result for 't9' has no matching tool_use "
            "in the preceding assistant message",
        ),
        (
            _broken(
                ("messages", 2, "content"),
                [{"type": "text", "text": "<reminder>x</reminder>"}, _tool_result("t1")],
            ),
            "messages.2.content.0: a text block comes before the tool_result at content.1",
        ),
        (
            _broken(("messages", 1, "content", 0, "text"), ""),
            "messages.1.content.0: text content blocks must contain non-whitespace text",
        ),
        (
            _broken(("messages", 0, "content"), "  \n"),
            "messages.0.content: text content must contain non-whitespace text",
        ),
        (
            _broken(("system", 0, "text"), " "),
            "system.0: text content blocks must contain non-whitespace text",
        ),
        (
            _broken(("messages", 4, "content", 1, "content", 0, "text"), ""),
            "messages.4.content.1.content.0: text content blocks must contain non-whitespace",
        ),
        (
            _broken(("messages", 1, "content", 0, "cache_control"), {"type": "ephemeral"}),
            "cache_control: 5 breakpoints found across tools, system and messages; "
            "at most 4 are allowed",
        ),
        (
            _broken(("messages", 0, "content"), [_tool_use("x")]),
            "messages.0.content.0: tool_use blocks may only appear in assistant messages",
        ),
    ],
)
def test_each_rule_is_reported(body: dict[str, Any], expected: str) -> None:
    problems = check_request(body)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_tool_use_at_the_end_of_the_conversation_is_unanswered() -> None:
    body = copy.deepcopy(VALID)
    body["messages"] = body["messages"][:2]
    assert check_request(body) == [
        "messages.1: tool_use ids t1 have no tool_result blocks immediately after; the next "
        "message must be a user message with one tool_result per tool_use"
    ]


def test_text_after_the_tool_results_is_fine_and_text_before_is_one_violation() -> None:
    after: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 10,
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [_tool_use("a"), _tool_use("b")]},
            {
                "role": "user",
                "content": [
                    _tool_result("a"),
                    _tool_result("b"),
                    {"type": "text", "text": "<reminder>r</reminder>"},
                ],
            },
        ],
    }
    assert check_request(after) == []
    between = copy.deepcopy(after)
    content: list[Any] = between["messages"][2]["content"]
    content.insert(1, content.pop())
    assert check_request(between) == [
        "messages.2.content.1: a text block comes before the tool_result at content.2; in a "
        "user message every tool_result block must come first, with any text after them"
    ]


def test_garbage_bodies_are_reported_not_raised() -> None:
    body = {"model": MODEL, "max_tokens": 5, "messages": ["hi", {"role": "user", "content": 3}]}
    assert check_request(body) == [
        "messages.0: must be an object with role and content",
        "messages.1.content: must be a string or a list of content blocks",
    ]


# --- limits: the Models API, count_tokens, and the too-long refusal -------------------------


def _limited(limits: ServerLimits, *turns: dict[str, Any]) -> MessagesServer:
    script = parse_script({"name": "t", "turns": list(turns) or [{"text": "ok"}]}, source="t")
    return MessagesServer(script, limits=limits, summarize=default_summary)


def test_models_retrieve_reads_the_configured_window_through_the_sdk() -> None:
    with _limited(ServerLimits(max_input_tokens=30_000, max_tokens=4096)) as server:
        info = _client(server).models.retrieve("claude-test")
        assert (info.id, info.max_input_tokens, info.max_tokens) == ("claude-test", 30_000, 4096)
        assert info.capabilities is not None and info.capabilities.thinking.types.adaptive.supported
        assert server.violations == []


def test_an_unknown_model_is_a_404_as_the_service_answers() -> None:
    with (
        _limited(ServerLimits(known_models=frozenset({"known"}))) as server,
        pytest.raises(anthropic.NotFoundError),
    ):
        _client(server).models.retrieve("unknown")


def test_count_tokens_counts_what_the_limit_checks() -> None:
    messages: list[Any] = [{"role": "user", "content": "x" * 4000}]
    body = {"model": MODEL, "max_tokens": 64, "messages": messages}
    with _limited(ServerLimits()) as server:
        counted = _client(server).messages.count_tokens(model=MODEL, messages=messages)
        assert counted.input_tokens == count_tokens(body) > 900
        assert server.requests == []  # counting is not a turn


def test_a_request_over_the_window_gets_the_services_exact_400() -> None:
    with _limited(ServerLimits(max_input_tokens=1000), {"text": "fine"}) as server:
        client = _client(server)
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "x" * 8000}]
            )
        error = caught.value.body["error"]  # type: ignore[index]
        assert error["type"] == "invalid_request_error"
        assert re.fullmatch(r"prompt is too long: \d+ tokens > 1000 maximum", error["message"])
        assert server.refusals == [error["message"]]
        assert server.served == 0
        message = client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT, tools=TOOLS)
        assert message.content[0].to_dict() == {"type": "text", "text": "fine"}


def test_a_request_without_tools_is_summarised_without_taking_a_turn() -> None:
    with _limited(ServerLimits(), {"text": "scripted"}) as server:
        client = _client(server)
        summary = client.messages.create(model=MODEL, max_tokens=64, messages=PROMPT)
        assert "Scripted summary" in str(summary.content[0].to_dict()["text"])
        assert len(server.summary_requests) == 1 and server.served == 0
