"""Protected paths: what runs later (git hooks and config, our own files) stays as left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from orchestrator.protocols import ToolError
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer
from orchestrator.tools import Workdir
from orchestrator.tools.files import EditFileTool, WriteFileTool
from orchestrator.tools.protected import ProtectedSet, ProtectedSnapshot, protected_paths
from orchestrator.tools.sandbox import find_bwrap, probe_bwrap

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **GIT_ENV},
        timeout=60,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    assert _git(root, "init", "-q").returncode == 0
    (root / "app.py").write_text("print('hi')\n")
    _git(root, "add", "app.py")
    assert _git(root, "commit", "-qm", "first").returncode == 0
    return root


def test_the_protected_paths_of_a_repository(repo: Path) -> None:
    paths = protected_paths(repo)
    names = {str(path.relative_to(repo)) for path in paths}
    assert {".git/hooks", ".git/config", "orchestrator.toml", ".mcp.json"} <= names
    assert not any(name.startswith((".git/objects", ".git/refs", ".git/index")) for name in names)
    _git(repo, "config", "core.hooksPath", "tools/hooks")
    _git(repo, "config", "include.path", "../shared.gitconfig")
    names = {str(path.relative_to(repo)) for path in protected_paths(repo)}
    assert {"tools/hooks", "shared.gitconfig"} <= names
    allowed = protected_paths(repo, [repo / "tools" / "hooks"])
    assert repo / "tools" / "hooks" not in allowed


def test_a_worktree_protects_its_pointer_and_its_gitdirs(repo: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    assert _git(repo, "worktree", "add", "-q", str(tree)).returncode == 0
    paths = set(protected_paths(tree))
    assert tree / ".git" in paths
    assert repo / ".git" / "hooks" in paths and repo / ".git" / "config" in paths
    gitdir = Path((tree / ".git").read_text().split(":", 1)[1].strip())
    assert gitdir.resolve() / "config" in paths


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (WriteFileTool, {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch x\n"}),
        (WriteFileTool, {"path": ".git/config", "content": "[core]\nfsmonitor = touch x\n"}),
        (WriteFileTool, {"path": "orchestrator.toml", "content": 'sandbox = "none"\n'}),
        (WriteFileTool, {"path": "./.mcp.json", "content": "{}"}),
        (EditFileTool, {"path": ".git/config", "old_text": "[core]", "new_text": "[core]\nx=1"}),
    ],
)
def test_the_file_tools_refuse_protected_paths(
    repo: Path, tool: type[Any], arguments: Mapping[str, str]
) -> None:
    before = ProtectedSnapshot.take(ProtectedSet(repo, protected_paths(repo)))
    workdir = Workdir(repo, protected=protected_paths(repo))
    with pytest.raises(ToolError, match="is protected") as refused:
        tool(workdir).run(arguments)
    assert str(refused.value).startswith("Error: ")
    assert before.changes() == ()


def test_a_snapshot_names_what_changed_with_a_diff(repo: Path) -> None:
    snapshot = ProtectedSnapshot.take(ProtectedSet(repo, protected_paths(repo)))
    _git(repo, "config", "core.fsmonitor", "touch /tmp/pwned")
    (repo / ".git" / "hooks" / "post-commit").write_text("#!/bin/sh\n")
    (repo / "orchestrator.toml").write_text('approval = "auto"\n')
    changes = {change.path.relative_to(repo).as_posix(): change for change in snapshot.changes()}
    assert set(changes) == {".git/config", ".git/hooks/post-commit", "orchestrator.toml"}
    assert any("fsmonitor" in line for line in changes[".git/config"].diff)
    assert changes["orchestrator.toml"].describe(repo) == "the run created orchestrator.toml"


# --- through the real CLI ----------------------------------------------------------------------

ATTACK = (
    "printf '#!/bin/sh\\ntouch {marker}\\n' > .git/hooks/post-commit; "
    "chmod +x .git/hooks/post-commit; "
    "git config core.fsmonitor 'touch {marker}'; "
    "echo done"
)


def _run(
    tmp_path: Path, repo: Path, turns: Sequence[Mapping[str, Any]], *flags: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    trace = tmp_path / f"t{len(list(tmp_path.glob('t*.jsonl')))}.jsonl"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))
    }
    script = parse_script({"name": "plant", "turns": list(turns)}, source="test")
    with MessagesServer(script) as server:
        env.update(
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_CONFIG_DIR=str(tmp_path / "config"),
            NO_COLOR="1",
        )
        command = ["run", "Work", "--workdir", str(repo), "--trace", str(trace), "--yes"]
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", *command, *flags],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=300,
        )
    return done, trace


def _bwrap_works() -> bool:
    binary = find_bwrap()
    return binary is not None and probe_bwrap(binary) is None


def _user_runs_git(repo: Path) -> None:
    (repo / "app.py").write_text("print('changed')\n")
    _git(repo, "status")
    _git(repo, "commit", "-qam", "by the user")


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_under_bwrap_planted_hooks_and_config_never_run(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": ATTACK.format(marker=marker)}}]},
        {"text": "Done."},
    ]
    done, _trace = _run(tmp_path, repo, turns, "--sandbox", "bwrap")
    assert done.returncode == 0, done.stderr
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    _user_runs_git(repo)
    assert not marker.exists()


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_under_bwrap_the_agent_still_commits(repo: Path, tmp_path: Path) -> None:
    commit = (
        "echo more >> app.py && git add app.py && "
        "git -c user.name=a -c user.email=a@b commit -qm 'by the agent' && git log --oneline"
    )
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": commit}}]},
        {"text": "Committed."},
    ]
    done, _trace = _run(tmp_path, repo, turns, "--sandbox", "bwrap")
    assert done.returncode == 0, done.stderr
    assert "by the agent" in _git(repo, "log", "--oneline").stdout


def test_outside_bwrap_a_planted_change_is_a_warning_and_exit_3(repo: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": ATTACK.format(marker=marker)}}]},
        {"text": "Done."},
    ]
    done, trace = _run(tmp_path, repo, turns, "--sandbox", "workdir")
    assert done.returncode == 3
    assert "! the run changed .git/config" in done.stderr
    assert "fsmonitor" in done.stderr
    assert "! the run created .git/hooks/post-commit" in done.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    changed = {Path(e["path"]).name for e in events if e["event"] == "protected.changed"}
    assert changed == {"config", "post-commit"}


def test_allow_write_is_never_a_project_setting(repo: Path, tmp_path: Path) -> None:
    (repo / "orchestrator.toml").write_text('allow_write = [".git/hooks"]\n')
    done, _trace = _run(tmp_path, repo, [{"text": "hi"}])
    assert done.returncode == 2
    assert "allow_write does not belong in a project file" in done.stderr


@pytest.mark.parametrize("sandbox", ["bwrap", "workdir"])
def test_write_file_cannot_plant_a_hook_in_any_mode(
    repo: Path, tmp_path: Path, sandbox: str
) -> None:
    if sandbox == "bwrap" and not _bwrap_works():
        pytest.skip("bwrap cannot run here")
    marker = tmp_path / "pwned"
    hook = {"path": ".git/hooks/post-commit", "content": f"#!/bin/sh\ntouch {marker}\n"}
    config = {
        "path": ".git/config",
        "old_text": "[core]",
        "new_text": f"[core]\n\tfsmonitor = touch {marker}",
    }
    turns: list[Mapping[str, Any]] = [
        {
            "tool_calls": [
                {"name": "write_file", "input": hook},
                {"name": "edit_file", "input": config},
            ]
        },
        {"text": "Done."},
    ]
    done, trace = _run(tmp_path, repo, turns, "--sandbox", sandbox)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    results = [e for e in events if e["event"] == "tool.result"]
    assert [r["is_error"] for r in results] == [True, True]
    assert all("is protected" in r["output"] for r in results)
    _user_runs_git(repo)
    assert not marker.exists()
