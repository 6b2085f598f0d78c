"""How a run ended, as the Python API returns it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import attrs

if TYPE_CHECKING:
    from orchestrator.approval import RefusedAction

#: How a run ended: the loop machine's final states.
RunStatus = Literal["done", "failed", "interrupted"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)


def run_status(value: str) -> RunStatus:
    """``value`` as a :data:`RunStatus`; anything else is a bug in the loop, said as one."""
    for status in RUN_STATUSES:
        if value == status:
            return status
    raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {value!r}")


@attrs.frozen
class RunResult:
    """How a run ended, as the CLI's ``--output-format json`` reports it."""

    #: ``done``, ``failed`` or ``interrupted``.
    status: RunStatus = attrs.field(validator=attrs.validators.in_(RUN_STATUSES))
    #: The model's final text.
    answer: str
    #: Rounds in the session so far.
    rounds: int
    #: The board at the end: one ``{"id", "text", "status", …}`` per item.
    plan: tuple[Mapping[str, Any], ...]
    #: Tokens by kind (``input_tokens``, ``output_tokens``, cache reads and writes).
    usage: Mapping[str, int]
    #: The price of those tokens, or None for a model whose price is unknown.
    cost_usd: float | None
    #: The trace file (one JSON event per line; ``orchestrator replay`` reads it).
    trace: Path | None
    #: Why it ended; for ``exit_code`` 3, why that is (``2 calls were refused: bash …``).
    reason: str = ""
    exit_code: int = 0
    run_id: str | None = None
    #: The conversation at the end, as the Messages API takes it.
    messages: tuple[Mapping[str, Any], ...] = ()
    #: Items a ``done`` run left neither completed nor cancelled (``exit_code`` 3).
    unfinished: tuple[str, ...] = ()
    #: What was refused (``exit_code`` 3): each call's ``tool``, ``target`` (a short account of
    #: its input) and ``reason``; also a hook or MCP server that did not run for what it runs.
    refused: tuple[RefusedAction, ...] = ()


#: How many refusals :func:`exit_3_reason` names before it counts the rest.
_NAMED = 3


def exit_3_reason(
    refused: Sequence[RefusedAction], protected: Sequence[str], unfinished: str
) -> str:
    """Why a ``done`` run's exit code is 3, in one line: refusals, protected files, the plan.

    ``protected`` describes each protected file that changed; ``unfinished`` is the plan's
    line ("" when it was settled).
    """
    parts: list[str] = []
    if refused:
        calls = all(not action.tool.endswith((" hook", "MCP server")) for action in refused)
        what = "call" if calls else "action"
        count = len(refused)
        named = ", ".join(f"{action.tool} {action.target}".strip() for action in refused[:_NAMED])
        more = f" and {count - _NAMED} more" if count > _NAMED else ""
        verb = "was" if count == 1 else "were"
        parts.append(f"{count} {what}{'s' if count != 1 else ''} {verb} refused: {named}{more}")
    if protected:
        files = "1 protected file" if len(protected) == 1 else f"{len(protected)} protected files"
        parts.append(f"{files} changed ({', '.join(protected)})")
    if unfinished:
        parts.append(unfinished)
    return "; ".join(parts)
