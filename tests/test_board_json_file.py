"""The JSON store (``orchestrator.board.json_file``): ``--board FILE``, its refusals, the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.board.json_file import (
    FORMAT,
    VERSION,
    BoardFileError,
    load_items,
    open_board,
    save_items,
)
from orchestrator.cli import main
from orchestrator.config import ConfigError, load_config
from orchestrator.plan import EdgePolicy, PlanBoard, PlanItem, Status
from orchestrator.replay import Replay
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.trace_file import read_trace

PLAN = {
    "items": [
        {"id": "1", "text": "Read", "status": "in_progress"},
        {"id": "2", "text": "Write", "status": "pending", "blocked_by": ["1"], "priority": "high"},
    ]
}


def _open(path: Path, errors: list[str] | None = None) -> PlanBoard:
    sink = errors if errors is not None else []
    return open_board(path, limit=20, policy=EdgePolicy.STRICT, on_write_error=sink.append)


def _document(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_a_missing_file_starts_an_empty_board_and_is_created(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    board = _open(path)
    assert board.is_empty
    assert _document(path) == {"format": FORMAT, "version": VERSION, "items": []}


def test_every_accepted_update_is_written_and_a_later_board_picks_it_up(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    first = _open(path)
    first.apply(PLAN)
    assert _document(path)["items"] == [item.as_dict() for item in first.items]
    with pytest.raises(Exception, match="blocked by #1"):
        first.apply({"merge": True, "items": [{"id": "2", "status": "in_progress"}]})
    assert _document(path)["items"] == [item.as_dict() for item in first.items]

    later = _open(path)
    assert later.items == first.items
    assert later.items[1] == PlanItem(
        "2", "Write", Status.PENDING, blocked_by=("1",), priority=later.items[1].priority
    )
    # The loaded board keeps its rules: #1 is still the item in progress.
    later.apply(
        {
            "merge": True,
            "items": [{"id": "1", "status": "completed"}, {"id": "2", "status": "in_progress"}],
        }
    )
    assert [item.status for item in load_items(path)] == [Status.COMPLETED, Status.IN_PROGRESS]
    # A reset empties the file too.
    later.reset()
    assert _document(path)["items"] == []


def test_writes_leave_no_temporary_files_behind(tmp_path: Path) -> None:
    path = tmp_path / "board.json"
    board = _open(path)
    for status in ("pending", "in_progress", "completed"):
        board.apply({"items": [{"id": "1", "text": "Read", "status": status}], "merge": True})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["board.json"]


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "corrupt board file (not JSON", id="not-json"),
        pytest.param("", "corrupt board file (not JSON", id="empty"),
        pytest.param('{"items": []}', "not an orchestrator board file", id="not-ours"),
        pytest.param(
            json.dumps({"format": FORMAT, "version": 2, "items": []}),
            "board file version 2 was written by another version of orchestrator; "
            "this one reads version 1",
            id="newer-version",
        ),
        pytest.param(
            json.dumps({"format": FORMAT, "version": "1", "items": []}),
            'board file version "1" was written by another version',
            id="version-as-text",
        ),
        pytest.param(
            json.dumps({"format": FORMAT, "version": 1, "items": {}}),
            "corrupt board file: 'items' is not a list",
            id="items-not-a-list",
        ),
        pytest.param(
            json.dumps({"format": FORMAT, "version": 1, "items": [{"id": "1", "text": "a"}]}),
            "corrupt board file: item 1 has no status",
            id="no-status",
        ),
        pytest.param(
            json.dumps(
                {
                    "format": FORMAT,
                    "version": 1,
                    "items": [{"id": "1", "text": "a", "status": "done"}],
                }
            ),
            "item 1 has the unknown status 'done'",
            id="bad-status",
        ),
        pytest.param(
            json.dumps(
                {
                    "format": FORMAT,
                    "version": 1,
                    "items": [
                        {"id": "1", "text": "a", "status": "in_progress"},
                        {"id": "2", "text": "b", "status": "in_progress"},
                    ],
                }
            ),
            "breaks the board's rules: Only one task can be in_progress at a time",
            id="two-in-progress",
        ),
        pytest.param(
            json.dumps(
                {
                    "format": FORMAT,
                    "version": 1,
                    "items": [{"id": "1", "text": "a", "status": "pending", "blocked_by": ["1"]}],
                }
            ),
            "breaks the board's rules: Dependency cycle #1 → #1",
            id="cycle",
        ),
    ],
)
def test_a_foreign_or_corrupt_file_is_refused_and_left_as_it_was(
    tmp_path: Path, content: str, message: str
) -> None:
    path = _write(tmp_path / "board.json", content)
    with pytest.raises(BoardFileError) as info:
        _open(path)
    assert message in str(info.value)
    assert str(info.value).startswith(str(path))
    assert "\n" not in str(info.value)
    assert path.read_text(encoding="utf-8") == content  # never silently reset


def test_a_write_that_fails_mid_run_is_reported_not_raised(tmp_path: Path) -> None:
    folder = tmp_path / "gone"
    folder.mkdir()
    errors: list[str] = []
    board = _open(folder / "board.json", errors)
    (folder / "board.json").unlink()
    folder.rmdir()
    board.apply(PLAN)
    assert len(board.items) == 2
    assert len(errors) == 1 and "cannot write the board file" in errors[0]


def test_save_refuses_an_unwritable_place(tmp_path: Path) -> None:
    with pytest.raises(BoardFileError, match="cannot write the board file"):
        save_items(tmp_path / "missing" / "board.json", [])


def test_a_repo_config_file_may_not_choose_the_board_path(tmp_path: Path) -> None:
    (tmp_path / "orchestrator.toml").write_text('board = "/etc/passwd"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="board does not belong in a file"):
        load_config(tmp_path, env={})
    assert load_config(tmp_path.parent, env={"ORCHESTRATOR_BOARD": "b.json"}).board == "b.json"


# --- through the CLI --------------------------------------------------------------------------


def _orchestrator(*args: str | Path) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in args])
    code = exit_info.value.code
    assert isinstance(code, int)
    return code


TURNS: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "todo", "input": PLAN}]},
    {
        "tool_calls": [
            {
                "name": "todo",
                "input": {"merge": True, "items": [{"id": "1", "status": "completed"}]},
            }
        ],
        "expect": [{"is_error": False, "contains": "Next ready: none"}],
    },
    {"text": "Paused here.", "expect": [{"is_error": False, "contains": "Next ready: #2"}]},
]
LATER_TURNS: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "todo",
                "input": {
                    "todos": [
                        {"id": "1", "content": "Read", "status": "completed"},
                        {
                            "id": "2",
                            "content": "Write",
                            "status": "in_progress",
                            "blockedBy": ["1"],
                        },
                    ],
                    "explanation": "On to writing",
                },
            }
        ],
    },
    {"text": "Writing now.", "expect": [{"is_error": False, "contains": "[>] #2: Write"}]},
]


def _run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, turns: list[dict[str, Any]], name: str
) -> tuple[int, Path]:
    trace = tmp_path / f"{name}.jsonl"
    script = parse_script({"name": name, "turns": turns}, source=f"{name}.json")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        code = _orchestrator(
            "run",
            "Write it",
            "--workdir",
            tmp_path,
            "--trace",
            trace,
            "--board",
            tmp_path / "board.json",
            "--max-retries",
            "0",
            "--quiet",
            # Runs that hand the board on to the next one leave items open on purpose.
            "--settle-plan",
            "false",
        )
        assert server.violations == []
    return code, trace


def test_a_second_run_picks_the_board_up_and_both_traces_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, first = _run(tmp_path, monkeypatch, TURNS, "first")
    assert code == 0
    statuses = [item.status for item in load_items(tmp_path / "board.json")]
    assert statuses == [Status.COMPLETED, Status.PENDING]

    code, second = _run(tmp_path, monkeypatch, LATER_TURNS, "second")
    assert code == 0
    assert [item.status for item in load_items(tmp_path / "board.json")] == [
        Status.COMPLETED,
        Status.IN_PROGRESS,
    ]
    events = [json.loads(line) for line in second.read_text(encoding="utf-8").splitlines()]
    started = next(e for e in events if e["event"] == "run.started")
    assert [i["status"] for i in started["plan"]["initial_items"]] == ["completed", "pending"]
    updated = next(e for e in events if e["event"] == "plan.updated")
    assert updated["explanation"] == "On to writing"
    for trace in (first, second):
        assert Replay(read_trace(trace)).check() is None


def test_a_corrupt_board_file_is_one_line_and_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    board = _write(tmp_path / "board.json", json.dumps({"format": FORMAT, "version": 9}))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
    capsys.readouterr()
    code = _orchestrator("run", "x", "--workdir", tmp_path, "--board", board)
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "board file version 9 was written by another version" in err
    assert json.loads(board.read_text(encoding="utf-8"))["version"] == 9


@pytest.mark.parametrize("command", ["replay", "resume"])
def test_a_trace_with_a_broken_recorded_board_is_one_line_and_exit_code_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    started = {
        "event": "run.started",
        "seq": 1,
        "run_id": "r",
        "ts": "2026-01-01T00:00:00Z",
        "trace_format": 1,
        "task": "x",
        "settings": {"model": "m", "system": "s"},
        "plan": {"limit": 20, "policy": "strict", "initial_items": [{"id": "1"}]},
    }
    trace = _write(tmp_path / "trace.jsonl", json.dumps(started) + "\n")
    capsys.readouterr()
    code = _orchestrator(command, trace, *(["--check"] if command == "replay" else []))
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "the recorded plan config is not a board: missing 'text'" in err


def test_resume_with_a_board_file_keeps_the_file_in_step_with_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.jsonl"
    board = tmp_path / "resumed.json"
    failing: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": PLAN}]},
        {"fault": "status", "status": 529},
    ]
    finishing: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "todo",
                    "input": {"merge": True, "items": [{"id": "1", "status": "completed"}]},
                }
            ]
        },
        {"text": "Done reading."},
    ]
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
    runs: list[tuple[str, list[dict[str, Any]], list[str | Path], int]] = [
        ("first", failing, ["run", "Read it", "--trace", trace], 1),
        # #2 stays pending for a later run: this one may end with it open.
        ("second", finishing, ["resume", trace, "--board", board, "--settle-plan", "false"], 0),
    ]
    for name, turns, args, expected in runs:
        script = parse_script({"name": name, "turns": turns}, source=f"{name}.json")
        with MessagesServer(script) as server:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
            code = _orchestrator(*args, "--workdir", tmp_path, "--max-retries", "0", "--quiet")
        assert code == expected
    assert [item.status for item in load_items(board)] == [Status.COMPLETED, Status.PENDING]
    assert Replay(read_trace(trace)).check() is None


def test_a_second_live_writer_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    """The issue's scenario: run B on a board run A is still writing would undo A's updates."""
    import os
    import subprocess
    import sys

    from orchestrator.board.json_file import lock_board, release_board

    board_path = tmp_path / "board.json"
    first = _open(board_path)  # run A, live in this process
    first.apply(PLAN)
    before = board_path.read_bytes()
    environment = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-key-000000"}
    command = ["run", "x", "--workdir", str(tmp_path), "--board", str(board_path), "--yes"]
    second = subprocess.run(
        [sys.executable, "-m", "orchestrator", *command],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        timeout=120,
    )
    assert second.returncode == 2
    assert second.stderr.count("\n") == 1 and "Traceback" not in second.stderr
    assert f"another run (pid {os.getpid()}) is writing this board" in second.stderr
    assert board_path.read_bytes() == before
    # A's next update still lands on the whole board.
    first.apply({"items": [{"id": "1", "status": "completed"}], "merge": True})
    assert [item["status"] for item in _document(board_path)["items"]] == [
        "completed",
        "pending",
    ]
    release_board(board_path)
    lock_board(board_path)  # once A is done, the next run may take it
    release_board(board_path)


def test_a_loaded_board_is_in_the_first_message_and_said_on_the_console(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    board_path = tmp_path / "board.json"
    save_items(
        board_path,
        [
            {"id": "1", "text": "Read", "status": "completed"},
            {"id": "2", "text": "Write", "status": "pending"},
        ],
    )
    turns = [{"text": "I see the plan."}]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))}
    with MessagesServer(parse_script({"name": "loaded", "turns": turns}, source="t")) as server:
        env.update(
            ANTHROPIC_API_KEY="sk-ant-test-key-000000",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
        )
        command = ["run", "Go on", "--workdir", str(tmp_path), "--board", str(board_path)]
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", *command, "--yes", "--settle-plan", "false"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=300,
        )
        first = server.requests[0]["messages"][0]["content"][0]["text"]
    assert done.returncode == 0, done.stderr
    assert "board: 2 items from board.json" in done.stderr
    assert first.startswith("Go on\n\nThe plan so far (loaded from board.json):\n")
    assert "[x] #1: Read\n[ ] #2: Write\n\n(1/2 completed)" in first
