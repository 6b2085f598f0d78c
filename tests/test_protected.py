"""Protected paths: what runs later (git hooks and config, our own files) stays as left."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
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


_AGENT = (
    "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b; "
)


def _dropped(events: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    return {d["path"]: d["why"] for e, f in events if e == "git.landed" for d in f["dropped"]}


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_landing_reads_the_index_and_packs_with_git_and_fails_closed(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each refusal on its own, with no nested .git for the guard to move out to hide it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the shaped src/HEAD goes there
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    blob = _git(repo, "rev-parse", "HEAD:app.py").stdout.strip()
    # skip-worktree on a changed file: git status and git diff would say nothing of it.
    events, _ = _overlay_call(repo, "echo evil >> app.py; git update-index --skip-worktree app.py")
    assert "skip-worktree" in _dropped(events)[".git/index"]
    assert "evil" in _git(repo, "diff").stdout
    # A gitlink in a split index whose shared index is moved aside: git cannot read the index.
    gitlink = f"git update-index --add --cacheinfo 160000,{head},vendor"
    events, _ = _overlay_call(
        repo, f"{gitlink} && git update-index --split-index && mv .git/sharedindex.* ."
    )
    assert "cannot read it" in _dropped(events)[".git/index"]
    events, _ = _overlay_call(repo, "mv sharedindex.* .git/; git ls-files -s")
    assert any("shared index lands only" in why for why in _dropped(events).values())
    assert "vendor" not in _git(repo, "ls-files", "-s").stdout
    assert not list((repo / ".git").glob("sharedindex.*"))
    # A replace ref; a commit whose tree makes a folder a git dir on checkout.
    shaped = (
        "mkdir -p src/objects/info src/refs/heads && echo 'ref: refs/heads/x' > src/HEAD && "
        "touch src/objects/info/k src/refs/heads/x && git add src && git commit -qm shaped"
    )
    replace = (
        "T=$(git rev-parse HEAD^{tree}); "
        f"T2=$( (git ls-tree HEAD; printf '160000 commit {head}\\tvendor\\n') | git mktree); "
        "git replace $T $T2"
    )
    events, _ = _overlay_call(repo, f"{_AGENT}{shaped}; {replace}")
    dropped = _dropped(events)
    assert any(p.startswith(".git/refs/replace/") and "replace" in w for p, w in dropped.items())
    branch = _git(repo, "symbolic-ref", "HEAD").stdout.strip()
    assert "a checkout makes a git dir" in dropped[f".git/{branch}"]
    assert _git(repo, "rev-parse", "HEAD").stdout.strip() == head
    # A pack whose index claims app.py's blob id for other content: the index git computes
    # from the pack is the one that lands, so the committed file stays what it was.
    events, text = _overlay_call(repo, _FORGED_INDEX.replace("BLOB", blob))
    assert "evil" in text  # inside, the forged index served it
    packs = list((repo / ".git" / "objects" / "pack").glob("pack-*.idx"))
    assert len(packs) == 1, events  # the pack lands, with an index of the harness's
    with packs[0].open("rb") as index:
        listed = subprocess.run(
            ["git", "show-index"], stdin=index, capture_output=True, check=False
        )
    assert listed.returncode == 0 and blob.encode() not in listed.stdout
    assert _git(repo, "cat-file", "-p", blob).stdout == "print('hi')\n"
    assert _git(repo, "fsck", "--no-dangling").returncode == 0


# An honest one-blob pack whose .idx is then edited to give the blob the id BLOB.
_FORGED_INDEX = """python3 - <<'EOF'
import hashlib, os, subprocess
def run(*args, data=b""):
    return subprocess.run(args, input=data, capture_output=True).stdout.strip()
evil = run("git", "hash-object", "-w", "--stdin", data=b"evil\\n").decode()
name = run("git", "pack-objects", "-q", ".git/objects/pack/pack", data=evil.encode() + b"\\n")
path = ".git/objects/pack/pack-" + name.decode() + ".idx"
idx = bytearray(open(path, "rb").read())
at = idx.index(bytes.fromhex(evil))
idx[at:at + 20] = bytes.fromhex("BLOB")
for i in range(256):
    idx[8 + 4 * i:12 + 4 * i] = (0 if i < idx[at] else 1).to_bytes(4, "big")
idx[-20:] = hashlib.sha1(bytes(idx[:-20])).digest()
os.chmod(path, 0o644)
open(path, "wb").write(bytes(idx))
EOF
git cat-file -p BLOB"""


def test_git_dir_shaped_finds_what_git_takes_for_a_git_dir(repo: Path) -> None:
    from orchestrator.tools.products.gitdir import git_dir_shaped

    def shape(folder: Path) -> None:
        for part in ("objects", "refs/heads"):
            (folder / part).mkdir(parents=True)
        (folder / "HEAD").write_text("ref: refs/heads/main\n")

    shape(repo / "src")
    (repo / "worktree-like").mkdir()
    (repo / "worktree-like" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "worktree-like" / "commondir").write_text("../.git\n")
    (repo / "deep" / "vendor").mkdir(parents=True)
    _git(repo / "deep" / "vendor", "init", "-q")
    (repo / "sub").mkdir()
    (repo / "sub" / ".git").write_text("gitdir: ../.git\n")
    (repo / "half").mkdir()
    (repo / "half" / "HEAD").write_text("x\n")  # no objects, no refs: not a git dir
    found = git_dir_shaped(repo)
    assert found == sorted(
        [
            repo / "deep" / "vendor" / ".git",
            repo / "src",
            repo / "sub" / ".git",
            repo / "worktree-like",
        ]
    )
    # git agrees: run in each shaped folder, it takes that folder for its git dir.
    for folder in (repo / "src", repo / "worktree-like"):
        said = _git(folder, "rev-parse", "--absolute-git-dir")
        assert said.stdout.strip() == str(folder), said.stderr
    assert _git(repo / "half", "rev-parse", "--absolute-git-dir").stdout.strip() == str(
        repo / ".git"
    )
    shape(repo)  # the work directory itself, beside its .git
    assert repo in git_dir_shaped(repo)


def test_a_split_index_is_read_with_its_shared_index_in_the_snapshot(repo: Path) -> None:
    """Outside bwrap: a gitlink that appears only when a shared index comes back is seen."""
    from orchestrator.tools.products.gitdir import find_layout

    covered = ProtectedSet(repo, layout=find_layout(repo), gitlinks=True)
    start = ProtectedSnapshot.take(covered)
    head = _git(repo, "rev-parse", "HEAD").stdout.strip()
    _git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor")
    _git(repo, "update-index", "--split-index")
    (shared,) = (repo / ".git").glob("sharedindex.*")
    aside = repo / shared.name
    shared.rename(aside)
    unreadable = ProtectedSnapshot.take(covered, start)
    assert [c.describe(repo) for c in start.changes(unreadable)] == [
        "the run left what git cannot read (so nothing in it is vouched for): the index"
    ]
    aside.rename(shared)  # the index file itself is as it was: only the shared one is back
    back = ProtectedSnapshot.take(covered, unreadable)
    assert any(
        "gitlink" in c.describe(repo) and c.path == repo / "vendor" for c in start.changes(back)
    )


def test_a_makefile_pattern_names_gnu_makes_other_names() -> None:
    from orchestrator.tools.products.paths import ProtectGlobs

    top = ProtectGlobs(("/Makefile",))
    assert top.matches("GNUmakefile") and top.matches("makefile") and top.matches("Makefile")
    assert not top.matches("sub/GNUmakefile")
    anywhere = ProtectGlobs(("**/makefile",))
    assert anywhere.matches("a/b/GNUmakefile") and anywhere.matches("Makefile")
    assert not ProtectGlobs(("Makefile.am",)).matches("GNUmakefile")


def test_a_shell_command_in_git_config_protects_the_files_it_names(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.tools.products.paths import named_by_git_config

    for name in ("scripts/lint.sh", "tools/fix.sh", "src/app.py"):
        (repo / name).parent.mkdir(exist_ok=True)
        (repo / name).write_text("true\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(
        "[alias]\n"
        "\tlint = !sh scripts/lint.sh\n"
        "\tfix = \"!sh -c 'tools/fix.sh --all && echo done'\"\n"
        "\tfmt = !black src .\n"  # folders (and the work directory) name no program
        "\tst = status\n"
        "[core]\n\tfsmonitor = python3 watch.py\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    (repo / "watch.py").write_text("")
    named = {path.relative_to(repo).as_posix() for path in named_by_git_config(repo)}
    assert {"scripts/lint.sh", "tools/fix.sh", "watch.py"} <= named
    assert not named & {".", "src", "src/app.py", "status"}


@pytest.mark.skipif(not _bwrap_works(), reason="bwrap cannot run here")
def test_the_folders_and_files_made_only_to_mount_on_are_removed(repo: Path) -> None:
    """A missing hooks folder is made to be bound, a missing board file is bwrap's mount point:
    neither is left in the user's folder."""
    from orchestrator.tools.bash import BashTool
    from orchestrator.tools.products.guard import ProductGuard
    from orchestrator.tools.sandbox import Sandbox, SandboxPolicy

    binary = find_bwrap()
    assert binary is not None
    hooks = repo / "tools" / "githooks"
    journal = repo / "board.db-journal"
    policy = SandboxPolicy(
        repo, git_dirs=[repo / ".git"], placeholders=[hooks], stores=[repo / "board.db", journal]
    )
    sandbox = Sandbox("bwrap", policy, binary)
    guard = ProductGuard.create(sandbox)
    try:
        result = BashTool(Workdir(repo), sandbox=sandbox, guard=guard).run(
            {"command": "ls -d tools/githooks; touch tools/githooks/x; echo ok"}
        )
        assert "tools/githooks" in result.text and "ok" in result.text
        assert not journal.exists()  # removed after the call
    finally:
        guard.close()
    assert not (repo / "tools").exists()
