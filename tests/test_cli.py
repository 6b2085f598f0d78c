"""Whole tasks through ``orchestrator run``, against the loopback Messages API.

Each test writes a script, starts a :class:`MessagesServer` playing it, and runs the real CLI
with the real ``anthropic`` client pointed at the server: in this process
(:func:`tests.in_process.run_cli`), except where the process is the point (Ctrl-C, and one
whole task through ``python -m orchestrator``). For every request the server got, the
API's structural rules must hold, and the script's ``expect`` entries (checked by the server)
must have matched the tool results the harness sent.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request
from tests.in_process import run_cli

TIMEOUT = 60
PLAN: dict[str, Any] = {
    "items": [
        {"id": "1", "text": "Fix add", "status": "in_progress"},
        {"id": "2", "text": "Run the tests", "status": "pending"},
    ]
}
PLAN_NEXT: dict[str, Any] = {
    "items": [
        {"id": "1", "text": "Fix add", "status": "completed"},
        {"id": "2", "text": "Run the tests", "status": "in_progress"},
    ]
}
PLAN_DONE: dict[str, Any] = {
    "items": [
        {"id": "1", "text": "Fix add", "status": "completed"},
        {"id": "2", "text": "Run the tests", "status": "completed"},
    ]
}
TWO_IN_PROGRESS: dict[str, Any] = {
    "items": [
        {"id": "1", "text": "Fix add", "status": "in_progress"},
        {"id": "2", "text": "Run the tests", "status": "in_progress"},
    ]
}


@attrs.frozen
class Finished:
    """A finished ``orchestrator`` process, the requests the server got, and the trace."""

    code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]
    trace: list[dict[str, Any]]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [event for event in self.trace if event["event"] == name]


def _environment(**extra: str) -> dict[str, str]:
    """The parent's environment without anything that would steer the CLI or the SDK."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
        and name.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(NO_COLOR="1", **extra)
    return env


def _orchestrator(
    args: Sequence[str], env: Mapping[str, str], cwd: Path, *, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``orchestrator ARGS`` in this process, or as a real one when ``process``."""
    if not process:
        return run_cli(args, env=env, cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def _run_task(
    tmp_path: Path,
    turns: Sequence[Mapping[str, Any]],
    *flags: str,
    task: str = "Fix add in calc.py and run its test",
    yes: bool = True,
    in_a_process: bool = False,
) -> Finished:
    """Run ``orchestrator run`` against a server playing ``turns``; check every request."""
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    trace = tmp_path / "t.jsonl"
    script = parse_script({"name": "cli", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        args = ["run", task, "--workdir", str(workdir), "--trace", str(trace), *flags]
        if yes:
            args.append("--yes")
        process = _orchestrator(args, env, tmp_path, process=in_a_process)
        requests = server.requests
        violations = server.violations
    assert "Traceback" not in process.stderr, process.stderr
    for number, body in enumerate(requests, start=1):
        assert check_request(body) == [], f"request {number}"
    assert violations == [], process.stdout + process.stderr
    lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
    return Finished(
        process.returncode,
        process.stdout,
        process.stderr,
        requests,
        [json.loads(line) for line in lines],
    )


def _call(name: str, arguments: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": dict(arguments)}], **extra}


def _ok(contains: str | None = None) -> list[dict[str, Any]]:
    return [{"is_error": False, **({"contains": contains} if contains else {})}]


def _error(contains: str) -> list[dict[str, Any]]:
    return [{"is_error": True, "contains": contains}]


def _fault(status: int) -> dict[str, Any]:
    return {"fault": "status", "status": status, "retry_after": 0.01}


CALC = "def add(a, b):\n    return a - b\n"
CALC_TEST = "from calc import add\n\nassert add(2, 3) == 5, 'add is wrong'\nprint('calc ok')\n"


def _calc_project(tmp_path: Path) -> Path:
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "calc.py").write_text(CALC, encoding="utf-8")
    (workdir / "test_calc.py").write_text(CALC_TEST, encoding="utf-8")
    return workdir


# --- whole tasks --------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_multi_step_task_edits_real_files_through_a_529_and_a_429(tmp_path: Path) -> None:
    workdir = _calc_project(tmp_path)
    test_command = f"{shlex.quote(sys.executable)} test_calc.py"
    turns = [
        _fault(529),
        _fault(429),
        {"text": "I'll plan this first.", "tool_calls": [{"name": "todo", "input": PLAN}]},
        _fault(529),
        _call("read_file", {"path": "calc.py"}, expect=_ok("(0/2 completed)")),
        _call(
            "edit_file",
            {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"},
            expect=_ok("return a - b"),
        ),
        _call(
            "write_file",
            {"path": "docs/CHANGES.md", "content": "- add adds now\n"},
            expect=_ok("Edited calc.py"),
        ),
        _call("todo", PLAN_NEXT, expect=_ok("Wrote")),
        _call("bash", {"command": test_command}, expect=_ok("(1/2 completed)")),
        _call("todo", PLAN_DONE, expect=_ok("calc ok")),
        {"text": "Fixed add; the test passes.", "expect": _ok("(2/2 completed)")},
    ]
    # A real process: the one whole task that goes through `python -m orchestrator` itself.
    run = _run_task(tmp_path, turns, in_a_process=True)
    assert run.code == 0, run.stderr
    assert (workdir / "calc.py").read_text(encoding="utf-8") == CALC.replace("a - b", "a + b")
    assert (workdir / "docs" / "CHANGES.md").read_text(encoding="utf-8") == "- add adds now\n"
    assert len(run.requests) == len(turns)
    assert all(body["model"] and body["stream"] is True for body in run.requests)
    # A retry sends the same body again; the trace sees one request per round.
    assert run.requests[0] == run.requests[1] == run.requests[2]
    assert run.requests[3] == run.requests[4]
    assert [event["round"] for event in run.events("model.request")] == list(range(1, 9))
    assert "Fixed add; the test passes." in run.stdout
    (finished,) = run.events("run.finished")
    assert (finished["status"], finished["rounds"]) == ("done", 8)
    assert [event["seq"] for event in run.trace] == list(range(1, len(run.trace) + 1))
    assert "test-key" not in json.dumps(run.trace)


def test_a_stale_plan_gets_a_reminder(tmp_path: Path) -> None:
    turns = [
        _call("todo", PLAN),
        _call("bash", {"command": "echo one"}, expect_reminder=False),
        _call("bash", {"command": "echo two"}, expect_reminder=False),
        _call("bash", {"command": "echo three"}, expect_reminder=False),
        _call("todo", PLAN_NEXT, expect=_ok("three"), expect_reminder=True),
        {"text": "Back on track.", "expect": _ok("(1/2 completed)"), "expect_reminder": False},
    ]
    run = _run_task(tmp_path, turns, "--settle-plan", "false")  # ends with items open
    assert run.code == 0, run.stderr
    (reminder,) = run.events("audit.reminder")
    assert (reminder["round"], reminder["rounds_since_update"]) == (4, 3)
    last_user = run.requests[4]["messages"][-1]["content"]
    assert [block["type"] for block in last_user] == ["tool_result", "text"]
    assert "<reminder>Update your todos.</reminder>" in last_user[-1]["text"]
    assert "[>] #1: Fix add" in last_user[-1]["text"]


def test_a_rejected_plan_update_then_a_corrected_one(tmp_path: Path) -> None:
    turns = [
        _call("todo", PLAN),
        _call("todo", TWO_IN_PROGRESS, expect=_ok("(0/2 completed)")),
        _call("todo", PLAN_NEXT, expect=_error("Only one task can be in_progress")),
        {"text": "Plan fixed.", "expect": _ok("[>] #2: Run the tests")},
    ]
    run = _run_task(tmp_path, turns, "--settle-plan", "false")  # ends with items open
    assert run.code == 0, run.stderr
    assert len(run.events("plan.rejected")) == 1
    assert [event["revision"] for event in run.events("plan.updated")] == [1, 2]
    assert "[x] #1: Fix add" in run.stdout


def test_a_repeated_call_is_blocked_and_the_run_goes_on(tmp_path: Path) -> None:
    turns = [
        _call("bash", {"command": "echo again"}),
        _call("bash", {"command": "echo again"}, expect=_ok("again")),
        _call("bash", {"command": "echo different"}, expect=_error("identical to the previous")),
        {"text": "Moved on.", "expect": _ok("different")},
    ]
    run = _run_task(tmp_path, turns)
    assert run.code == 0, run.stderr
    (blocked,) = run.events("guard.blocked")
    assert (blocked["name"], blocked["rule"], blocked["round"]) == ("bash", "repeat", 2)


def test_a_path_escape_is_refused_and_nothing_is_written_outside(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    kept = tmp_path / "kept.txt"
    kept.write_text("original\n", encoding="utf-8")
    (workdir / "link.txt").symlink_to(kept)
    turns = [
        _call("write_file", {"path": "../outside.txt", "content": "escaped"}),
        _call(
            "write_file",
            {"path": str(tmp_path / "absolute.txt"), "content": "escaped"},
            expect=_error("escapes the work directory"),
        ),
        _call(
            "edit_file",
            {"path": "link.txt", "old_text": "original", "new_text": "escaped"},
            expect=_error("escapes the work directory"),
        ),
        _call(
            "write_file",
            {"path": "inside.txt", "content": "fine"},
            expect=_error("escapes the work directory"),
        ),
        {"text": "Stayed inside.", "expect": _ok("Wrote")},
    ]
    run = _run_task(tmp_path, turns)
    assert run.code == 0, run.stderr
    assert not (tmp_path / "outside.txt").exists()
    assert not (tmp_path / "absolute.txt").exists()
    assert kept.read_text(encoding="utf-8") == "original\n"
    assert (workdir / "inside.txt").read_text(encoding="utf-8") == "fine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt", "t.jsonl", "work"]


# --- approvals ----------------------------------------------------------------------------


def test_without_a_terminal_refusals_are_announced_counted_and_not_a_clean_success(
    tmp_path: Path,
) -> None:
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "bash", "input": {"command": "echo run > ran.txt"}},
                {"name": "write_file", "input": {"path": "new.txt", "content": "x"}},
                {"name": "read_file", "input": {"path": "missing.txt"}},
                {"name": "todo", "input": PLAN},
            ]
        },
        {
            "text": "Nothing was allowed, so I stop here.",
            "expect": [
                {"is_error": True, "contains": "bash did not run: this session has no one"},
                {"is_error": True, "contains": "write_file did not run"},
                {"is_error": True, "contains": "does not exist"},
                {"is_error": False, "contains": "(0/2 completed)"},
            ],
        },
        # The plan is unsettled, so one reminder comes; the model says again why it stops.
        {"text": "Still nothing I can do without approval."},
    ]
    run = _run_task(tmp_path, turns, yes=False)
    # Done, but not a clean success: exit 3 says some actions never happened.
    assert run.code == 3, run.stderr
    assert not (tmp_path / "work" / "ran.txt").exists()
    assert not (tmp_path / "work" / "new.txt").exists()
    results = [event["output"] for event in run.events("tool.result")]
    assert not any("declined" in output for output in results)
    # One line at the start says nothing can be approved here, before the model is asked.
    notice = [line for line in run.stderr.splitlines() if "no terminal to ask" in line]
    assert len(notice) == 1
    assert "2 action(s) refused" in run.stdout
    assert "bash echo run > ran.txt: no terminal to ask (--approval ask)" in run.stdout
    assert "write_file new.txt: no terminal to ask (--approval ask)" in run.stdout


@pytest.mark.parametrize(
    ("mode", "ran", "written", "code"),
    [("auto", True, True, 0), ("edits", False, True, 3), ("deny", False, False, 3)],
)
def test_approval_modes_decide_what_runs_without_a_terminal(
    tmp_path: Path, mode: str, ran: bool, written: bool, code: int
) -> None:
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "bash", "input": {"command": "echo run > ran.txt"}},
                {"name": "write_file", "input": {"path": "new.txt", "content": "x"}},
            ]
        },
        {"text": "Finished."},
    ]
    run = _run_task(tmp_path, turns, "--approval", mode, yes=False)
    assert run.code == code, run.stdout + run.stderr
    assert (tmp_path / "work" / "ran.txt").exists() == ran
    assert (tmp_path / "work" / "new.txt").exists() == written
    assert ("no terminal to ask" in run.stderr) == (mode == "edits")
    if mode == "deny":
        assert (
            "not allowed in this session (--approval deny)"
            in run.events("tool.result")[0]["output"]
        )


# --- exit codes ---------------------------------------------------------------------------


def test_max_rounds_fails_with_exit_code_1(tmp_path: Path) -> None:
    turns = [_call("bash", {"command": f"echo {n}"}) for n in range(4)]
    run = _run_task(tmp_path, turns, "--max-rounds", "2")
    assert run.code == 1
    assert len(run.requests) == 2
    assert "--max-rounds" in run.stderr
    assert run.events("run.finished")[0]["status"] == "failed"


def test_a_persistent_529_without_retries_fails_with_one_line(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [_fault(529), {"text": "never reached"}]
    run = _run_task(tmp_path, turns, "--max-retries", "0")
    assert run.code == 1
    assert len(run.requests) == 1
    # Not the header: it names the work directory, whose name holds "529" too.
    (line,) = [line for line in run.stderr.splitlines() if "API error 529" in line]
    assert "overloaded" in line
    assert run.events("run.finished")[0]["reason"] in line


@pytest.mark.parametrize(
    "args",
    [
        ["run", "task", "--no-such-flag"],
        ["run", "task", "--max-rounds", "0"],
        ["run"],
    ],
)
def test_a_usage_error_exits_2_with_one_line(tmp_path: Path, args: list[str]) -> None:
    process = _orchestrator(args, _environment(ANTHROPIC_API_KEY="test-key"), tmp_path)
    assert process.returncode == 2
    assert "Traceback" not in process.stderr
    lines = process.stderr.strip().splitlines()
    assert len(lines) == 1, process.stderr
    assert lines[0].startswith("orchestrator: error:")


def test_a_missing_api_key_exits_2_and_says_how_to_set_it(tmp_path: Path) -> None:
    process = _orchestrator(
        ["run", "Do it", "--workdir", str(tmp_path), "--yes"], _environment(), tmp_path
    )
    assert process.returncode == 2
    (line,) = process.stderr.strip().splitlines()
    assert "ANTHROPIC_API_KEY" in line
    assert "orchestrator demo" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_ctrl_c_while_the_model_answers_exits_130(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    trace = tmp_path / "t.jsonl"
    script = parse_script(
        {"name": "slow", "turns": [{"fault": "slow", "seconds": 30}, {"text": "too late"}]},
        source="test",
    )
    with MessagesServer(script) as server:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        args = ["run", "Wait", "--workdir", str(tmp_path / "work"), "--trace", str(trace)]
        process = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args, "--yes"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + TIMEOUT
            while not server.requests and process.poll() is None:
                assert time.monotonic() < deadline, "the request never arrived"
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=TIMEOUT)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    finished = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()][-1]
    assert (finished["event"], finished["status"]) == ("run.finished", "interrupted")


# --- the demo -----------------------------------------------------------------------------


def test_demo_refactors_hello_and_its_test_passes(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    process = _orchestrator(["demo", "--workdir", str(workdir)], _environment(), tmp_path)
    assert process.returncode == 0, process.stderr
    hello = (workdir / "hello.py").read_text(encoding="utf-8")
    assert "def greet(name: str) -> str:" in hello
    assert 'if __name__ == "__main__":' in hello
    check = subprocess.run(
        [sys.executable, "test_hello.py"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SCRIPTED" in process.stdout


def test_the_demo_prints_commands_a_person_can_paste(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from orchestrator.cli._common import how_i_was_called as _how_i_was_called

    monkeypatch.setattr(sys, "argv", [".venv/bin/orchestrator", "demo"])
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    assert _how_i_was_called() == ".venv/bin/orchestrator"
    monkeypatch.setattr(shutil, "which", lambda _name: ".venv/bin/orchestrator")
    assert _how_i_was_called() == "orchestrator"
    monkeypatch.setattr(sys, "argv", ["/x/orchestrator/__main__.py", "demo"])
    assert _how_i_was_called().endswith(" -P -m orchestrator")


# --- input, help, output formats -------------------------------------------------------------


def _piped(args: Sequence[str], env: Mapping[str, str], cwd: Path, stdin: str) -> Any:
    return run_cli(args, env=env, cwd=cwd, input=stdin)


@pytest.mark.parametrize("args", [["run", "-"], ["run"]], ids=["dash", "no-argument"])
def test_the_task_is_read_from_piped_stdin(tmp_path: Path, args: list[str]) -> None:
    script = parse_script({"name": "stdin", "turns": [{"text": "Read it."}]}, source="test")
    with MessagesServer(script) as server:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        done = _piped(
            [*args, "--workdir", str(tmp_path)], env, tmp_path, "Fix the bug\nin calc.py\n"
        )
        requests = server.requests
    assert done.returncode == 0, done.stderr
    assert requests[0]["messages"][0]["content"][0]["text"] == "Fix the bug\nin calc.py"


@pytest.mark.parametrize(
    ("args", "stdin"), [(["run", "   "], ""), (["run", "-"], "\n  \n")], ids=["arg", "stdin"]
)
def test_an_empty_task_is_a_usage_error(tmp_path: Path, args: list[str], stdin: str) -> None:
    env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    done = _piped(args, env, tmp_path, stdin)
    assert done.returncode == 2
    assert done.stderr == ("orchestrator: error: the task is empty; say what the agent should do\n")


def test_bare_orchestrator_and_h_print_help_and_exit_0(tmp_path: Path) -> None:
    env = _environment()
    bare = _orchestrator([], env, tmp_path)
    short = _orchestrator(["-h"], env, tmp_path)
    assert bare.returncode == short.returncode == 0
    assert bare.stdout == short.stdout
    assert bare.stdout.startswith("Usage: orchestrator [OPTIONS] COMMAND [ARGS]...")
    for command in ("run", "chat", "resume", "sessions", "show", "diagram", "config", "demo"):
        assert f"  {command} " in bare.stdout
    assert bare.stderr == ""


def test_every_setting_has_a_flag_with_its_default_and_variables_in_help(tmp_path: Path) -> None:
    from orchestrator.config import SETTINGS

    done = _orchestrator(["run", "-h"], _environment(), tmp_path)
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # help wraps lines; compare on words
    for setting in SETTINGS:
        if setting.secret:
            assert setting.flag not in text  # a key on a command line would end up in ps
            continue
        assert setting.flag in text, setting.name
        for variable in setting.env:
            assert variable in text, variable
        if setting.default not in (None, False) and not isinstance(setting.default, tuple):
            shown = (
                f"{setting.default:g}" if isinstance(setting.default, float) else setting.default
            )
            assert f"[default: {shown}]" in text, setting.name


def test_a_user_config_file_sits_below_the_project_file(tmp_path: Path) -> None:
    user = tmp_path / "user-config"
    user.mkdir()
    (user / "config.toml").write_text("max_rounds = 7\nplan_limit = 9\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / "orchestrator.toml").write_text("max_rounds = 5\n", encoding="utf-8")
    env = _environment(ORCHESTRATOR_CONFIG_DIR=str(user))
    done = _orchestrator(["config", "--workdir", str(project)], env, tmp_path)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert f"5  ({project / 'orchestrator.toml'} [max_rounds])" in rows["max_rounds"]
    assert f"9  ({user / 'config.toml'} [plan_limit])" in rows["plan_limit"]
    assert f"user file:    {user / 'config.toml'}" in done.stdout


def test_output_format_json_prints_one_final_object(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "x"}}],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        {"text": "Wrote a.txt.", "usage": {"input_tokens": 20, "output_tokens": 7}},
    ]
    run = _run_task(tmp_path, turns, "--output-format", "json", "--approval", "deny", yes=False)
    assert run.code == 3
    (line,) = run.stdout.splitlines()
    result = json.loads(line)
    assert list(result) == [
        "answer",
        "status",
        "exit_code",
        "reason",
        "rounds",
        "usage",
        "cost_usd",
        "duration_s",
        "model",
        "trace",
        "resume",
        "refused_actions",
        "unfinished",
        "run_id",
        "plan",
    ]
    assert result["answer"] == "Wrote a.txt."
    assert (result["status"], result["exit_code"], result["rounds"]) == ("done", 3, 2)
    assert result["usage"]["input_tokens"] == 30
    assert result["usage"]["output_tokens"] == 12
    assert result["cost_usd"] > 0
    assert result["trace"] == str(tmp_path / "t.jsonl")
    assert result["refused_actions"] == [
        {"tool": "write_file", "target": "a.txt", "reason": "refused by --approval deny"}
    ]
    assert result["reason"] == "1 call was refused: write_file a.txt"  # why exit 3, in one line


@pytest.mark.parametrize("flags", [["--json"], ["--output-format", "stream-json"]])
def test_stream_json_is_the_old_json_flag(
    tmp_path: Path,
    flags: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from orchestrator.cli import main

    script = parse_script({"name": "stream", "turns": [{"text": "Hello."}]}, source="test")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        with pytest.raises(SystemExit) as exited:
            main(["run", "hi", "--yes", "--workdir", str(tmp_path), *flags])
    assert exited.value.code == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert events[0]["event"] == "run.started"
    assert [e["event"] for e in events[-2:]] == ["run.finished", "result"]


def test_project_instructions_join_the_system_prompt_and_are_announced(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("Run tests with `make check`.\n", encoding="utf-8")
    (work / "CLAUDE.md").write_text("Use tabs.\n", encoding="utf-8")
    run = _run_task(tmp_path, [{"text": "Noted."}])
    assert run.code == 0, run.stderr
    system = json.dumps(run.requests[0]["system"])
    assert "Run tests with `make check`." in system
    assert "Use tabs." in system
    assert "project instructions: AGENTS.md, CLAUDE.md" in run.stdout


def test_the_demo_refuses_a_workdir_holding_its_files(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text("mine\n", encoding="utf-8")
    done = _orchestrator(["demo", "--workdir", str(tmp_path)], _environment(), tmp_path)
    assert done.returncode == 2
    assert "already holds hello.py" in done.stderr
    assert (tmp_path / "hello.py").read_text(encoding="utf-8") == "mine\n"


def test_a_malformed_base_url_fails_at_once_naming_the_variable(tmp_path: Path) -> None:
    env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL="not-a-url")
    done = _orchestrator(["run", "task", "--workdir", str(tmp_path)], env, tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "orchestrator: error: ANTHROPIC_BASE_URL: base_url must be an http(s) URL such as "
        "https://api.anthropic.com, got 'not-a-url'\n"
    )


def test_an_auth_token_alone_is_enough(tmp_path: Path) -> None:
    script = parse_script({"name": "token", "turns": [{"text": "Hi."}]}, source="test")
    with MessagesServer(script) as server:
        env = _environment(ANTHROPIC_AUTH_TOKEN="token-9", ANTHROPIC_BASE_URL=server.base_url)
        done = _orchestrator(["run", "hello", "--workdir", str(tmp_path)], env, tmp_path)
        headers = server.request_headers
    assert done.returncode == 0, done.stderr
    assert headers[0]["authorization"] == "Bearer token-9"


def test_deny_bash_leaves_list_files_to_look_around(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "pkg" / ".git").mkdir(parents=True)
    (work / "pkg" / "mod.py").write_text("x = 1\n", encoding="utf-8")
    (work / "README").write_text("hi\n", encoding="utf-8")
    turns = [
        _call("list_files", {"recursive": True}),
        {"text": "Seen.", "expect": [{"is_error": False, "equals": "README\npkg/\npkg/mod.py"}]},
    ]
    run = _run_task(tmp_path, turns, "--deny-bash")
    assert run.code == 0, run.stderr
    names = [tool["name"] for tool in run.requests[0]["tools"]]
    assert "bash" not in names
    assert "list_files" in names


# --- a start you can see (issue 26, item 3) --------------------------------------------------


def test_the_start_says_model_workdir_sandbox_approval_and_window(tmp_path: Path) -> None:
    finished = _run_task(tmp_path, [{"text": "Nothing to do."}], "--sandbox", "workdir")
    header = [line for line in finished.stderr.splitlines() if " · workdir " in line]
    assert len(header) == 1, finished.stderr
    line = header[0]
    assert line.startswith("orchestrator: model ")
    assert f"workdir {tmp_path / 'work'}" in line
    assert "sandbox workdir" in line
    assert "approval auto" in line  # --yes
    assert "window 200,000 tokens (Models API)" in line
    assert "checking model" in finished.stderr.split(line)[0]


def test_resume_names_the_session_the_task_and_the_round_it_goes_on_from(tmp_path: Path) -> None:
    first = _run_task(tmp_path, [{"text": "Half done."}], "--settle-plan", "false")
    run_id = first.events("run.started")[0]["run_id"]
    script = parse_script({"name": "more", "turns": [{"text": "All done."}]}, source="test")
    with MessagesServer(script) as server:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        done = _orchestrator(["resume", str(tmp_path / "t.jsonl"), "go on", "--yes"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stderr.splitlines() if " · workdir " in line)
    assert f"resuming session {run_id} after round 1: Fix add in calc.py" in header


class _SilentEndpoint:
    """A host that accepts connections and never says a byte: a hung proxy."""

    def __init__(self) -> None:
        import socket
        import threading

        self._socket = socket.create_server(("127.0.0.1", 0))
        self._held: list[socket.socket] = []
        self._closed = threading.Event()
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._socket.accept()
            except OSError:
                return
            self._held.append(connection)

    def close(self) -> None:
        self._closed.set()
        self._socket.close()
        for connection in self._held:
            connection.close()


def test_a_silent_endpoint_shows_the_lookup_and_fails_within_its_bounds(tmp_path: Path) -> None:
    endpoint = _SilentEndpoint()
    trace = tmp_path / "t.jsonl"
    try:
        env = _environment(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=endpoint.base_url)
        args = ["run", "Say hi", "--workdir", str(tmp_path), "--trace", str(trace), "--yes"]
        done = _orchestrator([*args, "--read-timeout", "1", "--max-retries", "0"], env, tmp_path)
    finally:
        endpoint.close()
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("orchestrator: checking model ")
    header = next(line for line in lines if " · workdir " in line)
    assert "window 200,000 tokens (assumed: the Models API did not say)" in header
    assert "the API sent nothing for 1 s (after 0 retries)" in done.stderr
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run.finished"
    assert events[-1]["status"] == "failed"
    window = next(event for event in events if event["event"] == "context.window")
    assert window["source"] == "fallback"
    assert "models.retrieve" in window["reason"]


# --- budgets (issue 26, item 7) ---------------------------------------------------------------


def test_max_cost_ends_the_run_cleanly_once_spent(tmp_path: Path) -> None:
    turns = [_call("bash", {"command": f"echo {n}"}) for n in range(6)]
    # $1 a token of any kind: the first round alone spends far past $1.
    run = _run_task(tmp_path, turns, "--max-cost", "1", "--price-per-mtok", "1e6,1e6,1e6,1e6")
    assert run.code == 1, run.stderr
    assert len(run.requests) == 1
    (line,) = [line for line in run.stderr.splitlines() if "run failed" in line]
    assert "reaching --max-cost 1" in line
    finished = run.events("run.finished")[0]
    assert finished["status"] == "failed" and "--max-cost" in finished["reason"]
    check = _orchestrator(
        ["replay", "--check", str(tmp_path / "t.jsonl")], _environment(), tmp_path
    )
    assert check.returncode == 0, check.stderr


def test_max_duration_ends_the_run_between_rounds(tmp_path: Path) -> None:
    # The sleep outlasts the 1 s budget however fast the machine, so the check must end it.
    turns = [_call("bash", {"command": "sleep 1.2"}), _call("bash", {"command": "echo never"})]
    run = _run_task(tmp_path, [*turns, {"text": "never reached"}], "--max-duration", "1s")
    assert run.code == 1, run.stderr
    assert len(run.requests) == 1
    assert "reaching --max-duration 1 s" in run.events("run.finished")[0]["reason"]


def test_max_cost_for_a_model_without_a_price_is_refused_at_once(tmp_path: Path) -> None:
    run = _run_task(tmp_path, [{"text": "unused"}], "--max-cost", "1", "--model", "gateway-x")
    assert run.code == 2
    assert run.stderr.count("\n") == 1, run.stderr
    assert "--price-per-mtok" in run.stderr
    assert run.requests == []
