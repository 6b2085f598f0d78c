"""The team's branches: each worker's, the integration branch its items merge into, and checks.

A team works in one repository. Each worker has a worktree on its own branch
(``team/ID/worker-K``); the team has an integration branch (``team/ID/integration``) that
starts at the work directory's ``HEAD``. An item a worker completes is one commit on its
branch, merged into the integration branch *before* the board marks it completed, with git's
plumbing (``merge-tree``, ``commit-tree``, a compare-and-swap ``update-ref``), so two workers
merging at once never lose one another's merge and no work tree or hook is involved. A worker
starting an item first brings its worktree up to the integration branch's tip, so an item
blocked by others starts from their work. At the end the integration branch is merged into
the work directory.

A commit that adds a gitlink (mode 160000: a nested repository, whose own config the
superproject's git would obey), changes a file that decides what runs later (our own
``orchestrator.toml`` and ``.mcp.json``, ``.gitmodules``, a hook manager's files, a file any
level of git config names), or holds a folder shaped like a git dir (``HEAD`` beside
``objects/`` and ``refs/``, which git run in that folder would take for a repository, with its
config), is never merged: it stays on the worker's branch, named. The harness commits a
worktree only while its ``HEAD`` names the branch the harness gave it, and merges the
integration branch into the work directory only when every step of it is a merge the harness
made (:func:`unmade`). Every git command here is the harness's own
(:func:`orchestrator.harness_git.run_git`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import attrs

from orchestrator.harness_git import GitError, GitPlace, run_git

if TYPE_CHECKING:
    from orchestrator.tools.protected import ProtectGlobs

#: A gitlink's mode in a tree: a commit of another repository, not a file.
GITLINK = "160000"
#: How often a merge into the integration branch is retried when another worker moved it.
_MERGE_TRIES = 50


class TeamError(Exception):
    """A team (or a worker) that cannot start or go on here; ``str()`` is one line."""


class HeadMoved(TeamError):
    """A worktree's ``HEAD`` no longer names the branch the harness gave it: nothing committed."""


def _refused_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """File names refused at any depth, and paths refused (with all under them) at the top."""
    from orchestrator.tools.protected import HOOK_MANAGER_FILES, OWN_FILES

    return frozenset({*OWN_FILES, ".gitmodules"}), HOOK_MANAGER_FILES


@attrs.frozen
class Merged:
    """How a merge into the integration branch went: its new tip, or the files in conflict.

    ``onto`` is the tip the branch moved from (None when it did not move: the commit was
    there already); the team keeps each move, to know the branch's history is its own.
    """

    tip: str | None
    conflicts: tuple[str, ...] = ()
    onto: str | None = None

    @property
    def ok(self) -> bool:
        return self.tip is not None


def rev(place: GitPlace | Path, ref: str) -> str | None:
    """The commit ``ref`` names, or None when there is none."""
    done = _git(place, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False)
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def merge_base(place: GitPlace | Path, one: str, other: str) -> str | None:
    done = _git(place, "merge-base", one, other, check=False)
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def is_ancestor(place: GitPlace | Path, older: str, newer: str) -> bool:
    return _git(place, "merge-base", "--is-ancestor", older, newer, check=False).returncode == 0


def place_of(folder: Path) -> GitPlace | None:
    """``folder``'s work tree top and git dir, read now (before any model has run there)."""
    top = run_git(folder, "rev-parse", "--show-toplevel", check=False)
    gitdir = run_git(folder, "rev-parse", "--absolute-git-dir", check=False)
    if top.returncode != 0 or gitdir.returncode != 0:
        return None
    return GitPlace(Path(top.stdout.strip()), Path(gitdir.stdout.strip()))


def in_git_dir(folder: Path) -> bool:
    """Whether ``folder`` is a bare repository or inside a git dir (no work tree of its own)."""
    done = run_git(folder, "rev-parse", "--is-inside-git-dir", "--is-bare-repository", check=False)
    return done.returncode == 0 and "true" in done.stdout.split()


def require_clean_repository(workdir: Path) -> None:
    """A team needs a repository with a commit and a clean tree; :class:`TeamError` else."""
    inside = run_git(workdir, "rev-parse", "--is-inside-work-tree", check=False)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        raise TeamError(
            f"{workdir}: not a git repository; team gives each worker a git worktree "
            "(git init, then commit what is there), or use --scripted in an empty folder"
        )
    if rev(workdir, "HEAD") is None:
        raise TeamError(f"{workdir}: the repository has no commit yet; commit once first")
    if dirty(workdir):
        raise TeamError(
            f"{workdir}: uncommitted changes; commit or stash them first, so the workers' "
            "branches merge back onto a clean tree"
        )


def dirty(place: GitPlace | Path) -> bool:
    """Whether the work tree has changes or new files (submodules are never looked into)."""
    done = _git(place, "status", "--porcelain", "--ignore-submodules=all", "--untracked-files=all")
    return bool(done.stdout.strip())


def head_branch(place: GitPlace | Path) -> str | None:
    """The branch ``HEAD`` names (``team/ID/worker-1``), or None when it is detached."""
    done = _git(place, "symbolic-ref", "-q", "HEAD", check=False)
    name = done.stdout.strip()
    return name.removeprefix("refs/heads/") if done.returncode == 0 and name else None


def branches(place: GitPlace | Path) -> frozenset[str]:
    """Every branch of the repository (``team/ID/worker-1``)."""
    done = _git(place, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads", check=False)
    return frozenset(done.stdout.split())


def checked_out_elsewhere(place: GitPlace) -> frozenset[str]:
    """The branches a worktree of the repository other than ``place`` has checked out."""
    done = _git(place, "worktree", "list", "--porcelain", check=False)
    here = place.work_tree.resolve()
    found: set[str] = set()
    where: Path | None = None
    for line in done.stdout.splitlines():
        if line.startswith("worktree "):
            where = Path(line.removeprefix("worktree ")).resolve()
        elif line.startswith("branch refs/heads/") and where != here:
            found.add(line.removeprefix("branch refs/heads/"))
    return frozenset(found)


def follow_new_branch(place: GitPlace, own: str, before: frozenset[str]) -> str | None:
    """``HEAD`` back on ``own`` when the model switched to a branch it made from ``own``.

    ``git switch -c fix`` is ordinary git: the branch ``own`` then moves to that branch's tip
    (only forward) and ``HEAD`` names ``own`` again, so the harness commits where it should.
    Never for a branch that was there before (``before``), a team's branch, or one another
    worktree has checked out: :func:`commit_all` refuses those. The branch it followed, or None.
    """
    now = head_branch(place)
    if now is None or now == own or now in before or now.startswith("team/"):
        return None
    if now in checked_out_elsewhere(place):
        return None
    own_tip, new_tip = rev(place, f"refs/heads/{own}"), rev(place, f"refs/heads/{now}")
    if own_tip is None or new_tip is None or not is_ancestor(place, own_tip, new_tip):
        return None
    moved = _git(place, "update-ref", f"refs/heads/{own}", new_tip, own_tip, check=False)
    if moved.returncode != 0:
        return None
    _git(place, "symbolic-ref", "HEAD", f"refs/heads/{own}")
    return now


def commit_all(
    place: GitPlace | Path, message: str, *, on: str | None, author: str | None = None
) -> str | None:
    """Commit every change and new file in the work tree; the new commit, or None (clean).

    Only while ``HEAD`` names the branch ``on`` (None: a detached ``HEAD``); else
    :class:`HeadMoved`, and nothing is committed. A model can point its worktree's ``HEAD``
    at another worker's branch or the integration branch; the harness's commit would then go
    there, past every check an item's merge gets.
    """
    found = head_branch(place)
    if found != on:
        now = f"branch {found}" if found is not None else "no branch (a detached HEAD)"
        wanted = f"branch {on}" if on is not None else "a detached HEAD"
        raise HeadMoved(
            f"HEAD names {now}, not {wanted} as the harness left it; nothing was committed there"
        )
    _git(place, "add", "-A", "--", ".")
    staged = _git(place, "diff", "--cached", "--quiet", "--ignore-submodules=none", check=False)
    if staged.returncode == 0:
        return None
    # Staged changes were found above with submodules looked at; git's own "nothing to
    # commit" would ignore a new gitlink (diff.ignoreSubmodules=all), so it is not asked.
    _git(place, "commit", "-q", "--no-verify", "--allow-empty", "-m", message, author=author)
    return rev(place, "HEAD")


def refusals(
    place: GitPlace | Path,
    base: str,
    commit: str,
    protect: ProtectGlobs | None = None,
    protected: Collection[str] = (),
) -> tuple[str, ...]:
    """What in ``base..commit`` may not be merged, each named.

    Gitlinks, the files that decide what runs later, anything in a ``.git`` folder, folders
    shaped like a git dir, files the ``protect`` globs name, and ``protected``: paths in the
    tree (``/``-separated, as :func:`protected_in_tree` gives them) that the single run's
    guard protects, such as a file git config includes or runs.
    """
    names, at_top = _refused_names()
    done = _git(
        place, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", "--raw", base, commit
    )
    fields = done.stdout.split("\0")
    found: list[str] = []
    changed: list[str] = []
    for header, path in zip(fields[0::2], fields[1::2], strict=False):
        if not header.startswith(":"):
            continue
        changed.append(path)
        old_mode, new_mode = header[1:].split(" ")[:2]
        if GITLINK in (old_mode, new_mode):
            found.append(f"{path} is a gitlink (a nested repository)")
        elif PurePosixPath(path).name in names or _under(path, at_top):
            found.append(f"{path} decides what runs later")
        elif _under(path, protected):
            found.append(
                f"{path} is named by git config (git reads or runs it, outside any sandbox)"
            )
        elif any(part.lower() == ".git" for part in PurePosixPath(path).parts):
            found.append(f"{path} is inside a .git folder")
        elif protect is not None and protect.matches(path):
            found.append(f"{path} is protected (--protect)")
    if changed:
        found.extend(
            f"{folder or '.'}/ is shaped like a git dir (git run there would take it for a "
            "repository, with its config)"
            for folder in gitdir_shaped(place, commit, changed)
        )
    return tuple(found)


def _under(path: str, tops: Iterable[str]) -> bool:
    return any(path == top or path.startswith(top + "/") for top in tops)


def gitdir_shaped(place: GitPlace | Path, commit: str, changed: Collection[str]) -> list[str]:
    """Folders of ``commit``'s tree that git would take for a git dir, and the change touches.

    Git takes a folder for a repository when it holds a ``HEAD`` and ``objects`` and ``refs``
    (or a ``commondir`` naming where they are). A tree has no empty folders, so a git dir a
    model committed shows as ``HEAD`` beside files (or links) under those names; the landing
    reads trees with the same rule (:func:`~orchestrator.tools.products.gitdir.shaped_folders`).
    A ``.git`` in a path is named by :func:`refusals` itself.
    """
    from orchestrator.tools.products.gitdir import shaped_folders

    listed = _git(place, "ls-tree", "-r", "-z", "--name-only", commit)
    shaped = shaped_folders(path for path in listed.stdout.split("\0") if path)
    return sorted(
        folder
        for folder in shaped
        if PurePosixPath(folder).name.lower() != ".git"
        and any(name.startswith(f"{folder}/" if folder else "") for name in changed)
    )


def protected_in_tree(top: Path, protected: Iterable[Path]) -> frozenset[str]:
    """The ``protected`` paths (a single run's list) that lie in ``top``'s tree, as tree paths."""
    root = top.resolve()
    return frozenset(
        path.relative_to(root).as_posix()
        for path in protected
        if path.is_relative_to(root) and path != root
    )


def protected_of(top: Path, allow: Iterable[Path] = ()) -> frozenset[str]:
    """What the single run's guard protects in the work tree at ``top``, as tree paths.

    The list :func:`orchestrator.tools.protected.protected_paths` gives (our own files, the
    hook managers', and every file any level of git config includes or runs from there).
    """
    from orchestrator.tools.protected import protected_paths

    return protected_in_tree(top, protected_paths(top, allow))


def main_work_tree(place: GitPlace | Path) -> Path | None:
    """The repository's main work tree (the first ``git worktree list`` names), or None (bare)."""
    done = _git(place, "worktree", "list", "--porcelain", "-z", check=False)
    separator = "\0"
    if done.returncode != 0:  # a git older than 2.36: lines, not NUL-ended fields
        done, separator = _git(place, "worktree", "list", "--porcelain", check=False), "\n"
    first = done.stdout.split(separator * 2, 1)[0].split(separator)
    if done.returncode != 0 or not first[0].startswith("worktree ") or "bare" in first:
        return None
    return Path(first[0].removeprefix("worktree "))


def merge_into(place: GitPlace | Path, branch: str, commit: str, message: str) -> Merged:
    """Merge ``commit`` into ``branch`` without a work tree; a conflict changes nothing.

    A fast-forward when ``branch`` has not moved since the commit's work started; otherwise a
    merge commit built by ``merge-tree``. The branch moves by compare-and-swap, so a merge
    that raced another worker's is redone on the new tip.
    """
    ref = f"refs/heads/{branch}"
    for _ in range(_MERGE_TRIES):
        tip = rev(place, ref)
        if tip is None:
            raise GitError(f"no branch {branch} to merge into")
        if is_ancestor(place, commit, tip):
            return Merged(tip)
        if is_ancestor(place, tip, commit):
            new = commit
        else:
            tried = _git(
                place,
                "merge-tree",
                "--write-tree",
                "-z",
                "--name-only",
                "--no-messages",
                tip,
                commit,
                check=False,
            )
            fields = [field for field in tried.stdout.split("\0") if field]
            if tried.returncode == 1:
                return Merged(None, tuple(dict.fromkeys(fields[1:])) or ("(git named no file)",))
            if tried.returncode != 0 or not fields:
                said = " ".join(tried.stderr.split())[-200:]
                return Merged(None, (f"(git: {said or 'the merge failed'})",))
            made = _git(place, "commit-tree", fields[0], "-p", tip, "-p", commit, "-m", message)
            new = made.stdout.strip()
        moved = _git(place, "update-ref", "-m", message, ref, new, tip, check=False)
        if moved.returncode == 0:
            return Merged(new, onto=tip)
    raise GitError(f"{branch} kept moving under {_MERGE_TRIES} merges; try again")


@attrs.frozen
class Move:
    """A move of the integration branch the harness made: one worker's merge of an item."""

    onto: str
    tip: str
    agent: str = ""
    item: str = ""


@attrs.frozen
class Sighting:
    """The integration branch moved from ``before`` to ``after`` during a tool call of ``agent``.

    How a move the harness did not make is put to the worker that made it.
    """

    agent: str
    before: str
    after: str


def unmade(
    place: GitPlace | Path, start: str, tip: str, moves: Iterable[Move], limit: int = 50
) -> list[str]:
    """The commits on the branch from ``tip`` down to ``start`` that no move in ``moves`` made.

    Walked from the tip: a commit a move made leads to the tip that move went from; any
    other commit is not the harness's (a worker's own git moved the branch there), and the
    walk goes on through its first parent. Tip-most first, at most ``limit``.
    """
    made = {move.tip: move.onto for move in moves}
    found: list[str] = []
    seen: set[str] = set()
    current: str | None = tip
    while current is not None and current != start and current not in seen:
        seen.add(current)
        if current in made:
            current = made[current]
            continue
        found.append(current)
        if len(found) >= limit:
            break
        current = rev(place, f"{current}^1")
    return found


def provenance(
    place: GitPlace | Path,
    branch: str,
    start: str,
    tip: str,
    *,
    moves: Sequence[Move],
    sightings: Sequence[Sighting] = (),
) -> tuple[str, ...]:
    """Why ``branch`` at ``tip`` is not the harness's own work, each named; () when it is.

    Every step from ``start`` must be a recorded move, and every recorded move must still be
    on it (a branch moved back loses items the board calls completed).
    """
    problems: list[str] = []
    foreign = unmade(place, start, tip, moves)
    if foreign:
        top = foreign[0]
        subject = _git(place, "log", "-1", "--format=%s", top, check=False).stdout.strip()
        agents = sorted(
            {
                seen.agent
                for seen in sightings
                for commit in foreign
                if seen.before != commit
                and is_ancestor(place, seen.before, commit)
                and is_ancestor(place, commit, seen.after)
            }
        )
        if len(agents) == 1:
            who = f"{agents[0]}'s own git (in one of its tool calls)"
        elif agents:
            who = f"the own git of one of {', '.join(agents)} (in their tool calls)"
        else:
            who = "something other than the harness (no worker's tool call saw it move)"
        more = f" and {len(foreign) - 1} more commit(s) under it" if len(foreign) > 1 else ""
        problems.append(
            f"{branch} was moved to commit {top[:10]} ({subject[:80]!r}){more} by {who}, "
            "not by a merge the harness made"
        )
    lost = [move for move in moves if not is_ancestor(place, move.tip, tip)]
    if lost:
        named = ", ".join(f"#{move.item} ({move.agent})" for move in lost[:5])
        problems.append(f"{branch} was moved back: the merges of {named} are no longer on it")
    return tuple(problems)


def merge_check(
    place: GitPlace | Path,
    branch: str,
    *,
    start: str,
    since: str,
    tip: str,
    moves: Sequence[Move],
    sightings: Sequence[Sighting] = (),
    protect: ProtectGlobs | None = None,
    protected: Collection[str] = (),
) -> tuple[tuple[str, ...], bool]:
    """Why ``branch`` at ``tip`` may not merge into the work directory, and whether it is own.

    Own: every step since ``since`` (the team's start, or a tip found own before) is a move
    in ``moves`` (:func:`provenance`). Then the whole change from ``start`` gets the refusals
    an item's commit gets: items merged side by side can make together what neither holds
    alone (one adds ``src/HEAD`` and ``src/objects/…``, another ``src/refs/…``).
    """
    made = provenance(place, branch, since, tip, moves=moves, sightings=sightings)
    if made:
        return tuple(f"{line}; nothing of it is merged" for line in made), False
    found = refusals(place, start, tip, protect, protected)
    return tuple(f"{branch}: {line}; nothing of it is merged" for line in found), True


def catch_up(place: GitPlace, integration: str, keep_as: str) -> str | None:
    """Bring the worktree's branch up to ``integration``'s tip before an item starts.

    Commits of its own the integration branch does not hold (an item that did not merge, work
    left when a worker was stopped) are kept on a branch of their own, named ``keep_as`` plus
    the commit, which is returned; the worktree then starts from the tip.
    """
    tip = rev(place, f"refs/heads/{integration}")
    head = rev(place, "HEAD")
    if tip is None or head is None or head == tip:
        return None
    if is_ancestor(place, head, tip):
        _git(place, "merge", "--ff-only", "-q", tip)
        return None
    kept = f"{keep_as}-{head[:10]}"
    _git(place, "update-ref", f"refs/heads/{kept}", head)
    # The caller committed everything first: nothing uncommitted is there for reset to drop.
    _git(place, "reset", "-q", "--hard", tip)
    return kept


def add_worktree(repo: GitPlace | Path, path: Path, branch: str, start: str) -> GitPlace:
    """A worktree at ``path`` on ``branch``: the branch made at ``start`` unless it exists."""
    _git(repo, "worktree", "prune")
    if path.exists() and (path / ".git").exists():
        found = place_of(path)
        if found is not None:
            return found
    if rev(repo, f"refs/heads/{branch}") is None:
        _git(repo, "worktree", "add", "-q", "--no-checkout", "-b", branch, str(path), start)
    else:
        _git(repo, "worktree", "add", "-q", "--no-checkout", str(path), branch)
    found = place_of(path)
    if found is None:
        raise TeamError(f"{path}: git made the worktree but cannot read it back")
    _git(found, "reset", "-q", "--hard")  # the checkout, with hooks off
    return found


def remove_worktree(repo: GitPlace | Path, path: Path) -> str | None:
    """Remove a committed worktree (its branch stays); else why it was left where it is.

    Its cleanliness is judged here, never by git's own check, which looks into nested
    repositories by running git there: with their config.
    """
    if not path.exists():
        _git(repo, "worktree", "prune", check=False)
        return None
    if dirty(path):
        return "it has changes that could not be committed"
    nested = _nested_repositories(path)
    if nested:
        return f"it holds a nested repository ({', '.join(nested[:3])}), kept for a person to see"
    _git(repo, "worktree", "remove", "--force", str(path), check=False)
    _git(repo, "worktree", "prune", check=False)
    return None if not path.exists() else "git would not remove it"


def _nested_repositories(top: Path) -> list[str]:
    """The folders below ``top`` that hold a ``.git`` of their own (its own one aside)."""
    found = []
    for folder, names, files in os.walk(top):
        here = Path(folder)
        if here != top and (".git" in names or ".git" in files):
            found.append(str(here.relative_to(top)))
        names[:] = [name for name in names if name != ".git"]
    return sorted(found)


def merge_branch(workdir: GitPlace | Path, commit: str, message: str) -> tuple[str, ...]:
    """Merge ``commit`` (a branch, or its tip) into the work directory's checkout.

    The files in conflict, or () when it merged.
    """
    done = _git(workdir, "merge", "--no-edit", "-q", "-m", message, commit, check=False)
    if done.returncode == 0:
        return ()
    files = _git(workdir, "diff", "--name-only", "-z", "--diff-filter=U", check=False)
    named = tuple(name for name in files.stdout.split("\0") if name)
    if not named:  # not a conflict: git refused the merge itself; say why
        named = (f"(git: {(done.stderr.strip().splitlines() or ['no reason'])[-1]})",)
    _git(workdir, "merge", "--abort", check=False)
    return named


def commits_between(place: GitPlace | Path, base: str, tip: str) -> Sequence[str]:
    """The commits in ``base..tip``, oldest first."""
    done = _git(place, "rev-list", "--reverse", f"{base}..{tip}", check=False)
    return done.stdout.split()


def _git(
    place: GitPlace | Path, *args: str, check: bool = True, author: str | None = None
) -> subprocess.CompletedProcess[str]:
    if isinstance(place, GitPlace):
        return run_git(place.work_tree, *args, place=place, check=check, author=author)
    return run_git(place, *args, check=check, author=author)
