"""``orchestrator board`` through the real CLI, in process: every bad input is one line, exit 2.

Each refusal is checked for what a broken implementation gets wrong: the exit code, one line
on stderr and no traceback, and that the board (or the file that is not one) is exactly as it
was, with nothing created.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from orchestrator.board.inputs import person
from orchestrator.board.stores import open_store, parse_url, sqlite_url
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
        (("claim", "URL", "--agent", "bob", "--lease", "nan"), "above 0 and finite"),
        (("claim", "URL", "--agent", "bob", "--lease", "inf"), "above 0 and finite"),
        (("claim", "URL", "--agent", "bob", "--lease", "0"), "above 0 and finite"),
        (("claim", "URL", "--agent", "bob", "--lease", "-1"), "above 0 and finite"),
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
    ("flags", "fragment"),
    [
        (("--agent", "person:mallory"), "--agent: agent must be a name of printable characters"),
        (("--agent", "a\x07b"), "--agent: agent must be a name of printable characters"),
        (("--agent", "alice", "--lease", "nan"), "--lease: lease must be a number of seconds"),
        (("--agent", "alice", "--lease", "0"), "--lease: lease must be a number of seconds"),
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


def test_a_lease_is_never_shown_as_infinity(url: str) -> None:
    claimed = board("claim", url, "--agent", "alice", "--lease", "1e308", "--json")
    assert claimed.code == 0
    assert json.loads(claimed.out)["lease_s"] > 0
    assert "Infinity" not in board("show", url, "--json").out


def _tamper(url: str, statement: str, *params: object) -> None:
    path = parse_url(url).dialect.path
    with sqlite3.connect(path) as connection:
        connection.execute(statement, params)
    connection.close()


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        ("UPDATE board_items SET status = 'done' WHERE id = '2'", "item #2: the store's row"),
        ("UPDATE board_items SET blocked_by = 'oops' WHERE id = '2'", "item #2: the store's row"),
        ("UPDATE board_items SET text = x'00ff' WHERE id = '2'", "item #2: the store's row"),
        ("UPDATE board_items SET lease_until = 9e999 WHERE id = '1'", "not a finite time"),
        ("UPDATE board_items SET owner = 'a' || char(10) || 'b' WHERE id = '1'", "item #1"),
        ("UPDATE board_log SET agent = x'00' WHERE seq = 2", "log line seq 2"),
        ("UPDATE board_log SET blocked_by = '{' WHERE seq = 2", "log line seq 2"),
        ("UPDATE board_log SET exit_code = 'passed' WHERE seq = 4", "log line seq 4"),
    ],
)
def test_a_malformed_row_is_one_line_naming_it(url: str, statement: str, fragment: str) -> None:
    _tamper(url, statement)
    verbs: list[tuple[str, ...]] = [("check", url), ("check", url, "--json")]
    if "board_log" in statement:
        verbs.append(("log", url))
    else:
        tampered = statement.rsplit("'", 2)[-2]  # the id in WHERE id = '…'
        claim = ("claim", url, tampered, "--agent", "carol")
        verbs += [("show", url), ("show", url, "--json"), claim]
    for args in verbs:
        done = board(*args)
        assert done.one_line_error, (args, done)
        assert fragment in done.err, (args, done.err)


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
