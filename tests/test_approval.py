"""Approval: the four modes, "yes for this session", and the terminal prompt in a real pty."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from orchestrator.approval import (
    Answer,
    ApprovalPolicy,
    command_prefix,
    no_terminal_notice,
    preview,
    session_choice,
)
from orchestrator.protocols import Refusal
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, check_request
from tests.test_chat import _env


def _asker(*answers: Answer) -> tuple[list[str], Any]:
    asked: list[str] = []
    queue = list(answers)

    def ask(tool: str, arguments: Any) -> Answer:
        asked.append(tool)
        return queue.pop(0)

    return asked, ask


def test_modes_decide_who_is_asked() -> None:
    bash, write = ("bash", {"command": "ls"}), ("write_file", {"path": "a", "content": ""})
    assert ApprovalPolicy("auto")(*bash) is True
    asked, ask = _asker(Answer(allow=True))
    edits = ApprovalPolicy("edits", ask)
    assert edits(*write) is True
    assert edits(*bash) is True
    assert asked == ["bash"]
    deny = ApprovalPolicy("deny")
    verdict = deny(*write)
    assert isinstance(verdict, Refusal)
    assert verdict.message.startswith("Error: write_file is not allowed in this session")
    assert [action.reason for action in deny.refused] == ["refused by --approval deny"]


def test_auto_approve_takes_claude_codes_tool_names_as_the_hooks_do() -> None:
    """``--auto-approve Bash`` (Claude Code's name, as its allow rules spell it) covers bash.

    A Claude Code user writes ``Bash`` and ``Write``; the matchers of hooks read both names,
    and a rule once took ``Bash`` without a word and approved nothing.
    """
    policy = ApprovalPolicy("ask", auto_approve={"Bash", "Edit"})
    assert policy("bash", {"command": "ls"}) is True
    assert policy("edit_file", {"path": "a", "old_text": "x", "new_text": "y"}) is True
    assert isinstance(policy("write_file", {"path": "a", "content": ""}), Refusal)
    assert isinstance(ApprovalPolicy("deny", auto_approve={"Bash"})("bash", {}), Refusal)


def test_without_a_terminal_the_refusal_does_not_claim_a_person_declined() -> None:
    policy = ApprovalPolicy("ask")
    verdict = policy("bash", {"command": "rm -rf build"})
    assert isinstance(verdict, Refusal)
    assert "declined" not in verdict.message and "user" not in verdict.message
    assert "no terminal" in verdict.message
    assert policy.refused[0].target == "rm -rf build"
    assert no_terminal_notice("ask", has_terminal=False) is not None
    assert no_terminal_notice("ask", has_terminal=True) is None
    assert no_terminal_notice("auto", has_terminal=False) is None
    assert no_terminal_notice("deny", has_terminal=False) is None


def test_yes_for_this_session_covers_a_tool_or_a_command_prefix_but_not_a_chained_command() -> None:
    asked, ask = _asker(
        Answer(allow=True, for_session=True),
        Answer(allow=True, for_session=True),
        Answer(allow=False, feedback="not that one"),
    )
    policy = ApprovalPolicy("ask", ask)
    assert policy("edit_file", {"path": "a"}) is True
    assert policy("edit_file", {"path": "b"}) is True
    assert policy("bash", {"command": "git status"}) is True
    assert policy("bash", {"command": "git status --short"}) is True
    verdict = policy("bash", {"command": "git status; rm -rf /"})
    assert isinstance(verdict, Refusal)
    assert verdict.message.startswith("Error: the user declined to run bash: not that one.")
    assert asked == ["edit_file", "bash", "bash"]
    assert command_prefix("pytest -q tests") == "pytest"
    assert session_choice("bash", {"command": "make && rm x"}) == "this exact command"
    chained, ask_once = _asker(Answer(allow=True, for_session=True))
    exact = ApprovalPolicy("ask", ask_once)
    assert exact("bash", {"command": "make && ls"}) is True
    assert exact("bash", {"command": "make && ls"}) is True
    assert chained == ["bash"]
    assert command_prefix("npm run test") == "npm run"


def test_the_preview_is_a_diff_for_edits_and_the_content_for_new_files(tmp_path: Path) -> None:
    (tmp_path / "greet.py").write_text("print('hi')\nprint('bye')\n", encoding="utf-8")
    edit = preview(
        "edit_file",
        {"path": "greet.py", "old_text": "print('hi')", "new_text": "print('hello')"},
        tmp_path,
    )
    lines = [line for line, _colour in edit]
    assert "-print('hi')" in lines and "+print('hello')" in lines
    assert " print('bye')" in lines  # context from the real file
    assert dict(edit)["-print('hi')"] == "red"
    new = preview("write_file", {"path": "new.py", "content": "a = 1\nb = 2\n"}, tmp_path)
    assert [line for line, _ in new] == ["new file new.py (2 lines)", "+ a = 1", "+ b = 2"]
    assert preview("bash", {"command": "make test"}, tmp_path) == [("$ make test", "cyan")]


PROMPT = "allow? [y]es"


@pytest.mark.e2e
def test_the_terminal_prompt_shows_the_change_and_takes_yes_always_and_no_with_a_reason(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    edit = {"path": "greet.py", "old_text": "Hello", "new_text": "Hi"}
    turns: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "name": "write_file",
                    "input": {"path": "greet.py", "content": "print('Hello, world!')\n"},
                }
            ]
        },
        {"tool_calls": [{"name": "edit_file", "input": edit}]},
        {
            "tool_calls": [
                {"name": "edit_file", "input": {**edit, "old_text": "Hi", "new_text": "Hey"}}
            ]
        },
        {"tool_calls": [{"name": "bash", "input": {"command": "python3 greet.py"}}]},
        {
            "text": "Stopped as asked.",
            "expect": [{"is_error": True, "contains": "declined to run bash: use the venv"}],
        },
    ]
    script = parse_script({"name": "approve", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        child = pexpect.spawn(
            sys.executable,
            [
                "-m",
                "orchestrator",
                "run",
                "Write greet.py",
                "--workdir",
                str(work),
                "--trace",
                str(tmp_path / "t.jsonl"),
            ],
            env=_env(server),
            encoding="utf-8",
            timeout=30,
            dimensions=(40, 200),
        )
        child.logfile_read = seen = io.StringIO()
        child.expect_exact("write_file greet.py")
        child.expect_exact("new file greet.py (1 lines)")
        child.expect_exact("+ print('Hello, world!')")
        child.expect_exact(PROMPT)
        child.send("y")  # one key, no Enter
        child.expect_exact("yes")
        child.expect_exact("-print('Hello, world!')")
        child.expect_exact("+print('Hi, world!')")
        child.expect_exact("[a]lways (every edit_file) this session")
        child.send("\r")  # Enter alone answers nothing (it was once "no")
        child.send("a")
        child.expect_exact("always")
        # The second edit runs without a question; the bash call asks.
        child.expect_exact("$ python3 greet.py")
        child.expect_exact("[a]lways (commands starting 'python3') this session")
        child.send("n")
        child.expect_exact("tell the model why")
        child.sendline("use the venv")
        child.expect(pexpect.EOF)
        child.close()
        violations, requests = server.violations, server.requests
    assert violations == []
    assert all(check_request(body) == [] for body in requests)
    assert (work / "greet.py").read_text(encoding="utf-8") == "print('Hey, world!')\n"
    assert child.exitstatus == 3
    # Three questions: the write, the first edit, the bash call; the second edit was allowed.
    assert seen.getvalue().count(PROMPT) == 3
    assert "\x1b[" not in seen.getvalue()  # NO_COLOR


@pytest.mark.parametrize("mode", ["ask", "edits", "auto", "deny"])
def test_every_mode_is_a_valid_policy(mode: str) -> None:
    assert ApprovalPolicy(mode).mode == mode


@pytest.mark.e2e
def test_ctrl_c_at_the_question_interrupts_the_run(tmp_path: Path) -> None:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": "touch ran"}}]},
        {"text": "never reached"},
    ]
    script = parse_script({"name": "interrupt", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        child = pexpect.spawn(
            sys.executable,
            ["-m", "orchestrator", "run", "Touch it", "--workdir", str(tmp_path)],
            env=_env(server, tmp_path / "state"),
            encoding="utf-8",
            timeout=30,
        )
        child.expect_exact(PROMPT)
        child.sendintr()
        child.expect(pexpect.EOF)
        child.close()
        served = server.served
    assert child.exitstatus == 130
    assert "run interrupted" in (child.before or "")
    assert not (tmp_path / "ran").exists()
    assert served == 1
