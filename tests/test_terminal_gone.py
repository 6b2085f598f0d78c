"""A run whose terminal goes (a closed pipe, a hung-up pty) still closes its trace cleanly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer

# A real process losing its terminal: the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e


def _env(tmp_path: Path, base_url: str) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=base_url,
        ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
        ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"),
    )
    return env


def _events(trace: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


def test_a_closed_pipe_costs_neither_the_run_nor_its_trace(tmp_path: Path) -> None:
    """``orchestrator run … | head -1``: the reader goes after one line."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    echo = {"tool_calls": [{"name": "bash", "input": {"command": "seq 1 200"}}]}
    turns = [{"text": "Counting.\n", **echo}, echo, echo, {"text": "Counted."}]
    trace = tmp_path / "t.jsonl"
    with MessagesServer(parse_script({"name": "pipe", "turns": turns}, source="t")) as server:
        args = ["run", "Count", "--workdir", str(workdir), "--yes", "--trace", str(trace)]
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args, "--verbose"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**_env(tmp_path, server.base_url), "NO_COLOR": "1"},
        )
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()  # like head -1
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=300)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    events = _events(trace)
    assert events[-1]["event"] == "run.finished" and events[-1]["status"] == "done"


def test_a_hung_up_terminal_ends_the_run_129_with_its_trace_closed(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    turns = [
        {"text": "Working.\n", "tool_calls": [{"name": "bash", "input": {"command": "echo a"}}]},
        {"fault": "slow", "seconds": 30},
        {"text": "too late"},
    ]
    trace = tmp_path / "t.jsonl"
    with MessagesServer(parse_script({"name": "hup", "turns": turns}, source="t")) as server:
        args = ["-m", "orchestrator", "run", "Work", "--workdir", str(workdir), "--yes"]
        child = pexpect.spawn(
            sys.executable,
            [*args, "--trace", str(trace)],
            env=_env(tmp_path, server.base_url),
            timeout=240,
        )
        child.expect_exact("echo a")
        deadline = time.monotonic() + 120  # wait until the slow request is in flight
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The terminal goes: closing the pty's master side makes the kernel hang it up (SIGHUP
        # to the session), once, as a closed terminal window does.
        os.close(child.child_fd)
        _pid, status = os.waitpid(child.pid, 0)
    assert not os.WIFSIGNALED(status), f"killed by signal {os.WTERMSIG(status)}"
    assert os.WEXITSTATUS(status) == 129, trace.read_text()[-600:]
    events = _events(trace)
    assert events[-1]["event"] == "run.finished"
    assert events[-1]["status"] == "interrupted"


def test_a_killed_run_is_named_killed_and_replay_says_so(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    turns = [
        {"text": "Working.\n", "tool_calls": [{"name": "bash", "input": {"command": "echo a"}}]},
        {"fault": "slow", "seconds": 30},
        {"text": "too late"},
    ]
    with MessagesServer(parse_script({"name": "kill", "turns": turns}, source="t")) as server:
        env = _env(tmp_path, server.base_url)
        command = ["run", "Work", "--workdir", str(workdir), "--yes", "--quiet"]
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        deadline = time.monotonic() + 120
        while len(server.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        process.kill()
        process.wait(timeout=60)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
            cwd=workdir,
        )

    (session,) = json.loads(cli("sessions", "--json").stdout)
    assert session["status"] == "killed"
    replayed = cli("replay", "--last")
    assert replayed.returncode == 0, replayed.stderr
    assert "has no run.finished: it was killed" in replayed.stderr
    shown = cli("show", session["run_id"])
    assert "it was killed" in shown.stderr
