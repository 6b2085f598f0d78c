"""What ``show --html`` and ``board show --html`` do: read, draw and write the pages.

A run on a shared board gets the team's lanes on its page, and every agent of that board whose
trace is found gets its own page beside its trace, so the links between them lead somewhere.
Each function returns the pages written (``None`` for the one sent to stdout); anything a
person got wrong (a file that is not a trace, a board URL that names none, a folder that does
not exist, an OUT that is the trace itself) is a :class:`PageError` or
:class:`~orchestrator.trace_file.TraceError` with one line to say. No page is written in the
place of a file any of them is drawn from: the trace, the board's file, its agents' traces.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from orchestrator.picture.model import read_picture
from orchestrator.picture.run_page import run_document
from orchestrator.picture.team import TeamError, TeamPicture, read_team, team_document
from orchestrator.picture.write import PageError, default_page_path, write_page
from orchestrator.pricing import Prices
from orchestrator.trace_file import TraceError, TraceFile, read_trace

__all__ = ["PageError", "TraceError", "write_board_pages", "write_run_pages"]


def write_run_pages(
    trace: TraceFile, out: str | None, prices: Prices | None = None
) -> list[Path | None]:
    """The run's page (to ``out``, or beside its trace), then its team's agents' pages."""
    picture = read_picture(trace, prices)
    team = None
    if picture.header.shared_board is not None:
        team = _team_of(picture.header.shared_board, trace.path.parent)
    default = default_page_path(trace.path, picture.header.run_id)
    sources = [trace.path, *(_sources_of(team) if team is not None else ())]
    written = [write_page(run_document(picture, team), out, default, sources=sources)]
    if team is not None:
        written.extend(_agent_pages(team, prices, sources, skip=[trace.path]))
    return written


def write_board_pages(url: str, out: str | None, prices: Prices | None = None) -> list[Path | None]:
    """The board's page (to ``out``, or beside a SQLite board's file), then each agent's page."""
    try:
        team = read_team(url)
    except TeamError as error:
        raise PageError(str(error)) from None
    if team.error is not None:
        raise PageError(team.error)
    sources = _sources_of(team)
    written = [write_page(team_document(team), out, default_board_page(url), sources=sources)]
    written.extend(_agent_pages(team, prices, sources))
    return written


def default_board_page(url: str) -> Path:
    """Beside a SQLite board's file (``board.db`` → ``board.html``); else ``board.html`` here."""
    from orchestrator.picture.team import sqlite_path

    database = sqlite_path(url)
    return database.with_suffix(".html") if database is not None else Path("board.html")


def _sources_of(team: TeamPicture) -> list[Path]:
    """The files a team's pages are drawn from: its agents' traces and a SQLite board's file."""
    from orchestrator.picture.team import sqlite_path

    database = sqlite_path(team.board)
    return [agent.trace for agent in team.agents] + ([database] if database is not None else [])


def _team_of(url: str, near: Path) -> TeamPicture:
    try:
        return read_team(url, [near])
    except TeamError as error:
        return TeamPicture(url, (), (), (), (), str(error))


def _agent_pages(
    team: TeamPicture, prices: Prices | None, sources: Iterable[Path], skip: Iterable[Path] = ()
) -> list[Path | None]:
    """Each agent's page, beside its trace, where it can be written.

    A trace that cannot be read, or a page's place that holds something else (a file that is
    not a page, a file a page is drawn from), is passed over.
    """
    sources = list(sources)
    skipped = {path.resolve() for path in skip}
    written: list[Path | None] = []
    for agent in team.agents:
        if agent.trace.resolve() in skipped:
            continue
        try:
            picture = read_picture(read_trace(agent.trace), prices)
            page = run_document(picture, team)
            written.append(write_page(page, None, agent.page, sources=sources))
        except (TraceError, PageError):
            continue
    return written
