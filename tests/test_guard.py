"""Tests for the repeat guard: identical consecutive calls and todo inputs refused in a row."""

from __future__ import annotations

from typing import Any

from orchestrator.guard import (
    DEFAULT_WHITELIST,
    RepeatGuard,
    canonical_call,
    describe_arguments,
)

LS: dict[str, Any] = {"command": "ls -la"}
BAD_PLAN: dict[str, Any] = {
    "items": [
        {"id": "1", "text": "a", "status": "in_progress"},
        {"id": "2", "text": "b", "status": "in_progress"},
    ]
}
GOOD_PLAN: dict[str, Any] = {"items": [{"id": "1", "text": "a", "status": "in_progress"}]}


def _refuse(guard: RepeatGuard, arguments: dict[str, Any]) -> str:
    """Run one todo call through the guard as a refused call; return the note it adds."""
    assert guard.check("todo", arguments) is None
    return guard.record("todo", arguments, is_error=True)


def test_identical_consecutive_call_is_blocked() -> None:
    guard = RepeatGuard()
    assert guard.check("bash", LS) is None
    guard.record("bash", LS, is_error=False)
    verdict = guard.check("bash", dict(LS))
    assert verdict is not None
    assert verdict.rule == "repeat"
    assert verdict.message.startswith("Error:")
    assert "identical to the previous" in verdict.message


def test_a_blocked_call_stays_blocked_when_sent_again() -> None:
    guard = RepeatGuard()
    guard.check("write_file", {"path": "a", "content": "x"})
    assert guard.check("write_file", {"path": "a", "content": "x"}) is not None
    assert guard.check("write_file", {"path": "a", "content": "x"}) is not None


def test_a_different_call_in_between_lets_the_call_run_again() -> None:
    guard = RepeatGuard()
    assert guard.check("bash", LS) is None
    assert guard.check("bash", {"command": "pwd"}) is None
    assert guard.check("bash", LS) is None


def test_same_input_to_another_tool_is_not_a_repeat() -> None:
    guard = RepeatGuard()
    guard.check("write_file", {"path": "a", "content": "x"})
    assert guard.check("edit_file", {"path": "a", "content": "x"}) is None


def test_whitelisted_tools_may_repeat() -> None:
    assert {"todo", "read_file"} <= DEFAULT_WHITELIST
    guard = RepeatGuard()
    for name, arguments in (("read_file", {"path": "a.py"}), ("todo", GOOD_PLAN)):
        assert guard.check(name, arguments) is None
        guard.record(name, arguments, is_error=False)
        assert guard.check(name, arguments) is None


def test_whitelist_is_configurable() -> None:
    guard = RepeatGuard(whitelist=frozenset({"bash"}))
    guard.check("bash", LS)
    assert guard.check("bash", LS) is None
    guard.check("read_file", {"path": "a"})
    verdict = guard.check("read_file", {"path": "a"})
    assert verdict is not None and verdict.rule == "repeat"


def test_key_order_does_not_matter() -> None:
    first = {"path": "a.py", "old_text": "x", "new_text": "y"}
    reordered = {"new_text": "y", "path": "a.py", "old_text": "x"}
    assert canonical_call("edit_file", first) == canonical_call("edit_file", reordered)
    guard = RepeatGuard()
    guard.check("edit_file", first)
    verdict = guard.check("edit_file", reordered)
    assert verdict is not None and verdict.rule == "repeat"


def test_nested_key_order_does_not_matter() -> None:
    one = {"items": [{"id": "1", "status": "pending", "text": "a"}]}
    other = {"items": [{"text": "a", "id": "1", "status": "pending"}]}
    assert canonical_call("todo", one) == canonical_call("todo", other)
    # List order is meaning, not formatting: a reordered plan is a different call.
    swapped = {"items": [{"id": "2", "text": "b"}, {"id": "1", "text": "a"}]}
    straight = {"items": [{"id": "1", "text": "a"}, {"id": "2", "text": "b"}]}
    assert canonical_call("todo", swapped) != canonical_call("todo", straight)


def test_odd_arguments_do_not_crash_the_guard() -> None:
    guard = RepeatGuard()
    assert guard.check("bash", ["not", "an", "object"]) is None
    assert guard.check("bash", None) is None
    assert guard.check("bash", None) is not None
    assert guard.check("bash", {"when": object()}) is None


def test_todo_refused_three_times_says_so_on_the_third_and_blocks_the_fourth() -> None:
    guard = RepeatGuard()
    assert _refuse(guard, BAD_PLAN) == ""
    assert _refuse(guard, BAD_PLAN) == ""
    third = _refuse(guard, BAD_PLAN)
    assert "3 times in a row" in third
    assert "change the call" in third
    verdict = guard.check("todo", BAD_PLAN)
    assert verdict is not None
    assert verdict.rule == "refused_repeat"
    assert verdict.message.startswith("Error:")
    assert "refused 3 times" in verdict.message


def test_refusal_count_uses_the_canonical_input() -> None:
    reordered = {"items": [{k: item[k] for k in reversed(item)} for item in BAD_PLAN["items"]]}
    guard = RepeatGuard()
    _refuse(guard, BAD_PLAN)
    _refuse(guard, reordered)
    assert "3 times" in _refuse(guard, BAD_PLAN)


def test_a_different_refused_input_restarts_the_count() -> None:
    other = {"items": [{"id": "1", "text": "", "status": "pending"}]}
    guard = RepeatGuard()
    _refuse(guard, BAD_PLAN)
    _refuse(guard, BAD_PLAN)
    assert _refuse(guard, other) == ""
    assert _refuse(guard, BAD_PLAN) == ""
    assert guard.check("todo", BAD_PLAN) is None


def test_an_accepted_todo_resets_the_count() -> None:
    guard = RepeatGuard()
    _refuse(guard, BAD_PLAN)
    _refuse(guard, BAD_PLAN)
    assert guard.check("todo", GOOD_PLAN) is None
    assert guard.record("todo", GOOD_PLAN, is_error=False) == ""
    assert _refuse(guard, BAD_PLAN) == ""
    assert _refuse(guard, BAD_PLAN) == ""
    assert guard.check("todo", BAD_PLAN) is None


def test_an_accepted_todo_after_the_limit_lifts_the_block() -> None:
    guard = RepeatGuard()
    for _ in range(3):
        _refuse(guard, BAD_PLAN)
    assert guard.check("todo", GOOD_PLAN) is None
    guard.record("todo", GOOD_PLAN, is_error=False)
    assert guard.check("todo", BAD_PLAN) is None


def test_rejection_limit_is_configurable() -> None:
    guard = RepeatGuard(rejection_limit=1)
    assert "1 times in a row" in _refuse(guard, BAD_PLAN)
    assert guard.check("todo", BAD_PLAN) is not None


def test_other_tools_errors_do_not_count_as_todo_refusals() -> None:
    guard = RepeatGuard()
    _refuse(guard, BAD_PLAN)
    _refuse(guard, BAD_PLAN)
    guard.check("bash", {"command": "false"})
    assert guard.record("bash", {"command": "false"}, is_error=True) == ""
    assert "3 times" in _refuse(guard, BAD_PLAN)


def test_describe_arguments_picks_the_key_field_and_clips() -> None:
    assert describe_arguments({"command": "ls\n-la"}) == "ls -la"
    assert describe_arguments({"items": [1, 2, 3]}) == "3 items"
    assert describe_arguments({"path": "a.py", "content": "x"}) == "a.py"
    long = describe_arguments({"command": "x" * 190 + " end"}, limit=20)
    assert len(long) == 20 and "…" in long and long.endswith(" end")
    assert describe_arguments(["odd"]) == '["odd"]'
