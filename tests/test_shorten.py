"""Tests for shortening commands: the words of a check survive a long folder in front of them."""

from __future__ import annotations

from orchestrator.console import _check_line
from orchestrator.guard import describe_arguments
from orchestrator.plan import check_failed
from orchestrator.protocols import CheckResult
from orchestrator.shorten import shorten_command

#: A venv in a clone made under ``mktemp -d``: 150 characters before the command's words.
LONG = "/tmp/tmp.Xq81/" + "p" * 85 + "/a-long-folder-name-so-that-path-lengths-show/.venv/bin"
CHECK = f'PATH={LONG}:"$PATH" test -f notes.txt'


def test_a_short_command_is_shown_whole() -> None:
    assert shorten_command("pytest -q tests/test_x.py", 60) == "pytest -q tests/test_x.py"


def test_a_long_path_gives_way_in_its_middle_and_the_words_stay() -> None:
    assert len(LONG) >= 150
    shown = shorten_command(CHECK, 60)
    assert len(shown) <= 60
    assert shown.endswith('/.venv/bin:"$PATH" test -f notes.txt')
    assert shown.startswith("PATH=/tmp/") and "…" in shown


def test_the_longest_path_gives_way_first_and_a_program_keeps_its_name() -> None:
    command = f"{LONG}/python -m pytest -q {LONG}/tests/test_a.py::test_b"
    shown = shorten_command(command, 100)
    assert len(shown) <= 100
    assert "/bin/python -m pytest -q " in shown
    assert shown.endswith("/tests/test_a.py::test_b")


def test_words_without_a_path_are_shown_whole_up_to_the_hard_limit() -> None:
    words = "python -c " + "'" + "x = 1; " * 20 + "'"
    assert shorten_command(words, 60) == words
    flood = "echo " + "y" * 2000
    shown = shorten_command(flood, 60, hard_limit=200)
    assert len(shown) == 200 and shown.startswith("echo yyy") and "…" in shown


def test_a_check_error_names_the_command_past_a_150_character_folder() -> None:
    error = check_failed("1", CheckResult(command=CHECK, exit_code=1, output="", duration_s=0.1))
    assert "test -f notes.txt" in str(error)
    assert "/.venv/bin" in str(error)


def test_the_console_and_the_call_line_keep_the_words_too() -> None:
    event = {"event": "plan.check", "item": "1", "command": CHECK, "exit_code": 1}
    text, _style = _check_line(event)
    assert "test -f notes.txt" in text
    assert describe_arguments({"command": CHECK}).endswith("test -f notes.txt")
    assert describe_arguments({"path": f"{LONG}/notes.txt"}).endswith("/bin/notes.txt")
