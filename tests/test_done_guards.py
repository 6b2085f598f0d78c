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

import pytest

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


# --- counted right, and a check that cannot run is the person's to hear ------------------------


def _run_here(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    turns: Sequence[Mapping[str, Any]],
    *flags: str,
) -> tuple[int, str, Path, MessagesServer]:
    """``orchestrator run`` in this process, as the console script runs it."""
    from orchestrator.cli import main

    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    trace = tmp_path / f"t{len(list(tmp_path.glob('t*.jsonl')))}.jsonl"
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")) and name != "ORCHESTRATOR_TEST_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("NO_COLOR", "1")
    script = parse_script({"name": "done", "turns": list(turns)}, source="test")
    capsys.readouterr()
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        command = ["run", "Do it", "--workdir", str(workdir), "--trace", str(trace), "--yes"]
        with pytest.raises(SystemExit) as exited:
            main([*command, *flags])
    code = exited.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().err, trace, server


def test_the_done_check_counts_its_attempts_as_retries_plus_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [{"text": f"Done {n}."} for n in range(5)]
    flags = ("--done-check", "exit 5", "--done-check-retries", "2")
    code, err, trace, server = _run_here(tmp_path, monkeypatch, capsys, turns, *flags)
    assert code == 1
    # Two failures the model may fix, each said with the count; the third ends the run.
    told = [json.dumps(request["messages"][-1]) for request in server.requests[1:]]
    assert len(told) == 2
    assert "(attempt 1 of 3)" in told[0]
    assert "(attempt 2 of 3; the next failure ends the run)" in told[1]
    checks = _events(trace, "loop.done_check")
    assert [check["attempt"] for check in checks] == [1, 2, 3]  # and no fourth
    assert "still failed (exit 5) after 3 attempt(s) (--done-check-retries)" in err
    assert server.served == 3


@pytest.mark.parametrize("setting", ["--done-check", "--completion-check"])
def test_a_check_whose_program_does_not_exist_is_exit_2_before_any_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    setting: str,
) -> None:
    turns = [{"text": "Done."}]
    code, err, trace, server = _run_here(
        tmp_path, monkeypatch, capsys, turns, setting, "RUN=1 pytset -q"
    )
    assert code == 2
    assert err.count("\n") == 1, err
    assert f"{setting} `RUN=1 pytset -q`: `pytset`: command not found" in err
    assert server.requests == [] and not trace.exists()
    # A builtin, a keyword or a program on PATH is no such mistake.
    code, err, _trace, _server = _run_here(
        tmp_path, monkeypatch, capsys, turns, setting, "cd . && [ -d . ] && true"
    )
    assert code == 0, err


def test_a_check_bash_cannot_run_is_told_to_the_person_as_a_broken_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    (work / "check.sh").chmod(0o755)
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "rm check.sh"}}]},
        {"text": "Done."},
    ]
    flags = ("--done-check", "./check.sh", "--done-check-retries", "0")
    code, err, _trace, _server = _run_here(tmp_path, monkeypatch, capsys, turns, *flags)
    assert code == 1
    (line,) = [line for line in err.splitlines() if "broken command" in line]
    assert line.startswith(
        "orchestrator: ! the check `./check.sh` is a broken command, exit 127: command not found;"
    )


def test_a_check_that_is_there_but_not_executable_is_told_so_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    # At the start: exit 2, in one line that says what to do.
    flags = ("--done-check", "./check.sh --fast", "--done-check-retries", "0")
    code, err, _trace, server = _run_here(tmp_path, monkeypatch, capsys, [{"text": "x"}], *flags)
    assert code == 2 and err.count("\n") == 1, err
    assert (
        "--done-check `./check.sh --fast`: `./check.sh`: not executable (chmod +x, or run it as "
        "`sh ./check.sh`); fix the command"
    ) in err
    assert server.requests == []
    # During the run (the model took its executable bit): exit 126, said to the person as such.
    (work / "check.sh").chmod(0o755)
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "chmod -x check.sh"}}]},
        {"text": "Done."},
    ]
    code, err, _trace, _server = _run_here(tmp_path, monkeypatch, capsys, turns, *flags)
    assert code == 1
    (line,) = [line for line in err.splitlines() if "broken command" in line]
    assert line.startswith(
        "orchestrator: ! the check `./check.sh --fast` is a broken command, exit 126: not "
        "executable (chmod +x, or run it as `sh ./check.sh`); it said: "
    ), line
