"""Where a shared board lives: ``sqlite:///PATH``, a ``.db`` path, or ``postgresql://…``.

:func:`open_store` turns the ``--board`` value into a store (the ``BoardStore`` protocol of
:mod:`orchestrator.protocols`); a JSON file is not a store (it belongs to one run:
:mod:`orchestrator.board.json_file`).

URLs read as SQLAlchemy reads them: ``sqlite:///team.db`` is ``team.db`` in the current
directory, ``sqlite:////srv/team.db`` the absolute path ``/srv/team.db``. ``?board=NAME`` picks
one of several boards in one database (``postgresql://host/db?board=NAME``, and for SQLite
``sqlite:///team.db?board=NAME``); without it, the database's default board.

Opening is quick to fail: a directory, a file that cannot be read, or a database that is not
a board is one line at once (the busy timeout is for writers waiting on each other, not for
paths that can never open).
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import attrs

from orchestrator.board.inputs import board_name_problem
from orchestrator.board.schema import Tables
from orchestrator.board.store import BoardUrlError, NoBoard, SqlBoardStore

__all__ = [
    "BUSY_TIMEOUT",
    "BoardUrlError",
    "NoBoard",
    "is_store_url",
    "open_existing",
    "open_store",
    "sqlite_url",
]

#: Seconds a writer waits for another's transaction before giving up.
BUSY_TIMEOUT = 60.0


def is_store_url(value: str) -> bool:
    """Whether ``value`` names a shared store rather than a JSON file."""
    return value.startswith(("sqlite://", "postgresql://", "postgres://")) or value.endswith(".db")


def sqlite_url(path: Path, board: str | None = None) -> str:
    """The URL of a SQLite board at ``path`` (made absolute: ``sqlite:////abs/path``)."""
    url = f"sqlite:///{Path(path).absolute()}"
    return url if board is None else f"{url}?board={board}"


#: Seconds to wait for a PostgreSQL server to answer before the board is called unopenable.
PG_CONNECT_TIMEOUT = 3

#: The turn file's (device, inode) -> the thread that holds its lock through some store of this
#: process: a second store of the same board in that thread must not wait on it (it would wait
#: on itself for ever); it waits on SQLite's lock instead, with its busy timeout, as it always
#: did.
_TURNS: dict[tuple[int, int], int] = {}


class _SQLite:
    """A board in a SQLite file: writers take turns on the file's lock, queued on a turn file.

    ``BEGIN IMMEDIATE`` alone serialises writers, but one that finds the lock taken sleeps in
    SQLite's busy handler (1, 2, 5, 10… ms) however soon the lock is free again: with many
    agents, much of their time goes to that sleep. So a writer first takes an exclusive
    ``flock`` on ``PATH-lock`` (the turn file) and only then begins: the kernel wakes the next
    writer the moment the last one ends. The turn file only orders writers of this package;
    SQLite's lock is still what keeps changes apart, so a writer without it (another program,
    a directory where the file cannot be made) is as safe as before, only slower to wake.
    """

    name = "sqlite"
    row_lock = False

    def __init__(self, path: Path) -> None:
        self.path = path
        #: The turn file's descriptor (None: not opened yet, or it cannot be), and its key.
        self._turn_fd: int | None = None
        self._turn_key: tuple[int, int] | None = None
        self._turn_tried = False
        #: Whether this store holds the turn now (between ``begin`` and ``end``).
        self._turn_held = False

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        return (sqlite3.Error,)

    @property
    def turn_file(self) -> Path:
        """Where writers queue for their turn (see the class)."""
        return Path(f"{self.path}-lock")

    def connect(self, *, create: bool) -> Any:
        path = self.path
        try:
            return self._connect(create=create)
        except OSError as error:  # a name too long for the file system, say
            raise BoardUrlError(f"{path}: cannot open the board: {error.strerror}") from None

    def _connect(self, *, create: bool) -> Any:
        path = self.path
        if path.is_dir():
            raise BoardUrlError(f"{path}: is a directory, not a board")
        if path.exists() and not path.is_file():
            # A FIFO or a device would hold the open (and the command) until someone wrote.
            raise BoardUrlError(f"{path}: is not a regular file, not a board")
        if not path.exists():
            if not create:
                raise NoBoard(f"{path}: no board there (board add starts one)")
            if not path.parent.is_dir():
                raise BoardUrlError(f"{path}: no such directory {path.parent}")
        try:
            return sqlite3.connect(
                path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as error:
            raise BoardUrlError(f"{path}: cannot open the board: {error}") from None

    def tables(self, connection: Any) -> set[str]:
        try:
            # A view is another program's as much as a table is.
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
            )
            names = {str(row[0]) for row in rows.fetchall()}
            if not names:
                # No tables yet, but marked by the program it belongs to: not ours to write.
                ((application,),) = connection.execute("PRAGMA application_id").fetchall()
                ((version,),) = connection.execute("PRAGMA user_version").fetchall()
                if application or version:
                    raise BoardUrlError(
                        f"{self.path}: not a board database (another program marked it: "
                        f"application_id {application}, user_version {version}); give a new "
                        "file or an empty database"
                    )
            return names
        except sqlite3.DatabaseError as error:
            if isinstance(error, sqlite3.OperationalError) and "unable to open" in str(error):
                raise BoardUrlError(f"{self.path}: cannot open the board: {error}") from None
            raise BoardUrlError(f"{self.path}: not a board database ({error})") from None

    def columns(self, connection: Any, table: str) -> set[str]:
        rows = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
        return {str(row[1]) for row in rows}

    def prepare(self, connection: Any) -> None:
        """WAL for readers beside a writer; only once the file is known to be a board."""
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
                return
            except sqlite3.OperationalError as error:
                # Agents opening a new board at once race on creating its -wal and -shm files;
                # anything else (a read-only file, a full disk) will not get better by waiting.
                busy = "locked" in str(error) or "busy" in str(error)
                if not busy or time.monotonic() > deadline:
                    raise BoardUrlError(f"{self.path}: cannot open the board: {error}") from None
                time.sleep(0.05)

    def begin_setup(self, connection: Any) -> None:
        connection.execute("BEGIN IMMEDIATE")

    def begin(self, connection: Any) -> None:
        if not connection.in_transaction:  # else BEGIN fails at once, as it always did
            self._take_turn()
        try:
            connection.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._end_turn()
            raise

    def begin_read(self, connection: Any) -> None:
        connection.execute("BEGIN")

    def end(self, connection: Any, *, commit: bool) -> None:
        try:
            if connection.in_transaction:
                connection.execute("COMMIT" if commit else "ROLLBACK")
        finally:
            self._end_turn()

    def close(self, connection: Any) -> None:
        try:
            connection.close()
        finally:
            self._end_turn()
            if self._turn_fd is not None:
                os.close(self._turn_fd)
                self._turn_fd = None

    def sql(self, text: str) -> str:
        return text

    def _take_turn(self) -> None:
        """Wait for the turn file's lock (opening the file the first time)."""
        if not self._turn_tried:
            self._turn_tried = True
            # Not blocking (a FIFO put there would hold the open), not through a symlink.
            flags = os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
            try:
                fd = os.open(self.turn_file, flags, 0o666)
            except OSError:
                return  # a directory this user cannot write: SQLite's lock alone, as before
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                os.close(fd)
                return
            self._turn_fd, self._turn_key = fd, (found.st_dev, found.st_ino)
        if self._turn_fd is None or self._turn_key is None:
            return
        me = threading.get_ident()
        if _TURNS.get(self._turn_key) == me:
            return  # this thread holds it through another store: see _TURNS
        fcntl.flock(self._turn_fd, fcntl.LOCK_EX)
        _TURNS[self._turn_key] = me
        self._turn_held = True

    def _end_turn(self) -> None:
        if not self._turn_held or self._turn_fd is None or self._turn_key is None:
            return
        self._turn_held = False
        _TURNS.pop(self._turn_key, None)
        fcntl.flock(self._turn_fd, fcntl.LOCK_UN)


class _Postgres:
    name = "postgresql"
    row_lock = True

    def __init__(self, url: str) -> None:
        self.url = url

    @property
    def errors(self) -> tuple[type[Exception], ...]:
        import psycopg

        return (psycopg.Error,)

    def connect(self, *, create: bool) -> Any:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            # A URL's own connect_timeout wins; else a server that never answers is named as
            # unopenable within seconds, as a bad path is.
            if "connect_timeout" in conninfo_to_dict(self.url):
                return psycopg.connect(self.url)
            return psycopg.connect(self.url, connect_timeout=PG_CONNECT_TIMEOUT)
        except psycopg.Error as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            raise BoardUrlError(f"{_shown(self.url)}: cannot connect: {first}") from None

    def tables(self, connection: Any) -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
            rows = cursor.fetchall()
        connection.rollback()
        return {str(row[0]) for row in rows}

    def columns(self, connection: Any, table: str) -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = %s",
                (table,),
            )
            return {str(row[0]) for row in cursor.fetchall()}

    def prepare(self, connection: Any) -> None:
        pass

    def begin_setup(self, connection: Any) -> None:
        # Two agents making one new board at once: one makes the tables, the other waits.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(7204183)")

    def begin(self, connection: Any) -> None:
        pass  # psycopg opens the transaction; the store locks the board's ``lock`` row first

    def begin_read(self, connection: Any) -> None:
        pass  # psycopg opens a transaction at the first statement

    def end(self, connection: Any, *, commit: bool) -> None:
        if commit:
            connection.commit()
        else:
            connection.rollback()

    def close(self, connection: Any) -> None:
        connection.close()

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")


def _shown(url: str) -> str:
    """The URL without its password, for a message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, parts.query, ""))


@attrs.frozen
class StoreAddress:
    """What a ``--board`` URL names: a database and a board in it."""

    dialect: Any
    #: The URL as given, without a password: what messages and ``store.url`` show.
    shown: str
    #: The board's name in the database (None: the default board).
    board: str | None = None


def parse_url(value: str) -> StoreAddress:
    """The database and board ``value`` names; :class:`BoardUrlError` (one line) when none."""
    if value.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(value)
        query = parse_qsl(parts.query, keep_blank_values=True)
        board = _board_name(value, [v for k, v in query if k == "board"])
        rest = urlencode([(k, v) for k, v in query if k != "board"])
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, parts.fragment))
        return StoreAddress(_Postgres(conninfo), _shown(value), board)
    if value.startswith("sqlite:"):
        if not value.startswith("sqlite:///") or value == "sqlite:///":
            raise BoardUrlError(
                f"{value}: a SQLite board is sqlite:///RELATIVE/PATH or sqlite:////ABSOLUTE/PATH "
                "(three slashes, then the path)"
            )
        rest, _, wanted = value.removeprefix("sqlite:///").partition("?")
        pairs = parse_qsl(wanted, keep_blank_values=True)
        unknown = sorted({k for k, _ in pairs if k != "board"})
        if unknown:
            raise BoardUrlError(f"{value}: unknown parameter {unknown[0]!r}; only board=NAME")
        board = _board_name(value, [v for k, v in pairs if k == "board"])
        if not rest or rest.endswith("/"):
            raise BoardUrlError(f"{value}: name the database file after sqlite:///")
        return StoreAddress(_SQLite(Path(rest)), value, board)
    if value.endswith(".db"):
        return StoreAddress(_SQLite(Path(value)), value)
    raise BoardUrlError(
        f"{value}: not a board store; give sqlite:///PATH, a .db path or postgresql://…"
    )


def _board_name(url: str, given: list[str]) -> str | None:
    if not given:
        return None
    if len(given) > 1:
        raise BoardUrlError(f"{_shown(url)}: board= is given {len(given)} times; give it once")
    problem = board_name_problem(given[0])
    if problem is not None:
        raise BoardUrlError(f"{_shown(url)}: {problem}")
    return given[0]


def open_store(
    value: str, *, clock: Callable[[], float] = time.time, create: bool = True
) -> SqlBoardStore:
    """The store ``value`` names; :class:`BoardUrlError` (one line) when it names none.

    With ``create`` (the default), a missing file or an empty database starts a new board
    (``store.created`` says so); without it, they are :class:`NoBoard`. A database that holds
    something else than boards is refused either way, before anything is written to it.
    ``clock`` is what leases are measured by (tests move it instead of waiting).
    """
    address = parse_url(value)
    return SqlBoardStore(
        address.dialect,
        address.shown,
        clock=clock,
        create=create,
        tables=Tables(address.board),
    )


def open_existing(value: str, *, clock: Callable[[], float] = time.time) -> SqlBoardStore:
    """The board ``value`` names, which must be there already: nothing is ever made.

    A missing file, an empty database or an unknown board name is :class:`NoBoard`, whose
    ``str()`` is the one line to show (``URL: no board there (board add starts one)``); any
    other ``value`` that names no board is :class:`BoardUrlError`, one line too. Every verb
    but ``board add`` opens its board this way, and so may anything that works a board a
    person made (``orchestrator work``).
    """
    return open_store(value, clock=clock, create=False)
