"""The team's live view: the shared board with owners, and what each agent is doing now.

On a terminal, one live region for the whole team: the board as the store holds it (each item
in progress with its holder), then one line per agent (waiting for the model, running a tool,
and for how long). Each agent's tool lines print above it, prefixed with its name. The board
is read afresh a few times a second, by the thread that draws it, through its own short-lived
connection (a SQLite connection belongs to the thread that opened it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from orchestrator.console import Activity, EventLines
from orchestrator.inert import inert
from orchestrator.plan import MARKERS, Status

_STYLES = {"pending": "", "in_progress": "bold cyan", "completed": "green", "cancelled": "dim"}
#: How often the board is read again from the store, at most.
_BOARD_EVERY = 0.5


class TeamBoardView:
    """One live region for the team; :meth:`feed` gives each agent's session its view."""

    def __init__(self, console: Console, url: str, agents: Sequence[str]) -> None:
        self._console, self._url = console, url
        self._activity = {agent: Activity() for agent in agents}
        self._rows: list[tuple[str, str, str, str]] = []  # (status, id, text, owner)
        self._read_at = 0.0
        self._lock = threading.Lock()
        self._live = Live(
            console=console, get_renderable=self._renderable, refresh_per_second=4, transient=True
        )

    @contextmanager
    def shown(self) -> Iterator[None]:
        self._live.start()
        try:
            yield
        finally:
            self._live.stop()

    def feed(self, agent: str) -> AgentFeed:
        return AgentFeed(self, agent)

    def say(self, agent: str, text: str, style: str = "") -> None:
        with self._lock:
            self._live.console.print(
                Text(f"{agent:>9} │ ", style="dim") + Text(inert(text), style=style),
                soft_wrap=True,
            )

    def follow(self, agent: str, event: Mapping[str, Any]) -> None:
        self._activity.setdefault(agent, Activity()).follow(event)

    def _renderable(self) -> RenderableType:
        now = time.monotonic()
        if now - self._read_at >= _BOARD_EVERY:
            self._read_at = now
            self._rows = _board_rows(self._url)
        grid = Table.grid(padding=(0, 1))
        room = max(self._console.height - len(self._activity) - 5, 1)
        for status, item_id, text, owner in self._rows[:room]:
            holder = Text(f"({owner})", style="cyan") if owner else Text("")
            label = Text(inert(f"#{item_id}: {text}"), style=_STYLES.get(status, ""))
            grid.add_row(MARKERS.get(Status(status), "[?]"), label, holder)
        if len(self._rows) > room:
            grid.add_row("…", Text(f"{len(self._rows) - room} more", style="dim"), "")
        done = sum(row[0] == "completed" for row in self._rows)
        board = Panel(grid, title=f"board {done}/{len(self._rows)}", title_align="left")
        lines = [
            Text(f"{agent:>9} │ ", style="dim") + Text(inert(a.describe() or "idle"), style="cyan")
            for agent, a in self._activity.items()
        ]
        return Group(board, *lines)


class AgentFeed:
    """One agent's view: events drive its activity line and print its tool lines above."""

    def __init__(self, team: TeamBoardView, agent: str) -> None:
        self._team, self._agent = team, agent
        self._lines = EventLines()
        self._partial = ""

    def __call__(self, event: Mapping[str, Any]) -> None:
        self._team.follow(self._agent, event)
        for text, style in self._lines.lines(event):
            self._team.say(self._agent, text, style)

    def on_line(self, text: str) -> None:
        """A whole line (a notice, the plan at the end): above the live region, prefixed."""
        for line in text.splitlines():
            self._team.say(self._agent, line)

    def on_text(self, text: str) -> None:
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            if line.strip():
                self._team.say(self._agent, line)

    def __enter__(self) -> AgentFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._partial.strip():
            self._team.say(self._agent, self._partial)
        self._partial = ""

    def paused(self) -> nullcontext[None]:
        return nullcontext()  # agents of a team never ask at the terminal


def _board_rows(url: str) -> list[tuple[str, str, str, str]]:
    """The board now, through a connection opened and closed in this thread."""
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    try:
        store = open_store(url)
    except (BoardError, BoardUrlError, OSError):
        return []  # not there yet (the lead has not written): an empty board for now
    try:
        return [
            (str(item.status), item.id, item.text, item.owner or "")
            if item.status == "in_progress"
            else (str(item.status), item.id, item.text, "")
            for item in store.items()
        ]
    except (BoardError, OSError):
        return []
    finally:
        store.close()
