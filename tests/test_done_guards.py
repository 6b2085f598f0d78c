"""The ``done`` edge's guards through the real CLI and SDK: a settled plan, and ``--done-check``.

The CLI runs in this process (:func:`tests.in_process.run_cli`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from tests.in_process import run_cli

TWO_ITEMS = {
    "items": [
        {"id": "1", "text": "Read", "status": "in_progress"},
        {"id": "2", "text": "Write", "status": "pending"},
    ]
}


def _run(
    tmp_path: Path, turns: Sequence[Mapping[str, Any]], *flags: str
) -> tuple[subprocess.CompletedProcess[str], Path, MessagesServer]:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    trace = tmp_path / f"t{len(list(tmp_path.glob('t*.jsonl')))}.jsonl"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    script = parse_script({"name": "done", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        env.update(
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
            NO_COLOR="1",
        )
        command = ["run", "Do it", "--workdir", str(workdir), "--trace", str(trace), "--yes"]
        done = run_cli([*command, *flags], env=env)
    return done, trace, server


def _replays(trace: Path) -> None:
    replayed = run_cli(["replay", "--check", str(trace)])
    assert replayed.returncode == 0, replayed.stderr


def _events(trace: Path, name: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    return [line for line in lines if line["event"] == name]


def test_an_unfinished_plan_is_reminded_once_then_the_run_exits_3(tmp_path: Path) -> None:
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": TWO_ITEMS}]},
        {"text": "All done!"},
        {"text": "All done!"},
    ]
    done, trace, server = _run(tmp_path, turns, "--output-format", "json")
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert (result["status"], result["exit_code"], result["unfinished"]) == ("done", 3, ["1", "2"])
    assert "! plan unfinished: 0/2 completed: #1, #2" in done.stderr
    reminded = [e for e in _events(trace, "audit.reminder") if e.get("reason") == "unfinished"]
    assert len(reminded) == 1
    assert "open: #1, #2" in json.dumps(server.requests[2]["messages"][-1])
    _replays(trace)


def test_the_done_check_holds_the_run_until_it_passes(tmp_path: Path) -> None:
    turns: list[Mapping[str, Any]] = [
        {"text": "Done."},
        {"tool_calls": [{"name": "bash", "input": {"command": "echo ok > done.txt"}}]},
        {"text": "Done now."},
    ]
    done, trace, server = _run(tmp_path, turns, "--done-check", "test -f done.txt")
    assert done.returncode == 0, done.stderr
    checks = _events(trace, "loop.done_check")
    assert [(c["exit_code"], c["passed"]) for c in checks] == [(1, False), (0, True)]
    assert "done-check `test -f done.txt` failed" in json.dumps(server.requests[1]["messages"])
    _replays(trace)


def test_the_done_check_ends_the_run_failed_after_its_retries(tmp_path: Path) -> None:
    turns = [{"text": "Done."}, {"text": "Done!"}]
    flags = ("--done-check", "echo not yet; exit 5", "--done-check-retries", "1")
    done, trace, _server = _run(tmp_path, turns, *flags)
    assert done.returncode == 1
    assert "the done-check `echo not yet; exit 5` still failed (exit 5)" in done.stderr
    _replays(trace)


def test_replay_catches_a_forged_done_check(tmp_path: Path) -> None:
    turns: list[Mapping[str, Any]] = [
        {"text": "Done."},
        {"tool_calls": [{"name": "bash", "input": {"command": "touch done.txt"}}]},
        {"text": "Done now."},
    ]
    done, trace, _server = _run(tmp_path, turns, "--done-check", "test -f done.txt")
    assert done.returncode == 0, done.stderr
    # Say the first check passed: the recorded run then never could have gone on.
    lines = trace.read_text().splitlines()
    forged = []
    for line in lines:
        event = json.loads(line)
        if event["event"] == "loop.done_check" and not event["passed"]:
            event.update(exit_code=0, passed=True)
        forged.append(json.dumps(event))
    trace.write_text("\n".join(forged) + "\n")
    replayed = run_cli(["replay", "--check", str(trace)])
    assert replayed.returncode == 1
    assert "diverged" in replayed.stderr
