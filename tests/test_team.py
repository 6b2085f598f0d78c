"""``orchestrator team``: the offline demo end to end, and the refusals and conflicts around it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from orchestrator.team import TeamPlan, _add_worktree, _git, _merge_back
from tests.test_cli import _environment

TIMEOUT = 300


def _cli(args: list[str], tmp_path: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=_environment(ORCHESTRATOR_STATE_DIR=str(tmp_path / "state"), **extra),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.mark.e2e
def test_the_scripted_team_does_every_item_once_and_merges_every_branch(tmp_path: Path) -> None:
    work = tmp_path / "repo"
    done = _cli(["team", "--scripted", "--workers", "3", "--workdir", str(work)], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "[SCRIPTED team demo" in done.stdout
    board = next(line for line in done.stdout.splitlines() if line.startswith("board: "))
    url = board.removeprefix("board: ").split(" (")[0]
    assert "(board check: ok)" in board
    # The log: every item completed exactly once, by the agent that claimed it.
    log = _cli(["board", "log", url, "--json"], tmp_path)
    assert log.returncode == 0, log.stderr
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    completed = Counter(e["item"] for e in entries if e["dst"] == "completed")
    assert completed == Counter({str(n): 1 for n in range(1, 6)})
    assert _cli(["board", "check", url], tmp_path).returncode == 0
    # Every agent's trace replays clean.
    traces = [
        line.split(": ", 2)[2] for line in done.stdout.splitlines() if line.startswith("trace: ")
    ]
    assert len(traces) == 4
    for trace in traces:
        check = _cli(["replay", "--check", trace], tmp_path)
        assert check.returncode == 0, check.stderr
    # The notes are merged back onto a clean tree, and the worktrees are gone.
    assert sorted(p.name for p in (work / "notes").iterdir()) == [
        "goodbye.md",
        "hello.md",
        "index.md",
        "testing.md",
        "usage.md",
    ]
    assert _git(work, "status", "--porcelain").stdout == ""
    assert len(_git(work, "worktree", "list").stdout.splitlines()) == 1
    assert "merged: " in done.stdout and "not merged" not in done.stdout


def test_a_team_needs_a_repository_and_says_so_in_one_line(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = _cli(["team", "Do it", "--workdir", str(plain)], tmp_path, ANTHROPIC_API_KEY="k")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not a git repository" in done.stderr


def test_the_scripted_demo_will_not_write_into_a_folder_with_files(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine", encoding="utf-8")
    done = _cli(["team", "--scripted", "--workdir", str(busy)], tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not empty" in done.stderr
    assert sorted(p.name for p in busy.iterdir()) == ["keep.txt"]


def test_a_conflict_stops_that_merge_names_the_file_and_leaves_the_tree_clean(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "shared.txt").write_text("one\n", encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    plan = TeamPlan(
        "x",
        2,
        repo,
        "",
        tmp_path / "base",
        lambda *_: pytest.fail(),
        lambda _: pytest.fail(),
        sys.stdout,
    )
    first, second = _add_worktree(plan, "worker-1"), _add_worktree(plan, "worker-2")
    (first.path / "shared.txt").write_text("worker one\n", encoding="utf-8")
    (second.path / "shared.txt").write_text("worker two\n", encoding="utf-8")
    merged, conflicts = _merge_back(plan, [first, second])
    assert merged == (first.branch,)
    assert conflicts == ((second.branch, ("shared.txt",)),)
    assert (repo / "shared.txt").read_text(encoding="utf-8") == "worker one\n"
    assert _git(repo, "status", "--porcelain").stdout == ""  # the failed merge was undone


@pytest.mark.e2e
def test_a_lead_that_fails_ends_the_team_before_any_worker_starts(tmp_path: Path) -> None:
    from orchestrator.script import parse_script
    from orchestrator.testing import MessagesServer

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n", encoding="utf-8")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "start")
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    fault = {"fault": "status", "status": 529, "body": overloaded}
    script = parse_script({"name": "lead", "turns": [fault]}, source="test")
    with MessagesServer(script) as server:
        done = _cli(
            ["team", "Plan it", "--workdir", str(repo)],
            tmp_path,
            ANTHROPIC_API_KEY="test-key",
            ANTHROPIC_BASE_URL=server.base_url,
            ORCHESTRATOR_MAX_RETRIES="0",
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "lead       failed" in done.stdout
    assert "worker-" not in done.stdout.split("team:")[1]
    assert len(_git(repo, "worktree", "list").stdout.splitlines()) == 1


def test_a_work_directory_that_is_not_there_is_one_line(tmp_path: Path) -> None:
    done = _cli(["team", "Do it", "--workdir", str(tmp_path / "nowhere")], tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no such directory" in done.stderr
    assert not (tmp_path / "state" / "team").exists() or not any(
        (tmp_path / "state" / "team").iterdir()
    )
