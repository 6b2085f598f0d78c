"""The team's branches: merges into the integration branch, what is refused, catching up."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    one = integration.commit_all(first, "#1: one", on="w/one")
    two = integration.commit_all(second, "#2: two", on="w/two")
    assert one is not None and two is not None
    landed = integration.merge_into(first, "integration", one, "merge #1")
    assert landed.ok and landed.tip == one  # nothing moved since it started: a fast-forward
    refused = integration.merge_into(second, "integration", two, "merge #2")
    assert not refused.ok and refused.conflicts == ("shared.txt",)
    assert integration.rev(repo, "integration") == one
    # A commit that does not conflict merges on top of the moved branch.
    (second.work_tree / "shared.txt").write_text("one\n", encoding="utf-8")
    (second.work_tree / "b.txt").write_text("b\n", encoding="utf-8")
    three = integration.commit_all(second, "#3: three", on="w/two")
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
    landed = integration.commit_all(first, "#1", on="w/one")
    assert landed is not None
    integration.merge_into(first, "integration", landed, "merge #1")
    (second.work_tree / "stray.txt").write_text("not merged\n", encoding="utf-8")
    stray = integration.commit_all(second, "#2 unfinished", on="w/two")
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
    commit = integration.commit_all(place, "#1", on="w/one")
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
    integration.commit_all(place, "saved", on="w/one")
    assert integration.remove_worktree(repo, place.work_tree) is None
    assert not place.work_tree.exists()
    assert "mine.txt" in run_git(repo, "ls-tree", "--name-only", "w/one").stdout


def test_files_git_config_names_and_git_dir_shapes_are_refused(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    (repo / ".gitconfig").write_text("[core]\n\tquotePath = false\n", encoding="utf-8")
    run_git(repo, "add", ".gitconfig")
    run_git(repo, "commit", "-q", "-m", "config")
    run_git(repo, "config", "include.path", "../.gitconfig")
    run_git(repo, "branch", "-f", "integration", "HEAD")
    place = _worktree(repo, "one")
    base = integration.rev(place, "HEAD")
    assert base is not None
    files = {
        ".gitconfig": "[core]\n\tfsmonitor = touch x\n",
        "src/HEAD": "ref: refs/heads/main\n",
        "src/objects/info/packs": "",
        "src/refs/heads/.keep": "",
        "tests/data/HEAD": "not a git dir: no objects or refs beside it\n",
        "wt/HEAD": "ref: refs/heads/main\n",
        "wt/commondir": "../../.git\n",
    }
    for name, text in files.items():
        (place.work_tree / name).parent.mkdir(parents=True, exist_ok=True)
        (place.work_tree / name).write_text(text, encoding="utf-8")
    commit = integration.commit_all(place, "#1", on="w/one")
    assert commit is not None
    # The list the single run's guard protects, read for the main work tree (the include is
    # resolved from the repository's own git dir, not from the worktree).
    protected = integration.protected_of(repo)
    assert ".gitconfig" in protected
    found = integration.refusals(place, base, commit, protected=protected)
    assert any(line.startswith(".gitconfig is named by git config") for line in found), found
    assert any(line.startswith("src/ is shaped like a git dir") for line in found), found
    assert any(line.startswith("wt/ is shaped like a git dir") for line in found), found
    assert len(found) == 3, found
    # Without the list, the config file goes through: the list is what refuses it.
    assert not any(".gitconfig" in line for line in integration.refusals(place, base, commit))


def test_a_branch_moved_outside_the_harness_s_merges_is_named_with_who_moved_it(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo")
    start = integration.rev(repo, "integration")
    assert start is not None
    one, two = _worktree(repo, "one"), _worktree(repo, "two")
    (one.work_tree / "a.txt").write_text("a\n", encoding="utf-8")
    first = integration.commit_all(one, "#1", on="w/one")
    assert first is not None
    landed = integration.merge_into(one, "integration", first, "merge #1")
    assert landed.ok and landed.onto == start and landed.tip is not None
    moves = [integration.Move(start, landed.tip, "t/worker-1", "1")]
    assert integration.provenance(repo, "integration", start, landed.tip, moves=moves) == ()
    # Worker two's own git puts a commit of its making on the branch, then its harness merges
    # an item on top: the merge is the harness's, the commit under it is not.
    (two.work_tree / "sneaky.txt").write_text("s\n", encoding="utf-8")
    run_git(two.work_tree, "add", "sneaky.txt", place=two)
    tree = run_git(two.work_tree, "write-tree", place=two).stdout.strip()
    sneaky = run_git(repo, "commit-tree", tree, "-p", landed.tip, "-m", "sneaky").stdout.strip()
    run_git(repo, "update-ref", "refs/heads/integration", sneaky)
    run_git(two.work_tree, "reset", "-q", "--hard", place=two)
    (two.work_tree / "b.txt").write_text("b\n", encoding="utf-8")
    second = integration.commit_all(two, "#2", on="w/two")
    assert second is not None
    merged = integration.merge_into(two, "integration", second, "merge #2")
    assert merged.ok and merged.onto == sneaky and merged.tip is not None
    moves.append(integration.Move(sneaky, merged.tip, "t/worker-2", "2"))
    seen = [
        integration.Sighting("t/worker-1", start, landed.tip),  # its own merge, earlier
        integration.Sighting("t/worker-2", landed.tip, sneaky),  # its bash call
        integration.Sighting("t/worker-1", sneaky, merged.tip),  # after the move
    ]
    found = integration.provenance(
        repo, "integration", start, merged.tip, moves=moves, sightings=seen
    )
    assert len(found) == 1, found
    assert f"moved to commit {sneaky[:10]} ('sneaky')" in found[0]
    assert "by t/worker-2's own git" in found[0] and "worker-1" not in found[0]
    # Moved back to the start: the merges the board counts as done are no longer on it.
    back = integration.provenance(repo, "integration", start, start, moves=moves[:1])
    assert back == (
        "integration was moved back: the merges of #1 (t/worker-1) are no longer on it",
    )


def test_the_harness_commits_only_on_the_branch_it_gave_the_worktree(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    place = _worktree(repo, "one")
    known = integration.branches(repo)
    run_git(place.work_tree, "symbolic-ref", "HEAD", "refs/heads/integration", place=place)
    (place.work_tree / "x.txt").write_text("x\n", encoding="utf-8")
    before = integration.rev(repo, "integration")
    assert integration.follow_new_branch(place, "w/one", known) is None  # not one it made
    with pytest.raises(integration.HeadMoved, match="HEAD names branch integration, not branch"):
        integration.commit_all(place, "#1", on="w/one")
    assert integration.rev(repo, "integration") == before
    run_git(place.work_tree, "checkout", "-q", "--detach", place=place)
    with pytest.raises(integration.HeadMoved, match="a detached HEAD"):
        integration.commit_all(place, "#1", on="w/one")


def test_items_merged_side_by_side_are_checked_again_as_one_change(tmp_path: Path) -> None:
    # Neither item's commit holds a git dir; merged together they make one in src/.
    repo = _repository(tmp_path / "repo")
    start = integration.rev(repo, "integration")
    assert start is not None
    moves: list[integration.Move] = []
    parts = {"one": ["src/HEAD", "src/objects/info/packs"], "two": ["src/refs/heads/main"]}
    places = {name: _worktree(repo, name) for name in parts}
    for number, (name, files) in enumerate(parts.items(), start=1):
        place = places[name]
        for file in files:
            (place.work_tree / file).parent.mkdir(parents=True, exist_ok=True)
            (place.work_tree / file).write_text("ref: refs/heads/main\n", encoding="utf-8")
        commit = integration.commit_all(place, f"#{number}", on=f"w/{name}")
        assert commit is not None
        assert integration.refusals(place, start, commit) == ()  # each alone goes through
        merged = integration.merge_into(place, "integration", commit, f"merge #{number}")
        assert merged.tip is not None and merged.onto is not None
        moves.append(integration.Move(merged.onto, merged.tip, f"t/{name}", str(number)))
    tip = moves[-1].tip
    problems, own = integration.merge_check(
        repo, "integration", start=start, since=start, tip=tip, moves=moves
    )
    assert own, problems
    assert problems == (
        "integration: src/ is shaped like a git dir (git run there would take it for a "
        "repository, with its config); nothing of it is merged",
    )
    # A branch a worker's own git moved is not looked into further: it is not the team's.
    run_git(repo, "update-ref", "refs/heads/integration", start)
    problems, own = integration.merge_check(
        repo, "integration", start=start, since=start, tip=start, moves=moves
    )
    assert not own and "moved back" in problems[0]


def test_a_branch_the_model_made_from_its_own_is_followed_back_onto_its_own(
    tmp_path: Path,
) -> None:
    repo = _repository(tmp_path / "repo")
    place = _worktree(repo, "one")
    known = integration.branches(repo)
    run_git(place.work_tree, "switch", "-q", "-c", "fix", place=place)
    (place.work_tree / "x.txt").write_text("x\n", encoding="utf-8")
    made = integration.commit_all(place, "the model's own commit", on="fix")
    assert integration.follow_new_branch(place, "w/one", known) == "fix"
    assert integration.head_branch(place) == "w/one"
    assert integration.rev(repo, "w/one") == made
    assert integration.commit_all(place, "#1", on="w/one") is None  # nothing left over
