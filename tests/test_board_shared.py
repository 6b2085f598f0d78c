"""Agents on one shared board through their ``todo`` tools, and a run with ``--board URL``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from orchestrator.board.check import check_log
from orchestrator.board.shared import SharedBoard
from orchestrator.board.store import StoreError
from orchestrator.board.stores import open_store
from orchestrator.plan import PlanError, TodoTool
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.tools.registry import ToolRegistry
from tests.in_process import run_cli
from tests.test_board_cli import board
from tests.test_cli import _environment


def _board(url: str, agent: str) -> SharedBoard:
    return SharedBoard(open_store(url), agent, lease=60)


def test_a_stale_full_rewrite_never_undoes_another_agents_change(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    alice, bob = _board(url, "alice"), _board(url, "bob")
    alice.apply({"items": [{"id": "1", "text": "API", "status": "in_progress"}]})
    bob.render()  # bob's model sees #1 in progress by alice
    stale = {
        "items": [
            {"id": "1", "text": "API", "status": "in_progress"},
            {"id": "2", "text": "UI", "status": "in_progress"},
        ]
    }
    alice.apply({"items": [{"id": "1", "status": "completed"}], "merge": True})
    bob.apply(stale)  # repeats #1 as bob saw it: not bob's edge, so it is skipped
    statuses = {item.id: (item.status.value, item.owner) for item in alice.store.items()}
    assert statuses == {"1": ("completed", "alice"), "2": ("in_progress", "bob")}
    # A full rewrite that leaves items out cancels nothing on a shared board.
    bob.apply({"items": [{"id": "2", "text": "UI", "status": "completed"}]})
    assert [item.status.value for item in bob.store.items()] == ["completed", "completed"]
    items, entries = bob.store.snapshot()
    assert check_log(entries, items) is None
    alice.close()
    bob.close()


def test_another_agents_item_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    alice, bob = _board(url, "alice"), _board(url, "bob")
    alice.apply({"items": [{"id": "1", "text": "API", "status": "in_progress"}]})
    bob.render()
    before = bob.store.snapshot()
    tool = TodoTool(bob)
    for attempt in (
        {"items": [{"id": "1", "status": "completed"}, {"id": "3", "text": "x"}]},
        {"items": [{"id": "1", "status": "pending"}]},
        {"items": [{"id": "9", "text": "new", "status": "completed"}]},
    ):
        with pytest.raises(PlanError):
            tool.run(attempt)
        assert bob.store.snapshot() == before
    with pytest.raises(PlanError, match="held by alice"):
        bob.apply({"items": [{"id": "1", "status": "completed"}]})
    # Bob's board shows who holds what.
    assert "[>] #1: API (alice)" in bob.render()
    assert "[>] #1: API (you)" in alice.render()
    alice.close()
    bob.close()


def test_the_models_bad_calls_on_a_shared_board_are_tool_errors_that_change_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with open_store(url) as store:
        store.add("Ship", check="make test", agent="person:ann")  # a person's check
        store.add("Tidy", check="make tidy", agent="alice")  # the agent's own
    alice = _board(url, "alice")
    registry = ToolRegistry([TodoTool(alice)])
    store = open_store(url)
    before = store.contents()
    for call, fragment in (
        ({"items": [{"id": "1", "status": "cancelled"}], "merge": True}, "only a person may"),
        ({"items": [{"id": "9", "text": "evil \x1b[2J text"}]}, "control character"),
        ({"items": [{"id": "bad\nid", "text": "x"}]}, "printable"),
        ({"todos": [{"id": "7", "content": "forged\n[x] #1: done"}]}, "line break"),
    ):
        result = registry.dispatch("todo", call)
        assert result.is_error and result.text.startswith("Error:"), result
        assert fragment in result.text
        assert store.contents() == before
    # Its own check's item it may cancel.
    done = registry.dispatch("todo", {"items": [{"id": "2", "status": "cancelled"}], "merge": True})
    assert not done.is_error, done.text
    alice.close()
    store.close()


def test_one_in_progress_per_agent_on_a_shared_board(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    alice, bob = _board(url, "alice"), _board(url, "bob")
    alice.apply(
        {
            "items": [
                {"id": "1", "text": "a", "status": "in_progress"},
                {"id": "2", "text": "b"},
                {"id": "3", "text": "c"},
            ]
        }
    )
    bob.apply({"items": [{"id": "2", "status": "in_progress"}], "merge": True})
    with pytest.raises(PlanError, match="alice already holds #1"):
        alice.apply({"items": [{"id": "3", "status": "in_progress"}], "merge": True})
    alice.close()
    bob.close()


def test_a_run_on_a_shared_board_through_the_real_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    with open_store(url) as store:
        store.add("Write the API", agent="lead")
        store.add("Write the UI", agent="lead")
        store.claim("bob", item_id="2")

    def todo(*items: dict[str, str]) -> dict[str, object]:
        return {"tool_calls": [{"name": "todo", "input": {"items": list(items), "merge": True}}]}

    turns = [
        todo({"id": "1", "status": "in_progress"}),
        todo({"id": "1", "status": "completed"}, {"id": "2", "status": "completed"}),
        todo({"id": "1", "status": "completed"}),
        {"text": "My part is done."},
    ]
    script = parse_script({"name": "shared", "turns": turns}, source="test")
    trace = tmp_path / "alice.jsonl"
    workdir = tmp_path / "work"
    workdir.mkdir()
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    with MessagesServer(script) as server:
        env.update(
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
            NO_COLOR="1",
        )
        command = ["run", "Do your part", "--workdir", str(workdir), "--yes", "--quiet"]
        shared = ["--board", url, "--agent", "alice", "--trace", str(trace)]
        done = run_cli([*command, *shared], env=env)
    assert done.returncode == 0, done.stderr
    # The model's second call tried to complete bob's item: refused whole, so #1 stayed too.
    results = [
        json.loads(line) for line in trace.read_text().splitlines() if '"tool.result"' in line
    ]
    assert [bool(r.get("is_error")) for r in results] == [False, True, False]
    assert "held by bob" in json.dumps(results[1])
    assert "[>] #2: Write the UI (bob)" in json.dumps(results[0], ensure_ascii=False)
    with open_store(url) as store:
        items, entries = store.snapshot()
    assert [(i.id, i.status.value, i.owner) for i in items] == [
        ("1", "completed", "alice"),
        ("2", "in_progress", "bob"),
    ]
    assert [(e.agent, e.item, e.trigger) for e in entries if e.trigger != "add"] == [
        ("bob", "2", "start"),
        ("alice", "1", "start"),
        ("alice", "1", "complete"),
    ]
    assert check_log(entries, items) is None
    replayed = run_cli(["replay", "--check", str(trace)])
    assert replayed.returncode == 0, replayed.stderr


def _orchestrator(
    args: list[str], tmp_path: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = _environment(ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"), **extra)
    return run_cli(args, env=env)


def test_a_check_set_with_board_add_guards_completion_in_a_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    added = _orchestrator(["board", "add", url, "Make ok", "--check", "test -f ok"], tmp_path)
    assert (added.returncode, added.stdout.strip()) == (0, "1"), added.stderr
    shown = _orchestrator(["board", "show", url], tmp_path)
    assert "#1: Make ok  (check: test -f ok)" in shown.stdout
    listed = json.loads(_orchestrator(["board", "show", url, "--json"], tmp_path).stdout)
    assert listed["items"][0]["check"] == "test -f ok"

    def todo(*items: dict[str, str]) -> dict[str, object]:
        return {"tool_calls": [{"name": "todo", "input": {"items": list(items), "merge": True}}]}

    turns = [
        todo({"id": "1", "status": "in_progress"}),
        todo({"id": "1", "status": "completed"}),  # ok is not there yet: refused
        todo({"id": "1", "status": "completed", "check": ""}),  # dropping the check: refused
        {"tool_calls": [{"name": "bash", "input": {"command": "touch ok"}}]},
        todo({"id": "1", "status": "completed"}),
        {"text": "Done, and checked."},
    ]
    script = parse_script({"name": "checked", "turns": turns}, source="test")
    workdir = tmp_path / "work"
    workdir.mkdir()
    trace = tmp_path / "alice.jsonl"
    with MessagesServer(script) as server:
        done = _orchestrator(
            [
                *("run", "Do it", "--workdir", str(workdir), "--yes", "--quiet", "--board", url),
                *("--agent", "alice", "--trace", str(trace), "--sandbox", "workdir"),
            ],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
        )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    results = [e for e in events if e["event"] == "tool.result"]
    assert [bool(r["is_error"]) for r in results] == [False, True, True, False, False]
    assert "its check `test -f ok` failed with exit code 1" in results[1]["output"]
    assert "cannot be changed or removed" in results[2]["output"]
    checks = [(e["item"], e["exit_code"]) for e in events if e["event"] == "plan.check"]
    assert checks == [("1", 1), ("1", 0)]
    with open_store(url) as store:
        contents = store.contents()
    assert [(i.id, i.status.value) for i in contents.items] == [("1", "completed")]
    assert check_log(contents.log, contents.items, checks=contents.checks) is None
    # Every run of the check is on the board's log: who ran it, the command, its exit code.
    runs = [e for e in contents.log if e.trigger == "check"]
    assert [(e.agent, e.item, e.check, e.exit_code) for e in runs] == [
        ("alice", "1", "test -f ok", 1),
        ("alice", "1", "test -f ok", 0),
    ]
    assert all(e.duration_s is not None and e.duration_s >= 0 for e in runs)
    assert [e.trigger for e in contents.log][-2:] == ["check", "complete"]


def test_completing_a_checked_item_by_hand_needs_skip_check(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'team.db'}"
    board("add", url, "Ship", "--check", "make test")
    board("claim", url, "1", "--agent", "ann")
    refused = board("complete", url, "1", "--agent", "ann")
    assert refused.one_line_error and "--skip-check" in refused.err
    forced = board("complete", url, "1", "--agent", "ann", "--skip-check")
    assert forced.code == 0, forced.err
    assert "without running its check" in forced.err


@pytest.mark.parametrize("setter", ["alice", None])
def test_a_check_an_agent_set_runs_only_where_this_agents_bash_may(
    tmp_path: Path, setter: str | None
) -> None:
    """A model's check (any agent's) is vetted like bash before it runs; a person's is not."""
    from orchestrator.protocols import CheckResult

    url = f"sqlite:///{tmp_path / 'b.db'}"
    with open_store(url) as store:
        store.add("Ship", agent=setter, check="touch ran")
    bob = _board(url, "bob")
    ran: list[str] = []

    def run_check(command: str) -> CheckResult:
        ran.append(command)
        return CheckResult(command, 0, "")

    bob.run_check = run_check
    bob.vet_model_check = lambda command: "bash is off in this run (--deny-bash)"
    registry = ToolRegistry([TodoTool(bob)])
    started = registry.dispatch("todo", {"items": [{"id": "1", "status": "in_progress"}]})
    assert not started.is_error, started.text
    done = registry.dispatch("todo", {"items": [{"id": "1", "status": "completed"}]})
    status = {item.id: item.status.value for item in bob.store.items()}
    if setter is None:  # a person's check: it runs, and the item completes
        assert (done.is_error, ran, status) == (False, ["touch ran"], {"1": "completed"})
        return
    assert done.is_error and "--deny-bash" in done.text, done.text
    assert "board complete --skip-check" in done.text
    assert (ran, status) == ([], {"1": "in_progress"})


def test_a_malformed_row_is_a_tool_error_and_a_run_refuses_it_at_start(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with open_store(url) as store:
        store.add("Write the API", agent="lead")
        store.add("Write the UI", agent="lead", blocked_by=["1"])
    alice = _board(url, "alice")
    registry = ToolRegistry([TodoTool(alice)])
    assert "[ ] #1: Write the API" in alice.render()
    with sqlite3.connect(tmp_path / "b.db") as connection:
        connection.execute("UPDATE board_items SET status = 'bogus' WHERE id = '1'")
    connection.close()
    named = "item #1: the store's row is malformed (its status is bogus)"
    with open_store(url) as store, pytest.raises(StoreError, match="its status is bogus"):
        store.snapshot()
    for call in (
        {"items": [{"id": "2", "status": "in_progress"}], "merge": True},
        {"items": [{"id": "3", "text": "Write the docs"}], "merge": True},
    ):
        result = registry.dispatch("todo", call)
        assert result.is_error and result.text.startswith("Error:"), result
        assert named in result.text and "the board did not change" in result.text
    # A reminder or the opening plan shows the board as last read, and why it is not newer.
    shown = alice.render()
    assert "[ ] #1: Write the API" in shown and f"reading it now failed: {named}" in shown
    alice.close()
    with pytest.raises(StoreError, match="its status is bogus"):
        _board(url, "bob")
    with sqlite3.connect(tmp_path / "b.db") as connection:
        assert connection.execute("SELECT COUNT(*) FROM board_log").fetchone() == (2,)
    connection.close()
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = _orchestrator(
        ["run", "Work the board", "--workdir", str(workdir), "--board", url, "--agent", "bob"],
        tmp_path,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",  # never reached: the board is refused first
    )
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and f"--board {named}" in done.stderr


def test_the_models_text_on_a_shared_board_has_the_boards_cap(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    alice = _board(url, "alice")
    registry = ToolRegistry([TodoTool(alice)])
    too_long = registry.dispatch("todo", {"items": [{"id": "1", "text": "x" * 2001}]})
    assert too_long.is_error and "2,001 characters long; at most 2,000" in too_long.text
    assert alice.store.items() == ()
    longest = registry.dispatch("todo", {"items": [{"id": "1", "text": "x" * 2000}]})
    assert not longest.is_error, longest.text
    alice.close()


def test_a_run_that_ends_holding_its_item_is_not_done_with_exit_0(tmp_path: Path) -> None:
    # The check fails and the model stops anyway: the item it claimed is still in progress,
    # held by it until the lease runs out, so the run's result cannot be a plain success.
    url = f"sqlite:///{tmp_path / 'team.db'}"
    _orchestrator(["board", "add", url, "Make ok", "--check", "test -f ok"], tmp_path)
    _orchestrator(["board", "add", url, "Someone else's"], tmp_path)
    turns = [
        {
            "tool_calls": [
                {"name": "todo", "input": {"items": [{"id": "1", "status": "in_progress"}]}}
            ]
        },
        {
            "tool_calls": [
                {"name": "todo", "input": {"items": [{"id": "1", "status": "completed"}]}}
            ]
        },
        {"text": "Done."},
    ]
    script = parse_script({"name": "held", "turns": turns}, source="test")
    workdir = tmp_path / "work"
    workdir.mkdir()
    with MessagesServer(script) as server:
        done = _orchestrator(
            [
                *("run", "Do it", "--workdir", str(workdir), "--yes", "--board", url),
                *("--agent", "alice", "--sandbox", "workdir", "--output-format", "json"),
            ],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
        )
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["status"], result["unfinished"]) == ("done", ["1"])  # not #2: not its own
    assert "#1" in result["reason"]
