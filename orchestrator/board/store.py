"""A shared board in a SQL store: SQLite embedded, PostgreSQL for agents on several machines.

Every change is a transition of the item machine
(:class:`orchestrator.item_machine.ItemMachine`, the same table and trigger names as a board of
one agent), fired on a model whose guards read the store inside the change's own transaction,
and appended to the store's log in that transaction. The log is append-only: items are never
deleted, and an id once given is stable.
Besides the machine's edges the log holds two kinds of line that change no status: ``edit``
(a person changed an item's text, blockers or check) and ``check`` (an item's check was run:
command, exit code, duration, by whom). ``board check`` replays all of them
(:mod:`orchestrator.board.check`).

Writers are serialised per board (``BEGIN IMMEDIATE`` on SQLite; a row lock on the board's
``lock`` row in PostgreSQL), because the guards read the whole board: an agent's single
in-progress item, the blockers of the item it claims. So of N agents that claim one item at
once exactly one wins, and a refused change writes nothing.

Leases need no daemon: whichever operation next touches the board first fires ``expire`` on
every claim whose lease ran out, logged like any other edge.

Actors (:mod:`orchestrator.board.inputs`): agents, and persons (``person:USER``) acting by
hand. Only the agent holding an item completes or releases it; a release with ``force`` frees
another's item (a dead agent's), logged as forced; a person may cancel any unfinished item,
and only a person may cancel one that carries a check a person set.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeGuard

import attrs
from transitions import EventData, MachineError

from orchestrator.board import schema
from orchestrator.board.inputs import (
    MAX_NAME,
    agent_problem,
    is_person,
    lease_problem,
    name_problem,
    team_of,
    text_problem,
)
from orchestrator.board.schema import Tables
from orchestrator.item_machine import ITEM_TRANSITIONS, ItemMachine, Status

#: How long a claim holds without renewal, by default (``--lease``).
DEFAULT_LEASE = 120.0
#: Log lines that are not edges of the item machine (the item's status stays as it was).
NOTE_TRIGGERS = frozenset({"edit", "check"})
#: Every trigger a log line may carry: ``add``, the item machine's edges, and the notes.
LOG_TRIGGERS = frozenset(
    {"add", *NOTE_TRIGGERS, *(str(edge["trigger"]) for edge in ITEM_TRANSITIONS)}
)
#: The marks a log line may carry (:attr:`LogEntry.flag`).
LOG_FLAGS = frozenset({"skip_check", "force"})
_FINAL = frozenset({Status.COMPLETED, Status.CANCELLED})
#: A team's hold on a board is the meta row ``team:ID`` (:meth:`SqlBoardStore.hold_for_team`).
_TEAM_KEY = "team:"
_STATUSES = {str(status): status for status in Status}


class BoardError(Exception):
    """A change the board's rules refuse; ``str()`` is one line naming the item and why."""

    def __init__(self, message: str, item_id: str | None = None, owner: str | None = None):
        super().__init__(message)
        self.item_id = item_id
        self.owner = owner


class NothingClaimable(BoardError):
    """``claim`` found no ready item; ``reason`` says why (``all done``, ``all claimed``…)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class UnknownBlocker(BoardError):
    """An item would wait on an id that is not on the board; ``item_id`` is that id."""


class TeamBusy(BoardError):
    """Another team works this board: ``team`` is its id, ``items`` its unfinished items.

    No items means it is still planning: it holds the board by a lease its lead renews.
    """

    def __init__(self, message: str, team: str, items: tuple[str, ...]) -> None:
        super().__init__(message)
        self.team = team
        self.items = items


class StoreError(BoardError):
    """The store itself failed: a malformed row, or the database erred; one line, naming it."""


class BoardUrlError(ValueError):
    """A ``--board`` value that names no store, or no board there; ``str()`` is one line."""


class NoBoard(BoardUrlError):
    """The store holds no board (yet): a missing file, an empty database, an unknown name."""


@attrs.frozen
class BoardItem:
    """One item as the store holds it."""

    id: str
    text: str
    status: Status
    owner: str | None = None
    lease_until: float | None = None
    blocked_by: tuple[str, ...] = ()
    #: Its place in board order (claims take the first ready item in it); None: not from a store.
    position: int | None = None

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "text": self.text, "status": str(self.status)}
        data["owner"] = self.owner
        data["blocked_by"] = list(self.blocked_by)
        if self.lease_until is not None and self.status == Status.IN_PROGRESS:
            left = self.lease_until - (time.time() if now is None else now)
            data["lease_s"] = round(max(left, 0.0), 1)
        return data


@attrs.frozen
class LogEntry:
    """One line of the board's log: an item added, an edge it took, an edit, a check run.

    ``check`` is the item's check on an ``add`` or ``edit`` line (``""``: none; ``None`` on
    an ``add`` line a store wrote before it recorded checks: unknown), and the command run on a
    ``check`` line. ``flag`` marks a ``complete`` done without running the check
    (``skip_check``) and a release of another agent's item (``force``).
    """

    seq: int
    ts: str
    agent: str | None
    item: str
    src: str | None
    dst: str
    trigger: str
    text: str | None = None
    blocked_by: tuple[str, ...] | None = None
    check: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    flag: str | None = None

    @property
    def passed(self) -> bool:
        """A ``check`` line whose command exited 0."""
        return self.trigger == "check" and self.exit_code == 0

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "seq": self.seq,
            "ts": self.ts,
            "agent": self.agent,
            "item": self.item,
            "src": self.src,
            "dst": self.dst,
            "trigger": self.trigger,
        }
        if self.text is not None:
            data["text"] = self.text
        if self.blocked_by is not None:
            data["blocked_by"] = list(self.blocked_by)
        if self.check is not None:
            data["check"] = self.check or None
        if self.exit_code is not None:
            data["exit_code"] = self.exit_code
        if self.duration_s is not None:
            data["duration_s"] = self.duration_s
        if self.flag is not None:
            data[self.flag] = True
        return data


@attrs.frozen
class BoardContents:
    """Everything ``board check`` compares, read in one transaction."""

    items: tuple[BoardItem, ...]
    log: tuple[LogEntry, ...]
    #: Each item's check, by item id.
    checks: Mapping[str, str]
    #: Who set each item's check, by item id (None: a store that did not say).
    setters: Mapping[str, str | None] = attrs.field(factory=dict)
    #: The meta table's counters (``next_id``, ``next_position``…), by key.
    counters: Mapping[str, int] = attrs.field(factory=dict)
    #: The database the board is in (``sqlite``, ``postgresql``; empty: not said).
    dialect: str = ""


class _Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class _Dialect(Protocol):
    """What differs between SQLite and PostgreSQL: connecting, locking, placeholders."""

    name: str
    #: Whether a write transaction starts by locking the board's ``lock`` row (PostgreSQL).
    row_lock: bool

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        """The database driver's error classes."""
        ...

    def connect(self, *, create: bool) -> Any: ...

    def tables(self, connection: Any) -> set[str]:
        """The database's table names, read without writing anything."""
        ...

    def columns(self, connection: Any, table: str) -> set[str]: ...

    def prepare(self, connection: Any) -> None:
        """Settings for a database known to be (or about to be) a board."""
        ...

    def begin_setup(self, connection: Any) -> None:
        """Start the transaction that makes or upgrades a board's tables."""
        ...

    def begin(self, connection: Any) -> None:
        """Start a write transaction that no other writer of this board runs beside."""
        ...

    def begin_read(self, connection: Any) -> None: ...

    def end(self, connection: Any, *, commit: bool) -> None: ...

    def close(self, connection: Any) -> None:
        """Close the connection, and whatever else the dialect opened beside it."""
        ...

    def sql(self, text: str) -> str: ...


#: Past the last number both databases keep in an integer column (signed 64 bits): a counter
#: or a seq there has no next one.
_INT64_END = 2**63 - 1


def _has_next(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a count (a whole number from 0) whose next one the database keeps."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _INT64_END


_ITEM_COLUMNS = "id, text, status, owner, lease_until, blocked_by, position"
_LOG_COLUMNS = (
    "seq, ts, agent, item, src, dst, trigger, text, blocked_by, check_command, exit_code, "
    "duration_s, flag"
)


class _Transaction:
    """One locked change: reads and writes of the store, and the log lines it appends."""

    def __init__(self, cursor: _Cursor, sql: Callable[[str], str], now: float) -> None:
        self._cursor, self._sql, self.now = cursor, sql, now
        self.appended: list[LogEntry] = []
        self._seq: int | None = None
        self._ts: str | None = None
        #: An agent's in-progress rows, read once until the transaction next writes: a claim
        #: reads them, and the start edge's guard asks the same again.
        self._held: dict[str | None, list[Any]] = {}

    def query(self, text: str, *params: Any) -> list[Any]:
        self._cursor.execute(self._sql(text), params)
        return self._cursor.fetchall()

    def run(self, text: str, *params: Any) -> None:
        self._held.clear()
        self._cursor.execute(self._sql(text), params)

    def held(self, agent: str | None) -> list[Any]:
        """The rows of the items ``agent`` has in progress."""
        rows = self._held.get(agent)
        if rows is None:
            rows = self._held[agent] = self.query(
                f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE status = 'in_progress' AND owner = ?",
                agent,
            )
        return rows

    def take(self, key: str) -> int:
        """The next number of a counter (ids, log seq, positions)."""
        rows = self.query("SELECT value FROM {meta} WHERE key = ?", key)
        value = rows[0][0] if rows else None
        if not _has_next(value):
            raise _malformed("the board's meta table", f"its {key} counter is {_label(value)}")
        self.run("UPDATE {meta} SET value = ? WHERE key = ?", value + 1, key)
        return value

    def item(self, item_id: str) -> BoardItem | None:
        rows = self.query(f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE id = ?", item_id)
        return _item(rows[0]) if rows else None

    def log(
        self,
        agent: str | None,
        item: str,
        src: str | None,
        dst: str,
        trigger: str,
        *,
        text: str | None = None,
        blocked_by: Sequence[str] | None = None,
        check: str | None = None,
        exit_code: int | None = None,
        duration_s: float | None = None,
        flag: str | None = None,
    ) -> None:
        if self._seq is None:
            # The log's last seq, once per transaction: writers take turns, so no other
            # writer appends in between (and no counter row is rewritten per line).
            ((last,),) = self.query("SELECT MAX(seq) FROM {log}")
            if last is not None and not _has_next(last):
                raise _malformed("the board's log", f"its last seq is {_label(last)}")
            self._seq = last or 0
        self._seq += 1
        seq = self._seq
        if self._ts is None:  # every line of a transaction has its time
            when = dt.datetime.fromtimestamp(self.now, dt.UTC)
            self._ts = when.isoformat(timespec="microseconds")
        ts = self._ts
        blockers = None if blocked_by is None else tuple(blocked_by)
        self.run(
            f"INSERT INTO {{log}} ({_LOG_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            seq,
            ts,
            agent,
            item,
            src,
            dst,
            trigger,
            text,
            None if blockers is None else json.dumps(list(blockers)),
            check,
            exit_code,
            duration_s,
            flag,
        )
        self.appended.append(
            LogEntry(
                seq,
                ts,
                agent,
                item,
                src,
                dst,
                trigger,
                text,
                blockers,
                check,
                exit_code,
                duration_s,
                flag,
            )
        )


def _label(value: object) -> str:
    """A stored value shown in a one-line message: as is when printable, else its repr."""
    return value if isinstance(value, str) and value and value.isprintable() else repr(value)


def _malformed(where: str, what: str) -> StoreError:
    return StoreError(
        f"{where}: the store's row is malformed ({what}); repair it by hand or restore the store"
    )


def _ids(value: object, where: str, field: str) -> tuple[str, ...]:
    if value == "[]":
        return ()  # most items wait on nothing: no JSON to read
    try:
        ids = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        ids = None
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise _malformed(where, f"{field} is {_label(value)}, not a list of ids")
    return tuple(ids)


def _item(row: Sequence[Any]) -> BoardItem:
    """The item a row of the items table holds; :class:`StoreError` naming it when malformed."""
    item_id, text, status, owner, lease_until, blocked_by, position = row
    if not isinstance(item_id, str) or not item_id or not item_id.isprintable():
        raise _malformed("an item", f"its id is {_label(item_id)}")
    where = f"item #{_label(item_id)}"
    if not isinstance(text, str) or not text:
        raise _malformed(where, f"its text is {_label(text)}")
    state = _STATUSES.get(status) if isinstance(status, str) else None
    if state is None:
        raise _malformed(where, f"its status is {_label(status)}")
    if owner is not None and (not isinstance(owner, str) or name_problem(owner) is not None):
        raise _malformed(where, f"its owner is {_label(owner)}")
    if lease_until is not None and (
        isinstance(lease_until, bool)
        or not isinstance(lease_until, int | float)
        or not math.isfinite(lease_until)
    ):
        raise _malformed(where, f"its lease is {_label(lease_until)}, not a finite time")
    if isinstance(position, bool) or not isinstance(position, int):
        raise _malformed(where, f"its position is {_label(position)}, not a whole number")
    if state == Status.IN_PROGRESS and (owner is None or lease_until is None):
        # Held by no one, or for ever: anyone could complete it, or it would never expire.
        missing = "an owner" if owner is None else "a lease"
        raise _malformed(where, f"it is in_progress without {missing}")
    blockers = _ids(blocked_by, where, "blocked_by")
    if item_id in blockers:
        raise _malformed(where, "it waits on itself")
    return BoardItem(
        item_id,
        text,
        state,
        owner,
        None if lease_until is None else float(lease_until),
        blockers,
        position,
    )


def _entry(row: Sequence[Any]) -> LogEntry:
    (seq, ts, agent, item, src, dst, trigger, text, blocked_by, check, code, took, flag) = row
    if isinstance(seq, bool) or not isinstance(seq, int):
        raise _malformed("a log line", f"its seq is {_label(seq)}")
    where = f"log line seq {seq}"
    for field, value, may_be_none in (
        ("ts", ts, False),
        ("item", item, False),
        ("dst", dst, False),
        ("trigger", trigger, False),
        ("agent", agent, True),
        ("src", src, True),
        ("text", text, True),
        ("check", check, True),
        ("flag", flag, True),
    ):
        if not (isinstance(value, str) or (value is None and may_be_none)):
            raise _malformed(where, f"its {field} is {_label(value)}")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
        raise _malformed(where, f"its exit code is {_label(code)}")
    if took is not None and (
        isinstance(took, bool) or not isinstance(took, int | float) or not math.isfinite(took)
    ):
        raise _malformed(where, f"its duration is {_label(took)}")
    if not item or not item.isprintable():
        raise _malformed(where, f"its item is {_label(item)}")
    if agent is not None and name_problem(agent) is not None:
        raise _malformed(where, f"its agent is {_label(agent)}")
    if trigger not in LOG_TRIGGERS:
        raise _malformed(where, f"its trigger is {_label(trigger)}, not one the board logs")
    for field, value in (("src", src), ("dst", dst)):
        if value is not None and value not in _STATUSES:
            raise _malformed(where, f"its {field} is {_label(value)}, not a status")
    if flag is not None and flag not in LOG_FLAGS:
        raise _malformed(where, f"its flag is {_label(flag)}")
    if log_time(ts) is None:
        raise _malformed(where, f"its ts is {_label(ts)}, not a time")
    return LogEntry(
        seq,
        ts,
        agent,
        item,
        src,
        dst,
        trigger,
        text,
        None if blocked_by is None else _ids(blocked_by, where, "blocked_by"),
        check,
        code,
        None if took is None else float(took),
        flag,
    )


def log_time(ts: str) -> dt.datetime | None:
    """A log line's ``ts`` as a time; None when it is not one as the log writes them.

    The log writes ISO 8601 with its offset: a time without one is not the log's.
    """
    try:
        when = dt.datetime.fromisoformat(ts)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


@attrs.define(slots=False, eq=False)
class _StoredItem:
    """The item machine's model for the item being moved: its guards read the store.

    One per store, pointed at each item in turn (adding a model to the machine binds every
    trigger to it, which costs more than the edge itself).
    """

    tx: _Transaction | None = None
    row: BoardItem | None = None
    actor: str | None = None
    #: A release with ``force``, or a person's cancel: the owner's hold does not stop it.
    override: bool = False
    #: A completion by hand without running the item's check (``--skip-check``).
    skip_check: bool = False
    state: str = ""
    fired: list[tuple[str, str, str]] = attrs.Factory(list)

    def point(self, tx: _Transaction, row: BoardItem, actor: str | None, **flags: bool) -> None:
        self.tx, self.row, self.actor, self.state = tx, row, actor, str(row.status)
        self.override = flags.get("override", False)
        self.skip_check = flags.get("skip_check", False)
        self.fired = []

    # Guards named in ITEM_TRANSITIONS.
    def no_other_item_in_progress(self, event: EventData) -> bool:
        # On a shared board the rule holds per owner: each agent works one item at a time.
        assert self.tx is not None and self.row is not None
        return all(row[0] == self.row.id for row in self.tx.held(self.actor))

    def dependencies_completed(self, event: EventData) -> bool:
        assert self.tx is not None and self.row is not None
        return not _unfinished(self.tx, self.row)

    def held_by_actor(self, event: EventData) -> bool:
        assert self.row is not None
        return self.override or self.row.owner is None or self.row.owner == self.actor

    def lease_expired(self, event: EventData) -> bool:
        assert self.tx is not None and self.row is not None
        return self.row.lease_until is not None and self.row.lease_until < self.tx.now

    def check_passes(self, event: EventData) -> bool:
        assert self.tx is not None and self.row is not None
        return self.skip_check or _check_passed(self.tx, self.row.id)

    def record_transition(self, event: EventData) -> None:
        assert event.transition is not None
        self.fired.append((event.event.name, event.transition.source, str(event.transition.dest)))


def _check_row(row: Sequence[Any]) -> tuple[str, str, str | None]:
    """(item, command, set_by) of a row of the checks table; StoreError naming it if malformed."""
    item, command, set_by = row
    if not isinstance(item, str) or not item or not item.isprintable():
        raise _malformed("a check", f"its item is {_label(item)}")
    where = f"item #{item}'s check"
    if not isinstance(command, str) or not command.strip():
        raise _malformed(where, f"its command is {_label(command)}")
    if set_by is not None and (not isinstance(set_by, str) or name_problem(set_by) is not None):
        raise _malformed(where, f"its set_by is {_label(set_by)}")
    return item, command, set_by


def _check_of(tx: _Transaction, item_id: str) -> tuple[str, str | None] | None:
    """The item's check and who set it, or None."""
    rows = tx.query("SELECT item, command, set_by FROM {checks} WHERE item = ?", item_id)
    if not rows:
        return None
    _, command, set_by = _check_row(rows[0])
    return command, set_by


def _check_passed(tx: _Transaction, item_id: str) -> bool:
    """No check, or a passing run of the current one logged since the item last started.

    The item's lines since that start are read whole, so a malformed one is named rather than
    taken for a missing or a failed run.
    """
    check = _check_of(tx, item_id)
    if check is None:
        return True
    ((started,),) = tx.query(
        "SELECT MAX(seq) FROM {log} WHERE item = ? AND trigger = 'start'", item_id
    )
    if started is not None and (isinstance(started, bool) or not isinstance(started, int)):
        raise _malformed(f"item #{item_id}'s log", f"its last start's seq is {_label(started)}")
    rows = tx.query(
        f"SELECT {_LOG_COLUMNS} FROM {{log}} WHERE item = ? AND seq > ? ORDER BY seq",
        item_id,
        started or 0,
    )
    return any(entry.passed and entry.check == check[0] for entry in map(_entry, rows))


def _unfinished(tx: _Transaction, item: BoardItem) -> list[str]:
    """The item's blockers that are not completed.

    Each blocker's row is read whole: a malformed one (a status the machine does not have) or
    a missing one is named, never taken for a blocker that is merely unfinished.
    """
    blockers = item.blocked_by
    if not blockers:
        return []
    marks = ", ".join("?" for _ in blockers)
    rows = tx.query(f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE id IN ({marks})", *blockers)
    found = {row.id: row for row in map(_item, rows)}
    for blocker in blockers:
        if blocker not in found:
            raise _malformed(
                f"item #{item.id}", f"it waits on #{_label(blocker)}, which is not on the board"
            )
    return [blocker for blocker in blockers if found[blocker].status != Status.COMPLETED]


def _refuse(problem: str | None, item_id: str | None = None) -> None:
    if problem is not None:
        raise BoardError(problem, item_id)


class BoardChange:
    """The operations of one transaction on the board (:meth:`SqlBoardStore.change`)."""

    def __init__(self, edges: _Edges, tx: _Transaction) -> None:
        self._edges, self._tx = edges, tx

    @property
    def now(self) -> float:
        return self._tx.now

    @property
    def appended(self) -> tuple[LogEntry, ...]:
        """The log lines this transaction wrote so far (expiries first)."""
        return tuple(self._tx.appended)

    def items(self) -> tuple[BoardItem, ...]:
        return _all_items(self._tx)

    def item(self, item_id: str) -> BoardItem | None:
        return self._tx.item(item_id)

    def add(
        self,
        text: str,
        *,
        agent: str | None = None,
        blocked_by: Sequence[str] = (),
        item_id: str | None = None,
        check: str | None = None,
    ) -> BoardItem:
        """A new pending item (see :meth:`SqlBoardStore.add`)."""
        _refuse(text_problem(text.strip() if isinstance(text, str) else text), item_id)
        if agent is not None:
            _refuse(name_problem(agent), item_id)
        if item_id is not None:
            _refuse(_id_problem(item_id), item_id)
        command = check.strip() if check is not None and check.strip() else None
        if command is not None:
            _refuse(text_problem(command, "check command"), item_id)
        return _add(
            self._tx,
            text.strip(),
            agent,
            blocked_by=tuple(blocked_by),
            item_id=item_id,
            check=command,
        )

    def checks(self) -> dict[str, str]:
        """Each item's acceptance check, by item id (items without one are not there)."""
        return {item: command for item, (command, _) in _checks(self._tx).items()}

    def edit(
        self,
        item_id: str,
        *,
        agent: str,
        text: str | None = None,
        blocked_by: Sequence[str] | None = None,
        check: str | None = None,
    ) -> BoardItem:
        """Change an unfinished item's text, blockers (a pending item's) or check (``""``: none).

        Logged as an ``edit`` line with the item's new text, blockers and check. Changing
        nothing logs nothing.
        """
        tx = self._tx
        _refuse(name_problem(agent), item_id)
        row = _existing(tx, item_id)
        if row.status in _FINAL:
            raise BoardError(f"item #{item_id} is {row.status}; a finished item is not edited")
        new_text = row.text if text is None else text.strip()
        if text is not None:  # what an older store took (a longer text) stays until changed
            _refuse(text_problem(new_text), item_id)
        new_blockers = row.blocked_by if blocked_by is None else tuple(dict.fromkeys(blocked_by))
        if new_blockers != row.blocked_by:
            if row.status != Status.PENDING:
                raise BoardError(
                    f"item #{item_id} is {row.status}; only a pending item's blockers change",
                    item_id,
                )
            _check_blockers(tx, item_id, new_blockers)
        held = _check_of(tx, item_id)
        old_check = held[0] if held else ""
        new_check = old_check if check is None else check.strip()
        if check is not None and new_check:
            _refuse(text_problem(new_check, "check command"), item_id)
        if (new_text, new_blockers, new_check) == (row.text, row.blocked_by, old_check):
            return row
        tx.run(
            "UPDATE {items} SET text = ?, blocked_by = ? WHERE id = ?",
            new_text,
            json.dumps(list(new_blockers)),
            item_id,
        )
        if new_check != old_check:
            tx.run("DELETE FROM {checks} WHERE item = ?", item_id)
            if new_check:
                tx.run(
                    "INSERT INTO {checks} (item, command, set_by) VALUES (?, ?, ?)",
                    item_id,
                    new_check,
                    agent,
                )
        status = str(row.status)
        tx.log(
            agent,
            item_id,
            status,
            status,
            "edit",
            text=new_text,
            blocked_by=new_blockers,
            check=new_check,
        )
        return attrs.evolve(row, text=new_text, blocked_by=new_blockers)

    def claim(
        self, agent: str, *, lease: float = DEFAULT_LEASE, item_id: str | None = None
    ) -> BoardItem:
        """Start the named item, or the first ready one, for ``agent`` (the claim is ``start``).

        Claiming an item the agent already holds (by id, or with none named) renews its
        lease. Raises :class:`NothingClaimable` when no item is ready, :class:`BoardError`
        when the named one cannot start (another agent holds it, its blockers are unfinished…).
        """
        _refuse(agent_problem(agent), item_id)
        _refuse(lease_problem(lease), item_id)
        tx = self._tx
        if item_id is None:
            held = tx.held(agent)
            # An agent that holds an item (a restarted worker) gets it back, renewed.
            row = _item(held[0]) if held else _next_ready(tx)
            item_id = row.id
        else:
            row = _existing(tx, item_id)
        until = tx.now + lease
        if row.status == Status.IN_PROGRESS and row.owner == agent:
            tx.run("UPDATE {items} SET lease_until = ? WHERE id = ?", until, row.id)
            return attrs.evolve(row, lease_until=until)
        status = self._edges.fire(tx, row, "start", agent)
        tx.run(
            "UPDATE {items} SET status = ?, owner = ?, lease_until = ? WHERE id = ?",
            status,
            agent,
            until,
            item_id,
        )
        return attrs.evolve(row, status=Status(status), owner=agent, lease_until=until)

    def complete(self, item_id: str, *, agent: str, skip_check: bool = False) -> BoardItem:
        """Complete an item ``agent`` holds.

        One with a check needs a passing run logged since it last started
        (:meth:`record_check`), or ``skip_check`` (logged as such).
        """
        _refuse(name_problem(agent), item_id)
        tx = self._tx
        row = _existing(tx, item_id)
        flag = "skip_check" if skip_check and _check_of(tx, item_id) is not None else None
        status = self._edges.fire(tx, row, "complete", agent, flag=flag, skip_check=skip_check)
        # The completer stays on record as the owner.
        tx.run("UPDATE {items} SET status = ?, lease_until = NULL WHERE id = ?", status, item_id)
        return attrs.evolve(row, status=Status(status), lease_until=None)

    def release(self, item_id: str, *, agent: str, force: bool = False) -> BoardItem:
        """Give a claimed item back (``pause``); with ``force``, whoever holds it (logged)."""
        _refuse(name_problem(agent), item_id)
        row = _existing(self._tx, item_id)
        forced = force and row.owner not in (None, agent)
        return self._free(row, "pause", agent, flag="force" if forced else None, override=force)

    def cancel(self, item_id: str, *, agent: str) -> BoardItem:
        """Cancel an item: an agent, one it holds or no one does; a person, any unfinished one.

        An item whose check a person set is cancelled by a person only.
        """
        _refuse(name_problem(agent), item_id)
        tx = self._tx
        row = _existing(tx, item_id)
        check = _check_of(tx, item_id)
        if not is_person(agent) and check is not None and _persons(check[1]):
            raise BoardError(
                f"item #{item_id} carries a check a person set ({_label(check[0])}); only a "
                "person may cancel it (board cancel); make the check pass instead",
                item_id,
                row.owner,
            )
        return self._free(row, "cancel", agent, override=is_person(agent))

    def record_check(
        self, item_id: str, *, agent: str, command: str, exit_code: int, duration_s: float
    ) -> LogEntry:
        """Log one run of an item's check (who ran it, the command, its exit code, how long)."""
        _refuse(name_problem(agent), item_id)
        row = _existing(self._tx, item_id)
        status = str(row.status)
        self._tx.log(
            agent,
            item_id,
            status,
            status,
            "check",
            check=command,
            exit_code=int(exit_code),
            duration_s=round(float(duration_s), 3),
        )
        return self._tx.appended[-1]

    def _free(
        self,
        row: BoardItem,
        trigger: str,
        agent: str,
        *,
        flag: str | None = None,
        override: bool = False,
    ) -> BoardItem:
        tx = self._tx
        status = self._edges.fire(tx, row, trigger, agent, flag=flag, override=override)
        tx.run(
            "UPDATE {items} SET status = ?, owner = NULL, lease_until = NULL WHERE id = ?",
            status,
            row.id,
        )
        return attrs.evolve(row, status=Status(status), owner=None, lease_until=None)


def _persons(set_by: str | None) -> bool:
    """Whether a check was set by a person (by hand, or before stores recorded who set it)."""
    return set_by is None or is_person(set_by)


def _id_problem(item_id: object) -> str | None:
    if not isinstance(item_id, str) or not item_id.strip() or not item_id.isprintable():
        return f"item id {_label(item_id)} must be non-empty printable text, e.g. 3"
    if item_id != item_id.strip():
        # "7 " beside "7" would be two items that every listing shows alike.
        return f"item id {item_id!r} starts or ends with a space"
    if len(item_id) > MAX_NAME:
        return f"an item id is at most {MAX_NAME} characters; this one is {len(item_id):,}"
    return None


def _existing(tx: _Transaction, item_id: str) -> BoardItem:
    """The item a verb acts on, read whole: its row, and that what it waits on is there."""
    row = tx.item(item_id)
    if row is None:
        raise BoardError(f"no item #{_label(item_id)} on this board", item_id)
    _unfinished(tx, row)
    return row


class _Edges:
    """Fires the item machine's edges on stored items and logs each one."""

    def __init__(self) -> None:
        self._machine = ItemMachine()
        self._model = _StoredItem()
        self._machine.add_model(self._model, initial=Status.PENDING.value)

    def fire(
        self,
        tx: _Transaction,
        row: BoardItem,
        trigger: str,
        actor: str | None,
        *,
        flag: str | None = None,
        override: bool = False,
        skip_check: bool = False,
    ) -> str:
        """Fire ``trigger`` on ``row``; log the edge and return the new status, or raise why not.

        The caller writes the status (with whatever else the edge changes) in one update.
        """
        model = self._model
        model.point(tx, row, actor, override=override, skip_check=skip_check)
        try:
            fired = getattr(model, trigger)()
        except MachineError:
            raise BoardError(_no_edge(row, trigger), row.id, row.owner) from None
        if not fired:
            raise _refused(tx, row, trigger, actor)
        status = str(row.status)
        for name, src, dst in model.fired:
            who = row.owner if name == "expire" else actor
            tx.log(who, row.id, src, dst, name, flag=flag)
            status = dst
        return status


class SqlBoardStore:
    """A board several agents share, in SQLite or PostgreSQL (see :func:`open_store`)."""

    def __init__(
        self,
        dialect: _Dialect,
        url: str,
        *,
        clock: Callable[[], float] = time.time,
        create: bool = True,
        tables: Tables | None = None,
    ):
        self.url = url
        self._dialect = dialect
        self._clock = clock
        self._tables = tables or Tables()
        self._edges = _Edges()
        self._statements: dict[str, str] = {}
        #: Whether opening made a new board (``board add`` says so).
        self.created = False
        self._connection = dialect.connect(create=create)
        try:
            self._open(create)
        except BaseException:
            dialect.close(self._connection)
            raise

    @property
    def board(self) -> str | None:
        """The board's name in its database (None: the default board)."""
        return self._tables.board

    # -- reading ------------------------------------------------------------------------------

    def items(self) -> tuple[BoardItem, ...]:
        """Every item in board order, after expiring the claims whose lease ran out."""
        with self._transaction() as tx:
            return _all_items(tx)

    def snapshot(self) -> tuple[tuple[BoardItem, ...], tuple[LogEntry, ...]]:
        """The items and the whole log, read in one transaction."""
        with self._transaction() as tx:
            return _all_items(tx), _all_entries(tx)

    def contents(self) -> BoardContents:
        """The items, the whole log and every check, read in one transaction (``board check``)."""
        with self._transaction() as tx:
            found = _checks(tx)
            checks = {item: command for item, (command, _) in found.items()}
            setters = {item: set_by for item, (_, set_by) in found.items()}
            # A counter no version writes breaks every later add: named here too.
            counters = _counters(tx)
            return BoardContents(
                _all_items(tx), _all_entries(tx), checks, setters, counters, self._dialect.name
            )

    def log(self, after: int = 0) -> Iterator[LogEntry]:
        """The log in order, from the line after ``after``."""
        self._dialect.begin_read(self._connection)
        cursor = self._connection.cursor()
        try:
            cursor.execute(
                self._sql(f"SELECT {_LOG_COLUMNS} FROM {{log}} WHERE seq > ? ORDER BY seq"),
                (after,),
            )
            rows = cursor.fetchall()
        except self._dialect.errors as error:
            raise _store_failed(error) from None
        finally:
            cursor.close()
            self._dialect.end(self._connection, commit=False)
        for row in rows:
            yield _entry(row)

    def checks(self) -> dict[str, str]:
        """Each item's acceptance check, by item id."""
        with self._transaction(expire=False) as tx:
            return {item: command for item, (command, _) in _checks(tx).items()}

    def check_setters(self) -> dict[str, str | None]:
        """Who set each item's check (``person:…``, an agent; None: a store that did not say)."""
        with self._transaction(expire=False) as tx:
            return {item: set_by for item, (_, set_by) in _checks(tx).items()}

    def teams(self) -> dict[str, tuple[str, ...]]:
        """Each team with unfinished items here, and their ids (see :func:`item_teams`)."""
        with self._transaction() as tx:
            return _unfinished_by_team(tx)

    def hold_for_team(self, team: str, *, lease: float) -> None:
        """Take (or renew) the board for ``team`` until ``lease`` seconds from now.

        One transaction: refused (:class:`TeamBusy`) while another team has unfinished items
        here or holds the board itself (a team still planning has no items yet), so two
        teams started at once on one board never both run. A team's hold is a row of the
        board's meta table (``team:ID``, the second it runs out); a dead lead's runs out by
        itself, and then its unfinished items are what keep other teams away.
        """
        _refuse(lease_problem(lease))
        with self._transaction() as tx:
            for other, items in _unfinished_by_team(tx).items():
                if other != team:
                    names = ", ".join(f"#{item}" for item in items[:8])
                    raise TeamBusy(f"items {names} belong to team {other}", other, items)
            key = _TEAM_KEY + team
            for held, until in tx.query(
                "SELECT key, value FROM {meta} WHERE key LIKE ?", _TEAM_KEY + "%"
            ):
                if held != key and isinstance(until, int | float) and until > tx.now:
                    other = str(held).removeprefix(_TEAM_KEY)
                    raise TeamBusy(f"team {other} is planning on it", other, ())
            until = math.ceil(tx.now + lease)
            tx.run("DELETE FROM {meta} WHERE key = ?", key)
            tx.run("INSERT INTO {meta} (key, value) VALUES (?, ?)", key, until)

    def let_go_for_team(self, team: str) -> None:
        """Give up ``team``'s hold on the board (its unfinished items still keep it)."""
        with self._transaction(expire=False) as tx:
            tx.run("DELETE FROM {meta} WHERE key = ?", _TEAM_KEY + team)

    # -- writing ------------------------------------------------------------------------------

    @contextmanager
    def change(self) -> Iterator[BoardChange]:
        """Several operations as one transaction: all of them happen, or (on an error) none."""
        with self._transaction() as tx:
            yield BoardChange(self._edges, tx)

    def add(
        self,
        text: str,
        *,
        agent: str | None = None,
        blocked_by: Sequence[str] = (),
        item_id: str | None = None,
        check: str | None = None,
    ) -> BoardItem:
        """A new pending item; its id is the next number unless one is given.

        ``text`` is one printable line. ``check`` is its acceptance check: an agent's run
        completes it only once the command passes where that agent's bash runs. Whoever adds
        it (``agent``) set the check: a person's (``person:…``, or no agent named) is cancelled
        by a person only.
        """
        with self.change() as change:
            return change.add(
                text, agent=agent, blocked_by=blocked_by, item_id=item_id, check=check
            )

    def edit(
        self,
        item_id: str,
        *,
        agent: str,
        text: str | None = None,
        blocked_by: Sequence[str] | None = None,
        check: str | None = None,
    ) -> BoardItem:
        """Change an item's text, blockers or check (see :meth:`BoardChange.edit`)."""
        with self.change() as change:
            return change.edit(item_id, agent=agent, text=text, blocked_by=blocked_by, check=check)

    def claim(
        self, agent: str, *, lease: float = DEFAULT_LEASE, item_id: str | None = None
    ) -> BoardItem:
        """Start the named item, or the first ready one (see :meth:`BoardChange.claim`)."""
        with self.change() as change:
            return change.claim(agent, lease=lease, item_id=item_id)

    def complete(self, item_id: str, *, agent: str, skip_check: bool = False) -> BoardItem:
        """Complete an item ``agent`` holds (see :meth:`BoardChange.complete`)."""
        with self.change() as change:
            return change.complete(item_id, agent=agent, skip_check=skip_check)

    def release(self, item_id: str, *, agent: str, force: bool = False) -> BoardItem:
        """Give a claimed item back (the ``pause`` edge): pending again, owned by no one.

        With ``force`` the item is freed whoever holds it (a dead agent's), logged as forced.
        """
        with self.change() as change:
            return change.release(item_id, agent=agent, force=force)

    def cancel(self, item_id: str, *, agent: str) -> BoardItem:
        """Cancel an item (see :meth:`BoardChange.cancel`)."""
        with self.change() as change:
            return change.cancel(item_id, agent=agent)

    def record_check(
        self, item_id: str, *, agent: str, command: str, exit_code: int, duration_s: float
    ) -> LogEntry:
        """Log one run of an item's check (see :meth:`BoardChange.record_check`)."""
        with self.change() as change:
            return change.record_check(
                item_id, agent=agent, command=command, exit_code=exit_code, duration_s=duration_s
            )

    def renew(self, agent: str, *, lease: float = DEFAULT_LEASE) -> int:
        """Push out the lease of every item ``agent`` holds; how many it holds."""
        _refuse(lease_problem(lease))
        with self._transaction() as tx:
            held = tx.query(
                "SELECT id FROM {items} WHERE status = 'in_progress' AND owner = ?", agent
            )
            if held:
                tx.run(
                    "UPDATE {items} SET lease_until = ? WHERE status = 'in_progress' AND owner = ?",
                    tx.now + lease,
                    agent,
                )
            return len(held)

    def close(self) -> None:
        self._dialect.close(self._connection)

    def __enter__(self) -> SqlBoardStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    def _sql(self, text: str) -> str:
        """A statement with this board's table names and the dialect's placeholders (cached)."""
        done = self._statements.get(text)
        if done is None:
            done = self._statements[text] = self._dialect.sql(self._tables.sql(text))
        return done

    def _open(self, create: bool) -> None:
        """Sort the database, then make this board's tables or upgrade them (never another's)."""
        dialect, connection, tables = self._dialect, self._connection, self._tables
        found = schema.sort_tables(dialect.tables(connection), tables)
        where = self.url if tables.board is None else f"{self.url} (board {tables.board})"
        if found.missing:
            raise BoardUrlError(
                f"{where}: a damaged board: its {tables.name(found.missing[0])} table is missing"
            )
        if not found.board:
            if found.foreign and not found.others:
                shown = ", ".join(found.foreign[:5])
                raise BoardUrlError(
                    f"{self.url}: not a board database (it holds other tables: {shown}); "
                    "give a new file or an empty database"
                )
            if not create:
                if found.others:
                    which = "no such board" if tables.board else "no default board"
                    raise NoBoard(
                        f"{where}: {which} here (boards here: {', '.join(found.others)}; "
                        "pick one with ?board=NAME)"
                    )
                raise NoBoard(f"{where}: no board there (board add starts one)")
        dialect.prepare(connection)
        self.created = not found.board
        if found.board and self._schema() == schema.SCHEMA:
            return  # a current board: no DDL (it would queue behind the writers' locks)
        cursor = connection.cursor()
        try:
            dialect.begin_setup(connection)
            if found.board and dialect.row_lock:
                # Upgrading a board agents may be using: writers first take this row, so none
                # is mid-transaction while the tables change under it.
                cursor.execute(self._sql("SELECT value FROM {meta} WHERE key = 'lock' FOR UPDATE"))
            self._setup(cursor)
            dialect.end(connection, commit=True)
        except dialect.errors as error:
            dialect.end(connection, commit=False)
            raise BoardUrlError(f"{where}: cannot open the board: {_first_line(error)}") from None
        except BaseException:
            dialect.end(connection, commit=False)
            raise
        finally:
            cursor.close()

    def _schema(self) -> int | None:
        """The schema the board's meta table records (None: a store from before schema 2)."""
        dialect, connection = self._dialect, self._connection
        dialect.begin_read(connection)
        cursor = connection.cursor()
        try:
            cursor.execute(self._sql("SELECT value FROM {meta} WHERE key = 'schema'"))
            row = cursor.fetchone()
        except dialect.errors as error:
            raise BoardUrlError(
                f"{self.url}: cannot read the board: {_first_line(error)}"
            ) from None
        finally:
            cursor.close()
            _end_quietly(dialect, connection)
        value = None if row is None else row[0]
        if row is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            # Not a schema any orchestrator wrote: "upgrading" it would overwrite the evidence.
            malformed = _malformed("the board's meta table", f"its schema is {_label(value)}")
            raise BoardUrlError(f"{self.url}: {malformed}")
        if isinstance(value, int) and value > schema.SCHEMA:
            raise BoardUrlError(
                f"{self.url}: the board's schema {value} was written by a newer orchestrator; "
                f"this one reads schema {schema.SCHEMA}"
            )
        return value if isinstance(value, int) else None

    def _setup(self, cursor: _Cursor) -> None:
        """Make the tables and counters that are missing, and add schema 2's columns."""
        dialect, tables = self._dialect, self._tables
        for statement in schema.statements(tables, dialect.name):
            cursor.execute(statement)
        for table, column, kind in schema.added_columns(tables):
            if column not in dialect.columns(self._connection, table):
                cursor.execute(f'ALTER TABLE "{table}" ADD COLUMN {column} {kind}')
        cursor.execute(self._sql("SELECT key, value FROM {meta}"))
        have = {str(key): value for key, value in cursor.fetchall()}
        wanted = (*schema.counters(), ("schema", schema.SCHEMA))
        for key, start in wanted:
            if key not in have:
                cursor.execute(
                    self._sql("INSERT INTO {meta} (key, value) VALUES (?, ?)"), (key, start)
                )
        if have.get("schema") != schema.SCHEMA:
            cursor.execute(
                self._sql("UPDATE {meta} SET value = ? WHERE key = 'schema'"), (schema.SCHEMA,)
            )

    @contextmanager
    def _transaction(self, *, expire: bool = True) -> Iterator[_Transaction]:
        connection, dialect = self._connection, self._dialect
        try:
            dialect.begin(connection)
        except dialect.errors as error:
            raise _store_failed(error) from None
        cursor = connection.cursor()
        try:
            tx = _Transaction(cursor, self._sql, 0.0)
            if dialect.row_lock:
                tx.query("SELECT value FROM {meta} WHERE key = 'lock' FOR UPDATE")
            # The time is read once the writer has its turn, so the log's times follow its
            # order (``board check`` holds them to it) however long the writer waited.
            tx.now = self._clock()
            if expire:
                _expire(self._edges, tx)
            yield tx
        except dialect.errors as error:
            _end_quietly(dialect, connection)
            raise _store_failed(error) from None
        except BaseException:
            _end_quietly(dialect, connection)
            raise
        else:
            try:
                dialect.end(connection, commit=True)
            except dialect.errors as error:
                raise _store_failed(error) from None
        finally:
            cursor.close()


def _end_quietly(dialect: _Dialect, connection: Any) -> None:
    """Roll back; a connection already lost has nothing to roll back."""
    with contextlib.suppress(*dialect.errors):
        dialect.end(connection, commit=False)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _store_failed(error: BaseException) -> StoreError:
    return StoreError(f"the board's database failed: {_first_line(error)}")


def item_teams(entries: Sequence[LogEntry] | Iterator[LogEntry]) -> dict[str, str]:
    """The team each item belongs to, by the log.

    That is the team of the agent that added it, else of the agent that last started it
    (``TEAM/worker-1`` is team ``TEAM``; a person and a name without ``/`` are no team's).
    """
    added: dict[str, str | None] = {}
    started: dict[str, str] = {}
    for entry in entries:
        if entry.trigger == "add":
            added[entry.item] = team_of(entry.agent)
        elif entry.trigger == "start":
            team = team_of(entry.agent)
            if team is not None:
                started[entry.item] = team
    found: dict[str, str] = {}
    for item, team in added.items():
        owner = team or started.get(item)
        if owner is not None:
            found[item] = owner
    return found


def _unfinished_by_team(tx: _Transaction) -> dict[str, tuple[str, ...]]:
    owners = item_teams(_all_entries(tx))
    found: dict[str, list[str]] = {}
    for item in _all_items(tx):
        team = owners.get(item.id)
        if team is not None and item.status not in _FINAL:
            found.setdefault(team, []).append(item.id)
    return {team: tuple(ids) for team, ids in found.items()}


def _checks(tx: _Transaction) -> dict[str, tuple[str, str | None]]:
    rows = tx.query("SELECT item, command, set_by FROM {checks}")
    return {item: (command, set_by) for item, command, set_by in map(_check_row, rows)}


def _counters(tx: _Transaction) -> dict[str, int]:
    """Each counter of the meta table a change takes; :class:`StoreError` naming a malformed one."""
    found = dict(tx.query("SELECT key, value FROM {meta}"))
    counters: dict[str, int] = {}
    for key, _start in schema.counters():
        value = found.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _malformed("the board's meta table", f"its {key} counter is {_label(value)}")
        counters[key] = value
    return counters


def _all_items(tx: _Transaction) -> tuple[BoardItem, ...]:
    """Every item in board order; one that waits on an id the board does not hold is named."""
    rows = tx.query(f"SELECT {_ITEM_COLUMNS} FROM {{items}} ORDER BY position")
    items = tuple(_item(row) for row in rows)
    ids = {item.id for item in items}
    for item in items:
        missing = next((b for b in item.blocked_by if b not in ids), None)
        if missing is not None:
            raise _malformed(
                f"item #{item.id}", f"it waits on #{_label(missing)}, which is not on the board"
            )
    return items


def _all_entries(tx: _Transaction) -> tuple[LogEntry, ...]:
    rows = tx.query(f"SELECT {_LOG_COLUMNS} FROM {{log}} ORDER BY seq")
    return tuple(_entry(row) for row in rows)


def _check_blockers(tx: _Transaction, item_id: str | None, blockers: Sequence[str]) -> None:
    """Every blocker exists, is not the item itself, and none waits (in a chain) on it.

    The words name no flag: a person's ``--blocked-by``, a line of ``add --from`` and the
    model's ``blocked_by`` all come here, and each front end says where the ids came from.
    """
    for blocker in blockers:
        if blocker == item_id:
            raise BoardError(f"item #{_label(blocker)} cannot wait on itself", item_id)
        if tx.item(blocker) is None:
            raise UnknownBlocker(
                f"blocked by #{_label(blocker)}, but there is no item #{_label(blocker)} on "
                "this board",
                blocker,
            )
    if item_id is None or not blockers:
        return
    waits = {item.id: item.blocked_by for item in _all_items(tx)}
    seen, frontier = set(), list(blockers)
    while frontier:
        current = frontier.pop()
        if current == item_id:
            raise BoardError(
                f"item #{item_id} cannot wait on {', '.join('#' + b for b in blockers)}: "
                f"that chain already waits on #{item_id}",
                item_id,
            )
        if current not in seen:
            seen.add(current)
            frontier.extend(waits.get(current, ()))


def _add(
    tx: _Transaction,
    text: str,
    agent: str | None,
    *,
    blocked_by: tuple[str, ...],
    item_id: str | None,
    check: str | None,
) -> BoardItem:
    blocked_by = tuple(dict.fromkeys(blocked_by))
    _check_blockers(tx, None, blocked_by)
    if item_id is None:
        while True:  # ids the model chose may have taken some numbers already
            item_id = str(tx.take("next_id"))
            if tx.item(item_id) is None:
                break
    elif tx.item(item_id) is not None:
        raise BoardError(f"item #{item_id} exists already; ids are never reused", item_id)
    tx.run(
        "INSERT INTO {items} (id, position, text, status, owner, lease_until, blocked_by) "
        "VALUES (?, ?, ?, 'pending', NULL, NULL, ?)",
        item_id,
        tx.take("next_position"),
        text,
        json.dumps(list(blocked_by)),
    )
    if check is not None:
        tx.run(
            "INSERT INTO {checks} (item, command, set_by) VALUES (?, ?, ?)", item_id, check, agent
        )
    tx.log(
        agent,
        item_id,
        None,
        "pending",
        "add",
        text=text,
        blocked_by=blocked_by,
        check=check or "",
    )
    return BoardItem(item_id, text, Status.PENDING, blocked_by=blocked_by)


def _no_edge(row: BoardItem, trigger: str) -> str:
    what = {
        "start": "claimed",
        "complete": "completed",
        "pause": "released",
        "cancel": "cancelled",
    }.get(trigger, trigger)
    held = f" by {row.owner}" if row.owner and row.status == Status.IN_PROGRESS else ""
    return f"item #{row.id} is {row.status}{held}; it cannot be {what}"


def _refused(tx: _Transaction, row: BoardItem, trigger: str, actor: str | None) -> BoardError:
    if trigger in ("complete", "pause", "cancel") and row.owner not in (None, actor):
        hint = " (a person frees it with board release --force)" if trigger == "pause" else ""
        return BoardError(
            f"item #{row.id} is held by {row.owner}; only its owner may {trigger} it{hint}",
            row.id,
            row.owner,
        )
    if trigger == "complete":
        check = _check_of(tx, row.id)
        if check is not None:
            return BoardError(
                f"item #{row.id} has a check ({_label(check[0])}) and no passing run of it is "
                "logged since the item was last started; it completes once its check passes "
                "in an agent's run, or by hand with --skip-check",
                row.id,
            )
    if trigger == "start":
        waiting = _unfinished(tx, row)
        if waiting:
            names = ", ".join(f"#{b}" for b in waiting)
            return BoardError(f"item #{row.id} is blocked by {names}; finish those first", row.id)
        held = tx.held(actor)
        if held:
            return BoardError(
                f"{actor} already holds #{held[0][0]}; complete or release it before claiming "
                f"#{row.id}",
                row.id,
            )
    return BoardError(f"item #{row.id}: {trigger} refused", row.id)


#: Pending items read per page while looking for a ready one (most boards: the first page).
_PAGE = 8


def _next_ready(tx: _Transaction) -> BoardItem:
    """The first pending item in board order whose blockers are all completed.

    The first item alone is read first: it is the one most claims take (the writer holds the
    board's lock meanwhile, so every row read that is not used costs every waiting agent).
    """
    after: int | None = None
    pending = 0
    size = 1
    while True:
        if after is None:
            page = tx.query(
                f"SELECT {_ITEM_COLUMNS} FROM {{items}} "
                "WHERE status = 'pending' ORDER BY position LIMIT ?",
                size,
            )
        else:
            page = tx.query(
                f"SELECT {_ITEM_COLUMNS} FROM {{items}} "
                "WHERE status = 'pending' AND position > ? ORDER BY position LIMIT ?",
                after,
                size,
            )
        for row in page:
            item = _item(row)
            if not _unfinished(tx, item):
                return item
        pending += len(page)
        if len(page) < size:
            break
        after, size = item.position, _PAGE
    raise _nothing_claimable(tx, pending)


_KNOWN_STATUSES = ", ".join(f"'{status}'" for status in Status)


def _nothing_claimable(tx: _Transaction, pending: int) -> BoardError:
    """Why no item is ready, once the rows that answer depends on are known to be sound.

    A row whose status the machine does not have may be a pending item, and a pending item
    the pages skipped (two items at one position) may be ready: either is named, never
    answered with "all done" or "waiting on blockers".
    """
    odd = tx.query(
        f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE status NOT IN ({_KNOWN_STATUSES}) LIMIT 1"
    )
    if odd:
        _item(odd[0])  # raises, naming it
        return _malformed("an item", f"its status is {_label(odd[0][2])}")
    ((counted,),) = tx.query("SELECT COUNT(*) FROM {items} WHERE status = 'pending'")
    if counted != pending:
        return _same_position(tx)
    if pending:
        return NothingClaimable(
            f"nothing claimable: {pending} pending item(s) wait on blockers",
            "waiting on blockers",
        )
    rows = tx.query(f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE status = 'in_progress'")
    active = [_item(row) for row in rows]
    if active:
        owners = ", ".join(f"#{item.id} ({item.owner})" for item in active[:5])
        return NothingClaimable(f"nothing claimable: all claimed: {owners}", "all claimed")
    return NothingClaimable("nothing claimable: all done", "all done")


def _same_position(tx: _Transaction) -> StoreError:
    """The pending item that shares its position with another (the store gives each its own)."""
    rows = tx.query(
        f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE status = 'pending' ORDER BY position"
    )
    items = [_item(row) for row in rows]
    for before, item in itertools.pairwise(items):
        if item.position == before.position:
            return _malformed(
                f"item #{item.id}", f"its position {item.position} is #{before.id}'s too"
            )
    return StoreError("the board's pending items changed while they were read; try again")


def _expire(edges: _Edges, tx: _Transaction) -> None:
    """Fire ``expire`` on every claim whose lease ran out: the owner is gone.

    A claim whose lease is not a finite time (or that has no owner) would never expire: it is
    read too, and named as malformed, by whatever operation comes next.
    """
    stale = tx.query(
        f"SELECT {_ITEM_COLUMNS} FROM {{items}} WHERE status = 'in_progress' AND (owner IS NULL "
        "OR CASE WHEN lease_until >= ? AND lease_until < ? THEN 0 ELSE 1 END = 1)",
        tx.now,
        sys.float_info.max,
    )
    for row in stale:
        item = _item(row)
        if item.lease_until is None or item.lease_until >= tx.now:
            continue
        status = edges.fire(tx, item, "expire", None)
        tx.run(
            "UPDATE {items} SET status = ?, owner = NULL, lease_until = NULL WHERE id = ?",
            status,
            item.id,
        )


def items_as_json(items: Sequence[BoardItem]) -> list[Mapping[str, Any]]:
    now = time.time()
    return [item.as_dict(now) for item in items]
