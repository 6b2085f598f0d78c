"""A shared board in a SQL store: SQLite embedded, PostgreSQL for agents on several machines.

Every change is a transition of the item machine (:class:`orchestrator.plan.ItemMachine`, the
same table and trigger names as a board of one agent), fired on a model whose guards read the
store inside the change's own transaction, and appended to the store's log in that
transaction. The log is append-only: items are never deleted, and an id once given is stable.

Writers are serialised per board (``BEGIN IMMEDIATE`` on SQLite; a row lock on the board's
``lock`` row in PostgreSQL), because the guards read the whole board: an agent's single
in-progress item, the blockers of the item it claims. So of N agents that claim one item at
once exactly one wins, and a refused change writes nothing.

Leases need no daemon: whichever operation next touches the board first fires ``expire`` on
every claim whose lease ran out, logged like any other edge.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import attrs
from transitions import EventData, MachineError

from orchestrator.plan import ItemMachine, Status

#: How long a claim holds without renewal, by default (``--lease``).
DEFAULT_LEASE = 120.0

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS board_meta (
        key TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS board_items (
        id TEXT PRIMARY KEY,
        position BIGINT NOT NULL,
        text TEXT NOT NULL,
        status TEXT NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION,
        blocked_by TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS board_log (
        seq BIGINT PRIMARY KEY,
        ts TEXT NOT NULL,
        agent TEXT,
        item TEXT NOT NULL,
        src TEXT,
        dst TEXT NOT NULL,
        trigger TEXT NOT NULL,
        text TEXT,
        blocked_by TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS board_items_status ON board_items (status, owner)",
    # An item's acceptance check, set when it is added (its own table: boards made before
    # checks existed gain it without a migration).
    """CREATE TABLE IF NOT EXISTS board_checks (
        item TEXT PRIMARY KEY,
        command TEXT NOT NULL
    )""",
)
_META_KEYS = ("lock", "next_id", "next_seq", "next_position")


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


@attrs.frozen
class BoardItem:
    """One item as the store holds it."""

    id: str
    text: str
    status: Status
    owner: str | None = None
    lease_until: float | None = None
    blocked_by: tuple[str, ...] = ()

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
    """One line of the board's log: an item added, or an edge one of its items took."""

    seq: int
    ts: str
    agent: str | None
    item: str
    src: str | None
    dst: str
    trigger: str
    text: str | None = None
    blocked_by: tuple[str, ...] | None = None

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
        return data


class _Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class _Dialect(Protocol):
    """What differs between SQLite and PostgreSQL: connecting, locking, placeholders."""

    name: str

    def connect(self) -> Any: ...

    def begin(self, connection: Any) -> None:
        """Start a write transaction that no other writer of this board runs beside."""
        ...

    def begin_read(self, connection: Any) -> None: ...

    def end(self, connection: Any, *, commit: bool) -> None: ...

    def sql(self, text: str) -> str: ...


class _Transaction:
    """One locked change: reads and writes of the store, and the log lines it appends."""

    def __init__(self, cursor: _Cursor, dialect: _Dialect, now: float) -> None:
        self._cursor, self._dialect, self.now = cursor, dialect, now
        self.appended: list[LogEntry] = []

    def query(self, text: str, *params: Any) -> list[Any]:
        self._cursor.execute(self._dialect.sql(text), params)
        return self._cursor.fetchall()

    def run(self, text: str, *params: Any) -> None:
        self._cursor.execute(self._dialect.sql(text), params)

    def take(self, key: str) -> int:
        """The next number of a counter (ids, log seq, positions)."""
        (value,) = self.query("SELECT value FROM board_meta WHERE key = ?", key)[0]
        self.run("UPDATE board_meta SET value = ? WHERE key = ?", int(value) + 1, key)
        return int(value)

    def item(self, item_id: str) -> BoardItem | None:
        rows = self.query(
            "SELECT id, text, status, owner, lease_until, blocked_by FROM board_items WHERE id = ?",
            item_id,
        )
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
    ) -> None:
        seq = self.take("next_seq")
        ts = dt.datetime.fromtimestamp(self.now, dt.UTC).isoformat(timespec="microseconds")
        blockers = None if blocked_by is None else json.dumps(list(blocked_by))
        self.run(
            "INSERT INTO board_log (seq, ts, agent, item, src, dst, trigger, text, blocked_by) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            seq,
            ts,
            agent,
            item,
            src,
            dst,
            trigger,
            text,
            blockers,
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
                None if blocked_by is None else tuple(blocked_by),
            )
        )


def _entry(row: Sequence[Any]) -> LogEntry:
    seq, ts, agent, item, src, dst, trigger, text, blocked_by = row
    return LogEntry(
        int(seq),
        str(ts),
        agent,
        str(item),
        src,
        str(dst),
        str(trigger),
        text,
        None if blocked_by is None else tuple(json.loads(blocked_by)),
    )


def _item(row: Sequence[Any]) -> BoardItem:
    item_id, text, status, owner, lease_until, blocked_by = row
    return BoardItem(
        str(item_id),
        str(text),
        Status(status),
        owner,
        None if lease_until is None else float(lease_until),
        tuple(json.loads(blocked_by)),
    )


@attrs.define(slots=False, eq=False)
class _StoredItem:
    """The item machine's model for one stored item: its guards read the store."""

    tx: _Transaction
    row: BoardItem
    actor: str | None
    state: str = ""
    fired: list[tuple[str, str, str]] = attrs.Factory(list)

    # Guards named in ITEM_TRANSITIONS.
    def no_other_item_in_progress(self, event: EventData) -> bool:
        # On a shared board the rule holds per owner: each agent works one item at a time.
        return not self.tx.query(
            "SELECT id FROM board_items WHERE status = 'in_progress' AND owner = ? AND id <> ?",
            self.actor,
            self.row.id,
        )

    def dependencies_completed(self, event: EventData) -> bool:
        return not _unfinished(self.tx, self.row.blocked_by)

    def held_by_actor(self, event: EventData) -> bool:
        return self.row.owner is None or self.row.owner == self.actor

    def lease_expired(self, event: EventData) -> bool:
        return self.row.lease_until is not None and self.row.lease_until < self.tx.now

    def check_passes(self, event: EventData) -> bool:
        return True  # acceptance checks on a shared board are not built yet

    def record_transition(self, event: EventData) -> None:
        assert event.transition is not None
        self.fired.append((event.event.name, event.transition.source, str(event.transition.dest)))


def _unfinished(tx: _Transaction, blockers: Sequence[str]) -> list[str]:
    if not blockers:
        return []
    marks = ", ".join("?" for _ in blockers)
    done = {
        str(row[0])
        for row in tx.query(
            f"SELECT id FROM board_items WHERE status = 'completed' AND id IN ({marks})",
            *blockers,
        )
    }
    return [blocker for blocker in blockers if blocker not in done]


class BoardChange:
    """The operations of one transaction on the board (:meth:`SqlBoardStore.change`)."""

    def __init__(self, machine: ItemMachine, tx: _Transaction) -> None:
        self._machine, self._tx = machine, tx

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
        if not text.strip():
            raise BoardError("the item's text is empty; say what is to be done", item_id)
        added = _add(self._tx, text.strip(), agent, tuple(blocked_by), item_id)
        if check is not None and check.strip():
            self._tx.run(
                "INSERT INTO board_checks (item, command) VALUES (?, ?)", added.id, check.strip()
            )
        return added

    def checks(self) -> dict[str, str]:
        """Each item's acceptance check, by item id (items without one are not there)."""
        return _checks(self._tx)

    def claim(
        self, agent: str, *, lease: float = DEFAULT_LEASE, item_id: str | None = None
    ) -> BoardItem:
        """Start the named item, or the first ready one, for ``agent`` (the claim is ``start``).

        Claiming an item the agent already holds (by id, or with none named) renews its
        lease. Raises :class:`NothingClaimable` when no item is ready, :class:`BoardError`
        when the named one cannot start (another agent holds it, its blockers are unfinished…).
        """
        tx = self._tx
        if item_id is None:
            held = tx.query(
                "SELECT id FROM board_items WHERE status = 'in_progress' AND owner = ?", agent
            )
            # An agent that holds an item (a restarted worker) gets it back, renewed.
            item_id = str(held[0][0]) if held else _next_ready(tx)
        row = tx.item(item_id)
        if row is None:
            raise BoardError(f"no item #{item_id} on this board", item_id)
        if row.status == Status.IN_PROGRESS and row.owner == agent:
            return _renew_one(tx, row, lease)
        _fire(self._machine, tx, row, "start", agent)
        tx.run(
            "UPDATE board_items SET owner = ?, lease_until = ? WHERE id = ?",
            agent,
            tx.now + lease,
            item_id,
        )
        claimed = tx.item(item_id)
        assert claimed is not None
        return claimed

    def complete(self, item_id: str, *, agent: str) -> BoardItem:
        return self._move(item_id, "complete", agent)

    def release(self, item_id: str, *, agent: str) -> BoardItem:
        return self._move(item_id, "pause", agent)

    def cancel(self, item_id: str, *, agent: str) -> BoardItem:
        return self._move(item_id, "cancel", agent)

    def _move(self, item_id: str, trigger: str, agent: str) -> BoardItem:
        tx = self._tx
        row = tx.item(item_id)
        if row is None:
            raise BoardError(f"no item #{item_id} on this board", item_id)
        _fire(self._machine, tx, row, trigger, agent)
        if trigger != "complete":  # the completer stays on record; a released item is free
            tx.run("UPDATE board_items SET owner = NULL, lease_until = NULL WHERE id = ?", item_id)
        else:
            tx.run("UPDATE board_items SET lease_until = NULL WHERE id = ?", item_id)
        moved = tx.item(item_id)
        assert moved is not None
        return moved


class SqlBoardStore:
    """A board several agents share, in SQLite or PostgreSQL (see :func:`open_store`)."""

    def __init__(self, dialect: _Dialect, url: str, *, clock: Callable[[], float] = time.time):
        self.url = url
        self._dialect = dialect
        self._clock = clock
        self._machine = ItemMachine()
        self._connection = dialect.connect()
        with self._transaction(expire=False) as tx:
            for statement in _SCHEMA:
                tx.run(statement)
            have = {str(row[0]) for row in tx.query("SELECT key FROM board_meta")}
            for key in _META_KEYS:
                if key not in have:
                    tx.run(
                        "INSERT INTO board_meta (key, value) VALUES (?, ?)",
                        key,
                        0 if key == "lock" else 1,
                    )

    # -- reading ------------------------------------------------------------------------------

    def items(self) -> tuple[BoardItem, ...]:
        """Every item in board order, after expiring the claims whose lease ran out."""
        with self._transaction() as tx:
            return _all_items(tx)

    def snapshot(self) -> tuple[tuple[BoardItem, ...], tuple[LogEntry, ...]]:
        """The items and the whole log, read in one transaction (what ``board check`` needs)."""
        with self._transaction() as tx:
            rows = tx.query(
                "SELECT seq, ts, agent, item, src, dst, trigger, text, blocked_by "
                "FROM board_log ORDER BY seq"
            )
            return _all_items(tx), tuple(_entry(row) for row in rows)

    def log(self, after: int = 0) -> Iterator[LogEntry]:
        """The log in order, from the line after ``after``."""
        self._dialect.begin_read(self._connection)
        cursor = self._connection.cursor()
        try:
            cursor.execute(
                self._dialect.sql(
                    "SELECT seq, ts, agent, item, src, dst, trigger, text, blocked_by "
                    "FROM board_log WHERE seq > ? ORDER BY seq"
                ),
                (after,),
            )
            rows = cursor.fetchall()
        finally:
            cursor.close()
        self._dialect.end(self._connection, commit=False)
        for row in rows:
            yield _entry(row)

    # -- writing ------------------------------------------------------------------------------

    @contextmanager
    def change(self) -> Iterator[BoardChange]:
        """Several operations as one transaction: all of them happen, or (on an error) none."""
        with self._transaction() as tx:
            yield BoardChange(self._machine, tx)

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

        ``check`` is its acceptance check: an agent's run completes it only once the command
        passes where that agent's bash runs.
        """
        with self.change() as change:
            return change.add(
                text, agent=agent, blocked_by=blocked_by, item_id=item_id, check=check
            )

    def checks(self) -> dict[str, str]:
        """Each item's acceptance check, by item id."""
        with self._transaction(expire=False) as tx:
            return _checks(tx)

    def claim(
        self, agent: str, *, lease: float = DEFAULT_LEASE, item_id: str | None = None
    ) -> BoardItem:
        """Start the named item, or the first ready one (see :meth:`BoardChange.claim`)."""
        with self.change() as change:
            return change.claim(agent, lease=lease, item_id=item_id)

    def complete(self, item_id: str, *, agent: str) -> BoardItem:
        with self.change() as change:
            return change.complete(item_id, agent=agent)

    def release(self, item_id: str, *, agent: str) -> BoardItem:
        """Give a claimed item back (the ``pause`` edge): pending again, owned by no one."""
        with self.change() as change:
            return change.release(item_id, agent=agent)

    def cancel(self, item_id: str, *, agent: str) -> BoardItem:
        with self.change() as change:
            return change.cancel(item_id, agent=agent)

    def renew(self, agent: str, *, lease: float = DEFAULT_LEASE) -> int:
        """Push out the lease of every item ``agent`` holds; how many it holds."""
        with self._transaction() as tx:
            held = tx.query(
                "SELECT id FROM board_items WHERE status = 'in_progress' AND owner = ?", agent
            )
            tx.run(
                "UPDATE board_items SET lease_until = ? WHERE status = 'in_progress' AND owner = ?",
                tx.now + lease,
                agent,
            )
            return len(held)

    def close(self) -> None:
        self._connection.close()

    def __enter__(self) -> SqlBoardStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, expire: bool = True) -> Iterator[_Transaction]:
        connection = self._connection
        self._dialect.begin(connection)
        cursor = connection.cursor()
        try:
            tx = _Transaction(cursor, self._dialect, self._clock())
            if expire:
                _expire(self._machine, tx)
            yield tx
        except BaseException:
            self._dialect.end(connection, commit=False)
            raise
        else:
            self._dialect.end(connection, commit=True)
        finally:
            cursor.close()


def _checks(tx: _Transaction) -> dict[str, str]:
    return {
        str(item): str(command)
        for item, command in tx.query("SELECT item, command FROM board_checks")
    }


def _all_items(tx: _Transaction) -> tuple[BoardItem, ...]:
    rows = tx.query(
        "SELECT id, text, status, owner, lease_until, blocked_by FROM board_items ORDER BY position"
    )
    return tuple(_item(row) for row in rows)


def _add(
    tx: _Transaction,
    text: str,
    agent: str | None,
    blocked_by: tuple[str, ...],
    item_id: str | None,
) -> BoardItem:
    for blocker in blocked_by:
        if tx.item(blocker) is None:
            raise BoardError(f"--blocked-by {blocker}: no item #{blocker} on this board", blocker)
    if item_id is None:
        while True:  # ids the model chose may have taken some numbers already
            item_id = str(tx.take("next_id"))
            if tx.item(item_id) is None:
                break
    elif tx.item(item_id) is not None:
        raise BoardError(f"item #{item_id} exists already; ids are never reused", item_id)
    tx.run(
        "INSERT INTO board_items (id, position, text, status, owner, lease_until, blocked_by) "
        "VALUES (?, ?, ?, 'pending', NULL, NULL, ?)",
        item_id,
        tx.take("next_position"),
        text,
        json.dumps(list(blocked_by)),
    )
    tx.log(agent, item_id, None, "pending", "add", text=text, blocked_by=blocked_by)
    return BoardItem(item_id, text, Status.PENDING, blocked_by=blocked_by)


def _fire(
    machine: ItemMachine, tx: _Transaction, row: BoardItem, trigger: str, actor: str | None
) -> None:
    """Fire ``trigger`` on ``row`` through the item machine; log the edge, or raise why not."""
    model = _StoredItem(tx, row, actor)
    machine.add_model(model, initial=str(row.status))
    try:
        fired = getattr(model, trigger)()
    except MachineError:
        raise BoardError(_no_edge(row, trigger), row.id, row.owner) from None
    finally:
        machine.remove_model(model)
    if not fired:
        raise _refused(tx, row, trigger, actor)
    for name, src, dst in model.fired:
        tx.log(row.owner if name == "expire" else actor, row.id, src, dst, name)
        tx.run("UPDATE board_items SET status = ? WHERE id = ?", dst, row.id)


def _no_edge(row: BoardItem, trigger: str) -> str:
    what = {"start": "claimed", "complete": "completed", "pause": "released"}.get(trigger, trigger)
    held = f" by {row.owner}" if row.owner and row.status == Status.IN_PROGRESS else ""
    return f"item #{row.id} is {row.status}{held}; it cannot be {what}"


def _refused(tx: _Transaction, row: BoardItem, trigger: str, actor: str | None) -> BoardError:
    if trigger in ("complete", "pause", "cancel") and row.owner not in (None, actor):
        return BoardError(
            f"item #{row.id} is held by {row.owner}; only its owner may {trigger} it",
            row.id,
            row.owner,
        )
    if trigger == "start":
        waiting = _unfinished(tx, row.blocked_by)
        if waiting:
            names = ", ".join(f"#{b}" for b in waiting)
            return BoardError(f"item #{row.id} is blocked by {names}; finish those first", row.id)
        held = tx.query(
            "SELECT id FROM board_items WHERE status = 'in_progress' AND owner = ?", actor
        )
        if held:
            return BoardError(
                f"{actor} already holds #{held[0][0]}; complete or release it before claiming "
                f"#{row.id}",
                row.id,
            )
    return BoardError(f"item #{row.id}: {trigger} refused", row.id)


def _next_ready(tx: _Transaction) -> str:
    pending = tx.query(
        "SELECT id, blocked_by FROM board_items WHERE status = 'pending' ORDER BY position"
    )
    for item_id, blocked_by in pending:
        if not _unfinished(tx, json.loads(blocked_by)):
            return str(item_id)
    if pending:
        raise NothingClaimable(
            f"nothing claimable: {len(pending)} pending item(s) wait on blockers",
            "waiting on blockers",
        )
    active = tx.query("SELECT id, owner FROM board_items WHERE status = 'in_progress'")
    if active:
        owners = ", ".join(f"#{item_id} ({owner})" for item_id, owner in active[:5])
        raise NothingClaimable(f"nothing claimable: all claimed: {owners}", "all claimed")
    raise NothingClaimable("nothing claimable: all done", "all done")


def _renew_one(tx: _Transaction, row: BoardItem, lease: float) -> BoardItem:
    tx.run("UPDATE board_items SET lease_until = ? WHERE id = ?", tx.now + lease, row.id)
    return attrs.evolve(row, lease_until=tx.now + lease)


def _expire(machine: ItemMachine, tx: _Transaction) -> None:
    """Fire ``expire`` on every claim whose lease ran out: the owner is gone."""
    stale = tx.query(
        "SELECT id, text, status, owner, lease_until, blocked_by FROM board_items "
        "WHERE status = 'in_progress' AND lease_until < ?",
        tx.now,
    )
    for row in stale:
        item = _item(row)
        _fire(machine, tx, item, "expire", None)
        tx.run("UPDATE board_items SET owner = NULL, lease_until = NULL WHERE id = ?", item.id)


def items_as_json(items: Sequence[BoardItem]) -> list[Mapping[str, Any]]:
    now = time.time()
    return [item.as_dict(now) for item in items]
