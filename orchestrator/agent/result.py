"""How a run ended, as the Python API returns it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import attrs

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
    reason: str = ""
    exit_code: int = 0
    run_id: str | None = None
    #: The conversation at the end, as the Messages API takes it.
    messages: tuple[Mapping[str, Any], ...] = ()
    #: Items a ``done`` run left neither completed nor cancelled (``exit_code`` 3).
    unfinished: tuple[str, ...] = ()
