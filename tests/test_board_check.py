"""``board check`` sees everything in the store: tampered stores, read through the real CLI.

Each case edits a store by hand as someone with the file would (SQL), and checks that
``board check`` fails (exit 1, one line) naming the item, where before it passed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import attrs
import pytest

from orchestrator.board.check import check_log
from orchestrator.board.inputs import person
from orchestrator.board.store import BoardItem, LogEntry
from orchestrator.board.stores import open_store, parse_url, sqlite_url
from orchestrator.plan import Status
from tests.test_board_cli import board


def _sql(url: str, *statements: str) -> None:
    with sqlite3.connect(parse_url(url).dialect.path) as connection:
        for statement in statements:
            connection.execute(statement)
    connection.close()


def _failed(url: str) -> str:
    done = board("check", url)
    assert done.code == 1, done
    assert done.err.count("\n") == 1 and "Traceback" not in done.err
    assert done.err.startswith("orchestrator: board check failed at ")
    return done.err


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A board worked the honest way: #1 done, #2 waits on it, #3 done after its check passed,
    #4 completed by hand with --skip-check, #5 pending with a person's check."""
    address = sqlite_url(tmp_path / "team.db")
    for args in (
        ("Write the API",),
        ("Write the UI", "--blocked-by", "1"),
        ("Test it", "--check", "make test"),
        ("Lint it", "--check", "make lint"),
        ("Ship it", "--check", "make ship"),
    ):
        assert board("add", address, *args).code == 0
    with open_store(address) as store:
        store.claim("alice", item_id="1")
        store.complete("1", agent="alice")
        store.claim("alice", item_id="3")
        store.record_check("3", agent="alice", command="make test", exit_code=1, duration_s=2.0)
        store.record_check("3", agent="alice", command="make test", exit_code=0, duration_s=2.5)
        store.complete("3", agent="alice")
        store.claim("bob", item_id="4")
    assert board("complete", address, "4", "--agent", "bob", "--skip-check").code == 0
    done = board("check", address)
    assert (done.code, done.err) == (0, ""), done
    return address


def test_a_changed_text_is_named(url: str) -> None:
    _sql(url, "UPDATE board_items SET text = 'Delete the API' WHERE id = '1'")
    assert "#1's text in the store is not the text its log gave it" in _failed(url)


def test_a_removed_blocker_is_named_and_the_blocked_start_after_it_too(url: str) -> None:
    with open_store(url) as store:  # #2's blocker is done: put a pending one in its way
        store.edit("2", agent="person:ann", blocked_by=["5"])
    _sql(url, "UPDATE board_items SET blocked_by = '[]' WHERE id = '2'")
    assert "#2 waits on nothing in the store; the log says #5" in _failed(url)
    # The store now lets an agent start #2 although it is really blocked: the log shows it.
    claimed = board("claim", url, "2", "--agent", "carol")
    assert claimed.code == 0
    assert "#2 started while its blocker #5 was not completed" in _failed(url)


def test_a_deleted_check_is_named(url: str) -> None:
    _sql(url, "DELETE FROM board_checks WHERE item = '5'")
    assert "#5's check in the store is none; the log says `make ship`" in _failed(url)


def test_a_changed_check_is_named(url: str) -> None:
    _sql(url, "UPDATE board_checks SET command = 'true' WHERE item = '5'")
    assert "#5's check in the store is `true`; the log says `make ship`" in _failed(url)


def test_a_completion_without_a_passing_check_is_named(url: str) -> None:
    _sql(url, "UPDATE board_log SET exit_code = 1 WHERE trigger = 'check' AND exit_code = 0")
    assert "#3 completed without a passing run of its check (make test)" in _failed(url)


def test_a_check_run_before_the_last_start_does_not_count(url: str) -> None:
    with open_store(url) as store:
        store.claim("dave", item_id="5")
        store.record_check("5", agent="dave", command="make ship", exit_code=0, duration_s=1)
        store.release("5", agent="dave")
        store.claim("erin", item_id="5")
        # The store refuses a completion the log cannot back…
        refused = board("complete", url, "5", "--agent", "erin")
        assert refused.code == 2 and "no passing run" in refused.err
    # …and a completion written into the store by hand is named by board check.
    _sql(
        url,
        "UPDATE board_items SET status = 'completed' WHERE id = '5'",
        # Written at the last line's time: a line earlier than the one before is named too.
        "INSERT INTO board_log (seq, ts, agent, item, src, dst, trigger) SELECT MAX(seq) + 1, "
        "MAX(ts), 'erin', '5', 'in_progress', 'completed', 'complete' FROM board_log",
    )
    assert "#5 completed without a passing run" in _failed(url)


def test_a_skip_not_logged_as_such_is_named(url: str) -> None:
    _sql(url, "UPDATE board_log SET flag = NULL WHERE flag = 'skip_check'")
    assert "#4 completed without a passing run of its check (make lint)" in _failed(url)


def test_an_agents_cancel_of_a_persons_checked_item_is_named(url: str) -> None:
    done = board("cancel", url, "5")
    assert done.code == 0
    assert board("check", url).code == 0  # a person's cancel is theirs to make
    _sql(url, "UPDATE board_log SET agent = 'mallory' WHERE trigger = 'cancel'")
    assert "mallory cancelled #5, which carries a check a person set" in _failed(url)


def test_an_edit_is_part_of_the_log(url: str) -> None:
    assert board("edit", url, "5", "--text", "Ship it today", "--check", "").code == 0
    assert board("check", url).code == 0
    edit = json.loads(board("log", url).out.splitlines()[-1])
    assert (edit["trigger"], edit["text"], edit["check"], edit["src"], edit["dst"]) == (
        "edit",
        "Ship it today",
        None,
        "pending",
        "pending",
    )
    # Edited in the store alone, the item no longer matches its log.
    _sql(url, "UPDATE board_items SET text = 'Ship it now' WHERE id = '5'")
    assert "#5's text" in _failed(url)


def test_an_old_log_without_checks_reads_sensibly() -> None:
    # Schema 1 logs said nothing of checks: an add line with no check holds no check rule,
    # until an edit names the check.
    old_add = LogEntry(1, "t", None, "1", None, "pending", "add", "x", ())
    start = LogEntry(2, "t", "a", "1", "pending", "in_progress", "start")
    complete = LogEntry(3, "t", "a", "1", "in_progress", "completed", "complete")
    done = BoardItem("1", "x", Status.COMPLETED, "a")
    assert check_log([old_add, start, complete], [done], checks={"1": "make test"}) is None
    edit = LogEntry(2, "t", "person:p", "1", "pending", "pending", "edit", "x", (), "make test")
    later = [attrs.evolve(entry, seq=entry.seq + 1) for entry in (start, complete)]
    violation = check_log([old_add, edit, *later], [done], checks={"1": "make test"})
    assert violation is not None and "#1 completed without a passing run" in str(violation)


def test_a_checks_setter_changed_by_hand_is_named(url: str) -> None:
    # Who set a check decides who may cancel the item: an agent may cancel its own check's
    # item, never a person's. The log records who set each check.
    _sql(url, "UPDATE board_checks SET set_by = 'mallory' WHERE item = '5'")
    assert f"#5's check was set by mallory in the store; the log says {person()}" in _failed(url)


def test_a_log_line_that_names_no_agent_is_named(url: str) -> None:
    _sql(url, "UPDATE board_log SET agent = NULL WHERE seq = 6")  # alice's start of #1
    assert "log line seq 6: #1: a start line that names no agent" in _failed(url)
    _sql(url, "UPDATE board_log SET agent = 'alice' WHERE seq = 6")
    cancelled = board("cancel", url, "5")
    assert cancelled.code == 0
    _sql(url, "UPDATE board_log SET agent = NULL WHERE trigger = 'cancel'")
    assert "#5: a cancel line that names no agent" in _failed(url)


def test_a_time_that_is_not_one_is_named(url: str) -> None:
    _sql(url, "UPDATE board_log SET ts = 'garbage' WHERE seq = 7")
    done = board("check", url)
    assert done.one_line_error, done  # a row no version writes: malformed, as in every reader
    assert "log line seq 7: the store's row is malformed (its ts is garbage, not a time)" in (
        done.err
    )


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        ("UPDATE board_items SET position = -5 WHERE id = '2'", "#2's position in the store is -5"),
        ("UPDATE board_items SET position = 1 WHERE id = '2'", "#2's position in the store (1) is"),
        (
            "UPDATE board_items SET position = 9 WHERE id = '1'",
            "#2's position in the store (2) is not after #1's (9), which the log added before it",
        ),
    ],
)
def test_a_position_out_of_the_logs_order_is_named(url: str, statement: str, fragment: str) -> None:
    # A position decides which item the next claim takes: it must follow the order the log
    # added the items in.
    _sql(url, statement)
    assert fragment in _failed(url)


def test_a_check_for_an_item_not_on_the_board_is_named(url: str) -> None:
    _sql(url, "INSERT INTO board_checks (item, command, set_by) VALUES ('9', 'true', NULL)")
    assert "the store holds a check for #9, which is not on the board" in _failed(url)


def test_an_owner_rewritten_in_the_log_alone_is_named(url: str) -> None:
    # #1 was started and completed by alice: the store keeps her on record as its owner.
    _sql(url, "UPDATE board_log SET agent = 'mallory' WHERE item = '1' AND trigger != 'add'")
    assert "the final state: #1's owner in the store is alice; the log says mallory" in (
        _failed(url)
    )


@pytest.mark.parametrize(
    ("statement", "fragment"),
    [
        (
            "UPDATE board_items SET owner = 'mallory' WHERE id = '1'",
            "store is mallory; the log says alice",
        ),
        (
            "UPDATE board_items SET owner = NULL WHERE id = '1'",
            "store is no one; the log says alice",
        ),
        (
            "UPDATE board_items SET owner = 'alice' WHERE id = '5'",
            "#5's owner in the store is alice",
        ),
    ],
)
def test_an_owner_rewritten_in_the_store_alone_is_named(
    url: str, statement: str, fragment: str
) -> None:
    _sql(url, statement)
    assert fragment in _failed(url)


def test_every_edge_leaves_the_owner_the_store_does(url: str) -> None:
    # A forced release, an expiry, a person's cancel and an agent's pause leave no owner; a
    # completion keeps the completer; board check agrees with the store on each.
    clock = [2_000_000_000.0]
    with open_store(url, clock=lambda: clock[0]) as store:
        store.claim("carol", item_id="2")
        store.release("2", agent="person:ann", force=True)
        store.claim("carol", item_id="2", lease=10)
        clock[0] += 11
        assert store.items()[1].owner is None  # expired
        store.claim("dave", item_id="2")
        store.release("2", agent="dave")
        store.claim("dave", item_id="2")
        store.cancel("2", agent="person:ann")
        owners = {item.id: item.owner for item in store.items()}
    assert owners == {"1": "alice", "2": None, "3": "alice", "4": "bob", "5": None}
    done = board("check", url)
    assert (done.code, done.err) == (0, ""), done
    _sql(url, "UPDATE board_items SET owner = 'dave' WHERE id = '2'")
    assert "#2's owner in the store is dave; the log says no one" in _failed(url)


def test_a_deleted_item_and_its_log_lines_are_named_by_the_counters(url: str) -> None:
    with open_store(url) as store:
        store.add("Document it")  # #6, and the log's last line
        store.add("Tag it", item_id="v1")  # an id given: next_id does not move
    assert board("check", url).code == 0
    _sql(
        url,
        "DELETE FROM board_items WHERE id = 'v1'",
        "DELETE FROM board_log WHERE seq = (SELECT MAX(seq) FROM board_log)",
    )
    assert (
        "the store's next_position counter is 8, but the last position the log's items took "
        "is #6's (6)" in _failed(url)
    )
    _sql(
        url,
        "DELETE FROM board_items WHERE id = '6'",
        "DELETE FROM board_log WHERE seq = (SELECT MAX(seq) FROM board_log)",
        "UPDATE board_meta SET value = 7 WHERE key = 'next_position'",
    )
    assert "the store's next_id counter is 7, but #6, an id it gave out, is not on the board" in (
        _failed(url)
    )


def test_ids_a_caller_chose_do_not_trouble_the_id_counter(tmp_path: Path) -> None:
    # An id given by hand may be a number next_id has not reached: that is not tampering.
    address = sqlite_url(tmp_path / "ids.db")
    with open_store(address) as store:
        store.add("chosen", item_id="3")
        store.add("first")  # #1
        store.add("second")  # #2
        store.add("fourth")  # #4: 3 was taken
        assert [item.id for item in store.items()] == ["3", "1", "2", "4"]
    done = board("check", address)
    assert (done.code, done.err) == (0, ""), done
    _sql(address, "UPDATE board_meta SET value = 9 WHERE key = 'next_id'")
    assert "next_id counter is 9, but #5, an id it gave out, is not on the board" in (
        _failed(address)
    )


def test_a_log_line_missing_between_others_is_named(url: str) -> None:
    _sql(url, "DELETE FROM board_log WHERE seq = 7")
    assert "log line seq 8: the log skips from seq 6 to 8" in _failed(url)


def test_log_lines_swapped_are_named_by_their_times(url: str) -> None:
    # Lines of one transaction share a time: the honest log passed above with several such.
    with open_store(url) as store:
        store.claim("carol", item_id="2")
        store.release("2", agent="carol")
    # A second later: within CLOCK_SKEW, but a SQLite board's writers share one clock.
    with open_store(url, clock=lambda: time.time() + 1) as store:
        store.add("Later")
        last = max(entry.seq for entry in store.log())
    assert board("check", url).code == 0
    _sql(
        url,
        f"UPDATE board_log SET seq = -1 WHERE seq = {last - 1}",
        f"UPDATE board_log SET seq = {last - 1} WHERE seq = {last}",
        f"UPDATE board_log SET seq = {last} WHERE seq = -1",
    )
    assert f"log line seq {last}: written at " in _failed(url)
    assert f"before line seq {last - 1} (" in _failed(url)


def test_a_time_within_the_clock_skew_passes_only_where_clocks_may_differ() -> None:
    def line(seq: int, ts: str) -> LogEntry:
        return LogEntry(seq, ts, None, str(seq), None, "pending", "add", "x", ())

    entries = [line(1, "2026-01-01T10:00:03+00:00"), line(2, "2026-01-01T10:00:00+00:00")]
    final = [BoardItem("1", "x", Status.PENDING), BoardItem("2", "x", Status.PENDING)]
    assert check_log(entries, final, clock_skew=5.0) is None
    violation = check_log(entries, final, clock_skew=0.0)
    assert violation is not None and violation.seq == 2
    later = [*entries, line(3, "2026-01-01T09:59:57+00:00")]  # 6 s before seq 1: too far
    violation = check_log(later, [*final, BoardItem("3", "x", Status.PENDING)], clock_skew=5.0)
    assert violation is not None and violation.seq == 3
    assert "before line seq 1 (2026-01-01T10:00:03+00:00)" in violation.message
