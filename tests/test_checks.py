"""Item acceptance checks through the real CLI and SDK: refused, fixed, recorded, re-verified."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.plan import CheckFailedError, PlanBoard, PlanError
from orchestrator.protocols import CheckResult
from tests.budget import examples
from tests.in_process import run_cli
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
    replayed = run_cli(["replay", "--check", str(trace)])
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


# --- a refused update, whatever refused it, changes nothing (hypothesis) ------------------------

_IDS = ("1", "2", "3", "4")
_COMMANDS = ("check-a", "check-b", "check-c")
_STATUSES = ("pending", "in_progress", "completed", "cancelled")


@st.composite
def _updates(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.sampled_from(_IDS), min_size=1, max_size=4, unique=True))
    items = []
    for item_id in ids:
        item: dict[str, Any] = {"id": item_id, "text": f"Step {item_id}"}
        item["status"] = draw(st.sampled_from(_STATUSES))
        check = draw(st.sampled_from((None, *_COMMANDS)))
        if check is not None:
            item["check"] = check
        items.append(item)
    return {"items": items, "merge": draw(st.booleans())}


@settings(max_examples=examples(300), deadline=None)
@given(
    updates=st.lists(_updates(), min_size=1, max_size=8),
    failing=st.frozensets(st.sampled_from(_COMMANDS)),
    hooked=st.booleans(),
)
def test_a_refused_update_for_any_reason_leaves_the_board_as_it_was(
    updates: list[dict[str, Any]], failing: frozenset[str], hooked: bool
) -> None:
    board = PlanBoard()
    board.run_check = lambda command: CheckResult(command, 1 if command in failing else 0, "")
    if hooked:  # a TaskCompleted hook that refuses item 4 whatever its check says
        board.task_completed = lambda item: CheckResult(
            "TaskCompleted hook x", 2 if item["id"] == "4" else 0, "no"
        )
    for update in updates:
        before = (board.items, board.revision, board.render())
        completing = {
            entry["id"]
            for entry in update["items"]
            if entry["status"] == "completed"
            and not any(i.id == entry["id"] and str(i.status) == "completed" for i in board.items)
        }
        try:
            board.apply(update)
        except PlanError as error:
            assert (board.items, board.revision, board.render()) == before, type(error)
            continue
        # Accepted: every item it completed had its check pass, and the hook's word.
        now = {item.id: item for item in board.items}
        for item_id in completing & set(now):
            assert now[item_id].check not in failing
            assert not (hooked and item_id == "4")


def test_a_failing_check_is_the_refusal_named_for_it() -> None:
    board = PlanBoard()
    board.run_check = lambda command: CheckResult(command, 3, "boom")
    board.apply({"items": [{"id": "1", "text": "x", "status": "in_progress", "check": "c"}]})
    before = (board.items, board.revision)
    try:
        board.apply({"merge": True, "items": [{"id": "1", "status": "completed"}]})
    except CheckFailedError as error:
        assert "exit 3" in str(error) or "3" in str(error)
    else:
        raise AssertionError("completed past a failing check")
    assert (board.items, board.revision) == before
