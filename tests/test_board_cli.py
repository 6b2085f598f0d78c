"""``orchestrator board`` through the real CLI, in process: every bad input is one line, exit 2.

Each refusal is checked for what a broken implementation gets wrong: the exit code, one line
on stderr and no traceback, and that the board (or the file that is not one) is exactly as it
was, with nothing created.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from orchestrator.board.inputs import person
from orchestrator.board.store import SqlBoardStore
from orchestrator.board.stores import NoBoard, open_existing, open_store, parse_url, sqlite_url
from orchestrator.cli import main


@attrs.frozen
class Done:
    """What one ``orchestrator board …`` printed, and its exit code."""

    code: int
    out: str
    err: str

    @property
    def one_line_error(self) -> bool:
        """Exit 2 with exactly one line on stderr and no traceback."""
        return self.code == 2 and self.err.count("\n") == 1 and "Traceback" not in self.err


def board(*args: str, stdin: str | None = None) -> Done:
    """``orchestrator board ARGS`` in this process, through the CLI's own ``main``."""
    return orchestrator("board", *args, stdin=stdin)


def orchestrator(*args: str, stdin: str | None = None) -> Done:
    """``orchestrator ARGS`` in this process, through the CLI's own ``main``."""
    with CliRunner().isolation(input=stdin) as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    return Done(code, out.getvalue().decode(), err.getvalue().decode())


def log_of(url: str) -> list[dict[str, object]]:
    done = board("log", url)
    assert done.code == 0, done.err
    return [json.loads(line) for line in done.out.splitlines()]


def state(url: str) -> tuple[str, str]:
    """The board as ``show --json`` and ``log`` print it (leases left out: they tick)."""
    shown = json.loads(board("show", url, "--json").out)
    for item in shown["items"]:
        item.pop("lease_s", None)
    return json.dumps(shown, sort_keys=True), board("log", url).out


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A board with three items: #2 waits on #1, #3 carries a person's check; alice holds #1."""
    address = sqlite_url(tmp_path / "team.db")
    assert board("add", address, "Write the API").code == 0
    assert board("add", address, "Write the UI", "--blocked-by", "1").code == 0
    assert board("add", address, "Ship", "--check", "make test").code == 0
    assert board("claim", address, "1", "--agent", "alice").code == 0
    return address


def test_sqlite_urls_read_as_sqlalchemy_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    made = board("add", "sqlite:///rel.db", "x")
    assert made.code == 0, made.err
    assert (tmp_path / "rel.db").is_file()  # three slashes: relative to the current directory
    assert not Path("/rel.db").exists()
    absolute = tmp_path / "abs.db"
    assert board("add", f"sqlite:///{absolute}", "y").code == 0  # four slashes: absolute
    assert absolute.is_file()
    assert sqlite_url(Path("rel.db")) == f"sqlite:///{tmp_path / 'rel.db'}"
    assert parse_url("sqlite:///a/b.db?board=x").board == "x"
    for bad, fragment in (
        ("sqlite://rel.db", "three slashes"),
        ("sqlite:///", "three slashes"),
        ("sqlite:///dir/", "name the database file"),
        ("sqlite:///rel.db?mode=ro", "unknown parameter 'mode'"),
        ("sqlite:///rel.db?board=Has Space", "a board's name is"),
        ("sqlite:///rel.db?board=a&board=b", "given 2 times"),
        ("board.json", "not a board store"),
    ):
        done = board("show", bad)
        assert done.one_line_error, (bad, done)
        assert fragment in done.err, (bad, done.err)


@pytest.mark.parametrize(
    "verb",
    [
        ("show",),
        ("claim", "--agent", "a"),
        ("complete", "1", "--agent", "a"),
        ("release", "1", "--agent", "a"),
        ("release", "1", "--force"),
        ("cancel", "1"),
        ("edit", "1", "--text", "x"),
        ("log",),
        ("check",),
    ],
)
def test_a_missing_board_is_named_and_nothing_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verb: tuple[str, ...]
) -> None:
    monkeypatch.chdir(tmp_path)
    name, *rest = verb
    done = board(name, "typo.db", *rest)
    assert done.one_line_error, done
    assert "typo.db: no board there" in done.err
    assert list(tmp_path.iterdir()) == []


def test_add_says_it_starts_a_new_board(tmp_path: Path) -> None:
    address = sqlite_url(tmp_path / "new.db")
    first = board("add", address, "First")
    assert (first.code, first.out) == (0, "1\n")
    assert first.err == f"orchestrator: starting a new board at {address}\n"
    second = board("add", address, "Second")
    assert (second.code, second.out, second.err) == (0, "2\n", "")


def test_an_add_refused_on_a_new_path_leaves_no_board_behind(tmp_path: Path) -> None:
    done = board("add", str(tmp_path / "new.db"), "x", "--blocked-by", "9")
    assert done.code == 2 and "no item #9" in done.err
    assert list(tmp_path.iterdir()) == []


def test_a_database_that_is_not_a_board_is_refused_untouched(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    with sqlite3.connect(app) as connection:
        connection.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        connection.execute("INSERT INTO users (name) VALUES ('ann')")
    connection.close()
    before = app.read_bytes()
    for args in (("add", str(app), "x"), ("show", str(app)), ("claim", str(app), "--agent", "a")):
        done = board(*args)
        assert done.one_line_error, done
        assert "not a board database (it holds other tables: users)" in done.err
    assert app.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not sqlite at all" * 100)
    done = board("show", str(junk))
    assert done.one_line_error and "not a board database" in done.err


def test_unopenable_paths_fail_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The busy timeout is for writers waiting on each other: a path that cannot open never
    # waits (a retry would sleep first).
    def no_waiting(seconds: float) -> None:
        raise AssertionError(f"waited {seconds} s on a path that can never open")

    monkeypatch.setattr(time, "sleep", no_waiting)
    folder = tmp_path / "folder.db"
    folder.mkdir()
    fifo = tmp_path / "pipe.db"
    os.mkfifo(fifo)  # opening it would block until a writer came
    unreadable = tmp_path / "locked.db"
    open_store(str(unreadable)).close()
    unreadable.chmod(0)
    cases = [(folder, "is a directory"), (fifo, "not a regular file")]
    if os.geteuid() != 0:  # root reads whatever the mode says
        cases.append((unreadable, "cannot open the board"))
    for path, fragment in cases:
        done = board("show", str(path))
        assert done.one_line_error, done
        assert fragment in done.err


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("claim", "URL", "--agent", ""), "name is empty"),
        (("claim", "URL", "--agent", "bad\x1bname"), "control character"),
        (("claim", "URL", "--agent", "person:mallory"), "marks a person"),
        (("claim", "URL", "--agent", " alice"), "starts or ends with a space"),
        (("claim", "URL", "--agent", "bob", "--lease", "nan"), "at least 1 and at most 86400"),
        (("claim", "URL", "--agent", "bob", "--lease", "inf"), "at least 1 and at most 86400"),
        (("claim", "URL", "--agent", "bob", "--lease", "0"), "at least 1 and at most 86400"),
        (("claim", "URL", "--agent", "bob", "--lease", "-1"), "at least 1 and at most 86400"),
        (("claim", "URL", "--agent", "bob", "--lease", "0.001"), "at least 1 and at most 86400"),
        (("claim", "URL", "--agent", "bob", "--lease", "soon"), "not a number of seconds"),
        (("add", "URL", "two\nlines"), "line break"),
        (("add", "URL", "a\x1b]52;c;bad\x07b"), "control character"),
        (("add", "URL", "   "), "is empty"),
        (("add", "URL", "x", "--check", "make\ntest"), "line break"),
        (("add", "URL", "x", "--agent", "person:x"), "marks a person"),
        (("edit", "URL", "2", "--text", "one\rtwo"), "line break"),
        (("edit", "URL", "2", "--blocked-by", "2"), "cannot wait on itself"),
        (("edit", "URL", "1", "--blocked-by", "2"), "only a pending item's blockers"),
        (("edit", "URL", "2"), "say what to change"),
        (("complete", "URL", "1", "--agent", "bob"), "held by alice"),
        (("complete", "URL", "3", "--agent", "alice"), "item #3 is pending"),
        (("release", "URL", "1"), "give --agent NAME"),
        (("release", "URL", "1", "--force", "--agent", "alice"), "--agent and --force: choose one"),
        (("add", "URL", "x" * 2001), "the item text is 2,001 characters long; at most 2,000"),
        (("add", "URL", "x", "--check", "y" * 2001), "--check: the check command is 2,001 char"),
        (("edit", "URL", "2", "--text", "x" * 100_000), "--text: the item text is 100,000 char"),
        (("add", "URL", "x", "--blocked-by", "9"), "--blocked-by 9: no item #9 on this board"),
        (("release", "URL", "1", "--agent", "bob"), "board release --force"),
        (("cancel", "URL", "9"), "no item #9"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    url: str, args: tuple[str, ...], fragment: str
) -> None:
    before = state(url)
    done = board(*(url if arg == "URL" else arg for arg in args))
    assert done.one_line_error, done
    assert fragment in done.err
    assert "\x1b" not in done.err
    assert state(url) == before


@pytest.mark.parametrize(
    "args",
    [
        ("show", "URL", "a\nb"),  # click's own message quotes the extra argument
        ("show", "URL", "\x1b]0;pwned\x07"),
        ("add", "URL", "--from", "no\nsuch"),
        ("show", "URL", "--html", "/nonexistent\n/x.html"),
        ("show", "sqlite:///no\nsuch.db", "--html"),
        ("show", "sqlite:///no\x1b[31msuch.db"),
        ("show", "sqlite:////tmp/" + "a" * 5000 + ".db"),  # too long for the file system
    ],
)
def test_a_persons_newline_or_escape_in_an_argument_stays_on_the_one_line(
    url: str, args: tuple[str, ...]
) -> None:
    # Whatever message names the argument (click's, the store's, the page's), the line is
    # one line, and a terminal shows the escape rather than obeys it.
    before = state(url)
    done = board(*(url if arg == "URL" else arg for arg in args))
    assert done.one_line_error, done
    assert "\x1b" not in done.err and "\x07" not in done.err
    assert state(url) == before


def test_json_output_escapes_what_a_terminal_would_obey_and_keeps_the_value(
    tmp_path: Path,
) -> None:
    path = tmp_path / "board.db"
    address = sqlite_url(path)
    assert board("add", address, "First").code == 0
    assert board("add", address, "Second", "--check", "make test").code == 0
    hostile = "x\x9b2J\u202eevil\x7f\x85"
    with sqlite3.connect(path) as connection:  # a hand edit: the CLI refuses such text
        connection.execute("UPDATE board_items SET text = ? WHERE id = '1'", (hostile,))
        connection.execute("UPDATE board_log SET text = ? WHERE seq = 1", (hostile,))
        connection.execute("UPDATE board_checks SET command = ? WHERE item = '2'", (hostile,))
    connection.close()
    shown = board("show", address, "--json")
    logged = board("log", address, "--json")
    for done in (shown, logged):
        assert done.code == 0, done
        for char in "\x9b\u202e\x7f\x85":
            assert char not in done.out, (char, done.out)
    items = {item["id"]: item for item in json.loads(shown.out)["items"]}
    assert items["1"]["text"] == hostile
    assert items["2"]["check"] == hostile
    assert json.loads(logged.out.splitlines()[0])["text"] == hostile


@pytest.mark.parametrize(
    ("edit", "args", "fragment"),
    [
        (
            "UPDATE board_meta SET value = 9223372036854775807 WHERE key = 'next_id'",
            ("add", "URL", "One more"),
            "its next_id counter is 9223372036854775807",
        ),
        (
            "UPDATE board_meta SET value = 9223372036854775807 WHERE key = 'next_position'",
            ("add", "URL", "One more"),
            "its next_position counter is 9223372036854775807",
        ),
        (
            "UPDATE board_meta SET value = -100 WHERE key = 'next_position'",
            ("add", "URL", "One more"),
            "its next_position counter is -100",
        ),
        (
            "UPDATE board_log SET seq = 9223372036854775807 WHERE seq = 2",
            ("claim", "URL", "2", "--agent", "bob"),
            "the board's log: the store's row is malformed (its last seq is 9223372036854775807)",
        ),
    ],
)
def test_a_counter_with_no_next_number_is_named_not_a_traceback(
    tmp_path: Path, edit: str, args: tuple[str, ...], fragment: str
) -> None:
    path = tmp_path / "board.db"
    address = sqlite_url(path)
    assert board("add", address, "First").code == 0
    assert board("add", address, "Second").code == 0
    with sqlite3.connect(path) as connection:
        connection.execute(edit)
    connection.close()
    before = _rows(path)
    done = board(*(address if arg == "URL" else arg for arg in args))
    assert done.one_line_error, done
    assert fragment in done.err
    assert _rows(path) == before


def test_a_schema_that_is_not_a_number_is_named_and_never_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    address = sqlite_url(path)
    assert board("add", address, "First").code == 0
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE board_meta SET value = 'x' WHERE key = 'schema'")
    connection.close()
    before = path.read_bytes()
    for args in (("check", address), ("show", address), ("claim", address, "--agent", "a")):
        done = board(*args)
        assert done.one_line_error, (args, done)
        assert "the store's row is malformed (its schema is x)" in done.err
    assert path.read_bytes() == before


def test_a_sqlite_file_another_program_marked_is_not_made_a_board(tmp_path: Path) -> None:
    # No tables, but a view, or the application id and user version a program sets.
    marks = {
        "view.db": ("CREATE VIEW answers AS SELECT 42", "it holds other tables: answers"),
        "app.db": ("PRAGMA application_id = 1234", "application_id 1234, user_version 0"),
        "versioned.db": ("PRAGMA user_version = 7", "application_id 0, user_version 7"),
    }
    for name, (statement, fragment) in marks.items():
        path = tmp_path / name
        with sqlite3.connect(path) as connection:
            connection.execute(statement)
        connection.close()
        before = path.read_bytes()
        for args in (("add", str(path), "x"), ("show", str(path))):
            done = board(*args)
            assert done.one_line_error, (name, done)
            assert "not a board database" in done.err and fragment in done.err, done.err
        assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(marks)


def test_a_postgresql_server_that_never_answers_is_named_within_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket
    import threading

    from orchestrator.board import stores

    # Accepts the connection and says nothing: without a connect timeout libpq waits for ever.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    port = silent.getsockname()[1]
    # Should no timeout be set, the connect ends when this closes, with another message.
    closer = threading.Timer(30, silent.close)
    closer.start()
    assert stores.PG_CONNECT_TIMEOUT < 5  # the rule for a board that cannot be opened
    monkeypatch.setattr(stores, "PG_CONNECT_TIMEOUT", 1)  # the test waits one second, not three
    try:
        base = f"postgresql://127.0.0.1:{port}/db"
        for url in (base, f"{base}?connect_timeout=1"):  # the URL's own setting is kept
            done = board("show", url)
            assert done.one_line_error, done
            assert "cannot connect: connection timeout expired" in done.err
    finally:
        closer.cancel()
        silent.close()


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (("--agent", "person:mallory"), "--agent: agent must be a name of printable characters"),
        (("--agent", "a\x07b"), "--agent: agent must be a name of printable characters"),
        (
            ("--agent", "alice", "--lease", "nan"),
            "--lease: lease must be a finite number of seconds",
        ),
        (("--agent", "alice", "--lease", "0"), "--lease: lease must be a finite number of seconds"),
    ],
)
def test_a_run_on_a_shared_board_takes_the_same_names_and_leases(
    url: str, tmp_path: Path, flags: tuple[str, ...], fragment: str
) -> None:
    before = state(url)
    done = orchestrator("run", "Work the board", "--workdir", str(tmp_path), "--board", url, *flags)
    assert done.one_line_error, done
    assert fragment in done.err
    assert state(url) == before


def test_a_lease_is_at_most_a_day_and_never_shown_as_infinity(url: str) -> None:
    for lease in ("1e308", "86401"):
        refused = board("claim", url, "--agent", "bob", "--lease", lease)
        assert refused.one_line_error, refused
        assert "at most 86400 (24 h)" in refused.err
    claimed = board("claim", url, "--agent", "alice", "--lease", "86400", "--json")
    assert claimed.code == 0, claimed.err
    assert 86_000 < json.loads(claimed.out)["lease_s"] <= 86_400
    assert "Infinity" not in board("show", url, "--json").out


@pytest.mark.parametrize("command", ["run", "work", "team"])
def test_every_front_end_caps_a_lease_by_the_boards_rule(
    url: str, tmp_path: Path, command: str
) -> None:
    # run, work and team read --lease through the one `lease` setting, which asks the board's
    # own rule (orchestrator.board.inputs.lease_problem).
    before = state(url)
    args = {
        "run": ("run", "Work the board", "--board", url, "--agent", "alice"),
        "work": ("work", url, "--agent", "alice"),
        "team": ("team", "Plan it", "--scripted"),
    }[command]
    done = orchestrator(*args, "--workdir", str(tmp_path), "--lease", "1e308")
    assert done.one_line_error, done
    assert "at most 86400 (24 h)" in done.err
    assert state(url) == before


def _rows(path: Path) -> list[tuple[object, ...]]:
    """Every row of every table, as stored: what a refusal must leave as it was."""
    with sqlite3.connect(path) as connection:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
        tables = [row[0] for row in connection.execute(query)]
        rows = [
            (table, *row)
            for table in sorted(tables)
            if not table.startswith("sqlite_")
            for row in connection.execute(f'SELECT * FROM "{table}"')
        ]
    connection.close()
    return rows


@pytest.fixture(scope="module")
def worked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A board file: #1 pending with a person's check (a failed run of it logged), #2 blocked
    by #1, #3 held by alice. Its log: seq 1-3 the adds, 4 alice's start, 5 the check run."""
    path = tmp_path_factory.mktemp("worked") / "board.db"
    with open_store(str(path)) as store:
        store.add("Write the API", agent="person:ann", check="make api")
        store.add("Write the UI", agent="person:ann", blocked_by=["1"])
        store.add("Write the docs", agent="person:ann")
        store.claim("alice", item_id="3", lease=3600)
        store.record_check("1", agent="alice", command="make api", exit_code=1, duration_s=0.5)
    # All in one file: beside it only the writers' empty turn file, which holds no data.
    assert sorted(p.name for p in path.parent.iterdir()) == ["board.db", "board.db-lock"]
    assert (path.parent / "board.db-lock").stat().st_size == 0
    return path


#: Every verb of `board`, with T for the item it acts on.
_VERBS: dict[str, tuple[str, ...]] = {
    "claim": ("claim", "URL", "--agent", "bob"),
    "claim ID": ("claim", "URL", "T", "--agent", "bob"),
    "complete": ("complete", "URL", "T", "--agent", "alice"),
    "release": ("release", "URL", "T", "--agent", "alice"),
    "release --force": ("release", "URL", "T", "--force"),
    "cancel": ("cancel", "URL", "T"),
    "edit": ("edit", "URL", "T", "--text", "New words"),
    "add": ("add", "URL", "New", "--blocked-by", "T"),
    "show": ("show", "URL"),
    "show --json": ("show", "URL", "--json"),
    "log": ("log", "URL"),
    "check": ("check", "URL"),
}
_LOG_READERS = {"log", "check"}
_ITEM = "the store's row is malformed"


@attrs.frozen
class Malformed:
    """A hand edit that leaves a row no version of the store writes, and who must name it."""

    sql: str
    #: The item the verbs act on.
    target: str
    #: What the one line must say.
    fragment: str
    #: The verbs whose answer does not depend on the row: they must answer as on the clean board.
    unaffected: frozenset[str] = frozenset({"log"})


def _item_case(sql: str, target: str, what: str, *unaffected: str) -> Malformed:
    return Malformed(
        sql, target, f"item #{target}: {_ITEM} ({what}", frozenset({"log", *unaffected})
    )


def _check_case(sql: str, what: str) -> Malformed:
    # A check is read by the verbs that decide by it (cancel: who set it; edit) and the readers.
    reads = {"cancel", "edit", "show", "show --json", "check"}
    return Malformed(sql, "1", f"item #1's check: {_ITEM} ({what}", frozenset(_VERBS) - reads)


def _log_case(column: str, value: str, seq: int) -> Malformed:
    sql = f"UPDATE board_log SET {column} = {value} WHERE seq = {seq}"
    return Malformed(sql, "1", f"log line seq {seq}: {_ITEM}", frozenset(_VERBS) - _LOG_READERS)


_ITEMS = "UPDATE board_items SET"
_CHECKS = "UPDATE board_checks SET"
_MALFORMED = {
    "status": _item_case(f"{_ITEMS} status = 'bogus' WHERE id = '1'", "1", "its status is bogus"),
    "status, bytes": _item_case(f"{_ITEMS} status = x'01' WHERE id = '1'", "1", "its status is b"),
    "owner, a line break": _item_case(
        f"{_ITEMS} owner = 'a' || char(10) || 'b' WHERE id = '3'", "3", "its owner is", "claim"
    ),
    "owner of a pending item, bytes": _item_case(
        f"{_ITEMS} owner = x'00' WHERE id = '1'", "1", "its owner is b"
    ),
    "owner missing in progress": _item_case(
        f"{_ITEMS} owner = NULL WHERE id = '3'", "3", "it is in_progress without an owner"
    ),
    "lease, text": _item_case(
        f"{_ITEMS} lease_until = 'abc' WHERE id = '3'", "3", "its lease is abc, not a finite time"
    ),
    "lease, infinite": _item_case(
        f"{_ITEMS} lease_until = 9e999 WHERE id = '3'", "3", "its lease is inf"
    ),
    "lease missing in progress": _item_case(
        f"{_ITEMS} lease_until = NULL WHERE id = '3'", "3", "it is in_progress without a lease"
    ),
    "lease of a pending item": _item_case(
        f"{_ITEMS} lease_until = 'abc' WHERE id = '1'", "1", "its lease is abc"
    ),
    "position, text": _item_case(
        f"{_ITEMS} position = 'abc' WHERE id = '1'", "1", "its position is abc"
    ),
    "position, a fraction": _item_case(
        f"{_ITEMS} position = 1.5 WHERE id = '1'", "1", "its position is 1.5"
    ),
    "blocked_by, not JSON": _item_case(
        f"{_ITEMS} blocked_by = 'oops' WHERE id = '2'", "2", "blocked_by is oops", "claim"
    ),
    "blocked_by, an item not there": _item_case(
        f"{_ITEMS} blocked_by = '[\"99\"]' WHERE id = '2'",
        "2",
        "it waits on #99, which is not on the board",
        # Adding an item that waits on #2 and claiming the first ready one (#1) do not read
        # what #2 waits on.
        "claim",
        "add",
    ),
    "blocked_by, itself": _item_case(
        f"{_ITEMS} blocked_by = '[\"2\"]' WHERE id = '2'", "2", "it waits on itself", "claim"
    ),
    "text, bytes": _item_case(f"{_ITEMS} text = x'00ff' WHERE id = '1'", "1", "its text is b"),
    "text, empty": _item_case(f"{_ITEMS} text = '' WHERE id = '1'", "1", "its text is ''"),
    "check command, empty": _check_case(
        f"{_CHECKS} command = '' WHERE item = '1'", "its command is ''"
    ),
    "check command, bytes": _check_case(
        f"{_CHECKS} command = x'00' WHERE item = '1'", "its command is b"
    ),
    "check set_by, a control character": _check_case(
        f"{_CHECKS} set_by = 'ann' || char(7) WHERE item = '1'", "its set_by is 'ann\\x07'"
    ),
    "check set_by, bytes": _check_case(
        f"{_CHECKS} set_by = x'00' WHERE item = '1'", "its set_by is b"
    ),
    "log ts": _log_case("ts", "'garbage'", 4),
    "log agent, bytes": _log_case("agent", "x'00'", 4),
    "log agent, a control character": _log_case("agent", "'al' || char(27) || 'ice'", 4),
    "log item": _log_case("item", "''", 4),
    "log src": _log_case("src", "'bogus'", 4),
    "log dst": _log_case("dst", "'bogus'", 4),
    "log trigger": _log_case("trigger", "'bogus'", 4),
    "log text": _log_case("text", "x'00'", 1),
    "log blocked_by": _log_case("blocked_by", "'{'", 2),
    "log check_command": _log_case("check_command", "x'00'", 5),
    "log exit_code": _log_case("exit_code", "'passed'", 5),
    "log duration_s": _log_case("duration_s", "'slow'", 5),
    "log flag": _log_case("flag", "'seq'", 4),
    "a counter": Malformed(
        "UPDATE board_meta SET value = 'x' WHERE key = 'next_id'",
        "1",
        "the board's meta table: the store's row is malformed (its next_id counter is x)",
        # add takes the counter; check reads everything in the store, the counters too.
        frozenset(_VERBS) - {"add", "check"},
    ),
}


def _untimed(out: str) -> str:
    """``out`` without the seconds a lease has left (they tick between two runs)."""
    return re.sub(r'"lease_s": [0-9.]+', '"lease_s": …', out.replace("/bad/", "/clean/"))


def _verb(name: str, url: str, target: str) -> tuple[str, ...]:
    return tuple({"URL": url, "T": target}.get(arg, arg) for arg in _VERBS[name])


@pytest.mark.parametrize("case", sorted(_MALFORMED))
def test_a_malformed_row_is_named_by_every_verb_that_reads_it(
    worked: Path, tmp_path: Path, case: str
) -> None:
    # Each verb runs on a copy of the worked board as made and on a copy with one row made
    # malformed by hand. A verb that reads the row says so in one line, exit 2, naming it,
    # and changes nothing; every other verb gives the answer it gives on the clean board.
    malformed = _MALFORMED[case]
    for verb in _VERBS:
        # One file name in two folders: outputs that name the board read the same.
        clean, bad = tmp_path / verb / "clean" / "board.db", tmp_path / verb / "bad" / "board.db"
        for path in (clean, bad):
            path.parent.mkdir(parents=True)
            shutil.copyfile(worked, path)
        with sqlite3.connect(bad) as connection:
            connection.execute(malformed.sql)
        connection.close()
        before = _rows(bad)
        expected = board(*_verb(verb, sqlite_url(clean), malformed.target))
        done = board(*_verb(verb, sqlite_url(bad), malformed.target))
        if verb in malformed.unaffected:
            assert (done.code, _untimed(done.out)) == (expected.code, _untimed(expected.out)), (
                verb,
                done,
            )
            continue
        assert done.one_line_error, (verb, done)
        assert malformed.fragment in done.err, (verb, done.err)
        assert _rows(bad) == before, verb


def test_a_persons_verbs_are_logged_as_the_person(url: str) -> None:
    me = person()
    assert board("cancel", url, "3").code == 0  # a person's check: a person may cancel it
    forced = board("release", url, "1", "--force", "--json")
    assert forced.code == 0, forced.err
    assert json.loads(forced.out)["owner"] is None
    edited = board("edit", url, "2", "--text", "Write the web UI", "--check", "npm test")
    assert edited.out == "[ ] #2: Write the web UI  (blocked by #1; check: npm test)\n"
    assert board("edit", url, "2", "--blocked-by", "").code == 0
    lines = log_of(url)[-4:]
    assert [(line["agent"], line["item"], line["trigger"]) for line in lines] == [
        (me, "3", "cancel"),
        (me, "1", "pause"),
        (me, "2", "edit"),
        (me, "2", "edit"),
    ]
    assert lines[1]["force"] is True
    assert (lines[2]["text"], lines[2]["blocked_by"], lines[2]["check"]) == (
        "Write the web UI",
        ["1"],
        "npm test",
    )
    assert (lines[3]["blocked_by"], lines[3]["check"]) == ([], "npm test")
    assert board("check", url).code == 0


def test_completing_a_checked_item_needs_a_passing_run_or_a_logged_skip(url: str) -> None:
    assert board("complete", url, "1", "--agent", "alice").code == 0
    assert board("claim", url, "3", "--agent", "alice").code == 0
    refused = board("complete", url, "3", "--agent", "alice")
    assert refused.one_line_error
    assert "no passing run of it is logged" in refused.err and "--skip-check" in refused.err
    with open_store(url) as store:  # an agent's run logs each check it runs
        store.record_check("3", agent="alice", command="make test", exit_code=2, duration_s=0.5)
    assert board("complete", url, "3", "--agent", "alice").one_line_error
    skipped = board("complete", url, "3", "--agent", "alice", "--skip-check")
    assert skipped.code == 0
    assert "completed without running its check" in skipped.err
    last = log_of(url)[-2:]
    assert (last[0]["trigger"], last[0]["exit_code"], last[0]["duration_s"]) == ("check", 2, 0.5)
    assert (last[1]["trigger"], last[1]["skip_check"]) == ("complete", True)
    assert board("check", url).code == 0


def test_add_reads_many_items_at_once(tmp_path: Path) -> None:
    address = sqlite_url(tmp_path / "many.db")
    plan = tmp_path / "plan.txt"
    plan.write_text("Write the API\n\nWrite the UI\n", encoding="utf-8")
    done = board("add", address, "--from", str(plan))
    assert (done.code, done.out) == (0, "1\n2\n"), done.err
    lines = "\n".join(
        [
            json.dumps({"id": "docs", "text": "Write the docs", "check": "make docs"}),
            json.dumps({"text": "Publish", "blocked_by": ["docs", "1"]}),
            "Tell everyone",
        ]
    )
    done = board("add", address, "--from", "-", "--json", stdin=lines)
    assert done.code == 0, done.err
    added = [json.loads(line) for line in done.out.splitlines()]
    assert [(a["id"], a["blocked_by"], a["check"]) for a in added] == [
        ("docs", [], "make docs"),
        ("3", ["docs", "1"], None),
        ("4", [], None),
    ]
    before = state(address)
    for bad, fragment in (
        ('Fine\n{"text": "x", "colour": "red"}\n', "line 2: unknown key 'colour'"),
        ('{"text": 3}\n', "line 1: text must be"),
        ("{not json\n", "line 1 is not JSON"),
        ("ok\nbad\x07bell\n", "line 2: the item text holds the control character"),
        ('{"text": "x", "blocked_by": ["nope"]}\n', "no item #nope"),
        ("\n\n", "no items in it"),
    ):
        refused = board("add", address, "--from", "-", stdin=bad)
        assert refused.one_line_error, (bad, refused)
        assert fragment in refused.err, (bad, refused.err)
        assert state(address) == before  # all of them or, on a bad line, none
    mixed = board("add", address, "x", "--from", "-", stdin="y\n")
    assert mixed.one_line_error


def test_add_from_names_the_line_of_a_refused_item(tmp_path: Path) -> None:
    address = sqlite_url(tmp_path / "many.db")
    assert board("add", address, "--from", "-", stdin='{"id": "docs", "text": "Docs"}\n').code == 0
    before = state(address)
    for lines, fragment in (
        (
            'First\n{"text": "x", "blocked_by": ["nope"]}\n',
            "--from: line 2: blocked by #nope, but no item #nope is on the board or on an "
            "earlier line",
        ),
        (
            # An id given lets later lines name it, not earlier ones.
            '{"text": "x", "blocked_by": ["api"]}\n{"id": "api", "text": "API"}\n',
            "--from: line 1: blocked by #api",
        ),
        (
            '{"id": "a", "text": "A"}\n\n{"id": "a", "text": "B"}\n',
            "--from: line 3: the id a is given on line 1 too",
        ),
        ('One\n{"id": "docs", "text": "Docs again"}\n', "--from: line 2: item #docs exists"),
        ('{"id": "docs ", "text": "Docs"}\n', "item id 'docs ' starts or ends with a space"),
        ('{"id": "' + "d" * 201 + '", "text": "Docs"}\n', "an item id is at most 200 characters"),
        ("Fine\n" + "x" * 2001 + "\n", "--from: line 2: the item text is 2,001 characters"),
        ('{"text": "x", "check": "' + "y" * 2001 + '"}\n', "--from: line 1: the check command"),
        ('{"text": ' + "[" * 5000 + "]" * 5000 + "}\n", "--from: line 1 is nested too deeply"),
    ):
        refused = board("add", address, "--from", "-", stdin=lines)
        assert refused.one_line_error, (lines, refused)
        assert fragment in refused.err, (lines, refused.err)
        assert "--blocked-by" not in refused.err and "--check:" not in refused.err
        assert state(address) == before
    longest = board("add", address, "x" * 2000)
    assert longest.code == 0, longest.err


def test_add_from_reads_a_bounded_line_and_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orchestrator.cli.board as board_cli

    address = sqlite_url(tmp_path / "b.db")
    nul = tmp_path / "nul.txt"
    nul.write_bytes(b"\0" * 100_000)  # one line with no end, as /dev/zero is
    done = board("add", address, "--from", str(nul))
    assert done.one_line_error, done
    assert "--from: line 1 is longer than 32,000 characters" in done.err
    monkeypatch.setattr(board_cli, "MAX_FROM_SIZE", 1_000)
    many = tmp_path / "many.txt"
    many.write_text("".join(f"item {n}\n" for n in range(200)), encoding="utf-8")
    done = board("add", address, "--from", str(many))
    assert done.one_line_error, done
    assert "--from: more than 1,000 characters by line 124" in done.err
    assert not (tmp_path / "b.db").exists()


def test_add_from_dev_zero_is_one_line_not_a_killed_process(tmp_path: Path) -> None:
    # The process boundary is the point: unbounded, this read eats memory until the kernel
    # kills the process. A limit on its address space makes that quick and safe here.
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "board", "add", "b.db", "--from", "/dev/zero"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited,
        check=False,
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "longer than 32,000 characters" in done.stderr
    assert list(tmp_path.iterdir()) == []


#: Every verb but add, which alone may start a board.
_OPENERS = [name for name in _VERBS if name != "add"]


@pytest.mark.parametrize("verb", _OPENERS)
def test_every_verb_but_add_opens_an_existing_board_only(
    url: str, monkeypatch: pytest.MonkeyPatch, verb: str
) -> None:
    import orchestrator.board.stores as stores

    asked: list[bool] = []
    real = stores.open_store

    def recording(value: str, **options: Any) -> SqlBoardStore:
        asked.append(options.get("create", True))
        return real(value, **options)

    monkeypatch.setattr(stores, "open_store", recording)
    done = board(*_verb(verb, url, "1"))
    assert "Traceback" not in done.err
    assert asked == [False], (verb, asked)
    asked.clear()
    assert board("add", url, "more").code == 0
    assert asked == [True]


def test_open_existing_is_one_line_for_a_board_that_is_not_there(tmp_path: Path) -> None:
    with pytest.raises(NoBoard) as missing:
        open_existing(str(tmp_path / "typo.db"))
    assert str(missing.value) == f"{tmp_path / 'typo.db'}: no board there (board add starts one)"
    assert list(tmp_path.iterdir()) == []
    made = sqlite_url(tmp_path / "made.db")
    assert board("add", made, "x").code == 0
    with open_existing(made) as store:
        assert [item.text for item in store.items()] == ["x"]


def test_every_verb_of_board_is_one_this_file_covers() -> None:
    from orchestrator.cli.board import board_group

    assert set(board_group.commands) == {
        "show",
        "add",
        "claim",
        "complete",
        "release",
        "cancel",
        "edit",
        "log",
        "check",
    }
