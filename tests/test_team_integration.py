"""The team's branches: merges into the integration branch, what is refused, catching up."""

from __future__ import annotations

from pathlib import Path

from orchestrator.harness_git import GitPlace, run_git
from orchestrator.team import integration
from orchestrator.tools.protected import ProtectGlobs


def _repository(folder: Path) -> Path:
    folder.mkdir()
    (folder / "shared.txt").write_text("one\n", encoding="utf-8")
    run_git(folder, "init", "-q", "-b", "main")
    run_git(folder, "add", "-A")
    run_git(folder, "commit", "-q", "-m", "start")
    run_git(folder, "branch", "integration", "HEAD")
    return folder


def _worktree(repo: Path, name: str) -> GitPlace:
    return integration.add_worktree(repo, repo.parent / name, f"w/{name}", "integration")


def test_a_conflict_is_named_and_leaves_the_integration_branch_as_it_was(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo")
    first, second = _worktree(repo, "one"), _worktree(repo, "two")
    (first.work_tree / "shared.txt").write_text("worker one\n", encoding="utf-8")
    (first.work_tree / "a.txt").write_text("a\n", encoding="utf-8")
    (second.work_tree / "shared.txt").write_text("worker two\n", encoding="utf-8")
    one = integration.commit_all(first, "#1: one")
    two = integration.commit_all(second, "#2: two")
    assert one is not None and two is not None
    landed = integration.merge_into(first, "integration", one, "merge #1")
    assert landed.ok and landed.tip == one  # nothing moved since it started: a fast-forward
    refused = integration.merge_into(second, "integration", two, "merge #2")
    assert not refused.ok and refused.conflicts == ("shared.txt",)
    assert integration.rev(repo, "integration") == one
    # A commit that does not conflict merges on top of the moved branch.
    (second.work_tree / "shared.txt").write_text("one\n", encoding="utf-8")
    (second.work_tree / "b.txt").write_text("b\n", encoding="utf-8")
    three = integration.commit_all(second, "#3: three")
    assert three is not None
    merged = integration.merge_into(second, "integration", three, "merge #3")
    assert merged.ok and merged.tip not in (one, three)
    assert {"a.txt", "b.txt"} <= set(
        run_git(repo, "ls-tree", "-r", "--name-only", "integration").stdout.split()
    )


def test_catching_up_keeps_commits_that_did_not_merge_on_a_branch_of_their_own(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo")
    first, second = _worktree(repo, "one"), _worktree(repo, "two")
    (first.work_tree / "a.txt").write_text("a\n", encoding="utf-8")
    landed = integration.commit_all(first, "#1")
    assert landed is not None
    integration.merge_into(first, "integration", landed, "merge #1")
    (second.work_tree / "stray.txt").write_text("not merged\n", encoding="utf-8")
    stray = integration.commit_all(second, "#2 unfinished")
    kept = integration.catch_up(second, "integration", "kept/two")
    assert kept is not None and integration.rev(repo, kept) == stray
    assert integration.rev(second, "HEAD") == landed
    assert (second.work_tree / "a.txt").exists() and not (second.work_tree / "stray.txt").exists()
    # Already there: nothing to keep.
    assert integration.catch_up(second, "integration", "kept/two") is None


def test_gitlinks_and_files_that_run_later_are_refused_by_name(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    place = _worktree(repo, "one")
    base = integration.rev(place, "HEAD")
    assert base is not None
    nested = place.work_tree / "vendor"
    nested.mkdir()
    run_git(nested, "init", "-q")
    (nested / "x").write_text("x\n", encoding="utf-8")
    run_git(nested, "add", "x")
    run_git(nested, "commit", "-q", "-m", "v")
    for name in ("orchestrator.toml", "sub/.mcp.json", ".husky/pre-commit", "notes/ok.md"):
        (place.work_tree / name).parent.mkdir(parents=True, exist_ok=True)
        (place.work_tree / name).write_text("x\n", encoding="utf-8")
    (place.work_tree / "tests").mkdir()
    (place.work_tree / "tests" / "test_x.py").write_text("x\n", encoding="utf-8")
    commit = integration.commit_all(place, "#1")
    assert commit is not None
    assert len(integration.refusals(place, base, commit)) == 4
    found = integration.refusals(place, base, commit, ProtectGlobs(("tests/**",)))
    assert len(found) == 5, found
    assert "tests/test_x.py is protected (--protect)" in found
    assert any(line.startswith("vendor is a gitlink") for line in found)
    for name in ("orchestrator.toml", "sub/.mcp.json", ".husky/pre-commit"):
        assert any(line.startswith(name) for line in found), (name, found)
    assert not any("notes/ok.md" in line for line in found)


def test_a_worktree_with_changes_is_never_removed(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    place = _worktree(repo, "one")
    (place.work_tree / "mine.txt").write_text("unsaved\n", encoding="utf-8")
    assert integration.remove_worktree(repo, place.work_tree) is not None
    assert (place.work_tree / "mine.txt").read_text(encoding="utf-8") == "unsaved\n"
    integration.commit_all(place, "saved")
    assert integration.remove_worktree(repo, place.work_tree) is None
    assert not place.work_tree.exists()
    assert "mine.txt" in run_git(repo, "ls-tree", "--name-only", "w/one").stdout
