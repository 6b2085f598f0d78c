"""Tests for the conversation: request bodies, cache breakpoints, and closing interrupted rounds."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.conversation import (
    INTERRUPTED_RESULT,
    MAX_CACHE_BREAKPOINTS,
    RESUME_PROMPT,
    Conversation,
    count_breakpoints,
)
from orchestrator.testing import check_request
from tests.budget import examples

TOOLS: list[dict[str, Any]] = [
    {"name": "bash", "description": "run", "input_schema": {"type": "object"}},
    {"name": "todo", "description": "plan", "input_schema": {"type": "object"}},
]
SYSTEM = "You are a coding agent."


def _request(conversation: Conversation, tools: list[dict[str, Any]] | None = None) -> Any:
    return conversation.request(
        model="claude-test",
        system=SYSTEM,
        tools=TOOLS if tools is None else tools,
        max_tokens=1024,
    )


def _tool_use(tool_id: str, command: str = "ls") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": command}}


def _result(tool_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": False}


def _play_round(conversation: Conversation, number: int, *, reminder: bool = False) -> None:
    """One round as the loop plays it: an assistant turn with a call, then its result."""
    conversation.add_assistant(
        [{"type": "text", "text": f"round {number}"}, _tool_use(f"toolu_{number}")]
    )
    conversation.add_tool_results([_result(f"toolu_{number}", f"output {number}")])
    if reminder:
        conversation.append_text_to_last_user("<reminder>Update your todos.</reminder>")


def _marked_positions(body: Any) -> list[str]:
    """Where the breakpoints of a request sit, as readable paths."""
    positions = [f"tools.{i}" for i, t in enumerate(body["tools"]) if "cache_control" in t]
    positions += [f"system.{i}" for i, b in enumerate(body["system"]) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        for b, block in enumerate(message["content"]):
            if "cache_control" in block:
                positions.append(f"messages.{m}.content.{b}")
    return positions


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=False, ensure_ascii=False)


def _conversation_of(rounds: int) -> Conversation:
    conversation = Conversation()
    conversation.add_user_text("Refactor hello.py")
    for number in range(1, rounds + 1):
        _play_round(conversation, number)
    return conversation


# --- breakpoints --------------------------------------------------------------------------


def test_first_request_marks_tools_system_and_the_task() -> None:
    body = _request(_conversation_of(0))
    assert _marked_positions(body) == ["tools.1", "system.0", "messages.0.content.0"]
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"}
    assert check_request(body) == []


def test_breakpoints_sit_on_tools_system_and_the_two_newest_user_messages() -> None:
    body = _request(_conversation_of(5))
    user_indexes = [i for i, m in enumerate(body["messages"]) if m["role"] == "user"]
    newest, before = user_indexes[-1], user_indexes[-2]
    assert _marked_positions(body) == [
        "tools.1",
        "system.0",
        f"messages.{before}.content.0",
        f"messages.{newest}.content.0",
    ]
    assert count_breakpoints(body) == MAX_CACHE_BREAKPOINTS == 4
    assert check_request(body) == []


def test_the_breakpoint_goes_on_the_last_block_of_a_message_after_a_reminder() -> None:
    conversation = _conversation_of(2)
    conversation.append_text_to_last_user("<reminder>Update your todos.</reminder>")
    body = _request(conversation)
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert "cache_control" not in last[0]
    assert last[1]["cache_control"] == {"type": "ephemeral"}
    assert check_request(body) == []


_TOOLS_REQUIRED = (
    "tools: requests which include `tool_use` or `tool_result` blocks must define tools"
)


def test_without_tools_the_spare_breakpoint_goes_to_an_older_message() -> None:
    body = _request(_conversation_of(5), tools=[])
    assert body["tools"] == []
    assert count_breakpoints(body) <= MAX_CACHE_BREAKPOINTS
    user_indexes = [i for i, m in enumerate(body["messages"]) if m["role"] == "user"]
    marked = _marked_positions(body)
    assert "system.0" in marked
    assert f"messages.{user_indexes[-1]}.content.0" in marked
    assert f"messages.{user_indexes[-2]}.content.0" in marked
    # The service refuses tool blocks without tools; every other rule holds.
    assert check_request(body) == [_TOOLS_REQUIRED]


@settings(max_examples=examples(60), deadline=None)
@given(
    steps=st.lists(st.sampled_from(["round", "reminder", "pause", "user"]), max_size=14),
    with_tools=st.booleans(),
)
def test_breakpoints_never_exceed_four_and_history_stays_clean(
    steps: list[str], with_tools: bool
) -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    for number, step in enumerate(steps):
        if step == "round":
            _play_round(conversation, number)
        elif step == "reminder":
            _play_round(conversation, number, reminder=True)
        elif step == "pause":
            conversation.add_assistant([{"type": "text", "text": "searching"}])
        else:
            conversation.add_user_text(f"next task {number}")
        body = _request(conversation, tools=TOOLS if with_tools else [])
        assert count_breakpoints(body) <= MAX_CACHE_BREAKPOINTS
        assert count_breakpoints(conversation.messages) == 0
        assert [p for p in check_request(body) if p != _TOOLS_REQUIRED] == []


def test_stored_history_has_no_cache_control_after_requests() -> None:
    conversation = _conversation_of(3)
    before = copy.deepcopy(conversation.messages)
    for _ in range(3):
        _request(conversation)
    assert conversation.messages == before
    assert count_breakpoints(conversation.messages) == 0
    assert "cache_control" not in _dumps(conversation.messages)


def test_tool_definitions_passed_in_are_not_marked() -> None:
    tools = copy.deepcopy(TOOLS)
    _request(_conversation_of(1), tools=tools)
    assert tools == TOOLS


# --- the cache prefix property ------------------------------------------------------------


def test_each_request_starts_with_the_previous_one_byte_for_byte() -> None:
    conversation = Conversation()
    conversation.add_user_text("Refactor hello.py")
    bodies = [_request(conversation)]
    for number in range(1, 7):
        _play_round(conversation, number, reminder=number in (4, 5))
        # Serialize now: a later round must not be able to change what was sent.
        bodies.append(json.loads(_dumps(_request(conversation))))
    for previous, following in itertools.pairwise(bodies):
        # The stable prefix (tools, system) is identical, breakpoints included.
        assert _dumps(previous["tools"]) == _dumps(following["tools"])
        assert _dumps(previous["system"]) == _dumps(following["system"])
        count = len(previous["messages"])
        # The previous newest message, with its breakpoint, sits unchanged in the next request:
        # the cache read for the next round ends exactly where the last write ended.
        newest = count - 1
        assert _dumps(previous["messages"][newest]) == _dumps(following["messages"][newest])
        assert "cache_control" in previous["messages"][newest]["content"][-1]
        # Everything before it is the same content (only an older breakpoint moved on).
        assert _dumps(_without_cache_control(previous["messages"])) == _dumps(
            _without_cache_control(following["messages"][:count])
        )


def test_a_request_body_does_not_change_when_the_conversation_grows() -> None:
    conversation = _conversation_of(2)
    body = _request(conversation)
    frozen = _dumps(body)
    _play_round(conversation, 3, reminder=True)
    conversation.add_user_text("and one more thing")
    assert _dumps(body) == frozen


# --- building the history -----------------------------------------------------------------


def test_empty_text_blocks_are_dropped_from_assistant_turns() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant([{"type": "text", "text": ""}, _tool_use("toolu_1")])
    assert conversation.messages[-1]["content"] == [_tool_use("toolu_1")]


def test_whitespace_only_text_blocks_are_dropped_too() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant(
        [{"type": "text", "text": " "}, {"type": "text", "text": "\n\n"}, _tool_use("toolu_1")]
    )
    assert conversation.messages[-1]["content"] == [_tool_use("toolu_1")]
    conversation.add_tool_results([_result("toolu_1")])
    assert check_request(_request(conversation)) == []


def test_an_assistant_turn_of_only_empty_text_gets_a_placeholder() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant([{"type": "text", "text": ""}])
    (block,) = conversation.messages[-1]["content"]
    assert block["type"] == "text" and block["text"].strip()
    conversation.add_user_text("go on")
    assert check_request(_request(conversation)) == []


def test_reminder_goes_after_every_tool_result() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant([_tool_use("a"), _tool_use("b", "pwd")])
    conversation.add_tool_results([_result("a"), _result("b")])
    conversation.append_text_to_last_user("<reminder>Update your todos.</reminder>")
    kinds = [b["type"] for b in conversation.messages[-1]["content"]]
    assert kinds == ["tool_result", "tool_result", "text"]
    assert check_request(_request(conversation)) == []


def test_a_paused_turn_and_its_continuation_make_one_assistant_message() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant([{"type": "text", "text": "Let me look."}])
    paused = _request(conversation)
    assert paused["messages"][-1]["role"] == "assistant"
    assert check_request(paused) == []
    conversation.add_assistant([_tool_use("toolu_1")])
    conversation.add_tool_results([_result("toolu_1")])
    body = _request(conversation)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in body["messages"][1]["content"]] == ["text", "tool_use"]
    assert check_request(body) == []
    # The request that was sent while paused is not changed by the continuation.
    assert len(paused["messages"][-1]["content"]) == 1


def test_a_duplicated_tool_use_id_is_kept_once() -> None:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant([_tool_use("dup"), _tool_use("dup", "pwd"), _tool_use("other")])
    ids = [b["id"] for b in conversation.messages[-1]["content"]]
    assert ids == ["dup", "other"]
    conversation.add_tool_results([_result("dup"), _result("other")])
    assert check_request(_request(conversation)) == []


# --- interrupted rounds and resuming ------------------------------------------------------


def _interrupted() -> Conversation:
    conversation = Conversation()
    conversation.add_user_text("task")
    conversation.add_assistant(
        [{"type": "text", "text": "two calls"}, _tool_use("a"), _tool_use("b", "pwd")]
    )
    return conversation


def test_close_dangling_tool_uses_answers_every_call_as_an_error() -> None:
    conversation = _interrupted()
    conversation.close_dangling_tool_uses()
    last = conversation.messages[-1]
    assert last["role"] == "user"
    assert last["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "a",
            "content": INTERRUPTED_RESULT,
            "is_error": True,
        },
        {
            "type": "tool_result",
            "tool_use_id": "b",
            "content": INTERRUPTED_RESULT,
            "is_error": True,
        },
    ]
    assert INTERRUPTED_RESULT.startswith("Error:")
    assert check_request(_request(conversation)) == []


def test_close_dangling_tool_uses_leaves_a_closed_history_alone() -> None:
    conversation = _conversation_of(2)
    before = copy.deepcopy(conversation.messages)
    conversation.close_dangling_tool_uses()
    assert conversation.messages == before
    conversation.add_assistant([{"type": "text", "text": "done"}])
    conversation.close_dangling_tool_uses()
    assert len(conversation.messages) == len(before) + 1
    Conversation().close_dangling_tool_uses()


def test_a_new_task_after_an_interrupted_round_keeps_roles_alternating() -> None:
    conversation = _interrupted()
    conversation.add_user_text("Now something else")
    body = _request(conversation)
    assert check_request(body) == []
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[-1]["text"] == "Now something else"


def test_a_new_task_after_a_failed_run_keeps_roles_alternating() -> None:
    # A run that failed on a model error leaves the history ending in a user message.
    conversation = _conversation_of(1)
    conversation.add_user_text("try again")
    assert check_request(_request(conversation)) == []
    assert conversation.messages[-1]["content"][-1]["text"] == "try again"


def test_prepare_to_resume_after_an_interrupted_round_sends_the_error_results() -> None:
    conversation = _interrupted()
    conversation.prepare_to_resume()
    last = conversation.messages[-1]
    assert [b["type"] for b in last["content"]] == ["tool_result", "tool_result"]
    assert RESUME_PROMPT not in _dumps(conversation.messages)
    assert check_request(_request(conversation)) == []


def test_prepare_to_resume_after_a_final_answer_asks_to_continue() -> None:
    conversation = _conversation_of(1)
    conversation.add_assistant([{"type": "text", "text": "I was cut off by max_tok"}])
    conversation.prepare_to_resume()
    assert conversation.messages[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": RESUME_PROMPT}],
    }
    assert check_request(_request(conversation)) == []


def test_prepare_to_resume_is_a_no_op_when_the_history_ends_with_the_user() -> None:
    conversation = _conversation_of(2)
    before = copy.deepcopy(conversation.messages)
    conversation.prepare_to_resume()
    assert conversation.messages == before


# --- the request summary is incremental and exact ------------------------------------------------

_STEPS = st.lists(
    st.sampled_from(
        ["task", "assistant", "tool_use", "results", "reminder", "pause", "replace", "reassign"]
    ),
    max_size=30,
)


def _full_summary(body: dict[str, Any]) -> tuple[int, int, int]:
    return (
        len(body["messages"]),
        count_breakpoints(body),
        len(json.dumps(body, ensure_ascii=False)),
    )


@settings(max_examples=examples(150), deadline=None)
@given(steps=_STEPS)
def test_the_summary_is_what_encoding_the_whole_body_gives(steps: list[str]) -> None:
    """Whatever happened to the conversation, including edits that bypass its methods."""
    conversation = Conversation()
    conversation.add_user_text("start ✓")
    for number, step in enumerate(steps):
        if step == "task":
            conversation.add_user_text(f"more work {number}")
        elif step == "assistant":
            conversation.add_assistant([{"type": "text", "text": f"thinking {number}"}])
        elif step == "tool_use":
            use = {"type": "tool_use", "id": f"t{number}", "name": "bash", "input": {"n": number}}
            conversation.add_assistant([use])
            conversation.close_dangling_tool_uses()
        elif step == "results":
            conversation.add_tool_results(
                [{"type": "tool_result", "tool_use_id": f"r{number}", "content": "ok" * number}]
            )
        elif step == "reminder" and conversation.messages[-1]["role"] == "user":
            conversation.append_text_to_last_user(f"<reminder>{number}</reminder>")
        elif step == "pause":
            conversation.add_assistant([{"type": "text", "text": "part one"}])
            conversation.add_assistant([{"type": "text", "text": "part two"}])
        elif step == "replace" and conversation.messages:
            first = conversation.messages[0]
            conversation.messages[0] = {
                **first,
                "content": [*first["content"], {"type": "text", "text": "x"}],
            }
        elif step == "reassign":
            conversation.messages = list(
                conversation.messages[: len(conversation.messages) // 2 * 2 or 1]
            )
        body = conversation.request(model="m", system="s", tools=[{"name": "t"}], max_tokens=9)
        summary = conversation.summary(body)
        expected = _full_summary(body)
        assert (summary.messages, summary.cache_breakpoints, summary.bytes) == expected
    stale = conversation.request(model="m", system="s", tools=[], max_tokens=9)
    conversation.add_user_text("after")
    assert conversation.summary(stale).bytes == len(json.dumps(stale, ensure_ascii=False))


_HEADS = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["m", "model-ü"]),
        "system": st.sampled_from(["s", "system\nwith ✓"]),
        "tools": st.sampled_from(
            [[], [{"name": "t"}], [{"name": "t", "x": None}], [{"name": "t", "x": float("nan")}]]
        ),
        "max_tokens": st.sampled_from([9, 10]),
        "options": st.sampled_from([None, {}, {"temperature": 0.5}, {"temperature": 1}]),
    }
)


@settings(max_examples=examples(100), deadline=None)
@given(heads=st.lists(_HEADS, min_size=1, max_size=6), edits=st.lists(st.booleans(), max_size=6))
def test_the_summary_stays_exact_when_the_head_changes_or_a_marked_message_is_edited(
    heads: list[dict[str, Any]], edits: list[bool]
) -> None:
    """The head's size is reused only while it is unchanged (``null`` and NaN both render as
    orjson's ``null``); a message edited after request() marked its copy is measured again."""
    conversation = Conversation()
    conversation.add_user_text("start")
    for number, head in enumerate(heads):
        use = {"type": "tool_use", "id": f"t{number}", "name": "t", "input": {"n": number}}
        conversation.add_assistant([use])
        conversation.add_tool_results(
            [{"type": "tool_result", "tool_use_id": f"t{number}", "content": "ok ✓"}]
        )
        body = conversation.request(**head)
        if number < len(edits) and edits[number]:
            # Not through a method, so the running totals cannot know: the copy is stale.
            conversation.messages[-1]["content"].append({"type": "text", "text": "late"})
        summary = conversation.summary(body)
        assert (summary.messages, summary.cache_breakpoints, summary.bytes) == _full_summary(body)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        pytest.param(None, float("nan"), id="null-then-nan"),
        pytest.param(float("inf"), None, id="infinity-then-null"),
        pytest.param("a", "b", id="changed"),
    ],
)
def test_a_head_is_measured_again_when_it_may_have_changed(first: Any, second: Any) -> None:
    conversation = Conversation()
    conversation.add_user_text("start")
    for value in (first, first, second):
        body = conversation.request(
            model="m", system="s", tools=[{"name": "t", "x": value}], max_tokens=9
        )
        assert conversation.summary(body).bytes == _full_summary(body)[2]
