"""What a configured command runs from the work directory: read, pinned, and refused when not.

Each command is read in a small work directory holding the files the attack report used; the
table says which paths are pinned and whether a command that runs with the user's rights is
refused (and why). No process is started: the reading is what decides.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from orchestrator.pinning import ABSENT, pin_problem, read_argv, read_shell

NODE_CHAIN = {".claude/hooks/node_modules", ".claude/node_modules", "node_modules"}


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    hooks = work / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    for name in ("check.sh", "fmt.py", "x.js", "rules.txt"):
        (hooks / name).write_text(f"{name}\n", encoding="utf-8")
    (work / "lib").mkdir()
    (work / "mod.py").write_text("print(1)\n", encoding="utf-8")
    venv = work / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    (venv / "bin" / "python").write_text("", encoding="utf-8")
    return work


@pytest.mark.parametrize(
    ("command", "pinned", "refused"),
    [
        # -e is a flag for sh, not "code follows": the script is pinned (the attack's 6a).
        ("sh -e .claude/hooks/check.sh", {".claude/hooks/check.sh"}, ""),
        ("bash -eux .claude/hooks/check.sh", {".claude/hooks/check.sh"}, ""),
        ("sh < .claude/hooks/check.sh", {".claude/hooks/check.sh"}, ""),
        # A shell's -c is a command, read in turn, wherever the c sits among the flags.
        ("bash -ec 'python3 .claude/hooks/fmt.py'", {".claude/hooks/fmt.py"}, ""),
        # Options that take an argument skip it.
        ("python3 -W ignore -X dev .claude/hooks/fmt.py", {".claude/hooks/fmt.py"}, ""),
        ("python3 -Wignore -B .claude/hooks/fmt.py", {".claude/hooks/fmt.py"}, ""),
        # Inline code: the words after it are its arguments, not a script.
        ("python3 -c 'import sys' .claude/hooks/fmt.py", set(), ""),
        ("perl -e 'print 1' .claude/hooks/check.sh", set(), ""),
        # Wrappers, assignments, cd and $CLAUDE_PROJECT_DIR lead to the program.
        ("env A=1 timeout 5 nice -n 3 sh .claude/hooks/check.sh", {".claude/hooks/check.sh"}, ""),
        ("cd .claude/hooks && sh check.sh", {".claude/hooks/check.sh"}, ""),
        ('"$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh', {".claude/hooks/check.sh"}, ""),
        # A program whose words may be code (jq -f, awk -f…): its files are pinned too.
        ("someprogram -f .claude/hooks/rules.txt", {".claude/hooks/rules.txt"}, ""),
        # One that only reads them: not pinned.
        ("cat .claude/hooks/rules.txt", set(), ""),
        # node looks in every node_modules from the script up: absent, they must stay so.
        ("node .claude/hooks/x.js", {".claude/hooks/x.js", *NODE_CHAIN}, ""),
        ("node -e 'require(\"y\")'", {"node_modules"}, ""),
        # What cannot be pinned refuses an outside hook.
        ("python3 -m mod", {"mod.py"}, "`python -m mod` may load mod.py"),
        ("perl -Ilib x.pl", {"lib"}, "loads code from the folder lib/"),
        ("PYTHONPATH=lib python3 /x.py", {"lib"}, "$PYTHONPATH looks for modules in lib/"),
        (".venv/bin/python .claude/hooks/fmt.py", None, "from .venv/ in the work directory"),
        # What this reading does not follow refuses an outside hook naming the folder.
        # A substitution's command is read in turn; what it prints is known only when it runs.
        ('echo "$(date) ran" >> ~/hook.log', set(), ""),
        ("x=$(sh .claude/hooks/check.sh)", {".claude/hooks/check.sh"}, ""),
        ('python3 "$(git rev-parse --show-toplevel)/x.py"', set(), "`$(…)/x.py` is a word only"),
        ('sh -c "`cat .claude/hooks/rules.txt`"', set(), "`$(…)` is a word only the shell"),
        ("sh <<EOF\n./x\nEOF", set(), "it reads a here-document"),
        ("sh .claude/hooks/*.sh", set(), "only the shell can expand"),
        ("python3 -Z .claude/hooks/fmt.py", None, "`python3 -Z` is an option not known"),
        ("php .claude/hooks/check.sh", None, "`php` runs what this reading does not follow"),
        # ... but not one that names nothing there.
        ("python3 -Z /opt/hook.py", set(), ""),
        ("make lint", set(), ""),
    ],
)
def test_each_form_pins_what_it_runs_or_says_why_it_cannot(
    work: Path, command: str, pinned: set[str] | None, refused: str
) -> None:
    reading = read_shell(command, work, environ={"PATH": "/usr/bin:/bin"})
    pins = reading.pins(work)
    if pinned is not None:
        assert set(pins) == pinned
    if refused:
        assert refused in reading.refusal
    else:
        assert reading.refusal == ""


def test_what_a_command_names_outside_the_work_directory_is_what_the_sandbox_shows(
    work: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    (home / ".claude" / "hooks").mkdir(parents=True)
    (home / ".claude" / "hooks" / "check.sh").write_text("exit 0\n", encoding="utf-8")
    (home / "rules").mkdir()
    command = "~/.claude/hooks/check.sh && cd ~/rules && python3 $HOME/.claude/hooks/check.sh ~"
    reading = read_shell(command, work, home=home, environ={})
    assert set(reading.outside) == {home / ".claude" / "hooks" / "check.sh", home / "rules"}
    assert reading.pins(work) == {} and reading.refusal == ""


def test_npx_and_a_server_s_own_script_are_read_without_a_shell(work: Path) -> None:
    environ = {"PATH": "/usr/bin:/bin"}
    server = read_argv(["python3", "srv.py"], work, work, environ=environ)
    assert server.pins(work) == {}  # no srv.py yet: one that appears is not trusted
    (work / "srv.py").write_text("serve()\n", encoding="utf-8")
    server = read_argv(["python3", "srv.py"], work, work, environ=environ)
    assert server.pins(work) == {"srv.py": hashlib.sha256(b"serve()\n").hexdigest()}
    npx = read_argv(["npx", "-y", "@scope/tool@1.2"], work, work, environ=environ)
    assert npx.pins(work) == {
        "node_modules/@scope/tool": ABSENT,
        "node_modules/.bin/tool": ABSENT,
    }
    (work / "node_modules" / ".bin").mkdir(parents=True)
    (work / "node_modules" / ".bin" / "tool").write_text("#!/bin/sh\n", encoding="utf-8")
    npx = read_argv(["npx", "-y", "@scope/tool@1.2"], work, work, environ=environ)
    assert "npx would run node_modules/.bin/tool" in npx.refusal
    # Started elsewhere (a user's server in its own folder), nothing of the work directory runs.
    assert read_argv(["npx", "-y", "tool"], work.parent, work, environ=environ).pins(work) == {}


def test_a_planted_file_is_named_once_trusted_or_pinned_and_absent_stays_absent(
    work: Path,
) -> None:
    reading = read_shell("node .claude/hooks/x.js", work, environ={})
    started = reading.pins(work)
    assert pin_problem(started, work, trusted={}, started=started, outside=False) is None
    # Outside, a file nobody trusted does not run; an absent folder needs no trust.
    assert pin_problem(started, work, trusted={}, outside=True) == (
        ".claude/hooks/x.js is in the work directory and was not trusted"
    )
    assert pin_problem(started, work, trusted=started, outside=True) is None
    # The model plants node_modules beside the script: the pin that it stay absent breaks.
    (work / ".claude" / "hooks" / "node_modules").mkdir()
    now = read_shell("node .claude/hooks/x.js", work, environ={}).pins(work)
    assert pin_problem(now, work, trusted={}, started=started, outside=False) == (
        ".claude/hooks/node_modules appeared during this run"
    )
    assert pin_problem(now, work, trusted=started, outside=False) == (
        ".claude/hooks/node_modules appeared since the folder was trusted"
    )
    (work / ".claude" / "hooks" / "x.js").write_text("planted\n", encoding="utf-8")
    now = read_shell("node .claude/hooks/x.js", work, environ={}).pins(work)
    assert pin_problem(now, work, trusted=started, outside=False) == (
        ".claude/hooks/x.js changed since the folder was trusted"
    )
