"""What a person sees while a run goes on: streamed text and one compact line per event.

The view is an event sink of the trace's processor chain, so the terminal shows exactly what
the trace records, rendered for people instead of programs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from orchestrator.guard import describe_arguments
from orchestrator.plan import items_from_dicts, render_items

if TYPE_CHECKING:
    from orchestrator.replay import RoundSummary


class PlainView:
    """Plain-text rendering: no escape codes, fit for pipes, logs and ``NO_COLOR``."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self._stream = stream or sys.stdout
        self._quiet = quiet
        self._calls: dict[str, Mapping[str, Any]] = {}
        self._midline = False

    def on_text(self, text: str) -> None:
        if not self._quiet:
            self._write(text)
            self._midline = not text.endswith("\n")

    def __call__(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        if name == "run.finished":
            self._line(f"run {event['status']} after {event['rounds']} rounds {event['reason']}")
        if self._quiet:
            return
        if name == "tool.call":
            self._calls[str(event["id"])] = event
        elif name == "tool.result":
            call = self._calls.pop(str(event["id"]), {})
            mark = "error" if event["is_error"] else "ok"
            args = describe_arguments(call.get("input", {}))
            self._line(f"  > {event['name']} {args} ({event['duration_ms']:.0f} ms, {mark})")
            if event["is_error"]:
                self._line("    " + str(event["output"]).splitlines()[0])
        elif name == "plan.updated":
            self._line(_indent(render_items(items_from_dicts(event["items"]))))
        elif name == "audit.reminder":
            self._line(
                f"  ! reminder: the plan has not changed for {event['rounds_since_update']} rounds"
            )
        elif name == "guard.blocked":
            self._line(f"  ! blocked {event['name']}: {event['rule']}")
        elif name == "model.response":
            usage = event.get("usage", {})
            self._line(
                f"  · round {event['round']}: {usage.get('input_tokens', 0)} in, "
                f"{usage.get('output_tokens', 0)} out, "
                f"{usage.get('cache_read_input_tokens', 0)} cached"
            )

    def _line(self, text: str) -> None:
        if self._midline:
            self._write("\n")
            self._midline = False
        self._write(text.rstrip() + "\n")

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def print_timeline(rows: Sequence[RoundSummary], stream: TextIO | None = None) -> None:
    """Print the replay timeline as a table (plain text when the stream is not a terminal)."""
    table = Table(title="timeline", box=box.SIMPLE_HEAD)
    for header in ("round", "tool calls", "plan", "reminders", "blocks", "tokens in/out/cached"):
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(
            str(row.round),
            str(row.tool_calls),
            f"{row.completed}/{row.total}",
            str(row.reminders or ""),
            str(row.blocks or ""),
            f"{row.input_tokens}/{row.output_tokens}/{row.cache_read_tokens}",
        )
    Console(file=stream or sys.stdout).print(table)
