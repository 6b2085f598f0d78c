"""A team's picture: a shared board's log as lanes, one per agent and one per item.

The board's log (read with the store's own :meth:`~orchestrator.board.store.SqlBoardStore.log`,
which only reads) is the time axis: each entry is a column. An item's lane is its state after
each entry (``blocked`` while an item it waits for is unfinished); an agent's lane shows which
item it held in progress. Each agent's trace is found by its ``run.started``, which names the
board it worked (``plan.shared``): in the folders given (the board's own folder holds a team's
traces) and in the state directory's sessions; its page is linked beside it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from orchestrator.picture.html import document
from orchestrator.picture.write import default_page_path, file_uri

#: How many candidate traces' first lines are read when looking for a board's agents.
_SCAN_LIMIT = 5000


@attrs.frozen
class AgentTrace:
    """One agent's session on the board: where its trace and page are, and how it ended."""

    agent: str
    run_id: str
    trace: Path
    status: str
    rounds: int
    cost: float | None
    task: str

    @property
    def page(self) -> Path:
        return default_page_path(self.trace, self.run_id)

    def as_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "run_id": self.run_id,
            "trace": str(self.trace),
            "trace_uri": file_uri(self.trace),
            "page": str(self.page),
            "page_uri": file_uri(self.page),
            "status": self.status,
            "rounds": self.rounds,
            "cost": self.cost,
            "task": self.task,
        }


@attrs.frozen
class TeamLane:
    label: str
    title: str
    #: ``[state, start, end, note]`` with ``end`` exclusive.
    segments: tuple[tuple[str, int, int, str], ...]


@attrs.frozen
class TeamPicture:
    """The board's log as lanes, the agents found, and what could not be read."""

    board: str
    log: tuple[Mapping[str, Any], ...]
    item_lanes: tuple[TeamLane, ...]
    agent_lanes: tuple[TeamLane, ...]
    agents: tuple[AgentTrace, ...]
    error: str | None = None

    @property
    def note(self) -> str:
        if self.error:
            return self.error
        return (
            f"{len(self.log)} log entries, {len(self.item_lanes)} items, {len(self.agents)} traces"
        )

    def as_json(self) -> dict[str, Any]:
        def lanes(found: Sequence[TeamLane]) -> list[dict[str, Any]]:
            return [
                {
                    "label": lane.label,
                    "title": lane.title,
                    "segments": [list(s) for s in lane.segments],
                }
                for lane in found
            ]

        return {
            "board": self.board,
            "error": self.error,
            "note": self.note,
            "columns": len(self.log),
            "log": list(self.log),
            "item_lanes": lanes(self.item_lanes),
            "agent_lanes": lanes(self.agent_lanes),
            "agents": [agent.as_json() for agent in self.agents],
        }


class TeamError(Exception):
    """A board that cannot be pictured at all (a URL that names no store); one line."""


def read_team(url: str, near: Iterable[Path] = ()) -> TeamPicture:
    """The picture of the board at ``url``; its agents' traces looked for in ``near`` too.

    A store that names no board raises :class:`TeamError`; one that cannot be read now (a
    server down, a file gone) gives a picture that says so, with whatever traces were found.
    """
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    folders = [*near]
    database = sqlite_path(url)
    if database is not None:
        folders.append(database.parent)
    agents = tuple(_agents(url, folders))
    if database is not None and not database.is_file():
        return TeamPicture(url, (), (), (), agents, f"no board at {database} (no such file)")
    try:
        store = open_store(url, create=False)  # a picture never makes a board
    except BoardUrlError as error:
        raise TeamError(str(error)) from None
    try:
        entries = [entry.as_dict() for entry in store.log()]
    except (BoardError, OSError) as error:
        return TeamPicture(url, (), (), (), agents, f"{url}: cannot read the board: {error}")
    except Exception as error:  # a driver's own error (sqlite3, psycopg): said, not raised
        return TeamPicture(url, (), (), (), agents, f"{url}: cannot read the board: {error}")
    finally:
        store.close()
    items, holders = _lanes(entries)
    return TeamPicture(store.url, tuple(entries), items, holders, agents)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite board, read as :func:`~orchestrator.board.stores.open_store` does."""
    from orchestrator.board.stores import BoardUrlError, parse_url

    try:
        path = getattr(parse_url(url).dialect, "path", None)
    except BoardUrlError:
        return None
    return path if isinstance(path, Path) else None


def same_board(one: str, other: str) -> bool:
    """Whether two board URLs name one store (``x.db`` and ``sqlite:///abs/x.db`` do)."""
    first, second = sqlite_path(one), sqlite_path(other)
    if first is not None and second is not None:
        return first.resolve() == second.resolve()
    return one == other


def _agents(url: str, folders: Sequence[Path]) -> Iterator[AgentTrace]:
    from orchestrator.sessions import sessions_dir, summarize

    seen: set[Path] = set()
    candidates = [path for folder in folders for path in _traces_in(folder)]
    candidates.extend(sessions_dir().glob("*/*.jsonl"))
    for path in candidates[:_SCAN_LIMIT]:
        resolved = path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        started = _first_event(path)
        plan = started.get("plan") if started is not None else None
        if not isinstance(plan, Mapping) or not isinstance(plan.get("shared"), str):
            continue
        if not same_board(plan["shared"], url):
            continue
        summary = summarize(path)
        yield AgentTrace(
            str(plan.get("agent") or "?"),
            summary.run_id or str(started.get("run_id") if started else ""),
            path,
            summary.status,
            summary.rounds,
            summary.cost,
            summary.task,
        )


def _traces_in(folder: Path) -> list[Path]:
    try:
        return sorted(path for path in folder.glob("*.jsonl") if path.is_file())
    except OSError:
        return []


def _first_event(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as stream:
            first = stream.readline(1 << 20)
    except OSError:
        return None
    try:
        event = json.loads(first)
    except ValueError:
        return None
    if isinstance(event, dict) and event.get("event") == "run.started":
        return event
    return None


class _Segments:
    """Open and closed segments of named lanes, each a state over log columns."""

    def __init__(self) -> None:
        self.closed: dict[str, list[tuple[str, int, int, str]]] = {}
        self.open: dict[str, tuple[str, int, str]] = {}

    def set(self, lane: str, state: str | None, column: int, note: str = "") -> None:
        self.closed.setdefault(lane, [])
        current = self.open.pop(lane, None)
        if current is not None:
            old, start, old_note = current
            if (old, old_note) == (state, note):
                self.open[lane] = current
                return
            if column > start:
                self.closed[lane].append((old, start, column, old_note))
        if state is not None:
            self.open[lane] = (state, column, note)

    def lanes(self, end: int) -> dict[str, tuple[tuple[str, int, int, str], ...]]:
        found = {}
        for lane, segments in self.closed.items():
            all_of = list(segments)
            if lane in self.open:
                state, start, note = self.open[lane]
                all_of.append((state, start, max(end, start + 1), note))
            found[lane] = tuple(all_of)
        return found


def _lanes(
    entries: Sequence[Mapping[str, Any]],
) -> tuple[tuple[TeamLane, ...], tuple[TeamLane, ...]]:
    items, holders = _Segments(), _Segments()
    texts: dict[str, str] = {}
    status: dict[str, str] = {}
    blockers: dict[str, tuple[str, ...]] = {}
    held_by: dict[str, str] = {}
    for column, entry in enumerate(entries):
        item, dst = str(entry["item"]), str(entry["dst"])
        # An edit (a person's) and a check run are notes: no one takes or leaves the item.
        note = entry.get("trigger") in ("edit", "check")
        if entry.get("src") is None or entry.get("trigger") == "edit":
            texts[item] = str(entry.get("text") or "")
            blockers[item] = tuple(str(b) for b in entry.get("blocked_by") or ())
        status[item] = dst
        agent = entry.get("agent")
        if note:
            pass
        elif dst == "in_progress" and agent:
            held_by[item] = str(agent)
            holders.set(str(agent), "holding", column, f"holds #{item} {texts.get(item, '')}")
        elif item in held_by:
            holder = held_by.pop(item)
            holders.set(holder, None, column)
        # Each pending item's look may change with any entry: a blocker completing unblocks it.
        for name in (item, *[i for i, b in blockers.items() if item in b]):
            waiting = any(status.get(b) != "completed" for b in blockers.get(name, ()))
            state = status.get(name, "pending")
            items.set(name, "blocked" if state == "pending" and waiting else state, column)
    end = len(entries)
    item_lanes = tuple(
        TeamLane(f"#{name} {texts.get(name, '')}", f"#{name}: {texts.get(name, '')}", segments)
        for name, segments in items.lanes(end).items()
    )
    agent_lanes = tuple(
        TeamLane(name, f"agent {name}", segments) for name, segments in holders.lanes(end).items()
    )
    return item_lanes, agent_lanes


def team_document(team: TeamPicture) -> str:
    """The board's own page: its lanes, its log and its agents' pages linked."""
    return document(f"orchestrator · board {team.board}", {"kind": "team", "team": team.as_json()})
