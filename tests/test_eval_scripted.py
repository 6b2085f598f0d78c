"""The scripted stand-ins: the diligent one keeps the board, the forgetful one needs reminding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.eval.arms import parse_arm
from orchestrator.eval.runner import ModelChoice, RunSpec, execute_run
from orchestrator.eval.scripted import ForgetfulModel, scripted_model
from orchestrator.eval.suite import Step, Task, bundled_suite_path, load_suite
from orchestrator.protocols import JSONObject

STEPS = tuple(Step(f"Step {i}", "bash", {"command": f"echo {i} >> log"}) for i in range(5))
TASK = Task("log", "Append five lines.", "test $(wc -l < log) -eq 5", steps=STEPS)


def _run(tmp_path: Path, kind: str, arm: str, repeat: int, task: Task = TASK) -> JSONObject:
    spec = RunSpec(task, parse_arm(arm), repeat, ModelChoice(kind, f"scripted:{kind}"),
                   str(tmp_path / f"{kind}-{arm}-{repeat}.jsonl"))  # fmt: skip
    return execute_run(spec)


def _events(row: JSONObject, name: str) -> list[JSONObject]:
    lines = Path(row["trace"]).read_text(encoding="utf-8").splitlines()
    return [event for event in map(json.loads, lines) if event["event"] == name]


def test_the_same_seed_gives_the_same_run(tmp_path: Path) -> None:
    first, second = _run(tmp_path, "forgetful", "board", 3), _run(tmp_path, "forgetful", "board", 3)
    keep = ("rounds", "success", "reminders", "rejected_updates", "repeated_calls")
    assert {k: first[k] for k in keep} == {k: second[k] for k in keep}


def test_without_a_board_skips_stay_skipped_and_with_one_a_reminder_recovers_them(
    tmp_path: Path,
) -> None:
    outcomes = {
        arm: [_run(tmp_path, "forgetful", arm, repeat) for repeat in range(8)]
        for arm in ("no-board", "board")
    }
    failed = [row for row in outcomes["no-board"] if not row["success"]]
    assert failed, "the forgetful model never skipped a step without a board"
    assert all(not _events(row, "audit.reminder") for row in outcomes["no-board"])
    recovered = [
        board
        for board, bare in zip(outcomes["board"], outcomes["no-board"], strict=True)
        if board["success"] and not bare["success"]
    ]
    assert recovered, "the board never made up for a skipped step"
    assert all(_events(row, "audit.reminder") for row in recovered)


def test_under_strict_its_catch_up_is_rejected_then_walked_one_edge_at_a_time(
    tmp_path: Path,
) -> None:
    rows = [_run(tmp_path, "forgetful", "strict", repeat) for repeat in range(6)]
    rejected = [event for row in rows for event in _events(row, "plan.rejected")]
    assert rejected
    assert {event["error"] for event in rejected} <= {"IllegalEdgeError", "InProgressConflictError"}
    lenient = [_run(tmp_path, "forgetful", "lenient", repeat) for repeat in range(6)]
    assert sum(r["rejected_updates"] for r in lenient) < sum(r["rejected_updates"] for r in rows)


def test_the_diligent_model_is_never_reminded_and_never_rejected(tmp_path: Path) -> None:
    row = _run(tmp_path, "diligent", "board", 0)
    assert (row["success"], row["reminders"], row["rejected_updates"]) == (True, 0, 0)
    updates = _events(row, "plan.updated")
    assert len(updates) == len(STEPS) + 1
    assert all(item["status"] == "completed" for item in updates[-1]["items"])


def test_a_task_without_steps_or_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="has no"):
        scripted_model("diligent", Task("t", "p", "true"), 0)
    task = load_suite(bundled_suite_path()).tasks[0]
    with pytest.raises(ValueError, match="unknown scripted model 'clever'"):
        scripted_model("clever", task, 0)
    assert isinstance(scripted_model("forgetful", task, 0), ForgetfulModel)
