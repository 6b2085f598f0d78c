"""The shared board's store, against SQLite and a throwaway PostgreSQL cluster alike."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from orchestrator.board.check import check_log
from orchestrator.board.store import BoardError, LogEntry, NothingClaimable, SqlBoardStore
from orchestrator.board.stores import BoardUrlError, open_store
from orchestrator.plan import Status
from tests.budget import deep, examples
from tests.in_process import run_cli
from tests.postgres import NoPostgres, fresh_database, start_cluster

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[str | None]:
    try:
        with start_cluster() as url:
            yield url
    except NoPostgres as why:
        yield f"skip:{why}"


# Every PostgreSQL test is in the e2e layer and goes to one xdist worker (`--dist loadgroup`), so
# one throwaway cluster serves them all.
_POSTGRESQL = pytest.param("postgresql", marks=[pytest.mark.e2e, pytest.mark.xdist_group("pg")])


@pytest.fixture(params=["sqlite", _POSTGRESQL])
def board_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'board.db'}"
    cluster = request.getfixturevalue("postgres_cluster")
    if cluster.startswith("skip:"):
        pytest.skip(cluster.removeprefix("skip:"))
    return fresh_database(cluster)


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

    agents = st.sampled_from(["alice", "bob", "carol"])

    @initialize()
    def open(self) -> None:
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="board-hyp-"))
        self.clock = Clock()
        self.store: SqlBoardStore = open_store(str(self.folder / "b.db"), clock=self.clock)

    def _attempt(self, action: Callable[[], object]) -> None:
        before = self.store.snapshot()
        try:
            action()
        except BoardError:
            assert self.store.snapshot() == before

    @rule(text=st.text(min_size=1, max_size=5), blockers=st.lists(st.integers(1, 6), max_size=2))
    def add(self, text: str, blockers: list[int]) -> None:
        self._attempt(lambda: self.store.add(text, blocked_by=[str(b) for b in blockers]))

    @rule(agent=agents, item=st.none() | st.integers(1, 6))
    def claim(self, agent: str, item: int | None) -> None:
        self._attempt(
            lambda: self.store.claim(agent, lease=10, item_id=None if item is None else str(item))
        )

    @rule(agent=agents, item=st.integers(1, 6))
    def complete(self, agent: str, item: int) -> None:
        self._attempt(lambda: self.store.complete(str(item), agent=agent))

    @rule(agent=agents, item=st.integers(1, 6))
    def release(self, agent: str, item: int) -> None:
        self._attempt(lambda: self.store.release(str(item), agent=agent))

    @rule(seconds=st.sampled_from([1.0, 11.0]))
    def wait(self, seconds: float) -> None:
        self.clock.now += seconds

    @invariant()
    def the_log_checks(self) -> None:
        if hasattr(self, "store"):
            items, entries = self.store.snapshot()
            assert check_log(entries, items) is None
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


def test_the_board_command_line(board_url: str) -> None:
    def board(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(["board", *args])

    assert board("add", board_url, "Write tests").stdout.strip() == "1"
    assert board("add", board_url, "Ship", "--blocked-by", "1").stdout.strip() == "2"
    wrong = board("add", board_url, "x", "--blocked-by", "9")
    assert (wrong.returncode, wrong.stderr.count("\n")) == (2, 1)
    assert "Traceback" not in wrong.stderr
    claimed = board("claim", board_url, "--agent", "alice", "--json")
    assert json.loads(claimed.stdout)["owner"] == "alice"
    nothing = board("claim", board_url, "--agent", "bob", "--json")
    assert nothing.returncode == 4
    assert json.loads(nothing.stdout) == {"claimed": None, "reason": "waiting on blockers"}
    refused = board("complete", board_url, "1", "--agent", "bob")
    assert refused.returncode == 2 and "held by alice" in refused.stderr
    assert board("complete", board_url, "1", "--agent", "alice").returncode == 0
    shown = json.loads(board("show", board_url, "--json").stdout)
    assert [(i["id"], i["status"], i["owner"]) for i in shown["items"]] == [
        ("1", "completed", "alice"),
        ("2", "pending", None),
    ]
    lines = [json.loads(line) for line in board("log", board_url).stdout.splitlines()]
    assert [line["trigger"] for line in lines] == ["add", "add", "start", "complete"]
    checked = board("check", board_url, "--json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["ok"] is True
    missing = board("show", "nowhere.json")
    assert missing.returncode == 2 and "not a board store" in missing.stderr
