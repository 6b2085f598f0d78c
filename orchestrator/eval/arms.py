"""Arms: the one thing that differs between the runs an eval compares.

An arm is named on the command line (``--arms board,no-board``) or in a suite (``arms = [...]``).
Names are ``board`` (the todo tool and the reminder, as ``orchestrator run`` has them),
``no-board`` (neither; the system prompt loses its line about the todo tool, everything else is
the same), ``reminder=N`` (the board, reminding after N stale rounds), ``strict`` /
``lenient`` (the board under that plan policy) and ``checks`` (the board, every item guarded
by the task's own check: an item completes only when the check passes). Modifiers combine with
``+``: ``lenient+reminder=10``, ``checks+reminder=5``.
"""

from __future__ import annotations

import re

import attrs

DEFAULT_ARMS = ("board", "no-board")
_REMINDER = re.compile(r"reminder=([0-9]+)")
POLICIES = ("strict", "lenient")


class ArmError(ValueError):
    """An arm name that means nothing; the message says which names exist."""


@attrs.frozen
class Arm:
    """How one arm runs the loop; ``None`` leaves a setting to the configuration."""

    name: str
    board: bool = True
    reminder_threshold: int | None = None
    plan_policy: str | None = None
    #: Every item's completion guarded by the task's check (``completion_check``).
    checks: bool = False

    def __attrs_post_init__(self) -> None:
        if self.plan_policy is not None and self.plan_policy not in POLICIES:
            raise ArmError(
                f"plan_policy must be one of {', '.join(POLICIES)}, got {self.plan_policy!r}"
            )
        if self.reminder_threshold is not None and self.reminder_threshold < 1:
            raise ArmError(f"reminder_threshold must be at least 1, got {self.reminder_threshold}")


def parse_arm(name: str) -> Arm:
    """The arm a name stands for; :class:`ArmError` for a name that is not one."""
    text = name.strip()
    if text == "no-board":
        return Arm(text, board=False)
    arm = Arm(text)
    for part in text.split("+"):
        match = _REMINDER.fullmatch(part)
        if part == "board":
            continue
        if part == "checks":
            arm = attrs.evolve(arm, checks=True)
        elif part in POLICIES:
            arm = attrs.evolve(arm, plan_policy=part)
        elif match is not None:
            arm = attrs.evolve(arm, reminder_threshold=int(match.group(1)))
        else:
            raise ArmError(
                f"unknown arm {name!r}; arms are board, no-board, reminder=N, strict, lenient, "
                "checks (combine board modifiers with +, e.g. lenient+reminder=10)"
            )
    return arm


def parse_arms(names: str | list[str] | tuple[str, ...]) -> tuple[Arm, ...]:
    """Arms from ``board,no-board`` or a list of names; duplicates and empties are refused."""
    raw = names.split(",") if isinstance(names, str) else list(names)
    arms = [parse_arm(name) for name in raw if name.strip()]
    if not arms:
        raise ArmError("no arms given; name at least one, e.g. --arms board,no-board")
    seen = [arm.name for arm in arms]
    duplicate = next((name for name in seen if seen.count(name) > 1), None)
    if duplicate is not None:
        raise ArmError(f"arm {duplicate!r} is named twice")
    return tuple(arms)


def system_for(arm: Arm, system: str) -> str:
    """The system prompt an arm runs with: without a board, no line tells of a todo tool."""
    if arm.board:
        return system
    return "\n".join(line for line in system.splitlines() if "todo" not in line.lower())
