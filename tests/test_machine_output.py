"""Output a script can trust: stream-json ends with the result, usage errors are JSON too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from tests.in_process import run_cli

START = {"items": [{"id": "1", "text": "Say hi", "status": "in_progress"}]}
DONE = {"items": [{"id": "1", "status": "completed"}], "merge": True}


def _environment(server: MessagesServer, tmp_path: Path, **extra: str) -> dict[str, str]:
    """This process's environment without its own key or settings, pointed at ``server``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    return {
        **env,
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": server.base_url,
        "ORCHESTRATOR_CONFIG_DIR": str(tmp_path / "config"),
        **extra,
    }


def _run(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    turns = [
        {"tool_calls": [{"name": "todo", "input": START}]},
        {"tool_calls": [{"name": "todo", "input": DONE}]},
        {"text": "hi"},
    ]
    with MessagesServer(parse_script({"name": "out", "turns": turns}, source="t")) as server:
        env = _environment(server, tmp_path)
        trace = str(tmp_path / f"{len(list(tmp_path.glob('*.jsonl')))}.jsonl")
        command = ["run", "Say hi", "--workdir", str(workdir), "--yes", "--trace", trace]
        return run_cli([*command, *flags], env=env)


def test_stream_json_ends_with_the_result_json_prints(tmp_path: Path) -> None:
    streamed = _run(tmp_path, "--output-format", "stream-json")
    assert streamed.returncode == 0, streamed.stderr
    lines = [json.loads(line) for line in streamed.stdout.splitlines()]
    last = lines[-1]
    assert last["event"] == "result" and lines[-2]["event"] == "run.finished"
    printed = json.loads(_run(tmp_path, "--output-format", "json", "-q").stdout)
    assert set(last) - {"event"} == set(printed)
    for result in (last, printed):
        assert result["status"] == "done" and result["exit_code"] == 0
        assert result["run_id"] and result["plan"] == [
            {"id": "1", "text": "Say hi", "status": "completed"}
        ]
    assert last["run_id"] == lines[0]["run_id"]


@pytest.mark.e2e
def test_json_output_is_utf8_even_when_the_model_sends_half_a_surrogate_pair(
    tmp_path: Path,
) -> None:
    """A response's JSON may escape half a UTF-16 pair (``"\\udc80"``); written as is, stdout
    carried a raw 0x80 byte that no JSON reader takes. The bytes on stdout are the point, so
    this runs a real process."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    turns = [{"text": "end \udc80"}]
    with MessagesServer(parse_script({"name": "half", "turns": turns}, source="t")) as server:
        env = _environment(server, tmp_path, ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"))
        command = [sys.executable, "-m", "orchestrator", "run", "Go", "--workdir", str(workdir)]
        done = subprocess.run(
            [*command, "--yes", "--output-format", "stream-json"],
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]
    assert lines[-1]["answer"] == "end \udc80"
    response = next(line for line in lines if line["event"] == "model.response")
    assert response["content"][0]["text"] == "end \udc80"


@pytest.mark.parametrize(
    "flags",
    [
        ("--output-format", "json", "--max-rounds", "-5"),
        ("--json", "--no-such-flag"),
        ("--output-format=stream-json", "--sandbox", "sideways"),
    ],
)
def test_a_usage_error_in_a_json_mode_is_one_json_object(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    done = _run(tmp_path, *flags)
    assert done.returncode == 2
    (line,) = done.stdout.splitlines()
    document = json.loads(line)
    assert document["status"] == "error" and document["exit_code"] == 2
    assert document["reason"] and document["reason"] in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_usage_error_in_text_mode_prints_nothing_on_stdout(tmp_path: Path) -> None:
    done = _run(tmp_path, "--max-rounds", "-5")
    assert (done.returncode, done.stdout) == (2, "")


def _run_in_state(
    tmp_path: Path, state: Path, *args: str, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``orchestrator ARGS`` in this process, or a second one where the pid matters."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    env.update(ORCHESTRATOR_STATE_DIR=str(state), ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "cfg"))
    if not process:
        return run_cli(args, env=env, cwd=tmp_path / "work")
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
        cwd=tmp_path / "work",
    )


def test_a_session_is_named_by_its_run_id_or_last(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (tmp_path / "work").mkdir()
    demo = _run_in_state(tmp_path, state, "demo", "--workdir", str(tmp_path / "work" / "d"))
    assert demo.returncode == 0, demo.stderr
    listed = json.loads(_run_in_state(tmp_path, state, "sessions", "--json").stdout)
    (session,) = listed
    assert set(session) >= {"run_id", "trace", "status", "rounds", "cost_usd", "workdir"}
    assert set(session) >= {"task", "started"}
    assert session["status"] == "done" and Path(session["trace"]).is_file()
    run_id = session["run_id"]
    by_id = _run_in_state(tmp_path, state, "replay", run_id, "--check")
    assert by_id.returncode == 0, by_id.stderr
    shown = _run_in_state(tmp_path, state, "show", run_id[:8], "--round", "1")
    assert shown.returncode == 0 and "todo" in shown.stdout
    missing = _run_in_state(tmp_path, state, "show", "deadbeef00")
    assert missing.returncode == 2 and "no such trace file or run id" in missing.stderr
    # --last is the newest session of the current directory: none was run from here.
    none_here = _run_in_state(tmp_path, state, "replay", "--last", "--check")
    assert none_here.returncode == 2 and "no sessions for" in none_here.stderr


@pytest.mark.e2e
def test_a_running_session_is_locked_against_a_second_process(tmp_path: Path) -> None:
    from orchestrator.sessions import SessionLock

    state = tmp_path / "state"
    (tmp_path / "work").mkdir()
    demo = _run_in_state(tmp_path, state, "demo", "--workdir", str(tmp_path / "work" / "d"))
    assert demo.returncode == 0, demo.stderr
    (session,) = json.loads(_run_in_state(tmp_path, state, "sessions", "--json").stdout)
    trace = Path(session["trace"])
    lock = SessionLock(trace)
    lock.take()  # this process is now "running" the session
    try:
        second = _run_in_state(tmp_path, state, "resume", str(trace), "next", "--yes", process=True)
        assert second.returncode == 2
        assert f"is running in another process (pid {os.getpid()})" in second.stderr
        assert second.stderr.count("\n") == 1
        listed = json.loads(_run_in_state(tmp_path, state, "sessions", "--json").stdout)
        assert listed[0]["status"] == f"running (pid {os.getpid()})"
    finally:
        lock.release()
    assert not lock.path.exists()
    assert (
        json.loads(_run_in_state(tmp_path, state, "sessions", "--json").stdout)[0]["status"]
        == "done"
    )
