"""Hooks in Claude Code's protocol: loaded from the files, run with its JSON, obeyed by exit code.

The runner is driven directly on real shell commands; the events that meet the machines are
driven through the real CLI, the real SDK and the loopback Messages-API server.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.hooks import Hook, HookConfigError, HookRunner, load_hooks
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request
from tests.in_process import run_cli
from tests.test_cli import _environment

TIMEOUT = 120


#: What the runners below said to the person, per test.
SAID: list[str] = []


def _runner(tmp_path: Path, *hooks: Hook, secrets: tuple[str, ...] = ()) -> HookRunner:
    SAID.clear()
    return HookRunner(
        hooks,
        tmp_path,
        session_id="s1",
        transcript_path="/t.jsonl",
        secrets=secrets,
        notice=SAID.append,
    )


# --- the files --------------------------------------------------------------------------------


def test_hooks_load_in_both_shapes_and_name_their_file(tmp_path: Path) -> None:
    project = tmp_path / "orchestrator.toml"
    project.write_text(
        '[[hooks.PreToolUse]]\nmatcher = "bash"\ncommand = "./guard.sh"\ntimeout = 30\n\n'
        '[[hooks.Stop]]\nhooks = [{ type = "command", command = "make test" }]\n',
        encoding="utf-8",
    )
    pre, stop = load_hooks([(tmp_path / "missing.toml", False), (project, True)])
    assert (pre.event, pre.matcher, pre.command, pre.timeout) == (
        "PreToolUse",
        "bash",
        "./guard.sh",
        30.0,
    )
    assert (stop.event, stop.command, stop.project, stop.origin) == (
        "Stop",
        "make test",
        True,
        str(project),
    )


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        ('[[hooks.OnTuesday]]\ncommand = "x"\n', "unknown event"),
        ('[[hooks.Stop]]\ncommand = ""\n', "needs a command"),
        ('[[hooks.PreToolUse]]\nmatcher = "("\ncommand = "x"\n', "is not a regex"),
        ('[[hooks.Stop]]\ncommand = "x"\ntimeout = -1\n', "timeout must be"),
        ('[hooks]\nStop = "x"\n', "array of tables"),
    ],
)
def test_a_bad_hook_table_is_refused_naming_it(tmp_path: Path, toml: str, words: str) -> None:
    path = tmp_path / "orchestrator.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(HookConfigError, match=words) as raised:
        load_hooks([(path, True)])
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("matcher", "tool", "matches"),
    [
        ("Bash", "bash", True),
        ("bash", "bash", True),
        ("Edit|Write", "write_file", True),
        ("Edit|Write", "bash", False),
        ("TodoWrite", "todo", True),
        ("", "mcp__docs__search", True),
        ("mcp__docs__.*", "mcp__docs__search", True),
        ("Read", "read_file", True),
    ],
)
def test_matchers_take_claude_codes_tool_names_and_ours(
    matcher: str, tool: str, matches: bool
) -> None:
    assert Hook("PreToolUse", "x", matcher).matches(tool) is matches


# --- the runner -------------------------------------------------------------------------------


def test_the_hook_reads_claude_codes_json_on_stdin(tmp_path: Path) -> None:
    runner = _runner(tmp_path, Hook("PreToolUse", "cat > payload.json"))
    outcome = runner.run("PreToolUse", {"tool_name": "bash", "tool_input": {"command": "ls"}})
    assert not outcome.blocked
    payload = json.loads((tmp_path / "payload.json").read_text(encoding="utf-8"))
    assert payload == {
        "session_id": "s1",
        "transcript_path": "/t.jsonl",
        "cwd": str(tmp_path),
        "hook_event_name": "PreToolUse",
        "tool_name": "bash",
        "tool_input": {"command": "ls"},
    }


def test_exit_2_blocks_with_stderr_and_other_codes_only_say_so(tmp_path: Path) -> None:
    blocking = _runner(tmp_path, Hook("Stop", "echo 'tests fail' >&2; exit 2"))
    outcome = blocking.run("Stop", {})
    assert (outcome.blocked, outcome.reason) == (True, "tests fail")
    failing = _runner(tmp_path, Hook("Stop", "echo oops >&2; exit 1"))
    outcome = failing.run("Stop", {})
    assert not outcome.blocked
    assert SAID == ["orchestrator: Stop hook `echo oops >&2; exit 1` failed (exit 1): oops"]


@pytest.mark.parametrize(
    ("printed", "blocked", "reason"),
    [
        ('{"decision": "block", "reason": "not yet"}', True, "not yet"),
        (
            '{"hookSpecificOutput": {"hookEventName": "PreToolUse", '
            '"permissionDecision": "deny", "permissionDecisionReason": "no force pushes"}}',
            True,
            "no force pushes",
        ),
        ('{"continue": false, "stopReason": "enough"}', True, "enough"),
        ('{"decision": "approve"}', False, ""),
        ("plain words", False, ""),
    ],
)
def test_json_on_stdout_decides_as_claude_code_reads_it(
    tmp_path: Path, printed: str, blocked: bool, reason: str
) -> None:
    (tmp_path / "out.txt").write_text(printed, encoding="utf-8")
    outcome = _runner(tmp_path, Hook("PreToolUse", "cat out.txt")).run("PreToolUse", {}, "bash")
    assert (outcome.blocked, outcome.reason) == (blocked, reason)


def test_garbage_output_is_a_non_blocking_error(tmp_path: Path) -> None:
    runner = _runner(tmp_path, Hook("PostToolUse", "printf '{not json\\x00\\xff'"))
    outcome = runner.run("PostToolUse", {}, "bash")
    assert not outcome.blocked
    assert "not JSON" in SAID[0]


def test_a_hanging_hook_is_killed_with_what_it_started(tmp_path: Path) -> None:
    hook = Hook("Stop", "sleep 300 & echo $! > child.pid; sleep 300", timeout=1)
    runner = _runner(tmp_path, hook)
    outcome = runner.run("Stop", {})
    assert not outcome.blocked
    assert "timed out after 1 s; killed" in SAID[0]
    child = int((tmp_path / "child.pid").read_text(encoding="utf-8"))
    for _ in range(100):  # the kill is sent; the kernel may take a moment to reap it
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return False
    return "\nState:\tZ" not in status  # a zombie has ended; only its entry waits for a reaper


def test_hook_output_is_redacted(tmp_path: Path) -> None:
    secret = "sk-ant-api03-very-secret-value"
    runner = _runner(tmp_path, Hook("Stop", f"echo 'key {secret}' >&2; exit 2"), secrets=(secret,))
    outcome = runner.run("Stop", {})
    assert secret not in outcome.reason
    assert "[REDACTED]" in outcome.reason


# --- through the CLI --------------------------------------------------------------------------


def _env(server: MessagesServer, config_dir: Path) -> dict[str, str]:
    return _environment(
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=server.base_url,
        ORCHESTRATOR_CONFIG_DIR=str(config_dir),
        ORCHESTRATOR_STATE_DIR=str(config_dir / "state"),
    )


def _run(
    tmp_path: Path, turns: Sequence[Mapping[str, Any]], hooks_toml: str, *flags: str
) -> tuple[subprocess.CompletedProcess[str], MessagesServer, Path]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "orchestrator.toml").write_text(hooks_toml, encoding="utf-8")
    trace = tmp_path / "t.jsonl"
    script = parse_script({"name": "hooks", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        done = run_cli(
            [
                *("run", "Do it", "--workdir", str(work)),
                *("--trace", str(trace), "--yes", "--sandbox", "workdir", *flags),
            ],
            env=_env(server, tmp_path / "config"),
            cwd=tmp_path,
        )
    assert "Traceback" not in done.stderr, done.stderr
    assert server.violations == [], done.stderr
    assert all(check_request(body) == [] for body in server.requests)
    return done, server, trace


def _replays(trace: Path, tmp_path: Path) -> None:
    check = run_cli(["replay", "--check", str(trace)], cwd=tmp_path)
    assert check.returncode == 0, check.stderr


NO_FORCE = (
    '[[hooks.PreToolUse]]\nmatcher = "Bash"\n'
    "command = \"grep -q 'push --force' && "
    "{ echo 'no force pushes here' >&2; exit 2; } || exit 0\"\n"
)


def test_a_pre_tool_use_hook_that_exits_2_blocks_the_call_and_the_model_reads_why(
    tmp_path: Path,
) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "git push --force; touch ran"}}]},
        {
            "text": "Understood, no force push.",
            "expect": [{"is_error": True, "contains": "no force pushes here"}],
        },
    ]
    done, _, trace = _run(tmp_path, turns, NO_FORCE, "--trust")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work" / "ran").exists()
    _replays(trace, tmp_path)


def test_a_stop_hook_keeps_the_model_working_like_the_done_check(tmp_path: Path) -> None:
    stop = "[[hooks.Stop]]\ncommand = \"test -f ok || { echo 'create ok first' >&2; exit 2; }\"\n"
    turns: list[dict[str, Any]] = [
        {"text": "All done!"},
        {"tool_calls": [{"name": "bash", "input": {"command": "touch ok"}}]},
        {"text": "Now it is done."},
    ]
    done, server, trace = _run(tmp_path, turns, stop, "--trust")
    assert done.returncode == 0, done.stderr
    second = json.dumps(server.requests[1]["messages"][-1])
    assert "create ok first" in second
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    checks = [e for e in events if e["event"] == "loop.done_check"]
    assert [c["passed"] for c in checks] == [False]  # the second stop passed: nothing blocked
    assert events[-1]["status"] == "done"
    _replays(trace, tmp_path)


def test_a_task_completed_hook_refuses_a_completion_until_it_passes(tmp_path: Path) -> None:
    hook = (
        "[[hooks.TaskCompleted]]\n"
        'command = "grep -q \'\\"id\\": \\"1\\"\' && test ! -f ok && '
        "{ echo 'item 1 needs ok' >&2; exit 2; } || exit 0\"\n"
    )
    plan = {"items": [{"id": "1", "text": "Make ok", "status": "in_progress"}]}
    done_plan = {"merge": True, "items": [{"id": "1", "status": "completed"}]}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {"tool_calls": [{"name": "todo", "input": done_plan}]},
        {
            "tool_calls": [{"name": "bash", "input": {"command": "touch ok"}}],
            "expect": [{"is_error": True, "contains": "item 1 needs ok"}],
        },
        {"tool_calls": [{"name": "todo", "input": done_plan}]},
        {"text": "Done.", "expect": [{"is_error": False, "contains": "(1/1 completed)"}]},
    ]
    done, _, trace = _run(tmp_path, turns, hook, "--trust")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    checks = [
        (e["command"].split()[0], e["exit_code"]) for e in events if e["event"] == "plan.check"
    ]
    assert checks == [("TaskCompleted", 2), ("TaskCompleted", 0)]
    _replays(trace, tmp_path)


def test_an_untrusted_projects_hooks_never_run_and_the_run_says_so(tmp_path: Path) -> None:
    spy = (
        '[[hooks.PreToolUse]]\ncommand = "touch hook-ran"\n'
        '[[hooks.SessionStart]]\ncommand = "touch hook-ran"\n'
    )
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "echo hi"}}]},
        {"text": "Done."},
    ]
    done, _, _ = _run(tmp_path, turns, spy)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work" / "hook-ran").exists()
    lines = [line for line in done.stderr.splitlines() if "hooks in" in line]
    assert len(lines) == 1 and "not trusted" in lines[0], done.stderr


def test_a_todo_call_a_hook_blocked_replays_as_never_applied(tmp_path: Path) -> None:
    no_todo = '[[hooks.PreToolUse]]\nmatcher = "TodoWrite"\ncommand = "echo no plans >&2; exit 2"\n'
    plan = {"items": [{"id": "1", "text": "Step", "status": "in_progress"}]}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {"text": "No plan, then.", "expect": [{"is_error": True, "contains": "no plans"}]},
    ]
    done, _, trace = _run(tmp_path, turns, no_todo, "--trust")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert not [e for e in events if e["event"] == "plan.updated"]
    _replays(trace, tmp_path)


def test_post_tool_use_speaks_after_a_call_that_succeeded_only(tmp_path: Path) -> None:
    from orchestrator.hooks import HookedTools
    from orchestrator.tools import ReadFileTool, ToolRegistry, Workdir

    (tmp_path / "a.txt").write_text("hello\n", encoding="utf-8")
    hook = Hook("PostToolUse", "cat >> seen.jsonl; echo; echo 'lint: 2 warnings' >&2; exit 2")
    tools = HookedTools(ToolRegistry([ReadFileTool(Workdir(tmp_path))]), _runner(tmp_path, hook))
    read = tools.dispatch("read_file", {"path": "a.txt"})
    assert not read.is_error
    assert read.text.endswith("[PostToolUse hook: lint: 2 warnings]")
    missing = tools.dispatch("read_file", {"path": "nope.txt"})
    assert missing.is_error and "PostToolUse" not in missing.text
    seen = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines() if line]
    assert [event["tool_input"]["path"] for event in seen] == ["a.txt"]
    assert "hello" in seen[0]["tool_response"]["output"]


def test_a_hook_that_leaves_a_session_of_its_own_running_does_not_hold_the_run(
    tmp_path: Path,
) -> None:
    # A setsid child keeps whatever it inherited open for ever: the verdict is the hook's own.
    decision = '{"decision": "block", "reason": "nope"}'
    (tmp_path / "out.txt").write_text(decision, encoding="utf-8")
    hook = Hook("PreToolUse", "setsid sleep 300 & echo $! > child.pid; cat out.txt", timeout=30)
    try:
        outcome = _runner(tmp_path, hook).run("PreToolUse", {}, "bash")
    finally:
        os.kill(int((tmp_path / "child.pid").read_text(encoding="utf-8")), 9)
    assert (outcome.blocked, outcome.reason) == (True, "nope")


def test_continue_false_lets_a_stop_end_and_refuses_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text(
        '{"continue": false, "stopReason": "enough", "decision": "block"}', encoding="utf-8"
    )
    stop = _runner(tmp_path, Hook("Stop", "cat out.txt")).run("Stop", {})
    assert not stop.blocked  # "continue": false outranks "decision" and means: stop now
    pre = _runner(tmp_path, Hook("PreToolUse", "cat out.txt")).run("PreToolUse", {}, "bash")
    assert (pre.blocked, pre.reason) == (True, "enough")


def test_a_refused_first_message_leaves_no_empty_trace(tmp_path: Path) -> None:
    refuse = '[[hooks.UserPromptSubmit]]\ncommand = "echo nope >&2; exit 2"\n'
    done, server, trace = _run(tmp_path, [{"text": "never asked"}], refuse, "--trust")
    assert done.returncode == 1
    assert "a UserPromptSubmit hook refused the message: nope" in done.stderr
    assert server.requests == []
    assert not trace.exists()
    assert "resume" not in done.stdout + done.stderr.split("refused the message")[1]
