"""Arm names: what each one switches, and the one-line refusals of names that mean nothing."""

from __future__ import annotations

import pytest

from orchestrator.eval.arms import Arm, ArmError, parse_arm, parse_arms, system_for
from orchestrator.loop import DEFAULT_SYSTEM


def test_each_documented_name_sets_what_it_says() -> None:
    assert parse_arm("board") == Arm("board")
    assert parse_arm("no-board") == Arm("no-board", board=False)
    assert parse_arm("reminder=10") == Arm("reminder=10", reminder_threshold=10)
    assert parse_arm("strict") == Arm("strict", plan_policy="strict")
    assert parse_arm("lenient+reminder=3") == Arm(
        "lenient+reminder=3", plan_policy="lenient", reminder_threshold=3
    )
    assert parse_arm("checks") == Arm("checks", checks=True)
    assert parse_arm("checks+reminder=5") == Arm(
        "checks+reminder=5", checks=True, reminder_threshold=5
    )


def test_a_list_keeps_its_order() -> None:
    assert [arm.name for arm in parse_arms("board,no-board,reminder=3")] == [
        "board",
        "no-board",
        "reminder=3",
    ]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("board,boards", "unknown arm 'boards'"),
        ("reminder=0", "reminder_threshold must be at least 1, got 0"),
        ("no-board+strict", "unknown arm"),
        ("board,board", "arm 'board' is named twice"),
        (" , ", "no arms given"),
    ],
)
def test_bad_arm_names_are_refused(names: str, message: str) -> None:
    with pytest.raises(ArmError, match=message):
        parse_arms(names)


def test_without_a_board_the_system_prompt_does_not_mention_a_todo_tool() -> None:
    system = DEFAULT_SYSTEM.format(workdir="/w")
    assert "todo" in system
    stripped = system_for(parse_arm("no-board"), system)
    assert "todo" not in stripped.lower()
    assert "You are a coding agent at /w." in stripped
    assert system_for(parse_arm("board"), system) == system
