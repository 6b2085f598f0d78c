"""One eval run through the real SDK against the loopback Messages API, and its bounds.

The no-board arm is checked on the request bodies the server received: no ``todo`` tool, no
reminder, no word of a todo tool in the system prompt; the board arm, given the same script,
sends all three, so the check can fail.
"""

from __future__ import annotations

import json
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from orchestrator.eval.arms import parse_arm
from orchestrator.eval.runner import (
    BoundedModel,
    Harness,
    Limits,
    ModelChoice,
    RunAborted,
    RunSpec,
    TraceTally,
    execute_run,
)
from orchestrator.eval.suite import Task
from orchestrator.protocols import ModelError
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer

TASK = Task(
    name="notes",
    prompt="Write notes.txt, then check it.",
    check="test -f notes.txt",
    files={"seed.txt": "seed\n"},
    max_rounds=20,
)
PLAN = {"items": [{"id": "1", "text": "Write notes", "status": "in_progress"}]}


def _turns_with_a_stale_plan() -> list[dict[str, Any]]:
    return [
        {"text": "Plan first.", "tool_calls": [{"name": "todo", "input": PLAN}]},
        {"tool_calls": [{"name": "write_file", "input": {"path": "notes.txt", "content": "n"}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo one"}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo two"}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo three"}}]},
        {"text": "Done."},
    ]


def _run_through_server(
    tmp_path: Path,
    arm: str,
    turns: list[dict[str, Any]],
    limits: Limits | None = None,
    task: Task = TASK,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    script = parse_script({"name": "eval-runner", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        choice = ModelChoice(
            "api", "claude-test", base_url=server.base_url, api_key="test-key", max_retries=0
        )
        spec = RunSpec(
            task, parse_arm(arm), 0, choice, str(tmp_path / f"{arm}.jsonl"), limits or Limits()
        )
        row = execute_run(spec)
        assert server.violations == []
        return row, server.requests


def _texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"]) + json.dumps(body.get("system", ""))


def test_the_no_board_arm_sends_no_todo_tool_and_no_reminder(tmp_path: Path) -> None:
    row, requests = _run_through_server(tmp_path, "no-board", _turns_with_a_stale_plan())
    assert len(requests) == 6
    for body in requests:
        assert "todo" not in [tool["name"] for tool in body["tools"]]
        assert {tool["name"] for tool in body["tools"]} == {
            "bash",
            "read_file",
            "write_file",
            "edit_file",
        }
        assert "<reminder>" not in _texts(body)
        assert "todo" not in json.dumps(body.get("system", "")).lower()
    # The model's todo call met an unknown tool, and the plan stayed empty.
    first_result = requests[1]["messages"][-1]["content"][0]
    assert first_result["is_error"] is True
    assert "unknown tool 'todo'" in str(first_result["content"])
    assert (row["reminders"], row["status"], row["success"]) == (0, "done", True)
    assert row["model"] == "claude-test" and row["scripted"] is False


def test_the_board_arm_given_the_same_script_sends_both(tmp_path: Path) -> None:
    row, requests = _run_through_server(tmp_path, "board", _turns_with_a_stale_plan())
    assert all("todo" in [tool["name"] for tool in body["tools"]] for body in requests)
    reminded = [i for i, body in enumerate(requests) if "<reminder>" in _texts(body)]
    assert reminded == [4, 5]
    assert "todo" in json.dumps(requests[0]["system"]).lower()
    assert row["reminders"] == 2


def test_the_checks_arm_refuses_a_completion_until_the_tasks_check_passes(
    tmp_path: Path,
) -> None:
    done = {"merge": True, "items": [{"id": "1", "status": "completed"}]}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": PLAN}]},
        {"tool_calls": [{"name": "todo", "input": done}]},  # notes.txt is not there yet
        {"tool_calls": [{"name": "write_file", "input": {"path": "notes.txt", "content": "n"}}]},
        {"tool_calls": [{"name": "todo", "input": done}]},
        {"text": "Done."},
    ]
    row, requests = _run_through_server(tmp_path, "checks", turns)
    refused = requests[2]["messages"][-1]["content"][0]
    assert refused["is_error"] is True and "test -f notes.txt" in str(refused["content"])
    accepted = requests[4]["messages"][-1]["content"][0]
    assert accepted["is_error"] is False and "(1/1 completed)" in str(accepted["content"])
    assert (row["status"], row["success"]) == ("done", True)
    # The board arm, given the same script, takes the early completion as it comes.
    _, requests = _run_through_server(tmp_path, "board", turns)
    assert requests[2]["messages"][-1]["content"][0]["is_error"] is False


def test_row_counts_are_those_of_the_trace(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": PLAN}]},
        {"tool_calls": [{"name": "todo", "input": {"items": [{"id": "1", "status": "nope"}]}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "touch notes.txt"}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "touch notes.txt"}}]},
        {"text": "Done.", "usage": {"input_tokens": 7, "output_tokens": 3}},
    ]
    row, _requests = _run_through_server(tmp_path, "board", turns)
    tally = TraceTally()
    for line in Path(row["trace"]).read_text(encoding="utf-8").splitlines():
        tally(json.loads(line))
    assert {key: row[key] for key in tally.fields()} == tally.fields()
    assert (row["rejected_updates"], row["repeated_calls"], row["blocked_calls"]) == (1, 1, 1)
    assert row["rounds"] == 5 and row["success"] is True
    assert row["cost_usd"] > 0


def test_a_runaway_run_ends_failed_at_the_round_limit(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "bash", "input": {"command": f"touch notes.txt; echo {i}"}}]}
        for i in range(10)
    ]
    row, requests = _run_through_server(tmp_path, "board", turns, Limits(max_rounds=3))
    assert len(requests) == 3
    assert (row["status"], row["rounds"], row["success"]) == ("failed", 3, False)
    assert row["check_exit"] == 0  # the check passed, but a runaway is not a success
    assert "--max-rounds" in row["reason"]


def test_a_run_over_its_cost_bound_ends_failed(tmp_path: Path) -> None:
    turns = [
        {
            "tool_calls": [{"name": "bash", "input": {"command": f"echo {i}"}}],
            "usage": {"output_tokens": 100_000},
        }
        for i in range(5)
    ]
    row, requests = _run_through_server(tmp_path, "board", turns, Limits(max_cost=1.0))
    assert len(requests) == 1
    assert (row["status"], row["success"]) == ("failed", False)
    assert "--max-cost $1" in row["reason"]
    assert row["cost_usd"] == pytest.approx(1.5, abs=0.01)  # plus the estimated cache tokens


def test_check_files_replace_links_the_agent_left_instead_of_writing_through_them(
    tmp_path: Path,
) -> None:
    victim, elsewhere = tmp_path / "victim.txt", tmp_path / "elsewhere"
    victim.write_text("mine\n")
    elsewhere.mkdir()
    task = Task(
        name="links",
        prompt="p",
        check="cat check.py tests/c.txt",
        check_files={"check.py": "check\n", "tests/c.txt": "c\n"},
    )
    swap = f"rm -rf check.py tests; ln -s {victim} check.py; ln -s {elsewhere} tests"
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": swap}}]},
        {"text": "Done."},
    ]
    row, _requests = _run_through_server(tmp_path, "no-board", turns, task=task)
    assert victim.read_text() == "mine\n"
    assert list(elsewhere.iterdir()) == []
    assert (row["success"], row["check_output"]) == (True, "check\nc\n")


def test_a_work_directory_the_agent_replaced_by_a_link_is_made_again(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    task = Task(name="gone", prompt="p", check="cat c.txt", check_files={"c.txt": "c\n"})
    swap = f'here="$PWD"; cd /; rm -rf "$here"; ln -s {elsewhere} "$here"'
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": swap}}]},
        {"text": "Done."},
    ]
    row, _requests = _run_through_server(tmp_path, "no-board", turns, task=task)
    assert list(elsewhere.iterdir()) == []
    assert (row["success"], row["check_output"]) == (True, "c\n")


def test_the_check_runs_where_the_models_bash_ran_so_the_code_it_checks_stays_in(
    tmp_path: Path,
) -> None:
    from orchestrator.tools.sandbox import SandboxPolicy, choose_sandbox

    if choose_sandbox("auto", SandboxPolicy(tmp_path)).sandbox.mode != "bwrap":
        pytest.skip("no usable bwrap: the check runs where bash does, unconfined")
    marker = tmp_path / "check-escaped"
    # The model's code: imported by the check, it tries to write beyond the work directory.
    app = (
        "import os, pathlib\n"
        "print('PYTHONSAFEPATH', os.environ.get('PYTHONSAFEPATH'))\n"
        "try:\n"
        f"    pathlib.Path({str(marker)!r}).write_text('escaped')\n"
        "except OSError as error:\n"
        "    print('kept in:', type(error).__name__)\n"
    )
    task = Task(
        name="escape",
        prompt="Nothing to do.",
        check="python check.py",
        files={"app.py": app},
        check_files={"check.py": "import os, sys\nsys.path.insert(0, os.getcwd())\nimport app\n"},
        max_rounds=5,
    )
    row, _ = _run_through_server(tmp_path, "board", [{"text": "Done."}], task=task)
    assert "PYTHONSAFEPATH 1" in row["check_output"] and "kept in:" in row["check_output"]
    assert not marker.exists()


def test_every_bundled_task_passes_its_check_in_the_sandbox_once_its_work_is_done(
    tmp_path: Path,
) -> None:
    # The checks run with PYTHONSAFEPATH=1: each puts its own folder on sys.path, and starts the
    # model's scripts as the model ran them (catches a check that only passed unconfined).
    from orchestrator.eval.suite import bundled_suite_path, load_suite

    for task in load_suite(bundled_suite_path()).tasks:
        choice = ModelChoice("diligent", "scripted")
        trace = str(tmp_path / f"{task.name}.jsonl")
        row = execute_run(RunSpec(task, parse_arm("board"), 0, choice, trace))
        assert (row["success"], row["check_exit"]) == (True, 0), (task.name, row["check_output"])


def test_an_api_failure_is_not_judged(tmp_path: Path) -> None:
    with pytest.raises(RunAborted, match="the model failed: API error 401"):
        _run_through_server(tmp_path, "board", [{"fault": "status", "status": 401}])


class _Echo:
    name = "echo"

    def respond(self, request: Any, on_text: Any) -> Any:
        raise AssertionError("a bounded model must not call on")


def test_work_directories_are_removed_unless_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    write = {"name": "write_file", "input": {"path": "notes.txt", "content": "n"}}
    turns: list[dict[str, Any]] = [{"tool_calls": [write]}, {"text": "Done."}]
    row, _requests = _run_through_server(tmp_path, "board", turns)
    assert row["workdir"] is None and list(temporary.iterdir()) == []
    with pytest.raises(RunAborted):
        _run_through_server(tmp_path, "board", [{"fault": "status", "status": 401}])
    assert list(temporary.iterdir()) == []
    script = parse_script({"name": "kept", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        choice = ModelChoice("api", "m", base_url=server.base_url, api_key="k", max_retries=0)
        trace = str(tmp_path / "kept.jsonl")
        row = execute_run(RunSpec(TASK, parse_arm("board"), 0, choice, trace, keep_workdir=True))
    kept = Path(row["workdir"])
    assert kept.parent == temporary
    assert sorted(path.name for path in kept.iterdir()) == ["notes.txt", "seed.txt"]


def test_a_link_the_agent_left_for_its_work_directory_is_removed_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temporary, elsewhere = tmp_path / "tmp", tmp_path / "elsewhere"
    temporary.mkdir()
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine\n")
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    swap = f'here="$PWD"; cd /; rm -rf "$here"; ln -s {elsewhere} "$here"'
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": swap}}]},
        {"fault": "status", "status": 401},
    ]
    with pytest.raises(RunAborted):
        _run_through_server(tmp_path, "board", turns)
    assert list(temporary.iterdir()) == []
    assert [path.name for path in elsewhere.iterdir()] == ["keep.txt"]


def test_a_machine_failure_is_not_judged_and_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "traces").write_text("a file where the trace folder should be")
    choice = ModelChoice("api", "claude-test", base_url="http://127.0.0.1:9", api_key="k")
    spec = RunSpec(TASK, parse_arm("board"), 3, choice, str(tmp_path / "traces" / "3.jsonl"))
    with pytest.raises(RunAborted) as aborted:
        execute_run(spec)
    assert str(aborted.value) == f"notes/board/3: File exists: {tmp_path / 'traces'}"


def test_the_time_bound_and_the_stop_flag_end_a_run_before_the_next_call() -> None:
    now = [0.0]
    late = BoundedModel(_Echo(), Limits(run_timeout=10), clock=lambda: now[0])
    now[0] = 10.0
    with pytest.raises(ModelError, match="longer than --run-timeout 10s"):
        late.respond({}, print)
    stop = threading.Event()
    stop.set()
    stopped = BoundedModel(_Echo(), Limits(), stop=stop)
    with pytest.raises(ModelError, match="interrupted"):
        stopped.respond({}, print)
    assert stopped.aborted == "the eval was interrupted"


def test_an_unknown_model_kind_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="kind must be one of api, forgetful, diligent, got 'gpt'"):
        ModelChoice("gpt", "x")


def test_the_bash_caps_set_for_an_eval_hold_in_its_runs(tmp_path: Path) -> None:
    turns = [
        {"tool_calls": [{"name": "bash", "input": {"command": "ulimit -u; ulimit -d"}}]},
        {"text": "Done."},
    ]
    script = parse_script({"name": "caps", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        choice = ModelChoice(
            "api", "claude-test", base_url=server.base_url, api_key="test-key", max_retries=0
        )
        harness = Harness(sandbox="workdir", max_processes=37, max_memory=99)
        spec = RunSpec(
            TASK, parse_arm("no-board"), 0, choice, str(tmp_path / "t.jsonl"), harness=harness
        )
        execute_run(spec)
        requests = server.requests
    result = requests[1]["messages"][-1]["content"][0]["content"]
    assert result.split() == ["37", str(99 << 10)], result
