"""Tests for ``orchestrator chat`` in a pseudo-terminal and for Ctrl-C on ``orchestrator run``.

Both run the real CLI and the real anthropic SDK against the package's loopback Messages API.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from orchestrator.replay import check_trace, rebuild
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request
from orchestrator.trace_file import read_trace

# A real chat process on a pseudo-terminal: the e2e layer (docs/development.md).
pytestmark = pytest.mark.e2e

PROMPT = "you> "
TIMEOUT = 30


def _server(*turns: dict[str, Any]) -> MessagesServer:
    return MessagesServer(parse_script({"name": "chat", "turns": list(turns)}, source="chat.json"))


def _env(server: MessagesServer, state: Path | None = None) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
        and name.lower() not in ("http_proxy", "https_proxy", "all_proxy")
    }
    env.update(
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL=server.base_url,
        ORCHESTRATOR_MAX_RETRIES="0",
        NO_COLOR="1",
        TERM="dumb",
    )
    if state is not None:
        env["ORCHESTRATOR_STATE_DIR"] = str(state)
    return env


def _assert_requests_were_well_formed(server: MessagesServer) -> None:
    assert server.violations == []
    for number, body in enumerate(server.requests, start=1):
        assert check_request(body) == [], f"request {number}"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def _state(workdir: Path) -> Path:
    """Each chat's own per-user state directory (history, traces), beside its work directory."""
    return workdir.parent / f"{workdir.name}-state"


def _start_chat(server: MessagesServer, workdir: Path, *flags: str) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "orchestrator", "chat", "--yes", "--workdir", str(workdir), *flags],
        env=_env(server, _state(workdir)),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(40, 200),
    )


def _wait_for_prompt(child: pexpect.spawn) -> None:
    child.expect_exact("/exit to leave")
    child.expect_exact(PROMPT)


def _spawn_chat(server: MessagesServer, workdir: Path) -> pexpect.spawn:
    child = _start_chat(server, workdir)
    _wait_for_prompt(child)
    return child


def _at_prompt(child: pexpect.spawn) -> None:
    """Wait for the prompt and for the terminal to be in its raw mode.

    The prompt is printed just before prompt_toolkit switches the terminal to raw mode; a
    Ctrl-D or Ctrl-C sent in that moment would be read by the cooked terminal instead.
    """
    child.expect_exact(PROMPT)
    wait_for_terminal_mode(child, raw=True)


def wait_for_terminal_mode(child: pexpect.spawn, *, raw: bool) -> None:
    """Wait until the child's terminal is raw (a prompt reads keys) or cooked (Ctrl-C signals).

    Read from the pseudo-terminal's own settings, so no pause has to guess how long it takes.
    """
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        is_raw = not termios.tcgetattr(child.child_fd)[3] & termios.ICANON
        if is_raw == raw:
            return
        time.sleep(0.01)
    pytest.fail(f"the terminal never went {'raw' if raw else 'cooked'}")


def _ended(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None, f"killed by signal {child.signalstatus}"
    return int(child.exitstatus)


# The first task makes a plan; the second merges into it by id, which only works if the
# board survived between turns. The ``expect`` entries make the server check the results.
PLAN = {
    "items": [
        {"id": "1", "text": "Write greeting", "status": "in_progress", "active_form": "Writing"},
        {"id": "2", "text": "Check greeting", "status": "pending"},
    ]
}
MERGE = {
    "merge": True,
    "items": [
        {"id": "1", "status": "completed"},
        {"id": "2", "status": "in_progress", "active_form": "Checking greeting"},
    ],
}
CHAT_TURNS: list[dict[str, Any]] = [
    {"text": "Planning the greeting work.", "tool_calls": [{"name": "todo", "input": PLAN}]},
    {
        "text": "Plan made; starting on number one.",
        "expect": [{"is_error": False, "contains": ["[>] #1: Write greeting", "(0/2 completed)"]}],
    },
    {"tool_calls": [{"name": "todo", "input": MERGE}], "expect": []},
    {
        "text": "Number one is done; checking number two.",
        "expect": [
            {
                "is_error": False,
                "contains": [
                    "[x] #1: Write greeting",
                    "[>] #2: Check greeting (Checking greeting)",
                    "(1/2 completed)",
                ],
            }
        ],
    },
]


def test_chat_keeps_the_plan_across_turns_and_answers_slash_commands(workdir: Path) -> None:
    with _server(*CHAT_TURNS) as server:
        child = _spawn_chat(server, workdir)
        child.sendline("Plan the greeting work")
        child.expect_exact("Plan made; starting on number one.")
        child.expect_exact(PROMPT)

        child.sendline("/plan")
        child.expect_exact("[>] #1: Write greeting (Writing)")
        child.expect_exact("[ ] #2: Check greeting")
        child.expect_exact("(0/2 completed)")
        child.expect_exact(PROMPT)

        child.sendline("Finish the greeting work")
        child.expect_exact("Number one is done; checking number two.")
        child.expect_exact(PROMPT)

        child.sendline("/plan")
        child.expect_exact("[x] #1: Write greeting")
        child.expect_exact("(1/2 completed)")
        child.expect_exact(PROMPT)

        child.sendline("/diagram")
        child.expect_exact("stateDiagram-v2")
        child.expect_exact("in_progress --> completed: complete")
        child.expect_exact(PROMPT)

        child.sendline("/nonsense")
        child.expect_exact("unknown command /nonsense")
        child.expect_exact(PROMPT)

        child.sendline("/reset")
        child.expect_exact("conversation and plan cleared")
        child.expect_exact(PROMPT)
        child.sendline("/plan")
        child.expect_exact("No todos.")
        child.expect_exact(PROMPT)

        child.sendline("/exit")
        assert _ended(child) == 0

    assert server.served == len(CHAT_TURNS)
    _assert_requests_were_well_formed(server)
    # The conversation persisted too: the second task's request carries the first exchange.
    second_task = server.requests[2]["messages"]
    assert second_task[0]["content"][0]["text"] == "Plan the greeting work"
    assert second_task[-1]["content"][-1]["text"] == "Finish the greeting work"

    history = (_state(workdir) / "chat_history").read_text(encoding="utf-8")
    assert "Plan the greeting work" in history
    assert "/reset" in history
    # The work directory stays clean: the trace is in the per-user state directory.
    assert list(workdir.iterdir()) == []
    (trace,) = (_state(workdir) / "sessions").glob("*/*.jsonl")
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    finished = [event for event in events if event["event"] == "run.finished"]
    assert [event["status"] for event in finished] == ["done", "done"]
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    # /reset is in the trace: replay holds, and resuming starts from nothing, not from the
    # conversation and plan the user told the chat to forget.
    assert events[-1]["event"] == "plan.updated" and events[-1]["reset"] is True
    assert check_trace(trace) is None
    resumed = rebuild(read_trace(trace))
    assert resumed.conversation.messages == []
    assert resumed.board.render() == "No todos."


def test_an_empty_line_does_nothing_and_eof_or_ctrl_c_leave_without_a_trace(
    tmp_path: Path,
) -> None:
    with _server({"text": "unused"}) as server:
        # Sessions side by side: most of each one's time is the SDK's import.
        children = {}
        for leave in ("eof", "ctrl-c"):
            (tmp_path / leave).mkdir()
            children[leave] = _start_chat(server, tmp_path / leave)
        for leave, child in children.items():
            _wait_for_prompt(child)
            child.sendline("")
            child.expect_exact(PROMPT)
            child.sendline("/plan")
            child.expect_exact("No todos.")
            _at_prompt(child)
            if leave == "eof":
                child.sendeof()
            else:
                child.send("half a thought")
                child.sendintr()  # clears the line, the chat goes on
                child.sendline("/help")
                child.expect_exact("/clear")
                _at_prompt(child)
                child.sendintr()  # at an empty prompt: leave
        for child in children.values():
            assert _ended(child) == 0
    assert server.requests == []
    for leave in children:
        # A session that sent nothing leaves no trace behind.
        assert not list((_state(tmp_path / leave) / "sessions").glob("*/*.jsonl"))
        history = (_state(tmp_path / leave) / "chat_history").read_text(encoding="utf-8")
        assert "/plan" in history
        assert "half a thought" not in history


# --- Ctrl-C --------------------------------------------------------------------------------


@pytest.fixture
def sleeping_server() -> Iterator[MessagesServer]:
    with _server(
        {
            "text": "Planning, then waiting.",
            "tool_calls": [
                {
                    "name": "todo",
                    "input": {
                        "items": [
                            {
                                "id": "1",
                                "text": "Wait for the build",
                                "status": "in_progress",
                                "active_form": "Waiting for the build",
                            }
                        ]
                    },
                },
                {"name": "bash", "input": {"command": "sleep 30"}},
            ],
        },
        {"text": "never reached"},
    ) as server:
        yield server


def _bash_call_in(paths: list[Path]) -> bool:
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
        for line in lines:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line is still being written
            if event.get("event") == "tool.call" and event.get("name") == "bash":
                return True
    return False


def _wait_for_bash_call(path: Path, process: subprocess.Popen[str]) -> None:
    """Wait until the trace holds the ``tool.call`` for the bash tool: the tool is running."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        if _bash_call_in([path]):
            return
        time.sleep(0.05)
    process.kill()
    out, err = process.communicate()
    pytest.fail(f"the bash tool.call never reached the trace:\n{out}\n{err}")


def _wait_for_chat_bash_call(workdir: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if _bash_call_in(list((_state(workdir) / "sessions").glob("*/*.jsonl"))):
            return
        time.sleep(0.05)
    pytest.fail("the chat's bash tool.call never reached its trace")


def signal_during_bash(
    server: MessagesServer,
    workdir: Path,
    trace: Path,
    signum: signal.Signals,
    ready: Callable[[subprocess.Popen[str]], None] = lambda process: None,
) -> tuple[subprocess.Popen[str], str, str]:
    """Run a task whose bash call sleeps; send ``signum`` once the call (and ``ready``) ran.

    ``ready`` gets the run's process, so a wait of its own can tell a run that ended from one
    that is slow.
    """
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "run",
            "Wait for the build",
            "--yes",
            "--workdir",
            str(workdir),
            "--trace",
            str(trace),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(server),
    )
    try:
        _wait_for_bash_call(trace, process)
        ready(process)
        process.send_signal(signum)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process, out, err


def test_ctrl_c_stops_cleanly_with_exit_130(workdir: Path, sleeping_server: MessagesServer) -> None:
    trace = workdir / "run.jsonl"
    process, out, err = signal_during_bash(sleeping_server, workdir, trace, signal.SIGINT)
    assert process.returncode == 130, err
    # The final plan, as it stood when the run stopped, then the closing lines.
    plan = "[>] #1: Wait for the build (Waiting for the build)\n\n(0/1 completed)\n"
    assert plan in out
    closing = out.split(plan, 1)[1].splitlines()
    assert closing[0].startswith("interrupted · 1 rounds · tokens ")
    assert closing[1:] == [
        f"trace: {trace}",
        f'resume: {sys.executable} -P -m orchestrator resume {trace} "next instruction"',
        f"picture: {sys.executable} -P -m orchestrator show {trace} --html",
    ]
    assert "orchestrator: run interrupted" in err
    assert "Traceback" not in err
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run.finished"
    assert events[-1]["status"] == "interrupted"
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    assert any(
        event["event"] == "loop.transition" and event["dst"] == "interrupted" for event in events
    )
    assert sleeping_server.served == 1
    _assert_requests_were_well_formed(sleeping_server)


def test_a_paste_is_one_message_alt_enter_adds_a_line_and_ctrl_c_stops_only_the_turn(
    workdir: Path,
) -> None:
    with _server(
        {"text": "Got the pasted block."},
        {"text": "Got two lines."},
        {"tool_calls": [{"name": "bash", "input": {"command": "sleep 30"}}]},
        {"text": "Back after the stop."},
        {"text": "Another model here."},
    ) as server:
        child = _spawn_chat(server, workdir)
        # Bracketed paste: the terminal wraps a paste in these markers; its newlines stay.
        child.send("\x1b[200~first pasted line\nsecond pasted line\x1b[201~")
        child.send("\r")
        child.expect_exact("Got the pasted block.")
        child.expect_exact(PROMPT)
        child.send("line one")
        child.send("\x1b\r")  # Esc Enter (what Alt-Enter sends): a new line, not a send
        child.send("line two\r")
        child.expect_exact("Got two lines.")
        child.expect_exact(PROMPT)

        child.sendline("Wait for something slow")
        _wait_for_chat_bash_call(workdir)
        wait_for_terminal_mode(child, raw=False)  # cooked again: Ctrl-C is a signal
        child.sendintr()
        child.expect_exact("run interrupted")
        child.expect_exact(PROMPT)
        child.sendline("Go on")
        child.expect_exact("Back after the stop.")
        child.expect_exact(PROMPT)
        child.sendline("/cost")
        child.expect_exact(" rounds · tokens ")
        child.expect_exact(PROMPT)
        child.sendline("/model")
        child.expect_exact("model: claude-")
        child.expect_exact(PROMPT)
        child.sendline("/model claude-other")
        child.expect_exact("model: claude-other from the next message on")
        child.expect_exact(PROMPT)
        child.sendline("Once more")
        child.expect_exact("Another model here.")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        # Leaving says what the session cost and how to continue it.
        child.expect(r"chat · \d+ rounds · tokens ")
        child.expect_exact("resume: ")
        child.expect_exact(' "next instruction"')
        assert _ended(child) == 0

    _assert_requests_were_well_formed(server)
    first, second = server.requests[0]["messages"], server.requests[1]["messages"]
    assert first[-1]["content"][-1]["text"] == "first pasted line\nsecond pasted line"
    assert second[-1]["content"][-1]["text"] == "line one\nline two"
    assert len(server.requests) == 5
    assert [body["model"] for body in server.requests][-2:] == ["claude-sonnet-5-5", "claude-other"]
    # The stopped turn's bash call was answered, and the next message came after it.
    last = server.requests[3]["messages"][-1]["content"]
    assert last[0]["type"] == "tool_result" and last[0]["is_error"] is True
    assert last[-1]["text"] == "Go on"


def test_a_turn_ends_without_run_lines_and_an_unknown_model_is_refused(workdir: Path) -> None:
    from orchestrator.testing import ServerLimits

    script = parse_script(
        {"name": "chat", "turns": [{"text": "Hello there."}, {"text": "Still here."}]},
        source="chat.json",
    )
    limits = ServerLimits(known_models=frozenset({"claude-sonnet-5-5", "claude-opus-5"}))
    with MessagesServer(script, limits=limits) as server:
        child = _start_chat(server, workdir)
        child.logfile_read = seen = io.StringIO()
        _wait_for_prompt(child)
        child.sendline("Say hello")
        child.expect_exact("Hello there.")
        child.expect_exact(PROMPT)
        child.sendline("/model claude-nonesuch")
        child.expect_exact("model: not switched: the endpoint does not know model")
        child.expect_exact("still claude-sonnet-5-5")
        child.expect_exact(PROMPT)
        child.sendline("/model claude-opus-5")
        child.expect_exact("model: claude-opus-5 from the next message on")
        child.expect_exact(PROMPT)
        child.sendline("Again")
        child.expect_exact("Still here.")
        child.expect_exact(PROMPT)
        child.sendline("/exit")
        assert _ended(child) == 0
    shown = seen.getvalue()
    # A turn that ends well says its answer, not the loop's bookkeeping.
    assert "run done after" not in shown
    assert "No todos." not in shown
    assert [body["model"] for body in server.requests] == ["claude-sonnet-5-5", "claude-opus-5"]
