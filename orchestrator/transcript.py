"""``orchestrator show``: a trace as a readable transcript, so nobody needs ``jq``.

Each round shows the model's text, every tool call with its input and output, plan changes
and rejections, reminders and blocked calls; ``--round N`` keeps one round. Plan events carry
no round number of their own; they belong to the round of the tool call that caused them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import click

from orchestrator.inert import inert
from orchestrator.plan import items_from_dicts, render_items
from orchestrator.trace_file import TraceFile

_CLIP_LINES = 20


class TranscriptError(Exception):
    """A transcript that cannot be shown as asked (a round the trace does not have)."""


def transcript_lines(
    trace: TraceFile, *, round_number: int | None = None, full: bool = False
) -> Iterator[str]:
    """The transcript, line by line."""
    current = 0
    rounds: set[int] = set()
    for line in trace.lines:
        event = line.event
        if isinstance(event.get("round"), int):
            current = event["round"]
            rounds.add(current)
        if round_number is not None and current != round_number:
            continue
        try:
            shown = list(_event_lines(event, full=full))
        except Exception as error:  # a hand-edited field of another shape: say so, show the rest
            shown = [f"? line {line.number}: {line.name} cannot be shown ({type(error).__name__})"]
        yield from shown
    if round_number is not None and round_number not in rounds:
        known = f"{min(rounds)}-{max(rounds)}" if rounds else "none"
        raise TranscriptError(f"{trace.path}: no round {round_number}; its rounds are {known}")


def print_transcript(
    trace: TraceFile, *, round_number: int | None = None, full: bool = False
) -> None:
    # Collected first so a missing round is one error line, not a transcript cut short.
    lines = list(transcript_lines(trace, round_number=round_number, full=full))
    for line in lines:
        click.echo(inert(line))


def _event_lines(event: Mapping[str, Any], *, full: bool) -> Iterator[str]:
    name = event.get("event")
    if name == "run.started":
        # ``model`` is the client's kind (anthropic, scripted:NAME); the model asked for is a
        # setting: both say how the run was answered.
        settings = event.get("settings")
        asked = settings.get("model") if isinstance(settings, Mapping) else None
        client = event.get("model", "?")
        shown = f"{asked} ({client})" if asked and asked != client else str(client)
        yield f"══ run {event.get('run_id', '?')} started {event.get('ts', '')} · model {shown}"
        if event.get("task"):
            yield f"task: {event['task']}"
    elif name == "model.request":
        yield f"── round {event.get('round')} ({event.get('messages', '?')} messages sent)"
    elif name == "model.response":
        for block in event.get("content") or []:
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                yield from _indented("assistant: ", str(block["text"]))
        usage = event.get("usage") or {}
        yield (
            f"   ({event.get('stop_reason')}; {usage.get('input_tokens', 0)} in, "
            f"{usage.get('output_tokens', 0)} out, "
            f"{usage.get('cache_read_input_tokens', 0)} cache read)"
        )
    elif name == "tool.call":
        arguments = json.dumps(event.get("input"), ensure_ascii=False, indent=2)
        yield f"→ {event.get('name')} [{event.get('id')}]"
        yield from _clipped(arguments, full=full, prefix="    ")
    elif name == "hook.updated_input":
        arguments = json.dumps(event.get("input"), ensure_ascii=False, indent=2)
        yield f"↻ a PreToolUse hook (`{event.get('hook', '?')}`) ran it with this input instead:"
        yield from _clipped(arguments, full=full, prefix="    ")
    elif name == "tool.result":
        _, verdict = tool_verdict(event)
        yield f"← {event.get('name')} {verdict} ({format_duration(event.get('duration_ms', 0))})"
        yield from _clipped(str(event.get("output", "")), full=full, prefix="    │ ")
        if event.get("diff"):
            yield from _clipped(str(event["diff"]), full=full, prefix="    ± ")
    elif name == "plan.updated":
        yield f"plan updated (revision {event.get('revision')}):"
        plan = render_items(items_from_dicts(event.get("items") or []))
        yield from ("    " + line for line in plan.splitlines())
    elif name == "plan.rejected":
        yield f"plan rejected: {event.get('message', event.get('error', ''))}"
    elif name == "audit.reminder":
        yield (
            f"⚑ reminder: the plan had not changed for {event.get('rounds_since_update')} "
            "rounds; the model was shown the plan again"
        )
    elif name == "guard.blocked":
        yield f"⊘ blocked {event.get('name')}: {str(event.get('rule', '')).replace('_', ' ')}"
    elif name == "run.finished":
        reason = f": {event['reason']}" if event.get("reason") else ""
        yield f"══ run {event.get('status')} after {event.get('rounds')} rounds{reason}"


def tool_verdict(event: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether a ``tool.result`` went well, and the word for it: ``ok``, ``exit N``, ``error``.

    A command that exits non-zero is not an error to the model (its output says why), but it
    is not a success a person should see ticked either.
    """
    code = event.get("exit_code")
    if isinstance(code, int) and code != 0:
        return False, f"exit {code}"
    return (False, "error") if event.get("is_error") else (True, "ok")


def format_duration(milliseconds: object) -> str:
    """``46 ms`` under a second, ``20.1 s`` past it."""
    value = float(milliseconds) if isinstance(milliseconds, int | float) else 0.0
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def _indented(head: str, text: str) -> Iterator[str]:
    pad = " " * len(head)
    for number, line in enumerate(text.strip().splitlines()):
        yield (head if number == 0 else pad) + line


def _clipped(text: str, *, full: bool, prefix: str) -> Iterator[str]:
    lines = text.splitlines() or [""]
    if not full and len(lines) > _CLIP_LINES:
        hidden = len(lines) - _CLIP_LINES
        lines = [
            *lines[: _CLIP_LINES - 5],
            f"… {hidden} more lines (--full shows all)",
            *lines[-5:],
        ]
    for line in lines:
        yield prefix + line
