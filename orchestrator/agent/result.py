"""How a run ended, as the Python API returns it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs


@attrs.frozen
class RunResult:
    """How a run ended, as the CLI's ``--output-format json`` reports it."""

    #: ``done``, ``failed`` or ``interrupted``.
    status: str
    #: The model's final text.
    answer: str
    #: Rounds in the session so far.
    rounds: int
    #: The board at the end: one ``{"id", "content", "status", …}`` per item.
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
