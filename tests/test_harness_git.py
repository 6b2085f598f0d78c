"""The harness's own git: in a repository a model wrote, nothing it planted runs.

Each attack is planted for real and judged from outside (a marker file outside the
repository); the same repository then shows plain git running every one of them, so the test
cannot pass because the plant was broken.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from orchestrator.harness_git import git_environment, run_git

PLAIN = {"GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "PATH": os.environ["PATH"]}
IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@t"]


def _plain(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=repo, env=PLAIN, capture_output=True, timeout=60, check=False
    )


def _hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A repository with a hook, an fsmonitor, a filter, an included textconv and a nested
    repository with an fsmonitor of its own; each touches its own marker in ``marks``."""
    repo, marks = tmp_path / "repo", tmp_path / "marks"
    marks.mkdir()
    repo.mkdir()
    _plain(repo, "init", "-q", "-b", "main")
    (repo / "a.txt").write_text("a\n", encoding="utf-8")
    _plain(repo, "add", "-A")
    _plain(repo, *IDENTITY, "commit", "-q", "-m", "start")
    nested = repo / "vendor"
    nested.mkdir()
    _plain(nested, "init", "-q")
    (nested / "x").write_text("x\n", encoding="utf-8")
    _plain(nested, "add", "x")
    _plain(nested, *IDENTITY, "commit", "-q", "-m", "v")
    # The plants, written as a model's bash would (no git runs after them).
    for hook in ("post-commit", "pre-commit", "post-merge", "post-checkout"):
        path = repo / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {marks}/hook-{hook}\n", encoding="utf-8")
        path.chmod(0o755)
    with (repo / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            f"[core]\n\tfsmonitor = touch {marks}/fsmonitor; false\n"
            f'[filter "evil"]\n\tclean = touch {marks}/filter; cat\n'
            f"[include]\n\tpath = ../evil.cfg\n"
        )
    (repo / "evil.cfg").write_text(
        f'[diff "evil"]\n\ttextconv = touch {marks}/textconv; cat\n', encoding="utf-8"
    )
    (repo / ".gitattributes").write_text("* filter=evil diff=evil\n", encoding="utf-8")
    with (nested / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marks}/nested-fsmonitor; false\n")
    (repo / "b.txt").write_text("b\n", encoding="utf-8")
    return repo, marks


def test_nothing_a_model_planted_runs_under_the_harness_git(tmp_path: Path) -> None:
    repo, marks = _hostile(tmp_path)
    run_git(repo, "add", "-A")
    run_git(repo, "status", "--porcelain")
    run_git(repo, "commit", "-q", "-m", "work")
    run_git(repo, "diff", "HEAD~1", "HEAD")
    run_git(repo, "branch", "side", "HEAD~1")
    run_git(repo, "checkout", "-q", "side")
    run_git(repo, "merge", "-q", "--no-edit", "main")
    assert sorted(p.name for p in marks.iterdir()) == []
    # The nested repository went in as a gitlink, which the team's merges refuse.
    assert "160000 commit" in run_git(repo, "ls-tree", "HEAD", "vendor").stdout
    # The same repository under plain git runs them: the plants were real.
    _plain(repo, "status")
    _plain(repo, "diff", "HEAD~1", "HEAD")
    _plain(repo, *IDENTITY, "commit", "-q", "--allow-empty", "-m", "x")
    found = {p.name for p in marks.iterdir()}
    assert {"fsmonitor", "nested-fsmonitor", "hook-post-commit", "textconv"} <= found, found


def test_git_gets_no_key_and_no_global_config(tmp_path: Path) -> None:
    env = git_environment(
        {"PATH": "/usr/bin", "ANTHROPIC_API_KEY": "sk-secret", "GIT_DIR": "/elsewhere"}
    )
    assert "ANTHROPIC_API_KEY" not in env and "GIT_DIR" not in env
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    repo = tmp_path / "r"
    repo.mkdir()
    run_git(repo, "init", "-q")
    (repo / ".git" / "config").write_text(
        "[core]\n\thooksPath = hooks\n\tfsmonitor = x\n\tpager = x\n", encoding="utf-8"
    )
    # Of two -c settings git takes the later: the harness's own come after the emptied ones.
    shown = run_git(repo, "config", "--get", "core.hooksPath").stdout.strip()
    assert shown == os.devnull
    assert run_git(repo, "config", "--get", "core.fsmonitor").stdout.strip() == "false"
