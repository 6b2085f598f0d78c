"""Where a shared board lives: ``sqlite:///PATH`` (or a ``.db`` path) or ``postgresql://…``.

:func:`open_store` turns the ``--board`` value into a store (the ``BoardStore`` protocol of
:mod:`orchestrator.protocols`); a JSON file is not a store (it belongs to one run:
:mod:`orchestrator.board_file`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.board.store import SqlBoardStore

#: Seconds a writer waits for another's transaction before giving up.
BUSY_TIMEOUT = 60.0


class BoardUrlError(ValueError):
    """A ``--board`` value that names no store; ``str()`` is one line."""


def is_store_url(value: str) -> bool:
    """Whether ``value`` names a shared store rather than a JSON file."""
    return value.startswith(("sqlite://", "postgresql://", "postgres://")) or value.endswith(".db")


class _SQLite:
    name = "sqlite"

    def __init__(self, path: Path) -> None:
        self.path = path

    def connect(self) -> Any:
        if not self.path.parent.is_dir():
            raise BoardUrlError(f"{self.path}: no such directory {self.path.parent}")
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            connection = None
            try:
                connection = sqlite3.connect(
                    self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
                )
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")
                return connection
            except sqlite3.OperationalError as error:
                # Agents opening a new board at once race on creating its -wal and -shm files.
                if connection is not None:
                    connection.close()
                if time.monotonic() > deadline:
                    raise BoardUrlError(f"{self.path}: cannot open the board: {error}") from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as error:
                raise BoardUrlError(f"{self.path}: not a board database ({error})") from None

    def begin(self, connection: Any) -> None:
        connection.execute("BEGIN IMMEDIATE")

    def begin_read(self, connection: Any) -> None:
        connection.execute("BEGIN")

    def end(self, connection: Any, *, commit: bool) -> None:
        if connection.in_transaction:
            connection.execute("COMMIT" if commit else "ROLLBACK")

    def sql(self, text: str) -> str:
        return text


class _Postgres:
    name = "postgresql"

    def __init__(self, url: str) -> None:
        self.url = url

    def connect(self) -> Any:
        import psycopg

        try:
            return psycopg.connect(self.url, connect_timeout=10)
        except psycopg.Error as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            raise BoardUrlError(f"{_shown(self.url)}: cannot connect: {first}") from None

    def begin(self, connection: Any) -> None:
        # Tables first (a fresh board), under an advisory lock so two creators do not race.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(7204183)")
            cursor.execute("SELECT to_regclass('board_meta') IS NOT NULL")
            (exists,) = cursor.fetchone()
            if exists:
                cursor.execute("SELECT value FROM board_meta WHERE key = 'lock' FOR UPDATE")

    def begin_read(self, connection: Any) -> None:
        pass  # psycopg opens a transaction at the first statement

    def end(self, connection: Any, *, commit: bool) -> None:
        if commit:
            connection.commit()
        else:
            connection.rollback()

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")


def _shown(url: str) -> str:
    """The URL without its password, for a message."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    user = f"{parts.username}:***@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, parts.query, ""))


def open_store(value: str, *, clock: Callable[[], float] = time.time) -> SqlBoardStore:
    """The store ``value`` names; :class:`BoardUrlError` (one line) when it names none.

    ``clock`` is what leases are measured by (tests move it instead of waiting).
    """
    if value.startswith(("postgresql://", "postgres://")):
        return SqlBoardStore(_Postgres(value), _shown(value), clock=clock)
    if value.startswith("sqlite://"):
        path = value.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise BoardUrlError(
                f"{value}: a SQLite board is sqlite:///PATH (three slashes, then the path)"
            )
        path = path[1:] if path.startswith("//") else path
        return SqlBoardStore(_SQLite(Path(path)), value, clock=clock)
    if value.endswith(".db"):
        return SqlBoardStore(_SQLite(Path(value)), value, clock=clock)
    raise BoardUrlError(
        f"{value}: not a board store; give sqlite:///PATH, a .db path or postgresql://…"
    )
