"""Protected paths: what runs later (git hooks and config, our own files) stays as left."""

from __future__ import annotations

import json
import os
import subprocess
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
from tests.in_process import run_cli

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
        done = run_cli([*command, *flags], env=env)
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
    who = (
        "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b"
    )
    commit = (
        f"{who}; echo more >> app.py && git add app.py && git commit -qm 'by the agent' && "
        "git switch -qc feature && echo new > new.py && git add new.py && "
        "git commit -qm 'on a branch' && echo wip >> app.py && git stash -q && git log --oneline"
    )
    # A second call sees the first one's commits: they landed in between.
    turns: list[Mapping[str, Any]] = [
        {"tool_calls": [{"name": "bash", "input": {"command": commit}}]},
        {"tool_calls": [{"name": "bash", "input": {"command": "git log --oneline -1 main"}}]},
        {"text": "Committed."},
    ]
    _git(repo, "branch", "-m", "main")
    done, trace = _run(tmp_path, repo, turns, "--sandbox", "bwrap")
    assert done.returncode == 0, done.stderr
    assert _git(repo, "log", "--format=%s", "main").stdout.split("\n")[:2] == [
        "by the agent",
        "first",
    ]
    assert _git(repo, "symbolic-ref", "HEAD").stdout.strip() == "refs/heads/feature"
    assert _git(repo, "show", "feature:app.py").stdout == "print('hi')\nmore\n"
    assert _git(repo, "show", "feature:new.py").stdout == "new\n"
    assert _git(repo, "status", "--porcelain").stdout == ""  # the stash took the change
    assert "wip" in _git(repo, "stash", "show", "-p").stdout
    assert _git(repo, "fsck", "--no-dangling").returncode == 0
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    outputs = [e["output"] for e in events if e["event"] == "tool.result"]
    assert "by the agent" in outputs[1]
    landed = [e for e in events if e["event"] == "git.landed"]
    assert landed and not any(e["dropped"] for e in landed)


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


# --- landing, directly -------------------------------------------------------------------------


def _overlay_call(repo: Path, command: str) -> tuple[Any, str]:
    """One bash call under bwrap with the git dir as an overlay, then its landing."""
    from orchestrator.tools.bash import BashTool
    from orchestrator.tools.products.guard import ProductGuard
    from orchestrator.tools.sandbox import Sandbox, SandboxPolicy

    binary = find_bwrap()
    assert binary is not None
    policy = SandboxPolicy(repo, git_dirs=[repo / ".git"], protected=protected_paths(repo))
    sandbox = Sandbox("bwrap", policy, binary)
    events: list[tuple[str, dict[str, Any]]] = []
    guard = ProductGuard.create(sandbox, log=lambda event, **fields: events.append((event, fields)))
    try:
        result = BashTool(Workdir(repo), sandbox=sandbox, guard=guard).run({"command": command})
    finally:
        guard.close()
    return events, result.text


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_landing_refuses_what_git_itself_would_not_write(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert _git(repo, "worktree", "add", "-q", str(other), "-b", "theirs").returncode == 0
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    blob = _git(repo, "hash-object", "-w", "app.py").stdout.strip()
    command = (
        "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b "
        "GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b; "
        "git update-ref refs/heads/theirs $(git commit-tree -m x HEAD^{tree}); "  # theirs is busy
        f"echo {blob} > .git/refs/heads/blob; "  # a branch must name a commit
        "echo 0123456789012345678901234567890123456789 > .git/refs/heads/nowhere; "
        "echo 'ref: ../../config' > .git/refs/heads/sym; "
        "printf x > .git/info/attributes; rm .git/hooks/*.sample; echo done"
    )
    events, text = _overlay_call(repo, command)
    dropped = {d["path"]: d["why"] for e, f in events if e == "git.landed" for d in f["dropped"]}
    assert ".git/refs/heads/theirs" in dropped, (events, text)
    assert "another worktree" in dropped[".git/refs/heads/theirs"]
    assert "must name a commit" in dropped[".git/refs/heads/blob"]
    assert "not in the repository" in dropped[".git/refs/heads/nowhere"]
    assert ".git/refs/heads/sym" in dropped and ".git/info/attributes" in dropped
    assert _git(repo, "rev-parse", "--verify", "-q", "refs/heads/blob").returncode != 0
    assert _git(repo, "rev-parse", "theirs").stdout.strip() == head
    assert _git(repo, "show-ref").stdout.count("refs/heads/") == 2  # main (or master), theirs
    assert (repo / ".git" / "hooks" / "pre-commit.sample").exists()  # deletions not landed
    assert "these writes were dropped" in text


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_a_loose_object_that_does_not_hash_to_its_name_is_not_landed(repo: Path) -> None:
    fake = "ab" + "c" * 38
    command = (
        'mkdir -p .git/objects/ab && python3 -c "import zlib,sys; '
        "sys.stdout.buffer.write(zlib.compress(b'blob 3\\0abc'))\" > "
        f".git/objects/ab/{fake[2:]}; git update-ref refs/heads/x {fake}; echo ok"
    )
    events, _text = _overlay_call(repo, command)
    dropped = [d for e, f in events if e == "git.landed" for d in f["dropped"]]
    assert any("does not hash to its name" in d["why"] for d in dropped)
    assert not (repo / ".git" / "objects" / "ab" / fake[2:]).exists()
