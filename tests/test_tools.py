"""Tests for the tool registry and the bash, read_file, write_file and edit_file tools."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.protocols import JSONObject, Refusal, ToolError, ToolResult
from orchestrator.signals import stop_signals_interrupt
from orchestrator.tools import (
    BashTool,
    EditFileTool,
    ReadFileTool,
    ToolRegistry,
    Workdir,
    WriteFileTool,
    cgroups,
    scrub_environment,
    standard_tools,
)
from orchestrator.tools.sandbox import Sandbox, SandboxPolicy
from tests.budget import examples


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    return elsewhere


@pytest.fixture
def workdir(root: Path) -> Workdir:
    return Workdir(root)


def _registry(workdir: Workdir, **kwargs: Any) -> ToolRegistry:
    return ToolRegistry(
        [BashTool(workdir), ReadFileTool(workdir), WriteFileTool(workdir), EditFileTool(workdir)],
        **kwargs,
    )


@pytest.fixture
def registry(workdir: Workdir) -> ToolRegistry:
    return _registry(workdir)


def _assert_error(result: ToolResult, *fragments: str) -> None:
    assert result.is_error, result
    assert result.text.startswith("Error:"), result.text
    for fragment in fragments:
        assert fragment in result.text, result.text


def _alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie nobody has reaped yet counts as dead."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait_until_dead(pid: int) -> bool:
    deadline = time.monotonic() + 30  # a hang guard: it returns as soon as the pid is gone
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def reap_pids(root: Path) -> Iterator[list[Path]]:
    """Pid files a test expects; whatever they name is killed afterwards, whatever happened."""
    pid_files: list[Path] = []
    yield pid_files
    for pid_file in pid_files:
        if pid_file.exists() and pid_file.read_text().strip():
            pid = int(pid_file.read_text())
            # Only a process still working in this test's folder: the pid of one that ended
            # may be another test's process by now (the pid space can be 32768).
            if _alive(pid) and _works_in(pid, root):
                os.kill(pid, signal.SIGKILL)


def _works_in(pid: int, folder: Path) -> bool:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(folder.resolve())
    except OSError:
        return False


# --- Workdir confinement -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("../x", "escapes the work directory"),
        ("a/../../x", "escapes the work directory"),
        ("..", "escapes the work directory"),
        ("~", "starts with '~'"),
        ("~/.ssh/id_rsa", "starts with '~'"),
        ("/proc/self/root", "under /proc"),
        ("a\x00b", "NUL byte"),
        ("", "empty"),
        ("x" * 4097, "4097 characters"),
        ("\ud800", "cannot be resolved"),
    ],
)
def test_resolve_rejects_paths_outside_or_malformed(
    workdir: Workdir, path: str, fragment: str
) -> None:
    with pytest.raises(ToolError) as caught:
        workdir.resolve(path)
    assert str(caught.value).startswith("Error: ")
    assert fragment in str(caught.value)
    assert "\x00" not in str(caught.value)


def test_resolve_message_names_the_path_the_root_and_a_fix(workdir: Workdir) -> None:
    with pytest.raises(ToolError) as caught:
        workdir.resolve("../x")
    assert str(caught.value) == (
        f"Error: path '../x' escapes the work directory {workdir.root}; "
        "use a path inside it, e.g. 'x'"
    )


def test_resolve_rejects_absolute_paths_outside(workdir: Workdir, outside: Path) -> None:
    for path in [str(outside / "f.txt"), "/etc/passwd", f"{workdir.root}/../outside/f.txt"]:
        with pytest.raises(ToolError, match="escapes the work directory"):
            workdir.resolve(path)


def test_resolve_rejects_proc_self_root_even_when_it_leads_inside(workdir: Workdir) -> None:
    with pytest.raises(ToolError, match="under /proc"):
        workdir.resolve(f"/proc/self/root{workdir.root}/x")


def test_resolve_accepts_paths_inside(workdir: Workdir) -> None:
    root = workdir.root
    assert workdir.resolve("a/b.txt") == root / "a" / "b.txt"
    assert workdir.resolve(str(root / "sub" / "f")) == root / "sub" / "f"
    assert workdir.resolve("a/../b") == root / "b"
    assert workdir.resolve(".") == root
    assert workdir.relative(workdir.resolve("a/b.txt")) == "a/b.txt"
    assert workdir.relative(root) == "."


def test_root_is_resolved_through_symlinks(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)
    assert Workdir(alias).root == root
    assert Workdir(alias).resolve(str(alias / "f")) == root / "f"


def test_symlink_made_with_bash_cannot_carry_a_write_outside(
    registry: ToolRegistry, root: Path, outside: Path
) -> None:
    (outside / "secret.txt").write_text("outside data", encoding="utf-8")
    made = registry.dispatch(
        "bash",
        {
            "command": f"ln -s {outside} linkdir && ln -s {outside}/secret.txt linkfile"
            f" && ln -s {outside}/new.txt dangling"
        },
    )
    assert not made.is_error, made.text

    _assert_error(
        registry.dispatch("write_file", {"path": "linkdir/planted.txt", "content": "x"}),
        "escapes the work directory",
    )
    _assert_error(
        registry.dispatch("write_file", {"path": "dangling", "content": "x"}),
        "escapes the work directory",
    )
    _assert_error(
        registry.dispatch(
            "edit_file", {"path": "linkfile", "old_text": "outside", "new_text": "changed"}
        ),
        "escapes the work directory",
    )
    _assert_error(registry.dispatch("read_file", {"path": "linkfile"}), "escapes")

    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "outside data"


def test_symlink_inside_the_work_directory_is_followed(registry: ToolRegistry, root: Path) -> None:
    (root / "real").mkdir()
    (root / "alias").symlink_to(root / "real")
    result = registry.dispatch("write_file", {"path": "alias/f.txt", "content": "hi"})
    assert result == ToolResult("Wrote 2 bytes to real/f.txt")
    assert (root / "real" / "f.txt").read_text(encoding="utf-8") == "hi"


# --- bash ------------------------------------------------------------------------------------


def test_bash_merges_streams_and_reports_exit_code(registry: ToolRegistry) -> None:
    result = registry.dispatch("bash", {"command": "echo out; echo err >&2; exit 3"})
    assert not result.is_error
    assert result.text == "out\nerr\n[exit code 3]"


def test_bash_runs_in_the_work_directory(registry: ToolRegistry, root: Path) -> None:
    assert registry.dispatch("bash", {"command": "pwd -P"}).text == f"{root}\n"


def test_bash_runs_the_command_in_its_own_session(registry: ToolRegistry) -> None:
    # Field 6 of /proc/PID/stat is the session id; a session leader's equals its pid. The
    # leader is the process the harness started (the launcher, exec'd into bash or into the
    # per-call reaper), never the harness's own session.
    result = registry.dispatch(
        "bash", {"command": "echo $$ $PPID $(cut -d' ' -f6 /proc/$$/stat /proc/$PPID/stat)"}
    )
    pid, parent, own_session, parent_session = (int(field) for field in result.text.split())
    assert own_session in (pid, parent)
    assert own_session != os.getsid(0)
    assert parent_session == own_session or parent == os.getpid()


def test_bash_without_output_says_so(registry: ToolRegistry) -> None:
    assert registry.dispatch("bash", {"command": "true"}) == ToolResult("(no output)")


@pytest.fixture
def silent_stdin() -> Iterator[None]:
    """Give this process a stdin that never ends, as a terminal would, for the test's length."""
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        yield
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)


@pytest.mark.usefixtures("silent_stdin")
@pytest.mark.parametrize(
    ("command", "expected"),
    [("cat", "(no output)"), ('read x; echo "got:[$x] status:$?"', "got:[] status:1\n")],
)
def test_bash_commands_reading_stdin_get_end_of_file(
    registry: ToolRegistry, command: str, expected: str
) -> None:
    result = registry.dispatch("bash", {"command": command, "timeout": 5})
    assert result == ToolResult(expected)


def test_bash_caps_huge_output_and_counts_the_rest(workdir: Workdir) -> None:
    tool = BashTool(workdir, max_output=10_000)
    result = tool.run({"command": "head -c 3000000 /dev/zero | tr '\\0' a"})
    assert not result.is_error
    assert result.text.startswith("a" * 10_000 + "\n... [output truncated: 2990000 more characters")
    assert len(result.text) < 10_300


def test_bash_decodes_multibyte_characters_split_across_reads(workdir: Workdir) -> None:
    # 70,000 three-byte characters straddle every 64 KiB read boundary.
    result = BashTool(workdir, max_output=1_000_000).run(
        {"command": "python3 -c \"print('€' * 70000, end='')\""}
    )
    assert result.text == "€" * 70_000


def test_bash_environment_is_an_allowlist(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = {
        "ANTHROPIC_API_KEY": "sk-ant-planted-1",
        "MY_API_KEY": "planted-2",
        "GITHUB_TOKEN": "planted-3",
        "db_password": "planted-4",
        "Client_Secret": "planted-5",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    # A credential whose name looks harmless: only an allowlist keeps it out.
    monkeypatch.setenv("DATABASE_URL", "postgres://user:planted-6@db/prod")
    monkeypatch.setenv("PASSED_IN", "visible-value")
    workdir = Workdir(root)
    sandbox = Sandbox("workdir", SandboxPolicy(root, env_names=("PASSED_IN",)))
    result = BashTool(workdir, sandbox=sandbox).run({"command": "env"})
    for name, value in planted.items():
        assert value not in result.text
        assert f"{name}=" not in result.text
    assert "planted-6" not in result.text
    assert "PASSED_IN=visible-value" in result.text
    assert f"PATH={os.environ['PATH']}" in result.text


def test_scrub_environment_drops_secret_names_in_any_case() -> None:
    env = {
        "PATH": "/bin",
        "ANTHROPIC_API_KEY": "k",
        "ANTHROPIC_BASE_URL": "http://localhost",
        "aws_secret_access_key": "s",
        "NPM_TOKEN": "t",
        "PGPASSWORD": "p",
        "HOME": "/root",
    }
    assert scrub_environment(env) == {
        "PATH": "/bin",
        "ANTHROPIC_BASE_URL": "http://localhost",
        "HOME": "/root",
    }


@pytest.fixture(params=["group", "reaper"])
def supervision(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How bash's processes are found: its control group, or (where none is writable) the reaper."""
    if request.param == "group" and not cgroups.available().usable:
        pytest.skip(f"no writable control group here: {cgroups.available().describe()}")
    if request.param == "reaper":
        monkeypatch.setattr(cgroups, "available", cgroups.Controllers)
    return str(request.param)


@pytest.mark.usefixtures("supervision")
def test_bash_timeout_kills_every_process_it_started(
    registry: ToolRegistry, root: Path, reap_pids: list[Path]
) -> None:
    reap_pids.extend(
        root / name for name in ["child.pid", "session.pid", "quiet.pid", "forked.pid"]
    )
    command = (
        "echo before; "
        "sleep 60 & echo $! > child.pid; "
        "setsid bash -c 'echo $$ > session.pid; exec sleep 60' & "
        # Its own session and not holding the pipe: only the process tree leads to it.
        "setsid bash -c 'echo $$ > quiet.pid; exec sleep 60' > /dev/null 2>&1 & "
        # setsid -f forks, so this one is orphaned: only the pipe it holds leads back to it.
        "setsid -f bash -c 'echo $$ > forked.pid; exec sleep 60'; "
        "until [ -s session.pid ] && [ -s quiet.pid ] && [ -s forked.pid ]; do sleep 0.01; done; "
        "sleep 60"
    )
    result = registry.dispatch("bash", {"command": command, "timeout": 1})
    _assert_error(result, "Error: command timed out after 1s", "before")
    for pid_file in reap_pids:
        pid = int(pid_file.read_text())
        assert _wait_until_dead(pid), f"{pid_file.name}: process {pid} survived the timeout"


@pytest.mark.usefixtures("supervision")
def test_bash_returns_and_stops_a_background_process_that_keeps_the_pipe(
    workdir: Workdir, root: Path, reap_pids: list[Path]
) -> None:
    reap_pids.append(root / "bg.pid")
    tool = BashTool(workdir, background_grace=0.2)
    result = tool.run({"command": "sleep 60 & echo $! > bg.pid; echo started", "timeout": 60})
    assert not result.is_error
    assert result.text == "started\n"
    assert _wait_until_dead(int((root / "bg.pid").read_text()))


@pytest.mark.usefixtures("supervision")
def test_bash_stops_what_a_command_left_before_it_killed_itself(
    workdir: Workdir, root: Path, reap_pids: list[Path]
) -> None:
    # Orphaned, in its own session, holding no pipe: only the group (or the reaper) knows it.
    reap_pids.append(root / "orphan.pid")
    command = (
        "(setsid bash -c 'echo $$ > orphan.pid; exec sleep 60' > /dev/null 2>&1 &); "
        "until [ -s orphan.pid ]; do sleep 0.01; done; kill -KILL $$"
    )
    result = BashTool(workdir).run({"command": command, "timeout": 30})
    assert "[terminated by signal 9]" in result.text
    assert _wait_until_dead(int((root / "orphan.pid").read_text()))


def test_a_stop_signal_swallowed_elsewhere_still_ends_the_command(
    workdir: Workdir, root: Path
) -> None:
    started = root / "started.pid"

    def interrupt_once_running() -> None:
        # Once the command runs, not after a fixed pause: a busy machine may start it late.
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    with stop_signals_interrupt():
        counting = signal.getsignal(signal.SIGINT)
        assert callable(counting)

        def swallowing(signum: int, frame: Any) -> None:
            # As a finalizer or an at-fork hook would: the interrupt is counted, then lost.
            with contextlib.suppress(KeyboardInterrupt):
                counting(signum, frame)

        signal.signal(signal.SIGINT, swallowing)
        interrupter = threading.Thread(target=interrupt_once_running, daemon=True)
        interrupter.start()
        # Were the interrupt lost, the command would run its 300 s and the suite's timeout fail it.
        with pytest.raises(KeyboardInterrupt):
            BashTool(workdir).run(
                {"command": "echo $$ > started.pid; exec sleep 300", "timeout": 600}
            )
        interrupter.join()
    assert _wait_until_dead(int(started.read_text(encoding="utf-8")))


def _call_groups() -> set[Path]:
    return {
        path
        for hierarchy in cgroups.available().hierarchies
        for path in hierarchy.parent.glob(f"orchestrator-{os.getpid()}-*")
    }


@pytest.mark.usefixtures("supervision")
def test_an_interrupt_during_a_command_stops_everything_it_started(
    workdir: Workdir, root: Path, reap_pids: list[Path]
) -> None:
    reap_pids.append(root / "orphan.pid")
    groups_before = _call_groups()

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    command = (
        "(setsid bash -c 'echo $$ > orphan.pid; exec sleep 60' > /dev/null 2>&1 &); "
        "until [ -s orphan.pid ]; do sleep 0.01; done; sleep 60"
    )
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with pytest.raises(KeyboardInterrupt):
            BashTool(workdir).run({"command": command, "timeout": 30})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert _wait_until_dead(int((root / "orphan.pid").read_text()))
    assert _call_groups() == groups_before


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"command": "true", "timeout": 0}, "'timeout' must be a positive number"),
        ({"command": "true", "timeout": -5}, "'timeout' must be a positive number"),
        ({"command": "true", "timeout": "5"}, "field 'timeout' must be integer, got string"),
        ({"command": "true", "timeout": True}, "field 'timeout' must be integer, got boolean"),
        ({"command": "true", "timeout": 1.5}, "field 'timeout' must be integer, got number"),
        ({"command": "   "}, "field 'command' is empty"),
        ({"command": "echo a\x00b"}, "NUL byte"),
        ({}, "field 'command' is required (string)"),
    ],
)
def test_bash_rejects_bad_arguments(
    registry: ToolRegistry, arguments: JSONObject, fragment: str
) -> None:
    _assert_error(registry.dispatch("bash", arguments), fragment)


def test_bash_timeout_above_the_maximum_is_capped(workdir: Workdir) -> None:
    result = BashTool(workdir).run({"command": "echo ok", "timeout": 10**9})
    assert result == ToolResult("ok\n")


# --- read_file -------------------------------------------------------------------------------


@pytest.fixture
def numbered(root: Path) -> Path:
    path = root / "numbered.txt"
    path.write_text("".join(f"line{n}\n" for n in range(1, 11)), encoding="utf-8")
    return path


def test_read_file_returns_the_whole_small_file(registry: ToolRegistry, numbered: Path) -> None:
    result = registry.dispatch("read_file", {"path": "numbered.txt"})
    assert result == ToolResult(numbered.read_text(encoding="utf-8"))


def test_read_file_offset_and_limit_select_lines(registry: ToolRegistry, numbered: Path) -> None:
    result = registry.dispatch("read_file", {"path": "numbered.txt", "offset": 3, "limit": 2})
    assert result.text == (
        "line3\nline4\n... [showing lines 3-4 of 10; use offset=5 to read further]"
    )
    tail = registry.dispatch("read_file", {"path": "numbered.txt", "offset": 9, "limit": 50})
    assert tail.text == "line9\nline10\n"


def test_read_file_null_optional_fields_mean_not_given(
    registry: ToolRegistry, numbered: Path
) -> None:
    result = registry.dispatch("read_file", {"path": "numbered.txt", "offset": None})
    assert result.text.startswith("line1\n")


def test_read_file_caps_long_output_and_says_where_to_continue(
    workdir: Workdir, root: Path
) -> None:
    (root / "long.txt").write_text("x" * 9 + "\n" * 1 + ("y" * 9 + "\n") * 19, encoding="utf-8")
    result = ReadFileTool(workdir, max_chars=50).run({"path": "long.txt"})
    assert result.text == (
        "xxxxxxxxx\n" + "yyyyyyyyy\n" * 4 + "... [output capped at 50 characters; "
        "showing lines 1-5 of 20; use offset=6 to read further]"
    )


def test_read_file_shows_the_start_of_a_line_longer_than_the_cap(
    workdir: Workdir, root: Path
) -> None:
    (root / "min.js").write_text("z" * 500 + "\nnext\n", encoding="utf-8")
    result = ReadFileTool(workdir, max_chars=100).run({"path": "min.js"})
    assert result.text.startswith("z" * 100 + "\n... [output capped at 100 characters")
    assert "use offset=2" in result.text


def test_read_file_keeps_line_endings_exactly(registry: ToolRegistry, root: Path) -> None:
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    assert registry.dispatch("read_file", {"path": "crlf.txt"}).text == "a\r\nb\r\n"


def test_read_file_empty_file(registry: ToolRegistry, root: Path) -> None:
    (root / "empty.txt").write_bytes(b"")
    assert registry.dispatch("read_file", {"path": "empty.txt"}) == ToolResult("(empty file)")


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"path": "missing.txt"}, "'missing.txt' does not exist"),
        ({"path": "sub"}, "'sub' is a directory"),
        ({"path": "."}, "is a directory"),
        ({"path": "blob.bin"}, "binary"),
        ({"path": "latin1.txt"}, "not valid UTF-8"),
        ({"path": "fifo"}, "not a regular file"),
        ({"path": "numbered.txt", "offset": 11}, "offset=11 is past the end"),
        ({"path": "numbered.txt", "offset": 0}, "'offset' must be 1 or more"),
        ({"path": "numbered.txt", "limit": 0}, "'limit' must be 1 or more"),
        ({"path": "numbered.txt", "limit": "3"}, "field 'limit' must be integer, got string"),
    ],
)
def test_read_file_errors(
    registry: ToolRegistry, root: Path, numbered: Path, arguments: JSONObject, fragment: str
) -> None:
    (root / "sub").mkdir()
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    os.mkfifo(root / "fifo")
    _assert_error(registry.dispatch("read_file", arguments), fragment)


# --- write_file ------------------------------------------------------------------------------


def test_write_file_creates_parents_and_counts_bytes(registry: ToolRegistry, root: Path) -> None:
    result = registry.dispatch("write_file", {"path": "a/b/c.txt", "content": "héllo\r\n"})
    assert result == ToolResult("Wrote 8 bytes to a/b/c.txt")
    assert (root / "a" / "b" / "c.txt").read_bytes() == "héllo\r\n".encode()


def test_write_file_overwrites(registry: ToolRegistry, root: Path) -> None:
    (root / "f.txt").write_text("old content", encoding="utf-8")
    registry.dispatch("write_file", {"path": str(root / "f.txt"), "content": "new"})
    assert (root / "f.txt").read_text(encoding="utf-8") == "new"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"path": ".", "content": "x"}, "is a directory"),
        ({"path": "sub", "content": "x"}, "is a directory"),
        ({"path": "plain.txt/child", "content": "x"}, "cannot write"),
        ({"path": "f.txt", "content": "\ud800"}, "UTF-8 cannot store"),
        ({"path": "f.txt"}, "field 'content' is required (string)"),
        ({"path": "f.txt", "content": 5}, "field 'content' must be string, got integer"),
    ],
)
def test_write_file_errors(
    registry: ToolRegistry, root: Path, arguments: JSONObject, fragment: str
) -> None:
    (root / "sub").mkdir()
    (root / "plain.txt").write_text("", encoding="utf-8")
    _assert_error(registry.dispatch("write_file", arguments), fragment)
    assert not (root / "f.txt").exists()


# --- edit_file -------------------------------------------------------------------------------


@pytest.fixture
def hello(root: Path) -> Path:
    path = root / "hello.py"
    path.write_text("print('hi')\nprint('hi')\nprint('hi')\nx = 1\n", encoding="utf-8")
    return path


def test_edit_file_replaces_a_unique_match(registry: ToolRegistry, hello: Path) -> None:
    result = registry.dispatch(
        "edit_file", {"path": "hello.py", "old_text": "x = 1", "new_text": "x = 2"}
    )
    assert result == ToolResult("Edited hello.py (1 replacement)")
    assert hello.read_text(encoding="utf-8").endswith("x = 2\n")


def test_edit_file_refuses_a_missing_match(registry: ToolRegistry, hello: Path) -> None:
    before = hello.read_text(encoding="utf-8")
    result = registry.dispatch(
        "edit_file", {"path": "hello.py", "old_text": "y = 1", "new_text": "y = 2"}
    )
    assert result == ToolResult(
        "Error: old_text not found in hello.py; read the file and copy the exact text",
        is_error=True,
    )
    assert hello.read_text(encoding="utf-8") == before


def test_edit_file_refuses_an_ambiguous_match(registry: ToolRegistry, hello: Path) -> None:
    before = hello.read_text(encoding="utf-8")
    result = registry.dispatch(
        "edit_file", {"path": "hello.py", "old_text": "'hi'", "new_text": "'bye'"}
    )
    assert result == ToolResult(
        "Error: old_text occurs 3 times in hello.py; include more context to make it unique, "
        "or pass replace_all=true",
        is_error=True,
    )
    assert hello.read_text(encoding="utf-8") == before


def test_edit_file_replace_all(registry: ToolRegistry, hello: Path) -> None:
    result = registry.dispatch(
        "edit_file",
        {"path": "hello.py", "old_text": "'hi'", "new_text": "'bye'", "replace_all": True},
    )
    assert result == ToolResult("Edited hello.py (3 replacements)")
    assert hello.read_text(encoding="utf-8").count("'bye'") == 3
    assert "'hi'" not in hello.read_text(encoding="utf-8")


def test_edit_file_keeps_crlf_line_endings(registry: ToolRegistry, root: Path) -> None:
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    result = registry.dispatch("edit_file", {"path": "dos.txt", "old_text": "two", "new_text": "2"})
    assert not result.is_error
    assert (root / "dos.txt").read_bytes() == b"one\r\n2\r\n"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({"path": "hello.py", "old_text": "", "new_text": "x"}, "field 'old_text' is empty"),
        ({"path": "hello.py", "old_text": "x = 1", "new_text": "x = 1"}, "are the same"),
        ({"path": "nope.py", "old_text": "a", "new_text": "b"}, "'nope.py' does not exist"),
        (
            {"path": "hello.py", "old_text": "'hi'", "new_text": "b", "replace_all": 1},
            "field 'replace_all' must be boolean, got integer",
        ),
        ({"path": "hello.py", "old_text": "a"}, "field 'new_text' is required (string)"),
    ],
)
def test_edit_file_errors(
    registry: ToolRegistry, hello: Path, arguments: JSONObject, fragment: str
) -> None:
    before = hello.read_text(encoding="utf-8")
    _assert_error(registry.dispatch("edit_file", arguments), fragment)
    assert hello.read_text(encoding="utf-8") == before


# --- registry --------------------------------------------------------------------------------


@attrs.frozen
class _ScriptedTool:
    """A tool whose behaviour a test supplies; ``calls`` records what reached ``run``."""

    name: str
    behaviour: Callable[[Mapping[str, Any]], ToolResult]
    properties: JSONObject = attrs.field(factory=dict)
    required: tuple[str, ...] = ()
    calls: list[Mapping[str, Any]] = attrs.field(factory=list)

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": "test tool",
            "input_schema": {
                "type": "object",
                "properties": self.properties,
                "required": list(self.required),
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.calls.append(arguments)
        return self.behaviour(arguments)


def _raise(error: Exception) -> Callable[[Mapping[str, Any]], ToolResult]:
    def behaviour(arguments: Mapping[str, Any]) -> ToolResult:
        raise error

    return behaviour


def test_registry_lists_schemas_in_registration_order(registry: ToolRegistry) -> None:
    assert registry.names == ("bash", "read_file", "write_file", "edit_file")
    assert [schema["name"] for schema in registry.schemas] == list(registry.names)
    for schema in registry.schemas:
        assert schema["description"]
        assert schema["input_schema"]["type"] == "object"
    assert registry.get("read_file") is not None
    assert registry.get("todo") is None


def test_registry_refuses_two_tools_with_one_name(workdir: Workdir) -> None:
    with pytest.raises(ValueError, match="read_file"):
        ToolRegistry([ReadFileTool(workdir), ReadFileTool(workdir)])


def test_registry_unknown_tool_lists_the_available_ones(registry: ToolRegistry) -> None:
    assert registry.dispatch("rm_rf", {}) == ToolResult(
        "Error: unknown tool 'rm_rf'; available tools: bash, read_file, write_file, edit_file",
        is_error=True,
    )


@pytest.mark.parametrize(("arguments", "got"), [([], "array"), (None, "null"), ("ls", "string")])
def test_registry_non_object_arguments(registry: ToolRegistry, arguments: object, got: str) -> None:
    _assert_error(
        registry.dispatch("bash", arguments),
        "Error: bash: arguments must be a JSON object with fields command, timeout",
        f"got {got}",
    )


@pytest.mark.parametrize(
    ("kind", "good", "bad", "got"),
    [
        ("string", "s", 1, "integer"),
        ("integer", 3, True, "boolean"),
        ("integer", 3, 3.5, "number"),
        ("number", 3.5, "3.5", "string"),
        ("number", 3, False, "boolean"),
        ("boolean", False, 0, "integer"),
        ("array", [1], {"a": 1}, "object"),
        ("object", {"a": 1}, [1], "array"),
    ],
)
def test_registry_checks_json_types(kind: str, good: object, bad: object, got: str) -> None:
    tool = _ScriptedTool("probe", lambda _: ToolResult("ran"), properties={"v": {"type": kind}})
    registry = ToolRegistry([tool])
    assert registry.dispatch("probe", {"v": good}) == ToolResult("ran")
    assert registry.dispatch("probe", {"v": bad}) == ToolResult(
        f"Error: probe: field 'v' must be {kind}, got {got}", is_error=True
    )
    assert tool.calls == [{"v": good}]


def test_registry_ignores_unknown_extra_fields(registry: ToolRegistry) -> None:
    assert registry.dispatch("bash", {"command": "echo x", "why": "test"}) == ToolResult("x\n")


def test_registry_turns_handler_failures_into_error_results() -> None:
    registry = ToolRegistry(
        [
            _ScriptedTool("plain", _raise(ToolError("bad call; try again"))),
            _ScriptedTool("prefixed", _raise(ToolError("Error: already prefixed"))),
            _ScriptedTool("boom", _raise(RuntimeError("kaboom"))),
            _ScriptedTool("sloppy", lambda _: ToolResult("forgot the prefix", is_error=True)),
        ]
    )
    assert registry.dispatch("plain", {}) == ToolResult("Error: bad call; try again", True)
    assert registry.dispatch("prefixed", {}) == ToolResult("Error: already prefixed", True)
    assert registry.dispatch("boom", {}) == ToolResult(
        "Error: boom failed: RuntimeError: kaboom", True
    )
    assert registry.dispatch("sloppy", {}) == ToolResult("Error: forgot the prefix", True)


def test_registry_asks_the_approver_only_for_side_effects(workdir: Workdir, root: Path) -> None:
    asked: list[tuple[str, Mapping[str, Any]]] = []

    def decline(tool: str, arguments: Mapping[str, Any]) -> bool:
        asked.append((tool, arguments))
        return False

    registry = _registry(workdir, approver=decline)
    (root / "f.txt").write_text("keep", encoding="utf-8")

    declined = registry.dispatch("bash", {"command": "touch ran"})
    # A bare False says the call was not approved; it must not claim a person declined.
    _assert_error(declined, "Error: bash was not approved, so it did not run")
    assert "user" not in declined.text
    assert not (root / "ran").exists()
    _assert_error(
        registry.dispatch("write_file", {"path": "f.txt", "content": "lost"}),
        "write_file was not approved",
    )
    assert (root / "f.txt").read_text(encoding="utf-8") == "keep"

    assert registry.dispatch("read_file", {"path": "f.txt"}) == ToolResult("keep")
    assert asked == [
        ("bash", {"command": "touch ran"}),
        ("write_file", {"path": "f.txt", "content": "lost"}),
    ]


def test_registry_runs_approved_calls_and_custom_approval_sets(
    workdir: Workdir, root: Path
) -> None:
    registry = _registry(workdir, approver=lambda tool, arguments: tool != "read_file")
    assert registry.dispatch("bash", {"command": "touch ran"}) == ToolResult("(no output)")
    assert (root / "ran").exists()

    strict = _registry(
        workdir, approver=lambda tool, arguments: False, needs_approval=frozenset({"read_file"})
    )
    _assert_error(strict.dispatch("read_file", {"path": "ran"}), "read_file was not approved")
    explained = _registry(workdir, approver=lambda tool, arguments: Refusal("Error: not today"))
    assert explained.dispatch("bash", {"command": "touch x"}) == ToolResult(
        "Error: not today", True
    )
    assert not (root / "x").exists()
    assert strict.dispatch("write_file", {"path": "w.txt", "content": ""}) == ToolResult(
        "Wrote 0 bytes to w.txt"
    )


# --- property: nothing the model sends escapes or crashes ------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)
_PATHS = st.sampled_from(["a.txt", "sub/b.txt", "../escape.txt", ".", "", "~/x", "/tmp"]) | st.text(
    max_size=30
)
_FIELDS = {
    "path": _PATHS | _JSON,
    "content": st.text(max_size=50) | _JSON,
    "old_text": st.sampled_from(["hello", "l", ""]) | st.text(max_size=5) | _JSON,
    "new_text": st.text(max_size=10) | _JSON,
    "replace_all": st.booleans() | _JSON,
    "offset": st.integers(-2, 5) | _JSON,
    "limit": st.integers(-2, 5) | _JSON,
}
_ARGUMENTS = _JSON | st.fixed_dictionaries({}, optional=_FIELDS)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["read_file", "write_file", "edit_file", "todo", ""]),
    arguments=_ARGUMENTS,
)
def test_dispatch_never_raises_and_never_writes_outside(
    tmp_path_factory: pytest.TempPathFactory, name: str, arguments: object
) -> None:
    base = tmp_path_factory.mktemp("property")
    work = base / "work"
    work.mkdir()
    (work / "a.txt").write_text("hello hello\n", encoding="utf-8")
    registry = _registry(Workdir(work))

    result = registry.dispatch(name, arguments)

    assert isinstance(result, ToolResult)
    assert isinstance(result.text, str)
    assert result.text
    if result.is_error:
        assert result.text.startswith("Error:")
    assert [p.name for p in base.iterdir()] == ["work"]


# --- hardened file tools: one descriptor, regular files, one name, temp + rename --------------


def test_read_and_write_refuse_a_fifo_without_blocking(workdir: Workdir, root: Path) -> None:
    os.mkfifo(root / "pipe")
    registry = _registry(workdir)
    read = registry.dispatch("read_file", {"path": "pipe"})
    _assert_error(read, "is not a regular file (a FIFO (named pipe))")
    written = registry.dispatch("write_file", {"path": "pipe", "content": "x"})
    _assert_error(written, "is a FIFO (named pipe); only regular files can be written")
    assert stat.S_ISFIFO((root / "pipe").lstat().st_mode)


def test_a_hard_linked_file_is_not_read_and_a_write_does_not_go_through_it(
    workdir: Workdir, root: Path, outside: Path
) -> None:
    secret = outside / "secret.txt"
    secret.write_text("outside text", encoding="utf-8")
    os.link(secret, root / "hl")
    registry = _registry(workdir)
    _assert_error(registry.dispatch("read_file", {"path": "hl"}), "has 2 hard links")
    _assert_error(
        registry.dispatch("edit_file", {"path": "hl", "old_text": "outside", "new_text": "x"}),
        "has 2 hard links",
    )
    written = registry.dispatch("write_file", {"path": "hl", "content": "new"})
    assert written == ToolResult("Wrote 3 bytes to hl")
    assert secret.read_text(encoding="utf-8") == "outside text"
    assert (root / "hl").read_text(encoding="utf-8") == "new"


def test_a_write_replaces_the_file_and_keeps_its_mode(workdir: Workdir, root: Path) -> None:
    script = root / "run.sh"
    script.write_text("old", encoding="utf-8")
    script.chmod(0o750)
    before = script.stat().st_ino
    result = _registry(workdir).dispatch("write_file", {"path": "run.sh", "content": "new"})
    assert not result.is_error
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert script.stat().st_ino != before  # renamed into place, not written through
    assert [p.name for p in root.iterdir()] == ["run.sh"]  # no temporary file left


def test_a_link_swapped_in_after_the_check_is_refused(
    workdir: Workdir, root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").mkdir()
    (outside / "f.txt").write_text("outside", encoding="utf-8")
    real_resolve = Workdir.resolve

    def resolve_then_swap(self: Workdir, path: str) -> Path:
        resolved = real_resolve(self, path)
        (root / "d").rename(root / "d.old")
        (root / "d").symlink_to(outside)  # the race, won every time
        return resolved

    monkeypatch.setattr(Workdir, "resolve", resolve_then_swap)
    result = _registry(workdir).dispatch("read_file", {"path": "d/f.txt"})
    _assert_error(result, "changed while it was opened")
    assert "outside" not in result.text.replace("outside the", "")


def test_redaction_replaces_secret_values_in_every_result(workdir: Workdir, root: Path) -> None:
    (root / "notes.txt").write_text("key=sk-ant-0123456789 db=hunter2-long", encoding="utf-8")
    tools = standard_tools(workdir)
    registry = ToolRegistry(tools, secrets=("sk-ant-0123456789", "hunter2-long", "short"))
    read = registry.dispatch("read_file", {"path": "notes.txt"})
    assert read == ToolResult("key=[REDACTED] db=[REDACTED]")
    echoed = registry.dispatch("bash", {"command": "echo short sk-ant-0123456789"})
    assert echoed == ToolResult("short [REDACTED]\n")


@pytest.mark.parametrize(
    ("has_bash", "hint", "not_named"),
    [(True, "bash 'ls", "list_files"), (False, "list_files", "bash")],
)
def test_a_missing_path_names_only_a_listing_tool_the_model_has(
    tmp_path: Path, has_bash: bool, hint: str, not_named: str
) -> None:
    (tmp_path / "sub").mkdir()
    workdir = Workdir(tmp_path, has_bash=has_bash)
    registry = ToolRegistry([ReadFileTool(workdir)])
    missing = registry.dispatch("read_file", {"path": "nope.py"})
    folder = registry.dispatch("read_file", {"path": "sub"})
    for result in (missing, folder):
        assert result.is_error and result.text.startswith("Error:")
        assert hint in result.text and not_named not in result.text
    assert "sub" in folder.text.split("list it with", 1)[1]


# --- what the person sees beside the result ----------------------------------------------------


def test_bash_gives_its_exit_code_beside_the_text(registry: ToolRegistry) -> None:
    assert registry.dispatch("bash", {"command": "exit 3"}).exit_code == 3
    assert registry.dispatch("bash", {"command": "true"}).exit_code == 0
    assert registry.dispatch("bash", {"command": "kill -TERM $$"}).exit_code == 128 + 15
    timed_out = registry.dispatch("bash", {"command": "sleep 30", "timeout": 1})
    assert (timed_out.is_error, timed_out.exit_code) == (True, 124)


def test_file_tools_give_a_diff_of_what_they_changed(registry: ToolRegistry, root: Path) -> None:
    created = registry.dispatch("write_file", {"path": "g.py", "content": "a\nb\n"})
    assert created.diff.splitlines()[:2] == ["--- /dev/null", "+++ b/g.py"]
    assert "+a" in created.diff.splitlines()
    edited = registry.dispatch("edit_file", {"path": "g.py", "old_text": "b", "new_text": "c"})
    assert {"-b", "+c"} <= set(edited.diff.splitlines())
    rewritten = registry.dispatch("write_file", {"path": "g.py", "content": "a\nc\nd\n"})
    assert "+d" in rewritten.diff.splitlines()
    assert "-a" not in rewritten.diff.splitlines()
    assert registry.dispatch("read_file", {"path": "g.py"}).diff == ""


def test_a_diff_is_redacted_like_the_text(workdir: Workdir, root: Path) -> None:
    registry = _registry(workdir, secrets=("s3cret-value-123",))
    result = registry.dispatch("write_file", {"path": "k", "content": "key=s3cret-value-123\n"})
    assert "s3cret-value-123" not in result.diff
    assert "[REDACTED]" in result.diff


def test_the_duration_is_the_tools_own_not_the_approval_prompts(
    workdir: Workdir, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A clock only the person moves: a duration that counted the prompt would be 100 s.
    clock = [1000.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])

    def slow_person(tool: str, arguments: Mapping[str, Any]) -> bool:
        clock[0] += 100.0  # a person reading the prompt
        return True

    registry = _registry(workdir, approver=slow_person)
    result = registry.dispatch("write_file", {"path": "f", "content": "x"})
    assert result.duration_s == 0.0
