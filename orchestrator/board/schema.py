"""A board's tables: their names (one set per board in a database), their shape, their upgrade.

A database may hold several boards. The default board's tables are ``board_meta``,
``board_items``, ``board_log`` and ``board_checks`` (the names every store made so far has);
a named board's (``?board=NAME`` in the URL) are ``board_NAME_meta`` and so on, so boards in
one database never see each other's items or log.

Opening a database sorts it first, before anything is written: a board (its ``meta`` table is
there), an empty database (a new board may start in it), a database that holds other boards
only (a new named board may start beside them), or something else, which is refused: an
application's database is never written into.

Schema 2 (this version) adds to the log what ``board check`` needs to see everything: the
check an item was added with, check runs (command, exit code, duration) and flags
(``skip_check``, ``force``); and who set each item's check. A store made before it (no
``schema`` key in its meta table) is upgraded in place when it is opened: columns are added,
nothing is rewritten, and its old log lines read as they always did (an ``add`` line without a
check says nothing about the item's check).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

#: The schema this version writes; a store with a higher one was made by a newer version.
SCHEMA = 2

#: Columns schema 2 added to tables a schema-1 store already has: (table, column, type).
_ADDED = (
    ("log", "check_command", "TEXT"),
    ("log", "exit_code", "BIGINT"),
    ("log", "duration_s", "DOUBLE PRECISION"),
    ("log", "flag", "TEXT"),
    ("checks", "set_by", "TEXT"),
)

_STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS {meta} (
        key TEXT PRIMARY KEY,
        value BIGINT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {items} (
        id TEXT PRIMARY KEY,
        position BIGINT NOT NULL,
        text TEXT NOT NULL,
        status TEXT NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION,
        blocked_by TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS {log} (
        seq {seq_type} PRIMARY KEY,
        ts TEXT NOT NULL,
        agent TEXT,
        item TEXT NOT NULL,
        src TEXT,
        dst TEXT NOT NULL,
        trigger TEXT NOT NULL,
        text TEXT,
        blocked_by TEXT,
        check_command TEXT,
        exit_code BIGINT,
        duration_s DOUBLE PRECISION,
        flag TEXT
    )""",
    # Partial indexes, so an item's move touches only the ones it enters or leaves (each is a
    # page more a commit writes): the next ready item is the first pending one in board
    # order; an agent's held item and the expired claims are among the few in progress.
    # Schema 1's index on (status, owner) moved with every change, and is dropped.
    "CREATE INDEX IF NOT EXISTS {items_ready} ON {items} (position) WHERE status = 'pending'",
    "CREATE INDEX IF NOT EXISTS {items_held} ON {items} (owner) WHERE status = 'in_progress'",
    "DROP INDEX IF EXISTS {items_status}",
    """CREATE TABLE IF NOT EXISTS {checks} (
        item TEXT PRIMARY KEY,
        command TEXT NOT NULL,
        set_by TEXT
    )""",
)
_COUNTERS = ("lock", "next_id", "next_seq", "next_position")
_DEFAULT_BOARD = re.compile(r"board_(meta|items|log|checks)")
_NAMED_META = re.compile(r"board_(.+)_meta")


@attrs.frozen
class Tables:
    """The table names of one board (``board`` None: the default board)."""

    board: str | None = None

    @property
    def prefix(self) -> str:
        return "board_" if self.board is None else f"board_{self.board}_"

    def name(self, kind: str) -> str:
        """A table's bare name (as the database lists it)."""
        return self.prefix + kind

    @property
    def names(self) -> Mapping[str, str]:
        """What the SQL texts' ``{meta}``, ``{items}``… stand for: quoted identifiers."""
        kinds = ("meta", "items", "log", "checks", "items_status", "items_ready", "items_held")
        return {kind: f'"{self.name(kind)}"' for kind in kinds}

    def sql(self, text: str) -> str:
        return text.format_map(self.names)


@attrs.frozen
class Found:
    """What a database holds, sorted before anything is written to it."""

    #: This board's tables are there.
    board: bool
    #: The names of the other boards there (``default`` for the unnamed one).
    others: tuple[str, ...]
    #: Tables that belong to no board (an application's).
    foreign: tuple[str, ...]
    #: This board's tables that are missing although its meta table is there.
    missing: tuple[str, ...] = ()


def sort_tables(tables: set[str], mine: Tables) -> Found:
    """Sort a database's table names into this board's, other boards' and the rest."""
    tables = {name.lower() for name in tables if not name.lower().startswith("sqlite_")}
    board = mine.name("meta") in tables
    missing = tuple(kind for kind in ("items", "log") if board and mine.name(kind) not in tables)
    others: set[str] = set()
    boards_tables: set[str] = set()
    if "board_meta" in tables:
        others.add("default")
    for name in tables:
        if _DEFAULT_BOARD.fullmatch(name):
            boards_tables.add(name)
            continue
        named = _NAMED_META.fullmatch(name)
        if named:
            others.add(named.group(1))
    for other in others - {"default"}:
        boards_tables.update(f"board_{other}_{kind}" for kind in ("meta", "items", "log", "checks"))
    mine_name = mine.board or "default"
    foreign = tuple(sorted(name for name in tables if name not in boards_tables))
    return Found(board, tuple(sorted(others - {mine_name})), foreign, missing)


def statements(tables: Tables, dialect: str) -> tuple[str, ...]:
    """The statements that make this board's tables (each one is a no-op when they exist).

    On SQLite the log's ``seq`` is ``INTEGER PRIMARY KEY``, the table's own row id, so an
    appended line writes one page rather than a row and a separate key index (a store made
    before schema 2 keeps its ``BIGINT`` key, which reads the same).
    """
    names = {**tables.names, "seq_type": "INTEGER" if dialect == "sqlite" else "BIGINT"}
    return tuple(text.format_map(names) for text in _STATEMENTS)


def counters() -> tuple[tuple[str, int], ...]:
    """The meta table's counters and where each starts."""
    return tuple((key, 0 if key == "lock" else 1) for key in _COUNTERS)


def added_columns(tables: Tables) -> tuple[tuple[str, str, str], ...]:
    """(bare table name, column, type) for every column schema 2 added."""
    return tuple((tables.name(kind), column, kind_of) for kind, column, kind_of in _ADDED)
