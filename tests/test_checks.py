"""Item acceptance checks through the real CLI and SDK: refused, fixed, recorded, re-verified."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.test_done_guards import _events, _replays, _run


def _todo(*items: Mapping[str, Any], merge: bool = False) -> dict[str, Any]:
    return {"tool_calls": [{"name": "todo", "input": {"items": list(items), "merge": merge}}]}


CHECKED = {"id": "1", "text": "Write out.txt", "status": "in_progress", "check": "test -f out.txt"}
TURNS: list[Mapping[str, Any]] = [
    _todo(CHECKED),
    _todo({"id": "1", "status": "completed"}, merge=True),
    {"tool_calls": [{"name": "bash", "input": {"command": "echo hi > out.txt"}}]},
    _todo({"id": "1", "status": "completed"}, merge=True),
    {"text": "Done."},
]


def test_an_item_completes_only_once_its_check_passes(tmp_path: Path) -> None:
    done, trace, _server = _run(tmp_path, TURNS)
    assert done.returncode == 0, done.stderr
    results = [e for e in _events(trace, "tool.result") if e["name"] == "todo"]
    assert [r["is_error"] for r in results] == [False, True, False]
    assert "check `test -f out.txt` failed with exit code 1" in results[1]["output"]
    checks = _events(trace, "plan.check")
    assert [(c["item"], c["exit_code"], c["passed"]) for c in checks] == [
        ("1", 1, False),
        ("1", 0, True),
    ]
    assert "✗ check #1 test -f out.txt" in done.stdout
    assert "✓ check #1 test -f out.txt" in done.stdout
    _replays(trace)


def test_replay_catches_a_completion_without_its_passing_check(tmp_path: Path) -> None:
    done, trace, _server = _run(tmp_path, TURNS)
    assert done.returncode == 0, done.stderr
    kept = [
        line for line in trace.read_text().splitlines() if json.loads(line)["event"] != "plan.check"
    ]
    trace.write_text("\n".join(kept) + "\n")
    replayed = subprocess.run(
        [sys.executable, "-m", "orchestrator", "replay", "--check", str(trace)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert replayed.returncode == 1 and "diverged" in replayed.stderr


def test_a_persons_check_from_the_board_file_cannot_be_dropped(tmp_path: Path) -> None:
    board = tmp_path / "board.json"
    board.write_text(
        json.dumps(
            {
                "format": "orchestrator-board",
                "version": 1,
                "items": [
                    {
                        "id": "1",
                        "text": "Ship",
                        "status": "in_progress",
                        "check": "test -f shipped",
                    }
                ],
            }
        )
    )
    turns: list[Mapping[str, Any]] = [
        _todo({"id": "1", "status": "completed", "check": ""}, merge=True),
        {"text": "Gave up."},
        {"text": "Gave up."},
    ]
    done, trace, _server = _run(tmp_path, turns, "--board", str(board))
    results = [e for e in _events(trace, "tool.result") if e["name"] == "todo"]
    assert results[0]["is_error"] and "set by the person" in results[0]["output"]
    saved = json.loads(board.read_text())["items"][0]
    assert (saved["status"], saved["check"]) == ("in_progress", "test -f shipped")
    assert done.returncode == 3  # the plan was left unfinished
