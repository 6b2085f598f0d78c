"""Tests for the scripted-turn format, its parser and the scripted model."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.conversation import cache_usage
from orchestrator.protocols import ModelError
from orchestrator.script import (
    Expectation,
    Fault,
    Script,
    ScriptedModel,
    ScriptedTurn,
    ScriptError,
    check_expectations,
    load_script,
    parse_script,
)

DEMO: dict[str, Any] = {
    "name": "demo",
    "scripted": True,
    "description": "plan, then work",
    "turns": [
        {
            "text": "I'll plan first.",
            "tool_calls": [
                {"name": "todo", "input": {"items": [{"content": "a", "status": "pending"}]}},
                {"name": "read_file", "input": {"path": "x.py"}, "id": "toolu_custom"},
            ],
            "expect": [],
        },
        {"fault": "status", "status": 529, "retry_after": 0.5},
        {
            "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
            "expect": [
                {"is_error": False, "contains": "(0/1 completed)"},
                {"is_error": True, "contains": ["Error:", "path"]},
            ],
            "expect_reminder": False,
        },
    ],
}


def _request(*last_user_content: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": list(last_user_content)},
        ],
    }


def _result(text: str, *, is_error: bool = False, tool_id: str = "t") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    if is_error:
        block["is_error"] = True
    return block


def _turn(**fields: Any) -> ScriptedTurn:
    script = parse_script({"name": "t", "turns": [{"text": "hi", **fields}]}, source="t.json")
    entry = script.turns[0]
    assert isinstance(entry, ScriptedTurn)
    return entry


# --- parsing -------------------------------------------------------------------------------


def test_compact_turn_becomes_api_blocks_with_generated_ids() -> None:
    script = parse_script(DEMO, source="demo.json")
    assert script.name == "demo"
    assert script.scripted is True
    assert script.description == "plan, then work"
    first = script.turns[0]
    assert isinstance(first, ScriptedTurn)
    assert first.content == (
        {"type": "text", "text": "I'll plan first."},
        {
            "type": "tool_use",
            "id": "toolu_01_0",
            "name": "todo",
            "input": {"items": [{"content": "a", "status": "pending"}]},
        },
        {"type": "tool_use", "id": "toolu_custom", "name": "read_file", "input": {"path": "x.py"}},
    )
    assert first.stop_reason == "tool_use"
    assert first.usage is None
    assert first.expect == ()
    assert first.expect_reminder is None


def test_generated_ids_follow_the_turn_number() -> None:
    script = parse_script(
        {
            "name": "ids",
            "turns": [
                {"text": "one"},
                {"tool_calls": [{"name": "a", "input": {}}, {"name": "b"}]},
            ],
        },
        source="ids.json",
    )
    second = script.turns[1]
    assert isinstance(second, ScriptedTurn)
    assert [b["id"] for b in second.content] == ["toolu_02_0", "toolu_02_1"]
    assert second.content[1]["input"] == {}
    assert second.stop_reason == "tool_use"
    first = script.turns[0]
    assert isinstance(first, ScriptedTurn)
    assert first.stop_reason == "end_turn"


def test_raw_turn_keeps_its_blocks_and_fields() -> None:
    third = parse_script(DEMO, source="demo.json").turns[2]
    assert third == ScriptedTurn(
        content=({"type": "text", "text": "Done."},),
        stop_reason="end_turn",
        usage={"input_tokens": 10, "output_tokens": 5},
        expect=(
            Expectation(is_error=False, contains=("(0/1 completed)",)),
            Expectation(is_error=True, contains=("Error:", "path")),
        ),
        expect_reminder=False,
    )


def test_raw_tool_use_defaults_stop_reason_to_tool_use() -> None:
    script = parse_script(
        {
            "name": "raw",
            "turns": [
                {"content": [{"type": "tool_use", "id": "x1", "name": "bash", "input": {"c": 1}}]},
                {"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"},
            ],
        },
        source="raw.json",
    )
    assert [getattr(t, "stop_reason", None) for t in script.turns] == ["tool_use", "max_tokens"]


def test_faults_parse_with_their_fields() -> None:
    script = parse_script(
        {
            "name": "faults",
            "turns": [
                {"fault": "status", "status": 429, "retry_after": 2, "body": "slow down"},
                {"fault": "status", "status": 500, "body": {"type": "error"}},
                {"fault": "disconnect"},
                {"fault": "cut_stream"},
                {"fault": "bad_json"},
                {"fault": "slow", "seconds": 0.25},
                {"text": "finally"},
            ],
        },
        source="faults.json",
    )
    assert script.turns[:6] == (
        Fault(kind="status", status=429, retry_after=2.0, body="slow down"),
        Fault(kind="status", status=500, body={"type": "error"}),
        Fault(kind="disconnect"),
        Fault(kind="cut_stream"),
        Fault(kind="bad_json"),
        Fault(kind="slow", seconds=0.25),
    )


def test_load_script_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps(DEMO), encoding="utf-8")
    assert load_script(path) == parse_script(DEMO, source="demo.json")


def test_load_script_reports_bad_json_with_position(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"name": "x",\n "turns": [}', encoding="utf-8")
    with pytest.raises(ScriptError, match=r"broken\.json: not valid JSON: .* line 2 column"):
        load_script(path)


def test_load_script_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"absent\.json: cannot read the script"):
        load_script(tmp_path / "absent.json")


def _with(change: object, index: int | None = None) -> dict[str, Any]:
    data = copy.deepcopy(DEMO)
    if index is None:
        assert isinstance(change, dict)
        data.update(change)
    else:
        data["turns"][index] = change
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "demo.json: a script must be a JSON object, got a list"),
        (_with({"name": ""}), "demo.json: name must be a non-empty string"),
        (_with({"scripted": "yes"}), "demo.json: scripted must be true or false"),
        (_with({"description": 3}), "demo.json: description must be a string"),
        (_with({"turns": []}), "demo.json: turns must be a non-empty list"),
        (_with({"turn": []}), "demo.json: turn is not a known field"),
        (_with("hello", 1), "demo.json: turn 2: an entry must be a JSON object, got a string"),
        (_with({"stop_reason": "end_turn"}, 0), "demo.json: turn 1: a turn needs text"),
        (_with({"text": ""}, 0), "demo.json: turn 1: text must be a non-empty string"),
        (_with({"text": 5}, 0), "demo.json: turn 1: text must be a non-empty string"),
        (_with({"tool_calls": {}}, 0), "demo.json: turn 1: tool_calls must be a list"),
        (_with({"tool_calls": []}, 0), "demo.json: turn 1: tool_calls must not be empty"),
        (
            _with({"tool_calls": ["todo"]}, 0),
            "demo.json: turn 1: tool_calls[0] must be an object",
        ),
        (
            _with({"tool_calls": [{"input": {}}]}, 2),
            "demo.json: turn 3: tool_calls[0].name must be a string",
        ),
        (
            _with({"tool_calls": [{"name": "a", "input": []}]}, 0),
            "demo.json: turn 1: tool_calls[0].input must be a JSON object",
        ),
        (
            _with({"tool_calls": [{"name": "a", "id": 7}]}, 0),
            "demo.json: turn 1: tool_calls[0].id must be a non-empty string",
        ),
        (
            _with({"tool_calls": [{"name": "a", "args": {}}]}, 0),
            "demo.json: turn 1: tool_calls[0]: args is not a known field",
        ),
        (
            _with({"tool_calls": [{"name": "a", "id": "toolu_custom"}]}, 2),
            "demo.json: turn 3: tool_calls[0].id 'toolu_custom' is already used by turn 1",
        ),
        (
            _with({"text": "a", "content": [{"type": "text", "text": "b"}]}, 0),
            "demo.json: turn 1: text cannot be combined with content",
        ),
        (_with({"content": []}, 0), "demo.json: turn 1: content must be a non-empty list"),
        (
            _with({"content": [{"text": "no type"}]}, 0),
            "demo.json: turn 1: content[0] must be an object with a string type",
        ),
        (
            _with({"content": [{"type": "text", "text": "  "}]}, 0),
            "demo.json: turn 1: content[0].text must be a non-empty string",
        ),
        (
            _with({"content": [{"type": "tool_use", "name": "a", "input": {}}]}, 0),
            "demo.json: turn 1: content[0].id must be a non-empty string",
        ),
        (
            _with({"content": [{"type": "tool_use", "id": "i", "name": "a", "input": 1}]}, 0),
            "demo.json: turn 1: content[0].input must be a JSON object",
        ),
        (
            _with({"text": "a", "stop_reason": "finished"}, 0),
            "demo.json: turn 1: stop_reason must be one of",
        ),
        (
            _with({"text": "a", "stop_reason": ["end_turn"]}, 0),
            "demo.json: turn 1: stop_reason must be one of",
        ),
        (_with({"text": "a", "usage": 5}, 0), "demo.json: turn 1: usage must be a JSON object"),
        (
            _with({"text": "a", "usage": {"tokens": 5}}, 0),
            "demo.json: turn 1: usage.tokens is not a usage field",
        ),
        (
            _with({"text": "a", "usage": {"output_tokens": -1}}, 0),
            "demo.json: turn 1: usage.output_tokens must be a whole number",
        ),
        (
            _with({"text": "a", "usage": {"output_tokens": True}}, 0),
            "demo.json: turn 1: usage.output_tokens must be a whole number",
        ),
        (_with({"text": "a", "expect": {}}, 0), "demo.json: turn 1: expect must be a list"),
        (
            _with({"text": "a", "expect": ["x"]}, 0),
            "demo.json: turn 1: expect[0] must be a JSON object",
        ),
        (
            _with({"text": "a", "expect": [{"is_error": "no"}]}, 0),
            "demo.json: turn 1: expect[0].is_error must be true or false",
        ),
        (
            _with({"text": "a", "expect": [{"contains": [1]}]}, 0),
            "demo.json: turn 1: expect[0].contains must be a string or a list of strings",
        ),
        (
            _with({"text": "a", "expect": [{"equals": 1}]}, 0),
            "demo.json: turn 1: expect[0].equals must be a string",
        ),
        (
            _with({"text": "a", "expect": [{"has": "x"}]}, 0),
            "demo.json: turn 1: expect[0]: has is not a known field",
        ),
        (
            _with({"text": "a", "expect_reminder": "yes"}, 0),
            "demo.json: turn 1: expect_reminder must be true or false",
        ),
        (_with({"text": "a", "stop": "x"}, 0), "demo.json: turn 1: stop is not a known field"),
        (_with({"fault": "timeout"}, 1), "demo.json: turn 2: fault must be one of"),
        (
            _with({"fault": "status"}, 1),
            "demo.json: turn 2: status must be an HTTP error status from 400 to 599",
        ),
        (
            _with({"fault": "status", "status": 200}, 1),
            "demo.json: turn 2: status must be an HTTP error status",
        ),
        (
            _with({"fault": "status", "status": 529, "retry_after": -1}, 1),
            "demo.json: turn 2: retry_after must be a number of seconds",
        ),
        (
            _with({"fault": "status", "status": 529, "body": 3}, 1),
            "demo.json: turn 2: body must be a string",
        ),
        (_with({"fault": "slow"}, 1), "demo.json: turn 2: seconds must be a number"),
        (
            _with({"fault": "slow", "seconds": "1"}, 1),
            "demo.json: turn 2: seconds must be a number",
        ),
        (
            _with({"fault": "disconnect", "status": 500}, 1),
            "demo.json: turn 2: status does not apply to a 'disconnect' fault",
        ),
        (
            _with({"fault": "slow", "seconds": 1, "text": "hi"}, 1),
            "demo.json: turn 2: text does not apply to a 'slow' fault",
        ),
    ],
)
def test_malformed_scripts_name_file_entry_and_field(data: object, message: str) -> None:
    with pytest.raises(ScriptError) as caught:
        parse_script(data, source="demo.json")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


# --- usage ---------------------------------------------------------------------------------


def test_usage_is_estimated_from_sizes_when_not_scripted() -> None:
    turn = _turn()
    request = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 400}]}
    usage = turn.usage_for(request)
    # No breakpoints: nothing is cached or written, all ~400 characters are plain input.
    assert usage["cache_read_input_tokens"] == 0
    assert usage["cache_creation_input_tokens"] == 0
    assert 100 <= usage["input_tokens"] <= 110
    assert usage["output_tokens"] == max(1, len(json.dumps(list(turn.content))) // 4)


def test_usage_models_the_prompt_cache_from_the_previous_request() -> None:
    turn = _turn()
    marked = {"type": "text", "text": "s" * 400, "cache_control": {"type": "ephemeral"}}
    opening: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "a" * 80}]}
    ]
    first = {"model": "m", "max_tokens": 10, "system": [marked], "messages": opening}
    second = {
        **first,
        "messages": [
            *opening,
            {"role": "assistant", "content": [{"type": "text", "text": "b" * 80}]},
            {"role": "user", "content": [{"type": "text", "text": "c" * 80}]},
        ],
    }
    written = turn.usage_for(first)
    assert written["cache_read_input_tokens"] == 0
    assert written["cache_creation_input_tokens"] >= 100
    again = turn.usage_for(second, first)
    assert again["cache_read_input_tokens"] == written["cache_creation_input_tokens"]
    assert again["input_tokens"] >= 40


def test_scripted_usage_overrides_the_estimate() -> None:
    turn = _turn(usage={"input_tokens": 7, "cache_read_input_tokens": 3})
    usage = turn.usage_for(None)
    assert usage["input_tokens"] == 7
    assert usage["cache_read_input_tokens"] == 3
    assert usage["cache_creation_input_tokens"] == 0
    assert usage["output_tokens"] >= 1


# --- expectations --------------------------------------------------------------------------


def test_expectations_hold() -> None:
    turn = _turn(
        expect=[
            {"is_error": False, "contains": "(1/4 completed)"},
            {"is_error": True, "equals": "Error: no such file"},
        ],
        expect_reminder=True,
    )
    request = _request(
        _result("[x] a\n(1/4 completed)"),
        _result("Error: no such file", is_error=True),
        {"type": "text", "text": "<reminder>update your todos</reminder>"},
    )
    assert check_expectations(turn, request) == []


def test_contains_mismatch_quotes_what_was_expected_and_got() -> None:
    turn = _turn(expect=[{"contains": "(1/4 completed)"}])
    request = _request(_result("Error: only one item may be in_progress", is_error=True))
    assert check_expectations(turn, request) == [
        "expected tool result 1 to contain '(1/4 completed)', "
        "got 'Error: only one item may be in_progress'"
    ]


def test_is_error_mismatches_in_both_directions() -> None:
    turn = _turn(expect=[{"is_error": True}, {"is_error": False}])
    request = _request(_result("fine"), _result("Error: bad", is_error=True))
    assert check_expectations(turn, request) == [
        "expected tool result 1 to be an error, got a success: 'fine'",
        "expected tool result 2 to succeed, got an error: 'Error: bad'",
    ]


def test_equals_mismatch_and_text_block_content() -> None:
    turn = _turn(expect=[{"equals": "ab"}])
    block = {
        "type": "tool_result",
        "tool_use_id": "t",
        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    }
    assert check_expectations(turn, _request(block)) == [
        "expected tool result 1 to equal 'ab', got 'a\\nb'"
    ]


def test_tool_result_count_mismatch() -> None:
    turn = _turn(expect=[{}, {}])
    assert check_expectations(turn, _request(_result("x"))) == [
        "expected 2 tool results, got 1 in the last user message"
    ]


def test_empty_expect_on_a_plain_prompt_holds() -> None:
    turn = _turn(expect=[])
    request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    assert check_expectations(turn, request) == []


def test_missing_reminder_is_reported_and_a_misplaced_one_is_named() -> None:
    turn = _turn(expect_reminder=True)
    assert check_expectations(turn, _request(_result("x"))) == [
        "expected a <reminder> text block after the tool results"
    ]
    misplaced = _request({"type": "text", "text": "<reminder>late</reminder>"}, _result("x"))
    assert check_expectations(turn, misplaced) == [
        "expected a <reminder> text block after the tool results "
        "(one comes before the tool results)"
    ]


def test_unwanted_reminder_is_reported() -> None:
    turn = _turn(expect_reminder=False)
    request = _request(_result("x"), {"type": "text", "text": "<reminder>x</reminder>"})
    assert check_expectations(turn, request) == [
        "expected no <reminder> text block, found '<reminder>x</reminder>'"
    ]
    assert check_expectations(turn, _request(_result("x"))) == []


def test_long_texts_are_shortened_in_mismatches() -> None:
    turn = _turn(expect=[{"equals": "short"}])
    (mismatch,) = check_expectations(turn, _request(_result("y" * 1000)))
    assert len(mismatch) < 300
    assert mismatch.endswith("...'")


# --- the scripted model --------------------------------------------------------------------


def _plain_request(text: str = "go") -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": text}]}


def test_scripted_model_plays_turns_in_order_and_streams_text() -> None:
    script = parse_script(
        {
            "name": "demo",
            "turns": [
                {"text": "first", "tool_calls": [{"name": "todo", "input": {"items": []}}]},
                {"content": [{"type": "text", "text": "second"}, {"type": "text", "text": "!"}]},
            ],
        },
        source="demo.json",
    )
    model = ScriptedModel(script)
    assert model.name == "scripted:demo"
    assert model.remaining == 2
    seen: list[str] = []
    first = model.respond(_plain_request(), seen.append)
    assert first.content == (
        {"type": "text", "text": "first"},
        {"type": "tool_use", "id": "toolu_01_0", "name": "todo", "input": {"items": []}},
    )
    assert first.stop_reason == "tool_use"
    assert first.tool_uses == (first.content[1],)
    assert (
        first.usage["input_tokens"] == cache_usage(None, _plain_request()).tokens()["input_tokens"]
    )
    assert model.remaining == 1
    second = model.respond(_plain_request(), seen.append)
    assert second.text == "second!"
    assert second.stop_reason == "end_turn"
    assert seen == ["first", "second", "!"]
    assert model.remaining == 0


def test_returned_blocks_are_copies() -> None:
    script = parse_script(
        {"name": "c", "turns": [{"tool_calls": [{"name": "a", "input": {"k": [1]}}]}]},
        source="c.json",
    )
    turn = ScriptedModel(script).respond(_plain_request(), lambda _: None)
    turn.content[0]["input"]["k"].append(2)
    entry = script.turns[0]
    assert isinstance(entry, ScriptedTurn)
    assert entry.content[0]["input"] == {"k": [1]}


def test_strict_expectation_failure_raises_model_error() -> None:
    script = parse_script(
        {
            "name": "demo",
            "turns": [
                {"text": "a"},
                {"text": "b"},
                {"text": "c"},
                {"text": "d", "expect": [{"contains": "(1/4 completed)"}]},
            ],
        },
        source="demo.json",
    )
    model = ScriptedModel(script)
    for _ in range(3):
        model.respond(_plain_request(), lambda _: None)
    request = _request(_result("Error: no item 'x'", is_error=True))
    with pytest.raises(ModelError) as caught:
        model.respond(request, lambda _: None)
    assert str(caught.value) == (
        "script 'demo' turn 4: expected tool result 1 to contain '(1/4 completed)', "
        "got \"Error: no item 'x'\""
    )


def test_lenient_model_collects_mismatches_and_plays_on() -> None:
    script = parse_script(
        {"name": "demo", "turns": [{"text": "a", "expect": [{"is_error": True}]}]},
        source="demo.json",
    )
    model = ScriptedModel(script, strict=False)
    turn = model.respond(_request(_result("ok")), lambda _: None)
    assert turn.text == "a"
    assert model.mismatches == (
        "script 'demo' turn 1: expected tool result 1 to be an error, got a success: 'ok'",
    )


def test_running_past_the_last_turn_raises_model_error() -> None:
    turns = [{"text": str(n)} for n in range(8)]
    model = ScriptedModel(parse_script({"name": "demo", "turns": turns}, source="demo.json"))
    for _ in range(8):
        model.respond(_plain_request(), lambda _: None)
    with pytest.raises(ModelError, match=r"^script 'demo' has no turn 9; it has 8$"):
        model.respond(_plain_request(), lambda _: None)


@pytest.mark.parametrize(
    ("fault", "described"),
    [
        (
            {"fault": "status", "status": 529, "retry_after": 1},
            "HTTP 529 overloaded_error (retry after 1s)",
        ),
        ({"fault": "status", "status": 429, "body": "slow"}, "HTTP 429 rate_limit_error: slow"),
        ({"fault": "disconnect"}, "the connection closed before any response"),
        ({"fault": "cut_stream"}, "the response stream was cut off mid-message"),
        ({"fault": "bad_json"}, "the response body was not JSON"),
    ],
)
def test_faults_raise_model_error_and_consume_their_entry(
    fault: dict[str, Any], described: str
) -> None:
    script = parse_script({"name": "f", "turns": [fault, {"text": "after"}]}, source="f.json")
    model = ScriptedModel(script)
    with pytest.raises(ModelError) as caught:
        model.respond(_plain_request(), lambda _: None)
    assert str(caught.value) == f"script 'f' turn 1: scripted fault: {described}"
    assert model.respond(_plain_request(), lambda _: None).text == "after"


def test_slow_fault_is_skipped_by_the_model() -> None:
    script = Script(
        name="s",
        turns=(
            Fault(kind="slow", seconds=30.0),
            ScriptedTurn(content=({"type": "text", "text": "x"},), stop_reason="end_turn"),
        ),
    )
    model = ScriptedModel(script)
    assert model.respond(_plain_request(), lambda _: None).text == "x"
    assert model.remaining == 0
