"""What a person sees while a run goes on, fed by the same events the trace records.

A view is an event sink of the trace's processor chain plus an ``on_text`` callback for streamed
model text. :class:`LiveView` keeps a rich plan panel on screen; :class:`PlainView` writes plain
lines for pipes and ``NO_COLOR``; :class:`JsonView` streams the events themselves.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.control import strip_control_codes
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.segment import Segment
from rich.spinner import Spinner
from rich.style import Style
from rich.table import Table
from rich.text import Text

from orchestrator.approval import diff_colour
from orchestrator.guard import describe_arguments
from orchestrator.inert import inert
from orchestrator.plan import (
    MARKERS,
    PlanItem,
    Status,
    item_annotations,
    items_from_dicts,
    render_items,
)
from orchestrator.shorten import shorten_command
from orchestrator.trace_file import json_text
from orchestrator.transcript import format_duration, tool_verdict

if TYPE_CHECKING:
    from orchestrator.replay import RoundSummary


class View(Protocol):
    """What the CLI hands a run: an event sink, a text sink, and a start/stop pair."""

    def __call__(self, event: Mapping[str, Any]) -> None: ...

    def on_text(self, text: str) -> None: ...

    def __enter__(self) -> View: ...

    def __exit__(self, *exc: object) -> None: ...

    def paused(self) -> AbstractContextManager[None]:
        """Hand the terminal to someone else for a while (an approval prompt)."""
        ...


def choose_view(
    *,
    quiet: bool,
    as_json: bool,
    stream: TextIO | None = None,
    verbose: bool = False,
    turns: bool = False,
) -> View:
    """``--json`` and ``--quiet`` first; then live on a colour terminal, plain otherwise.

    ``turns`` is for chat: a turn that ends well gets no ``run done after N rounds`` line.
    """
    stream = stream or sys.stdout
    if as_json:
        return JsonView(stream)
    if quiet:
        return PlainView(stream, quiet=True)
    if stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb":
        return LiveView(Console(file=stream), verbose=verbose, turns=turns)
    return PlainView(stream, verbose=verbose, turns=turns)


#: Lines of a tool's output shown under its result line: (head, tail), and with --verbose.
PREVIEW_LINES = (3, 2)
VERBOSE_PREVIEW_LINES = (40, 20)
#: A diff's first lines shown under a write or an edit: its headers take three.
DIFF_PREVIEW_HEAD = 12
#: Tools whose output the view already shows another way (the plan panel).
_NO_PREVIEW = frozenset({"todo"})


#: How much of one line a preview shows: a single 200,000-character line is a flood too.
PREVIEW_WIDTH = 240


def output_preview(output: str, *, head: int, tail: int) -> list[str]:
    """The first ``head`` and last ``tail`` lines of a tool's output, with a count of the rest.

    Each line is cut at :data:`PREVIEW_WIDTH` characters, saying how many more it had.
    """
    lines = output.rstrip("\n").splitlines()
    if len(lines) > head + tail + 1:
        hidden = len(lines) - head - tail
        lines = [
            *lines[:head],
            f"… {hidden} more lines (--verbose shows more, `show` all)",
            *lines[-tail:],
        ]
    return [_narrow(line) for line in lines]


def _narrow(line: str) -> str:
    if len(line) <= PREVIEW_WIDTH:
        return line
    return f"{line[:PREVIEW_WIDTH]} … {len(line) - PREVIEW_WIDTH} more characters"


# --- the lines every view shares -------------------------------------------------------------


class EventLines:
    """Turns events into (text, style) lines; the views decide how to show them."""

    def __init__(self, *, verbose: bool = False, turns: bool = False) -> None:
        self._turns = turns
        self._calls: dict[str, Mapping[str, Any]] = {}
        #: A PreToolUse hook's ``updatedInput`` per call id: what ran instead of the model's.
        self._updated: dict[str, Mapping[str, Any]] = {}
        self._head, self._tail = VERBOSE_PREVIEW_LINES if verbose else PREVIEW_LINES
        self._diff_head = max(self._head, DIFF_PREVIEW_HEAD)
        self._window_source = ""

    def _result_lines(self, event: Mapping[str, Any]) -> list[tuple[str, str]]:
        """A call's one line (name, input, duration, verdict) and its output's preview."""
        call = self._calls.pop(str(event["id"]), {})
        updated = self._updated.pop(str(event["id"]), None)
        args = describe_arguments((updated or call).get("input", {}))
        ok, verdict = tool_verdict(event)
        duration = format_duration(event["duration_ms"])
        head = f"{'✓' if ok else '✗'} {event['name']} {args}  {duration}  {verdict}"
        out = [(head, "green" if ok else "red")]
        if updated is not None:  # the line names what ran; the model's ask stays visible
            asked = describe_arguments(call.get("input", {}))
            note = f"    ↻ input from the PreToolUse hook `{updated.get('hook', '?')}`"
            out.append((f"{note}; the model asked: {asked}", "yellow"))
        if event.get("diff"):
            # Every change a file tool made is shown, so an edit nobody was asked about
            # (--approval edits or auto) is still seen.
            diff = output_preview(str(event["diff"]), head=self._diff_head, tail=self._tail)
            out.extend(("    " + line, diff_colour(line) or "dim") for line in diff)
            return out
        if event["name"] in _NO_PREVIEW:
            first_line = next(iter(str(event["output"]).splitlines()), "")
            if not ok and first_line:
                out.append(("    " + first_line, "red dim"))
            return out
        shown = output_preview(str(event["output"]), head=self._head, tail=self._tail)
        out.extend(("    │ " + line, "dim" if ok else "red dim") for line in shown)
        return out

    def lines(self, event: Mapping[str, Any]) -> list[tuple[str, str]]:
        name = event.get("event")
        if name == "tool.call":
            self._calls[str(event["id"])] = event
            return []
        if name == "hook.updated_input":
            self._updated[str(event["id"])] = event
            return []
        if name == "tool.result":
            return self._result_lines(event)
        if name == "plan.updated" and event.get("explanation"):
            return [("✎ " + " ".join(str(event["explanation"]).split()), "italic")]
        if name == "audit.reminder":
            if event.get("reason") == "unfinished":
                names = ", ".join(f"#{item}" for item in event.get("unfinished") or ())
                return [(f"⚑ reminder: the plan is unfinished: {names}", "bold yellow")]
            text = f"⚑ reminder: the plan has not changed for {event['rounds_since_update']} rounds"
            return [(text, "bold yellow")]
        if name in ("loop.done_check", "plan.check"):
            return [_check_line(event)]
        if name == "guard.blocked":
            return [
                (f"⊘ blocked {event['name']}: {event['rule'].replace('_', ' ')} call", "magenta")
            ]
        if name == "model.response":
            usage = event.get("usage") or {}
            text = (
                f"· round {event['round']}: {usage.get('input_tokens', 0)} in · "
                f"{usage.get('output_tokens', 0)} out · "
                f"{usage.get('cache_read_input_tokens', 0)} cache read · "
                f"{usage.get('cache_creation_input_tokens', 0)} cache write"
            )
            if event.get("context_window"):
                share = 100 * int(event.get("context_tokens", 0)) // int(event["context_window"])
                # "~": an assumed window (the header line says why), not one the API gave.
                about = "~" if self._window_source == "fallback" else ""
                text += f" · ctx {share}% of {about}{_thousands(int(event['context_window']))}"
            return [*_thinking_lines(event.get("content") or ()), (text, "dim")]
        if name == "context.window":
            self._window_source = str(event.get("source", ""))
            if self._window_source == "refusal":
                text = f"⌫ the window is {int(event['window']):,} tokens, learned from a refusal"
                return [(text, "cyan")]
            return []
        if name == "context.cleared":
            text = f"⌫ cleared {event['blocks']} old tool results ({event['tokens_freed']} tokens)"
            return [(text, "cyan")]
        if name == "context.compacted":
            text = (
                f"⌫ compacted the conversation: {event['tokens_before']} → "
                f"{event['tokens_after']} tokens, {event['messages_kept']} messages kept"
            )
            return [(text, "cyan")]
        if name == "run.finished":
            if self._turns and event["status"] == "done":
                return []
            text = f"run {event['status']} after {event['rounds']} rounds"
            if event.get("reason"):
                text += f": {event['reason']}"
            return [(text, "bold green" if event["status"] == "done" else "bold red")]
        return []


@contextmanager
def _terminal_may_be_gone() -> Iterator[None]:
    """The end of a run's output: a terminal that hung up or a closed pipe is not an error."""
    from orchestrator.trace import TERMINAL_GONE

    try:
        yield
    except OSError as error:
        if error.errno not in TERMINAL_GONE:
            raise


def _check_line(event: Mapping[str, Any]) -> tuple[str, str]:
    """``✓ done-check make test  2.1 s`` / ``✗ check #3 pytest -q  0.4 s  exit 1``."""
    what = "done-check" if event["event"] == "loop.done_check" else f"check #{event.get('item')}"
    command = " ".join(str(event.get("command", "")).split())
    shown = shorten_command(command, 80)
    passed = event.get("exit_code") == 0
    text = f"{'✓' if passed else '✗'} {what} {shown}  {float(event.get('duration_s', 0)):.1f} s"
    if not passed:
        text += f"  exit {event.get('exit_code')}"
    return text, "green" if passed else "red"


# --- plain ---------------------------------------------------------------------------------


class PlainView:
    """Plain text with no escape codes, fit for pipes, logs and ``NO_COLOR``."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        quiet: bool = False,
        verbose: bool = False,
        turns: bool = False,
    ) -> None:
        self._stream = stream or sys.stdout
        self._quiet = quiet
        self._lines = EventLines(verbose=verbose, turns=turns)
        self._midline = False

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._midline:
            with _terminal_may_be_gone():
                self._write("\n")

    def paused(self) -> AbstractContextManager[None]:
        if self._midline:
            self._write("\n")
            self._midline = False
        return nullcontext()

    def on_text(self, text: str) -> None:
        if not self._quiet and text:
            self._write(text)
            self._midline = not text.endswith("\n")

    def __call__(self, event: Mapping[str, Any]) -> None:
        if self._quiet:
            return
        if event.get("event") == "plan.updated":
            self._line(_indent(render_items(items_from_dicts(event["items"]))))
        for text, _style in self._lines.lines(event):
            self._line(text)

    def _line(self, text: str) -> None:
        if self._midline:
            self._write("\n")
            self._midline = False
        self._write(text.rstrip() + "\n")

    def _write(self, text: str) -> None:
        # Every byte the model or a tool sent is shown, none is obeyed (colour codes too).
        self._stream.write(inert(text))
        self._stream.flush()


def _thousands(tokens: int) -> str:
    return f"{tokens // 1000}k" if tokens >= 1000 else str(tokens)


def _thinking_lines(content: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Thinking blocks folded to one dim line each: the model's notes, not its answer."""
    lines = []
    for block in content:
        if block.get("type") == "thinking":
            text = str(block.get("thinking", ""))
            first = text.strip().splitlines()[0] if text.strip() else ""
            shown = first if len(first) <= 60 else first[:59] + "…"
            lines.append((f"∴ thinking ({len(text)} chars): {shown}", "dim italic"))
        elif block.get("type") == "redacted_thinking":
            lines.append(("∴ thinking (redacted)", "dim italic"))
        elif block.get("type") == "compaction":
            summary = str(block.get("content") or "")
            lines.append(
                (f"⌫ the server compacted the conversation ({len(summary)} chars)", "cyan")
            )
    return lines


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.splitlines())


# --- json ----------------------------------------------------------------------------------


class JsonView:
    """``--json``: every trace event as one JSON line on stdout, for other programs."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stdout

    def __enter__(self) -> JsonView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def paused(self) -> AbstractContextManager[None]:
        return nullcontext()

    def on_text(self, text: str) -> None:
        return None  # the text arrives whole in model.response

    def __call__(self, event: Mapping[str, Any]) -> None:
        self._stream.write(json_text(event) + "\n")  # stdout stays UTF-8
        self._stream.flush()


# --- live ----------------------------------------------------------------------------------

_STYLES = {
    Status.PENDING: "white",
    Status.IN_PROGRESS: "bold cyan",
    Status.COMPLETED: "green",
    Status.CANCELLED: "dim strike",
}


#: How often the live panel is redrawn when nothing else changes (its spinner's frame rate),
#: and how often waiting lines are printed above it.
REFRESH_PER_SECOND = 8
#: Lines waiting for their batch beyond this many are printed at once: the live region would
#: otherwise grow past the screen.
_MOST_PENDING_LINES = 20


class _RenderedLines:
    """Lines rendered once, handed to rich as they are on every redraw until they go stale."""

    def __init__(self, lines: list[list[Segment]]) -> None:
        self._lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        newline = Segment.line()
        for line in self._lines:
            yield from line
            yield newline


@functools.lru_cache(maxsize=64)
def _style(name: str) -> Style | None:
    return Style.parse(name) if name else None


class _StyledLines:
    """Whole lines, each in one style, as segments: what ``Text`` would print, for less work.

    The event lines never need wrapping (they are printed with ``soft_wrap``), so rich's text
    layout is skipped; control codes are stripped and tabs expanded, as ``Text`` does.
    """

    def __init__(self, lines: list[tuple[str, str]]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        newline = Segment.line()
        for text, style in self.lines:
            yield Segment(strip_control_codes(text).expandtabs(8), _style(style))
            yield newline


class LiveView:
    """A rich plan panel pinned to the bottom of the terminal; events scroll above it.

    Rich redraws the live region with every print, so lines are printed in batches at most
    :data:`REFRESH_PER_SECOND` times a second (a line waiting for its batch is shown in the live
    region meanwhile, above the panel). The panel is rendered anew only when the plan changes,
    the terminal's width changes, or its spinner is due for its next frame, and redrawn from
    those rendered lines otherwise.
    """

    def __init__(self, console: Console, *, verbose: bool = False, turns: bool = False) -> None:
        self._console = console
        self._lines = EventLines(verbose=verbose, turns=turns)
        self._activity = Activity()
        self._items: tuple[PlanItem, ...] = ()
        self._partial = ""
        self._spinner = Spinner("dots", style="cyan")
        self._live: Live | None = None
        self._panel: _RenderedLines | None = None
        self._panel_size = (0, -2)
        self._panel_at = 0.0
        self._pending: list[tuple[str, str]] = []  # (text, style) lines waiting for their batch
        self._printed_at = 0.0

    def __enter__(self) -> LiveView:
        # A new Live per run: chat starts and stops the panel around every prompt.
        self._live = Live(
            console=self._console,
            refresh_per_second=REFRESH_PER_SECOND,
            get_renderable=self._renderable,
            transient=True,
        )
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        live, self._live = self._live, None
        with _terminal_may_be_gone():
            self._flush_partial()
            if live is not None:
                live.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        # The live region would redraw over a prompt: take it down, then put it back.
        self._flush_partial()
        live, self._live = self._live, None
        if live is not None:
            live.stop()
        try:
            yield
        finally:
            if live is not None:
                self.__enter__()

    def on_text(self, text: str) -> None:
        *complete, self._partial = (self._partial + inert(text)).split("\n")
        if complete:
            self._pending.extend((line, "") for line in complete)
            self._print_if_due()

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") == "plan.updated":
            self._items = items_from_dicts(event["items"])
            self._panel = None
        self._activity.follow(event)
        lines = [(inert(text), style) for text, style in self._lines.lines(event)]
        if lines:
            if self._partial:  # the half line in flight goes before the event's lines
                self._pending.append((self._partial, ""))
                self._partial = ""
            self._pending.extend(lines)
            self._print_if_due()

    def _print_if_due(self) -> None:
        due = time.monotonic() - self._printed_at >= 1 / REFRESH_PER_SECOND
        if due or len(self._pending) >= _MOST_PENDING_LINES:
            self._print_pending()

    def _print_pending(self) -> None:
        pending, self._pending = self._pending, []
        if pending:
            self._console.print(_StyledLines(pending), soft_wrap=True, end="")
        self._printed_at = time.monotonic()

    def _flush_partial(self) -> None:
        if self._partial:
            self._pending.append((self._partial, ""))
            self._partial = ""
        self._print_pending()

    def _renderable(self) -> RenderableType:
        # Lines waiting for their batch are shown in the live region until it is printed.
        parts: list[RenderableType] = [_StyledLines(list(self._pending))] if self._pending else []
        if self._partial:
            parts.append(Text(self._partial))
        doing = self._activity.describe()
        # The region must fit the terminal: rich cannot erase what scrolled off its top, so a
        # taller one leaves stale copies in the scrollback and pushes the status line away.
        room = self._console.height - len(self._pending) - bool(self._partial) - bool(doing) - 1
        parts.append(self._rendered_panel(room))
        if doing:
            parts.append(Text(inert(doing), style="cyan"))
        return Group(*parts)

    def _rendered_panel(self, room: int) -> _RenderedLines:
        # Room to spare is no constraint: lines arriving must not redraw the panel each time.
        fits = room >= len(self._items) + _PANEL_CHROME
        now, size = time.monotonic(), (self._console.width, -1 if fits else room)
        stale = now - self._panel_at >= 1 / REFRESH_PER_SECOND or size != self._panel_size
        if self._panel is None or stale:
            panel = plan_panel(self._items, self._spinner, max_lines=None if fits else room)
            options = self._console.options.update_width(size[0])
            self._panel = _RenderedLines(self._console.render_lines(panel, options, pad=False))
            self._panel_size, self._panel_at = size, now
        return self._panel


class Activity:
    """What the run is waiting on right now, and for how long: the model, or a running tool."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._clock = clock
        self._what = ""
        self._since = 0.0

    def follow(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        if name == "model.request":
            self._start("waiting for the model…")
        elif name == "tool.call":
            args = describe_arguments(event.get("input", {}), limit=100)
            self._start(f"running {event.get('name')} {args} …")
        elif name in ("model.response", "tool.result", "run.finished"):
            self._what = ""

    def _start(self, what: str) -> None:
        self._what, self._since = what, self._clock()

    def describe(self) -> str:
        if not self._what:
            return ""
        return f"{self._what} {self._clock() - self._since:.0f} s"


#: Lines a panel takes besides its items: two borders, the progress bar, the activity line.
_PANEL_CHROME = 4


def plan_panel(
    items: Sequence[PlanItem], spinner: Spinner | None = None, *, max_lines: int | None = None
) -> RenderableType:
    """The plan as a panel: one coloured row per item and a ``k/n`` progress bar.

    Within ``max_lines`` (a small terminal) it shows the items around the one in progress and
    says how many are hidden; with no room for a panel, one summary line.
    """
    done = sum(item.status == Status.COMPLETED for item in items)
    total = len(items)
    rows = len(items) if max_lines is None else max_lines - _PANEL_CHROME
    if rows < 2 and items and max_lines is not None:
        current = next((i for i in items if i.status == Status.IN_PROGRESS), None)
        doing = f" · #{current.id}: {current.text}" if current is not None else ""
        return Text(inert(f"plan {done}/{total}{doing}"), style="blue", overflow="ellipsis")
    shown, above, below = _visible_items(items, rows)
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=3)
    grid.add_column()
    status_of = {item.id: item.status for item in items}
    if above:
        grid.add_row(Text("…", style="dim"), Text(f"{above} more above", style="dim"))
    for item in shown:
        style = _STYLES[item.status]
        label = Text(
            inert(f"#{item.id}: {item.text}{item_annotations(item, status_of)}"), style=style
        )
        if item.status == Status.IN_PROGRESS:
            activity: RenderableType = Text(inert(item.active_form or "working"), style="cyan")
            if spinner is not None:
                spinner.text = activity
                activity = spinner
            grid.add_row(Text(MARKERS[item.status], style=style), Group(label, activity))
        else:
            grid.add_row(Text(MARKERS[item.status], style=style), label)
    if below:
        grid.add_row(Text("…", style="dim"), Text(f"{below} more below", style="dim"))
    footer = Table.grid(padding=(0, 1))
    footer.add_row(ProgressBar(total=max(total, 1), completed=done, width=30), f"{done}/{total}")
    body: RenderableType = Group(grid, footer) if items else Text("No todos.", style="dim")
    return Panel(body, title="plan", title_align="left", border_style="blue")


def _visible_items(items: Sequence[PlanItem], rows: int) -> tuple[Sequence[PlanItem], int, int]:
    """The items that fit in ``rows`` (a row says what is hidden on each cut side).

    The window starts just above the item in progress (or the first one left to do), so what
    the agent is on is always in sight.
    """
    if len(items) <= rows:
        return items, 0, 0
    focus = next(
        (i for i, item in enumerate(items) if item.status == Status.IN_PROGRESS),
        next((i for i, item in enumerate(items) if item.status == Status.PENDING), len(items) - 1),
    )
    room = max(rows - 2, 1)  # at most a "more above" and a "more below" row
    start = min(max(focus - 1, 0), len(items) - room)
    if start == 0:
        room = min(rows - 1, len(items))  # nothing above: one more item fits
    elif start + room >= len(items):
        room, start = rows - 1, len(items) - (rows - 1)
    return items[start : start + room], start, len(items) - start - room


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
    # rich drops colour for NO_COLOR but keeps bold and italics; no colour system means no codes.
    plain = bool(os.environ.get("NO_COLOR"))
    Console(file=stream or sys.stdout, color_system=None if plain else "auto").print(table)
