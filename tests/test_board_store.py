"""The shared board's store, against SQLite and a throwaway PostgreSQL cluster alike."""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from orchestrator.board.check import check_log
from orchestrator.board.inputs import person
from orchestrator.board.store import (
    BoardContents,
    BoardError,
    LogEntry,
    NothingClaimable,
    SqlBoardStore,
    StoreError,
    TeamBusy,
    item_teams,
)
from orchestrator.board.stores import BoardUrlError, open_store, parse_url, sqlite_url
from orchestrator.plan import Status
from tests.budget import deep, examples
from tests.postgres import fresh_database
from tests.test_board_cli import board

ROOT = Path(__file__).resolve().parent.parent


# Every PostgreSQL test is in the e2e layer and goes to one xdist worker (`--dist loadgroup`), so
# one throwaway cluster serves them all.
_POSTGRESQL = pytest.param("postgresql", marks=[pytest.mark.e2e, pytest.mark.xdist_group("pg")])


@pytest.fixture(params=["sqlite", _POSTGRESQL])
def board_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'board.db'}"
    # The session's one cluster (tests/conftest.py), a fresh database in it for each test.
    return fresh_database(request.getfixturevalue("postgres_cluster"))


class Clock:
    """Lease time the test moves by hand, so no test waits for a lease."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_claims_follow_the_rules_and_every_change_is_logged(board_url: str) -> None:
    with open_store(board_url) as store:
        first = store.add("Write tests", agent="lead")
        second = store.add("Ship", agent="lead", blocked_by=[first.id])
        assert (first.id, second.id) == ("1", "2")
        claimed = store.claim("alice")
        assert (claimed.id, claimed.status, claimed.owner) == ("1", Status.IN_PROGRESS, "alice")
        with pytest.raises(BoardError, match=r"held by alice|in_progress by alice") as taken:
            store.claim("bob", item_id="1")
        assert "alice" in str(taken.value)
        with pytest.raises(NothingClaimable) as nothing:
            store.claim("bob")
        assert nothing.value.reason == "waiting on blockers"
        with pytest.raises(BoardError, match="only its owner may complete"):
            store.complete("1", agent="bob")
        with pytest.raises(BoardError, match="blocked by #1"):
            store.claim("alice", item_id="2")
        store.complete("1", agent="alice")
        assert store.claim("bob").id == "2"
        with pytest.raises(NothingClaimable) as held:
            store.claim("carol")
        assert held.value.reason == "all claimed"
        store.complete("2", agent="bob")
        with pytest.raises(NothingClaimable) as done:
            store.claim("carol")
        assert done.value.reason == "all done"
        log = [entry.as_dict() for entry in store.log()]
        items, entries = store.snapshot()
    assert [(e["seq"], e["agent"], e["item"], e["trigger"]) for e in log] == [
        (1, "lead", "1", "add"),
        (2, "lead", "2", "add"),
        (3, "alice", "1", "start"),
        (4, "alice", "1", "complete"),
        (5, "bob", "2", "start"),
        (6, "bob", "2", "complete"),
    ]
    assert set(log[2]) >= {"seq", "ts", "agent", "item", "src", "dst", "trigger"}
    assert (log[2]["src"], log[2]["dst"]) == ("pending", "in_progress")
    assert check_log(entries, items) is None
    # Completed items are kept: the log and the store still hold both.
    assert [item.status for item in items] == [Status.COMPLETED, Status.COMPLETED]


def test_one_item_in_progress_per_agent_not_per_board(board_url: str) -> None:
    with open_store(board_url) as store:
        for text in ("a", "b", "c"):
            store.add(text)
        assert store.claim("alice").id == "1"
        assert store.claim("bob").id == "2"
        with pytest.raises(BoardError, match="alice already holds #1"):
            store.claim("alice", item_id="3")
        store.release("1", agent="alice")
        assert store.claim("alice", item_id="3").owner == "alice"
        assert {item.id: item.owner for item in store.items()} == {
            "1": None,
            "2": "bob",
            "3": "alice",
        }


def test_a_dead_agents_claim_expires_by_the_named_edge(board_url: str) -> None:
    clock = Clock()
    with open_store(board_url, clock=clock) as store:
        store.add("work")
        store.claim("alice", lease=30)
        clock.now += 29
        with pytest.raises(NothingClaimable):
            store.claim("bob")
        assert store.claim("alice", lease=30).id == "1"  # claiming again renews
        clock.now += 29
        assert store.renew("alice", lease=30) == 1
        clock.now += 31  # alice stopped renewing: she is gone
        taken = store.claim("bob")
        assert (taken.id, taken.owner) == ("1", "bob")
        with pytest.raises(BoardError, match="held by bob"):
            store.complete("1", agent="alice")
        entries = list(store.log())
        expired = [e for e in entries if e.trigger == "expire"]
        assert [(e.agent, e.src, e.dst) for e in expired] == [("alice", "in_progress", "pending")]
        items, logged = store.snapshot()
    assert check_log(logged, items) is None


def test_a_refused_change_writes_nothing(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("a")
        store.claim("alice")
        before = (store.items(), list(store.log()))
        attempts: list[Callable[[], object]] = [
            lambda: store.complete("1", agent="bob"),
            lambda: store.release("1", agent="bob"),
            lambda: store.claim("bob", item_id="1"),
            lambda: store.complete("9", agent="alice"),
            lambda: store.add("b", blocked_by=["7"]),
            lambda: store.add("   "),
        ]
        for attempt in attempts:
            with pytest.raises(BoardError):
                attempt()
        assert (store.items(), list(store.log())) == before


def test_ids_are_stable_and_never_reused(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("a")
        store.add("b", item_id="7")
        with pytest.raises(BoardError, match="never reused"):
            store.add("c", item_id="7")
        assert [store.add(text).id for text in ("d", "e")] == ["2", "3"]
    with open_store(board_url) as again:  # a restart keeps them
        assert [item.id for item in again.items()] == ["1", "7", "2", "3"]


def test_bad_urls_are_one_line() -> None:
    for url, fragment in (
        ("board.json", "not a board store"),
        ("sqlite://board.db", "three slashes"),
        ("/no/such/dir/board.db", "no such directory"),
    ):
        with pytest.raises(BoardUrlError, match=fragment):
            open_store(url)


# --- the log check ---------------------------------------------------------------------------


def _entry(seq: int, agent: str | None, item: str, src: str | None, dst: str, trigger: str,
           blocked_by: tuple[str, ...] | None = None) -> LogEntry:  # fmt: skip
    return LogEntry(seq, "t", agent, item, src, dst, trigger, "x", blocked_by)


def _replayed(*entries: LogEntry) -> str:
    violation = check_log(entries, ())
    assert violation is not None
    return str(violation)


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, "a", "1", "pending", "in_progress", "start"),
                _entry(3, "b", "1", "pending", "in_progress", "start"),
            ),
            "seq 3: #1 start from pending, but the log has it in_progress",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, None, "2", None, "pending", "add", ()),
                _entry(3, "a", "1", "pending", "in_progress", "start"),
                _entry(4, "a", "2", "pending", "in_progress", "start"),
            ),
            "seq 4: a started #2 while holding #1",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, None, "2", None, "pending", "add", ("1",)),
                _entry(3, "a", "2", "pending", "in_progress", "start"),
            ),
            "seq 3: #2 started while its blocker #1",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, "a", "1", "pending", "in_progress", "start"),
                _entry(3, "b", "1", "in_progress", "completed", "complete"),
            ),
            "seq 3: b took complete on #1, which a held",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, None, "1", None, "pending", "add", ()),
            ),
            "seq 2: item #1 added twice",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(3, "a", "1", "pending", "in_progress", "start"),
            ),
            "skips from seq 1 to 3",
        ),
        (
            (
                _entry(1, None, "1", None, "pending", "add", ()),
                _entry(2, "a", "1", "pending", "completed", "complete"),
            ),
            "seq 2: #1: pending → completed by complete is not an edge",
        ),
    ],
)  # fmt: skip
def test_check_names_the_first_broken_rule(entries: tuple[LogEntry, ...], fragment: str) -> None:
    assert fragment in _replayed(*entries)


def test_check_compares_the_log_with_the_store(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("a")
        store.claim("alice")
        items, entries = store.snapshot()
    assert check_log(entries, items) is None
    assert "lost" in str(check_log(entries, ()))
    assert "the log leaves it in_progress" in str(
        check_log(entries, [items[0].__class__("1", "a", Status.COMPLETED)])
    )


# --- interleavings ---------------------------------------------------------------------------


class Interleaved(RuleBasedStateMachine):
    """Agents' operations in any order: a refused one changes nothing; the log always checks."""

    agents = st.sampled_from(["alice", "bob", "TEAM/carol"])
    people = st.sampled_from(["person:ann"])

    @initialize()
    def open(self) -> None:
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="board-hyp-"))
        self.clock = Clock()
        self.store: SqlBoardStore = open_store(str(self.folder / "b.db"), clock=self.clock)

    def _attempt(self, action: Callable[[], object]) -> None:
        before = self.store.contents()
        try:
            action()
        except BoardError:
            assert self.store.contents() == before

    @rule(
        text=st.text(min_size=1, max_size=5),
        blockers=st.lists(st.integers(1, 6), max_size=2),
        check=st.none() | st.sampled_from(["make test", "make\nlint", ""]),
        adder=st.none() | agents | people,
    )
    def add(self, text: str, blockers: list[int], check: str | None, adder: str | None) -> None:
        self._attempt(
            lambda: self.store.add(
                text, blocked_by=[str(b) for b in blockers], check=check, agent=adder
            )
        )

    @rule(
        item=st.integers(1, 6),
        text=st.none() | st.text(min_size=0, max_size=5),
        blockers=st.none() | st.lists(st.integers(1, 6), max_size=2),
        check=st.none() | st.sampled_from(["make test", "make ship", ""]),
    )
    def edit(
        self, item: int, text: str | None, blockers: list[int] | None, check: str | None
    ) -> None:
        waits = None if blockers is None else [str(b) for b in blockers]
        self._attempt(
            lambda: self.store.edit(
                str(item), agent="person:ann", text=text, blocked_by=waits, check=check
            )
        )

    @rule(actor=agents | people, item=st.integers(1, 6))
    def cancel(self, actor: str, item: int) -> None:
        self._attempt(lambda: self.store.cancel(str(item), agent=actor))

    @rule(actor=agents | people, item=st.integers(1, 6))
    def force_release(self, actor: str, item: int) -> None:
        self._attempt(lambda: self.store.release(str(item), agent=actor, force=True))

    @rule(
        agent=agents,
        item=st.integers(1, 6),
        command=st.sampled_from(["make test", "make ship"]),
        code=st.sampled_from([0, 1]),
    )
    def run_check(self, agent: str, item: int, command: str, code: int) -> None:
        self._attempt(
            lambda: self.store.record_check(
                str(item), agent=agent, command=command, exit_code=code, duration_s=0.1
            )
        )

    @rule(agent=agents, item=st.none() | st.integers(1, 6))
    def claim(self, agent: str, item: int | None) -> None:
        self._attempt(
            lambda: self.store.claim(agent, lease=10, item_id=None if item is None else str(item))
        )

    @rule(agent=agents, item=st.integers(1, 6), skip=st.booleans())
    def complete(self, agent: str, item: int, skip: bool) -> None:
        self._attempt(lambda: self.store.complete(str(item), agent=agent, skip_check=skip))

    @rule(agent=agents, item=st.integers(1, 6))
    def release(self, agent: str, item: int) -> None:
        self._attempt(lambda: self.store.release(str(item), agent=agent))

    @rule(seconds=st.sampled_from([1.0, 11.0]))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds

    @invariant()
    def the_log_checks(self) -> None:
        if hasattr(self, "store"):
            contents = self.store.contents()
            items = contents.items
            assert check_log(contents.log, items, checks=contents.checks) is None
            owners = Counter(i.owner for i in items if i.status == Status.IN_PROGRESS)
            assert all(count == 1 for count in owners.values())

    def teardown(self) -> None:
        import shutil

        if hasattr(self, "store"):
            self.store.close()
            shutil.rmtree(self.folder, ignore_errors=True)


TestInterleaved = Interleaved.TestCase
TestInterleaved.settings = settings(
    max_examples=examples(40),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- many processes --------------------------------------------------------------------------


def _chains(store: SqlBoardStore, count: int, seed: int) -> None:
    """``count`` items, some waiting on an earlier one (random dependency chains)."""
    chooser = random.Random(seed)
    for number in range(1, count + 1):
        blockers = (
            [str(chooser.randint(1, number - 1))] if number > 1 and chooser.random() < 0.3 else []
        )
        store.add(f"item {number}", blocked_by=blockers)  # fmt: skip


@pytest.mark.e2e
def test_many_claimers_some_killed_complete_every_item_exactly_once(board_url: str) -> None:
    # 500 items keep sixteen claimers contending past the kills; the deep profile runs 2,000.
    # The survivors wait out the killed agents' leases polling the board: a short lease is less
    # waiting and less polling. A survivor too slow for it is refused, which the test allows.
    items, workers, lease = (2000 if deep() else 500), 16, 2.0
    with open_store(board_url) as store:
        _chains(store, items, seed=23)
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.board_worker", board_url, f"agent-{n}", str(lease)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(workers)
    ]
    # Kill three once they have started working; their claims must come back by themselves.
    killed = processes[:3]
    with open_store(board_url) as store:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            started = {e.agent for e in store.log() if e.trigger == "start"}
            if all(f"agent-{n}" in started for n in range(3)):
                break
            time.sleep(0.05)
    for process in killed:
        process.send_signal(signal.SIGKILL)
    outputs = {}
    for process in processes:
        _out, err = process.communicate(timeout=900)
        outputs[process.pid] = (process.returncode, err)
    survivors = [outputs[p.pid] for p in processes[3:]]
    assert all(code == 0 for code, _ in survivors), survivors
    with open_store(board_url) as store:
        final, entries = store.snapshot()
    completions = Counter(e.item for e in entries if e.trigger == "complete")
    assert len(final) == items
    assert all(item.status == Status.COMPLETED for item in final)
    assert sorted(completions) == sorted(item.id for item in final)
    assert set(completions.values()) == {1}
    assert check_log(entries, final) is None
    starts = Counter(e.item for e in entries if e.trigger == "start")
    expiries = [e for e in entries if e.trigger == "expire"]
    # Each expired item was started again (a killed agent's always expire; on a loaded
    # machine a slow survivor's may too, and its late completion is refused).
    assert all(starts[e.item] >= 2 for e in expiries)
    killed_names = {f"agent-{n}" for n in range(3)}
    held_at_death = {e.item for e in entries if e.trigger == "start" and e.agent in killed_names}
    assert all(completions[item] == 1 for item in held_at_death)


# --- SQLite writers' turns ------------------------------------------------------------------


def _turn_free(turn: Path) -> bool:
    """Whether nobody holds the turn file's lock now (taken and given back at once if so)."""
    fd = os.open(turn, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing gives back a lock taken through it
    return True


def _waiting_on(turn: Path) -> bool:
    """Whether some process waits for the turn file's lock (a blocked FLOCK in /proc/locks)."""
    inode = f":{turn.stat().st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and "FLOCK" in line and inode in line for line in lines)


def test_a_sqlite_writer_holds_the_turn_file_for_its_change_only(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    turn = tmp_path / "board.db-lock"
    with open_store(sqlite_url(path)) as store:
        store.add("a")
        assert turn.is_file() and turn.stat().st_size == 0
        with store.change() as change:
            change.claim("alice")
            assert not _turn_free(turn)  # taken before BEGIN, for the whole change
        assert _turn_free(turn)
        list(store.log())  # a reader does not queue
        with pytest.raises(BoardError), store.change() as change:
            change.complete("1", agent="bob")
        assert _turn_free(turn)  # a refused change gives it back too
    assert str(turn) not in _open_files()  # closed with the store


def _open_files() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone already
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def test_a_sqlite_writer_waits_for_its_turn_and_then_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "board.db"
    with open_store(sqlite_url(path)) as store:
        store.add("a")
    turn = tmp_path / "board.db-lock"
    held = os.open(turn, os.O_RDONLY)
    fcntl.flock(held, fcntl.LOCK_EX)  # another writer's turn, as far as the store can tell
    claimed: list[str] = []
    with open_store(sqlite_url(path)) as store:
        worker = threading.Thread(target=lambda: claimed.append(store.claim("alice").id))
        worker.start()
        try:
            deadline = time.monotonic() + 60
            while not _waiting_on(turn) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert _waiting_on(turn), "the claim did not wait for the turn"
            assert not claimed
        finally:
            os.close(held)
            worker.join(timeout=60)
        assert claimed == ["1"]


def test_a_second_store_in_the_thread_holding_the_turn_does_not_wait_on_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It waits on SQLite's lock instead, for the busy timeout, and fails as it always did; a
    # store that queued on the turn file would wait for ever (and the test time out).
    monkeypatch.setattr("orchestrator.board.stores.BUSY_TIMEOUT", 0.05)
    url = sqlite_url(tmp_path / "board.db")
    with open_store(url) as first, open_store(url) as second:
        first.add("a")
        first.add("b")
        with first.change() as change:
            change.claim("alice")
            with pytest.raises(StoreError, match="database is locked"):
                second.claim("bob")
        assert second.claim("bob").id == "2"  # and it works once the first change is done


def test_a_claimer_imports_no_plan_board() -> None:
    # A claimer process starts just to take an item: the plan board's module (and the protocols
    # it brings) were a good part of its start (docs/performance.md, board_claim_vs_floor).
    code = (
        "import sys; import orchestrator.board.stores\n"
        "print(sorted({'orchestrator.plan', 'orchestrator.protocols'} & set(sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout == "[]\n", done.stdout


def test_the_board_command_line(board_url: str) -> None:
    assert board("add", board_url, "Write tests").out == "1\n"
    assert board("add", board_url, "Ship", "--blocked-by", "1").out == "2\n"
    wrong = board("add", board_url, "x", "--blocked-by", "9")
    assert wrong.one_line_error
    claimed = board("claim", board_url, "--agent", "alice", "--json")
    assert json.loads(claimed.out)["owner"] == "alice"
    nothing = board("claim", board_url, "--agent", "bob", "--json")
    assert nothing.code == 4
    assert json.loads(nothing.out) == {"claimed": None, "reason": "waiting on blockers"}
    refused = board("complete", board_url, "1", "--agent", "bob")
    assert refused.one_line_error and "held by alice" in refused.err
    assert board("complete", board_url, "1", "--agent", "alice").code == 0
    shown = json.loads(board("show", board_url, "--json").out)
    assert [(i["id"], i["status"], i["owner"]) for i in shown["items"]] == [
        ("1", "completed", "alice"),
        ("2", "pending", None),
    ]
    lines = [json.loads(line) for line in board("log", board_url).out.splitlines()]
    assert [line["trigger"] for line in lines] == ["add", "add", "start", "complete"]
    checked = board("check", board_url, "--json")
    assert checked.code == 0 and json.loads(checked.out)["ok"] is True
    missing = board("show", "nowhere.json")
    assert missing.one_line_error and "not a board store" in missing.err


# --- several boards in one database, and what is not a board ----------------------------------


def _named(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}board={name}"


def test_boards_in_one_database_do_not_see_each_other(board_url: str) -> None:
    red, blue = _named(board_url, "red"), _named(board_url, "blue")
    assert board("add", red, "Red one").out == "1\n"
    assert board("add", blue, "Blue one").out == "1\n"
    assert board("add", blue, "Blue two").out == "2\n"
    assert board("claim", red, "--agent", "RED/worker-1").code == 0
    with open_store(red) as store:
        assert store.board == "red"
        assert [(i.id, i.text, i.owner) for i in store.items()] == [
            ("1", "Red one", "RED/worker-1")
        ]
        assert [e.agent for e in store.log()] == [person(), "RED/worker-1"]
    with open_store(blue) as store:
        assert [(i.text, i.status.value) for i in store.items()] == [
            ("Blue one", "pending"),
            ("Blue two", "pending"),
        ]
    # The default board is a board of its own; a name not there is named, never made.
    missing = board("show", board_url)
    assert missing.one_line_error and "no default board here (boards here: blue, red" in missing.err
    unknown = board("show", _named(board_url, "green"))
    assert unknown.one_line_error and "(board green): no such board here" in unknown.err
    assert board("check", red).code == 0 and board("check", blue).code == 0


def test_a_database_with_other_tables_is_refused_and_left_alone(board_url: str) -> None:
    if board_url.startswith("sqlite"):
        with sqlite3.connect(parse_url(board_url).dialect.path) as connection:
            connection.execute("CREATE TABLE orders (id INTEGER)")
        connection.close()
    else:
        import psycopg

        with psycopg.connect(parse_url(board_url).dialect.url, autocommit=True) as server:
            server.execute("CREATE TABLE orders (id INTEGER)")
    for url in (board_url, _named(board_url, "red")):
        done = board("add", url, "x")
        assert done.one_line_error, done
        assert "not a board database (it holds other tables: orders)" in done.err
        with pytest.raises(BoardUrlError, match="not a board database"):
            open_store(url)


def test_items_belong_to_the_team_that_added_or_started_them(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("planned by team a", agent="A/lead")
        store.add("added by a person")
        store.add("added by a person, worked by team b")
        store.add("done by team a", agent="A/lead")
        store.claim("B/worker-1", item_id="3")
        store.claim("A/worker-1", item_id="4")
        store.complete("4", agent="A/worker-1")
        assert store.teams() == {"A": ("1",), "B": ("3",)}
        assert item_teams(store.log()) == {"1": "A", "3": "B", "4": "A"}


def test_a_team_holds_its_board_from_the_start_until_it_lets_go_or_dies(board_url: str) -> None:
    clock = Clock()
    with open_store(board_url, clock=clock) as store, open_store(board_url, clock=clock) as other:
        store.hold_for_team("A", lease=30)
        # Team A has planned nothing yet: its hold alone keeps team B away.
        with pytest.raises(TeamBusy, match="team A is planning") as busy:
            other.hold_for_team("B", lease=30)
        assert (busy.value.team, busy.value.items) == ("A", ())
        clock.now += 20
        store.hold_for_team("A", lease=30)  # renewed: 30 s from now
        clock.now += 20
        with pytest.raises(TeamBusy):
            other.hold_for_team("B", lease=30)
        store.add("planned by A", agent="A/lead")
        store.let_go_for_team("A")
        # Let go, but its unfinished item still belongs to it.
        with pytest.raises(TeamBusy, match="items #1 belong to team A") as busy:
            other.hold_for_team("B", lease=30)
        assert busy.value.items == ("1",)
        store.cancel("1", agent=person("me"))
        other.hold_for_team("B", lease=30)
        # A lead that dies stops renewing: its hold runs out by itself.
        clock.now += 31
        store.hold_for_team("A", lease=30)
        assert store.teams() == {}


def test_a_checked_item_completes_after_a_passing_run_since_its_last_start(
    board_url: str,
) -> None:
    with open_store(board_url) as store:
        store.add("Test it", check="make test", agent="person:ann")
        store.add("Lint it", check="make lint", agent="bot")
        store.claim("alice", item_id="1")
        with pytest.raises(BoardError, match="no passing run of it is logged"):
            store.complete("1", agent="alice")
        store.record_check("1", agent="alice", command="make lint", exit_code=0, duration_s=1)
        with pytest.raises(BoardError, match="no passing run"):  # another command's run
            store.complete("1", agent="alice")
        store.record_check("1", agent="alice", command="make test", exit_code=0, duration_s=1)
        assert store.complete("1", agent="alice").status == Status.COMPLETED
        # An agent may cancel an item whose check an agent set; a person's, only a person.
        store.claim("alice", item_id="2")
        assert store.cancel("2", agent="alice").status == Status.CANCELLED
        store.add("Ship it", check="make ship")  # no actor named: a person's check
        with pytest.raises(BoardError, match="only a person may cancel it"):
            store.cancel("3", agent="alice")
        store.claim("bob", item_id="3")
        with pytest.raises(BoardError, match="held by bob"):
            store.release("3", agent="alice")
        freed = store.release("3", agent="TEAM/lead", force=True)
        assert (freed.status, freed.owner) == (Status.PENDING, None)
        assert store.cancel("3", agent="person:ann").status == Status.CANCELLED
        contents = store.contents()
    assert check_log(contents.log, contents.items, checks=contents.checks) is None
    forced = [e for e in contents.log if e.trigger == "pause"]
    assert [(e.agent, e.flag) for e in forced] == [("TEAM/lead", "force")]
    assert store_checks(contents) == {"1": "make test", "2": "make lint", "3": "make ship"}


def store_checks(contents: BoardContents) -> dict[str, str]:
    return dict(contents.checks)


def test_a_store_made_before_schema_2_opens_upgraded_and_reads_as_it_did(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _schema_one_store(path)
    url = sqlite_url(path)
    with open_store(url, create=False) as store:
        assert [(i.id, i.status.value, i.owner) for i in store.items()] == [
            ("1", "completed", "alice"),
            ("2", "in_progress", "bob"),
        ]
        assert store.checks() == {"2": "make test"}
        assert store.check_setters() == {"2": None}  # not said: taken as a person's
        contents = store.contents()
        assert check_log(contents.log, contents.items, checks=contents.checks) is None
        with pytest.raises(BoardError, match="only a person may cancel it"):
            store.cancel("2", agent="bob")
        store.record_check("2", agent="bob", command="make test", exit_code=0, duration_s=3)
        store.complete("2", agent="bob")
        added = store.add("New", check="make new", agent="person:ann")
        contents = store.contents()
    assert check_log(contents.log, contents.items, checks=contents.checks) is None
    assert [e.seq for e in contents.log] == list(range(1, 9))
    assert contents.log[-1].check == "make new" and added.id == "3"
    done = board("check", url)
    assert done.code == 0, done.err


def _schema_one_store(path: Path) -> None:
    """A board as the previous version made it: its tables, counters and log lines."""
    ts = "2025-01-01T10:00:00.000000+00:00"  # the log's time, as the store writes one
    statements = (
        "CREATE TABLE board_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)",
        "CREATE TABLE board_items (id TEXT PRIMARY KEY, position BIGINT NOT NULL, text TEXT "
        "NOT NULL, status TEXT NOT NULL, owner TEXT, lease_until DOUBLE PRECISION, blocked_by "
        "TEXT NOT NULL)",
        "CREATE TABLE board_log (seq BIGINT PRIMARY KEY, ts TEXT NOT NULL, agent TEXT, item TEXT "
        "NOT NULL, src TEXT, dst TEXT NOT NULL, trigger TEXT NOT NULL, text TEXT, blocked_by TEXT)",
        "CREATE INDEX board_items_status ON board_items (status, owner)",
        "CREATE TABLE board_checks (item TEXT PRIMARY KEY, command TEXT NOT NULL)",
        "INSERT INTO board_meta VALUES ('lock', 0), ('next_id', 3), ('next_seq', 6), "
        "('next_position', 3)",
        "INSERT INTO board_items VALUES ('1', 1, 'Write it', 'completed', 'alice', NULL, '[]'), "
        "('2', 2, 'Test it', 'in_progress', 'bob', 9e15, '[\"1\"]')",
        "INSERT INTO board_checks VALUES ('2', 'make test')",
        "INSERT INTO board_log VALUES "
        f"(1, '{ts}', NULL, '1', NULL, 'pending', 'add', 'Write it', '[]'), "
        f"(2, '{ts}', NULL, '2', NULL, 'pending', 'add', 'Test it', '[\"1\"]'), "
        f"(3, '{ts}', 'alice', '1', 'pending', 'in_progress', 'start', NULL, NULL), "
        f"(4, '{ts}', 'alice', '1', 'in_progress', 'completed', 'complete', NULL, NULL), "
        f"(5, '{ts}', 'bob', '2', 'pending', 'in_progress', 'start', NULL, NULL)",
    )
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        for statement in statements:
            connection.execute(statement)
    connection.close()


# --- what the store refuses to hold, and rows it did not write -------------------------------


def _by_hand(url: str, *statements: str) -> None:
    """Edit a store as someone with the database would: SQL, outside the board's code."""
    if url.startswith("sqlite"):
        with sqlite3.connect(parse_url(url).dialect.path) as connection:
            for statement in statements:
                connection.execute(statement)
        connection.close()
        return
    import psycopg

    with psycopg.connect(parse_url(url).dialect.url, autocommit=True) as server:
        for statement in statements:
            server.execute(statement)


def test_a_claim_with_nothing_to_claim_names_a_malformed_status(board_url: str) -> None:
    # The new-user report: one item, its status edited by hand; claim said "all done" (or
    # "1 pending item(s) wait on blockers" with a second item waiting on it).
    with open_store(board_url) as store:
        store.add("Write the API")
    _by_hand(board_url, "UPDATE board_items SET status = 'bogus' WHERE id = '1'")
    with open_store(board_url) as store:
        with pytest.raises(StoreError, match=r"item #1: .*malformed \(its status is bogus\)"):
            store.claim("b")
        assert [entry.trigger for entry in store.log()] == ["add"]


@pytest.mark.parametrize("lease", ["'NaN'", "'Infinity'", "'-Infinity'"])
def test_a_lease_that_is_no_time_is_named_by_every_change(board_url: str, lease: str) -> None:
    # PostgreSQL's DOUBLE PRECISION holds NaN and infinities (which never compare as expired);
    # SQLite keeps the word as text. Either way the claim would be held for ever.
    with open_store(board_url) as store:
        store.add("Write the API")
        store.add("Write the UI")
        store.claim("alice", item_id="1")
    _by_hand(board_url, f"UPDATE board_items SET lease_until = {lease} WHERE id = '1'")
    with open_store(board_url) as store:
        before = [entry.seq for entry in store.log()]
        changes: list[Callable[[], object]] = [
            lambda: store.claim("bob"),
            lambda: store.add("More"),
            lambda: store.complete("2", agent="bob"),
            store.items,
        ]
        for change in changes:
            with pytest.raises(StoreError, match=r"item #1: .*malformed \(its lease is "):
                change()
        assert [entry.seq for entry in store.log()] == before


def test_a_duration_that_is_no_number_is_named(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("Ship", check="make ship")
        store.claim("alice")
        store.record_check("1", agent="alice", command="make ship", exit_code=0, duration_s=1.5)
    _by_hand(board_url, "UPDATE board_log SET duration_s = 'NaN' WHERE trigger = 'check'")
    with open_store(board_url) as store:
        with pytest.raises(StoreError, match=r"log line seq 3: .*malformed \(its duration is"):
            list(store.log())
        # The completion reads the check runs since the start, and names the one it cannot
        # read rather than calling it missing.
        with pytest.raises(StoreError, match="log line seq 3"):
            store.complete("1", agent="alice")


def test_a_pending_item_sharing_a_position_is_never_skipped_unsaid(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("Blocker")
        for number in range(8):
            store.add(f"Waits {number}", blocked_by=["1"])  # positions 2 to 9
        store.add("Ready")  # #10
        store.claim("alice", item_id="1")
    _by_hand(board_url, "UPDATE board_items SET position = 9 WHERE id = '10'")
    with open_store(board_url) as store:
        try:
            claimed = store.claim("bob")
        except StoreError as error:  # the pages passed #10 by: named, never "nothing claimable"
            assert "its position 9 is #" in str(error)
        else:
            assert claimed.id == "10"


def test_the_store_caps_leases_and_text_for_every_caller(board_url: str) -> None:
    with open_store(board_url) as store:
        store.add("Write the API")
        for lease in (1e308, 86_401.0, math.inf):
            with pytest.raises(BoardError, match=r"at most 86400 \(24 h\)"):
                store.claim("alice", lease=lease)
            with pytest.raises(BoardError, match=r"at most 86400 \(24 h\)"):
                store.renew("alice", lease=lease)
        assert store.claim("alice", lease=86_400).lease_until is not None
        attempts: list[Callable[[], object]] = [
            lambda: store.add("x" * 2001),
            lambda: store.add("x", check="y" * 2001),
            lambda: store.edit("1", agent="person:ann", text="x" * 2001),
        ]
        for attempt in attempts:
            with pytest.raises(BoardError, match="characters long; at most 2,000"):
                attempt()
        assert store.add("x" * 2000).text == "x" * 2000


def test_a_longer_text_an_older_store_took_is_read_and_kept_until_changed(
    board_url: str,
) -> None:
    with open_store(board_url) as store:
        store.add("Write the API", check="make api")
        store.add("Write the UI")
    long = "x" * 3000
    _by_hand(
        board_url,
        f"UPDATE board_items SET text = '{long}' WHERE id = '1'",
        f"UPDATE board_log SET text = '{long}' WHERE seq = 1",
        f"UPDATE board_checks SET command = '{long}' WHERE item = '1'",
        f"UPDATE board_log SET check_command = '{long}' WHERE seq = 1",
    )
    with open_store(board_url) as store:
        assert store.items()[0].text == long
        edited = store.edit("1", agent="person:ann", blocked_by=["2"])
        assert (edited.text, edited.blocked_by) == (long, ("2",))
        with pytest.raises(BoardError, match="at most 2,000"):
            store.edit("1", agent="person:ann", text=long + "y")
        contents = store.contents()
    assert check_log(contents.log, contents.items, checks=contents.checks) is None
