"""How a finished run is reported: closing lines, the ``--output-format json`` object, exit code.

Exit codes: 0 done, 1 failed, 2 usage or input error, 3 done but some side-effecting calls were
refused or the plan was left unfinished (so the work the model reports may not have happened),
130 interrupted (Ctrl-C),
143 terminated (SIGTERM), 129 hung up (SIGHUP).

The JSON object (``--output-format json``) has these keys: ``answer`` (the model's last text),
``status`` (``done``, ``failed``, ``interrupted``), ``exit_code``, ``reason``, ``rounds``,
``usage`` (``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``, summed over the session), ``cost_usd`` (null when the price is
unknown), ``duration_s``, ``model``, ``trace`` (its path), ``resume`` (the command that continues
the session), ``refused_actions`` (a list of ``{tool, target, reason}``) and ``unfinished`` (the
ids of the items a ``done`` run left neither completed nor cancelled), ``run_id`` and ``plan``
(the board's items). ``stream-json`` ends with the same object and ``"event": "result"``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.exits import EXIT_DONE, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE
from orchestrator.pricing import Prices, UsageTotals, format_cost

if TYPE_CHECKING:
    from orchestrator.approval import RefusedAction

__all__ = [
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "RunReport",
    "exit_code",
]


@attrs.frozen
class RunReport:
    """Everything the closing lines and the JSON object say about one finished run."""

    status: str
    reason: str
    answer: str
    rounds: int
    totals: UsageTotals
    model: str
    trace: Path | None
    refused: Sequence[RefusedAction]
    exit_code: int
    me: str = "orchestrator"
    prices: Prices | None = None
    #: Items a done run left unfinished, and the board's (completed, total) then.
    unfinished: tuple[str, ...] = ()
    progress: tuple[int, int] = (0, 0)
    run_id: str | None = None
    #: The board at the end, one object per item (as ``plan.updated`` carries them).
    plan: tuple[Mapping[str, Any], ...] = ()

    @property
    def cost(self) -> float | None:
        return self.totals.cost(self.prices, self.model)

    @property
    def resume_command(self) -> str:
        if self.trace is None:
            return ""
        return f'{self.me} resume {shlex.quote(str(self.trace))} "next instruction"'

    @property
    def picture_command(self) -> str:
        """The command that writes this run's page (by run id where that finds the trace)."""
        if self.trace is None:
            return ""
        from orchestrator.sessions import trace_named

        named = self.run_id is not None and trace_named(self.run_id) == self.trace
        shown = self.run_id if named else shlex.quote(str(self.trace))
        return f"{self.me} show {shown} --html"

    def cost_line(self) -> str:
        """Rounds, tokens, cost and time so far (chat's ``/cost``)."""
        return (
            f"{self.rounds} rounds · {self.totals.tokens_line()} · "
            f"{format_cost(self.cost)} · {self.totals.elapsed:.1f} s"
        )

    def closing_lines(self) -> list[str]:
        lines = [f"{self.status} · {self.cost_line()}"]
        if self.refused:
            lines.append(
                f"! {len(self.refused)} action(s) refused, so not everything the model reports "
                f"happened (exit code {EXIT_REFUSED}):"
            )
            lines.extend(
                f"    {action.tool} {action.target}: {action.reason}" for action in self.refused
            )
        if self.unfinished:
            lines.append(self.unfinished_line())
        if self.trace is not None:
            lines.append(f"trace: {self.trace}")
            lines.append(f"resume: {self.resume_command}")
            lines.append(f"picture: {self.picture_command}")
        return lines

    def unfinished_line(self) -> str:
        done, total = self.progress
        names = ", ".join(f"#{item_id}" for item_id in self.unfinished)
        return f"! plan unfinished: {done}/{total} completed: {names} (exit code {EXIT_REFUSED})"

    def as_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "status": self.status,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "rounds": self.rounds,
            "usage": dict(self.totals.usage),
            "cost_usd": None if self.cost is None else round(self.cost, 6),
            "duration_s": round(self.totals.elapsed, 3),
            "model": self.totals.model or self.model,
            "trace": None if self.trace is None else str(self.trace),
            "resume": self.resume_command,
            "refused_actions": [action.as_dict() for action in self.refused],
            "unfinished": list(self.unfinished),
            "run_id": self.run_id,
            "plan": [dict(item) for item in self.plan],
        }


def exit_code(
    status: str, refused: int, interrupted_code: int = EXIT_INTERRUPTED, unfinished: int = 0
) -> int:
    """The process's exit code for a run that ended in ``status`` with ``refused`` refusals."""
    if status == "done":
        return EXIT_REFUSED if refused or unfinished else EXIT_DONE
    if status == "interrupted":
        return interrupted_code
    return EXIT_FAILED
