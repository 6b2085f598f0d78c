"""A work directory's git dir: where it is, what in it may change, and cleaning one the model made.

What may change in a git dir (:func:`allowed`) is what ``git add``, ``git commit`` and
``git switch -c`` write: objects, refs, logs, the index, ``HEAD`` and git's ordinary
bookkeeping (``ORIG_HEAD``, ``COMMIT_EDITMSG``, ``packed-refs``, …). Everything else (config,
``config.worktree``, ``commondir``, hooks, ``info/``, ``modules/``, a worktree's ``gitdir``, a
rebase's todo list with its ``exec`` lines) decides what git runs or where it looks, so outside
bwrap a change to it is reported, and under bwrap it never reaches the repository.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import attrs

from orchestrator.tools.products.paths import common_dir, pointed_gitdir

#: Folders whose whole content may change (objects, refs and their logs, LFS' objects).
_FREE_TREES = frozenset({"objects", "refs", "logs", "lfs", "rr-cache", "fsmonitor--daemon"})
#: Files git writes in the course of ordinary work.
BOOKKEEPING = frozenset(
    {
        "HEAD",
        "ORIG_HEAD",
        "FETCH_HEAD",
        "MERGE_HEAD",
        "MERGE_MSG",
        "MERGE_MODE",
        "MERGE_RR",
        "SQUASH_MSG",
        "CHERRY_PICK_HEAD",
        "REVERT_HEAD",
        "REBASE_HEAD",
        "AUTO_MERGE",
        "COMMIT_EDITMSG",
        "TAG_EDITMSG",
        "NOTES_EDITMSG",
        "EDIT_DESCRIPTION",
        "description",
        "index",
        "packed-refs",
        "shallow",
        "gc.pid",
        "gc.log",
        "locked",
    }
)
_ALWAYS_FREE = re.compile(r"(?:.*\.lock|sharedindex\.[0-9a-f]{40,64}|BISECT_[A-Z_]+)")
#: Inside objects/: files that send git's object lookups elsewhere.
_NOT_FREE_IN_OBJECTS = frozenset({"info/alternates", "info/http-alternates"})


def allowed(relative: PurePosixPath) -> bool:
    """Whether a path inside a git dir (relative to it) is one git's ordinary work changes."""
    parts = relative.parts
    if not parts:
        return True
    if parts[0] == "worktrees" and len(parts) >= 3:
        # A linked worktree's own gitdir: its HEAD, index and logs, never gitdir/commondir.
        inner = PurePosixPath(*parts[2:])
        return inner.parts[0] not in ("objects", "lfs") and allowed(inner)
    if parts[0] == "objects":
        return "/".join(parts[1:]) not in _NOT_FREE_IN_OBJECTS
    if parts[0] in _FREE_TREES:
        return True
    name = parts[-1]
    if _ALWAYS_FREE.fullmatch(name):
        return True
    if len(parts) == 1:
        return name in BOOKKEEPING
    if parts[0] == "hooks" and len(parts) == 2:
        return name.endswith(".sample")  # git never runs a *.sample hook
    return parts[0] == "info" and len(parts) == 2 and name in ("exclude", "refs", "packs")


def free_tree(relative: PurePosixPath) -> bool:
    """Whether everything below ``relative`` is allowed (a walk need not go in)."""
    parts = relative.parts
    if len(parts) == 1:
        return parts[0] in _FREE_TREES and parts[0] != "objects"
    if len(parts) == 2 and parts[0] == "objects":
        return parts[1] != "info"
    return False


def not_allowed(gitdir: Path) -> Iterator[Path]:
    """Every file, link or special file in ``gitdir`` that :func:`allowed` does not cover."""
    stack = [gitdir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            relative = PurePosixPath(os.path.relpath(entry.path, gitdir))
            if entry.is_dir(follow_symlinks=False):
                if not free_tree(relative):
                    stack.append(Path(entry.path))
            elif not allowed(relative):
                yield Path(entry.path)


# --- where the git dirs are -----------------------------------------------------------------


@attrs.frozen
class GitLayout:
    """A work directory's git dirs: its own (``HEAD``, the index) and the common one.

    The common one holds objects, refs and config; they are the same folder except in a
    linked worktree.
    """

    workdir: Path
    gitdir: Path
    common: Path
    #: Whether ``workdir/.git`` is a file pointing at ``gitdir`` (a worktree, a submodule).
    pointer: bool = False

    @property
    def mounts(self) -> tuple[Path, ...]:
        """The folders to cover: the common dir, and the own one when it lies elsewhere."""
        if self.gitdir == self.common or self.gitdir.is_relative_to(self.common):
            return (self.common,)
        return (self.common, self.gitdir)

    @property
    def own_prefix(self) -> PurePosixPath | None:
        """Where the own gitdir's files appear inside the common dir's overlay (None: apart)."""
        if self.gitdir == self.common:
            return PurePosixPath()
        if self.gitdir.is_relative_to(self.common):
            return PurePosixPath(self.gitdir.relative_to(self.common).as_posix())
        return None


def find_layout(workdir: Path) -> GitLayout | None:
    """The git dirs ``workdir/.git`` leads to, or None when it has none (or a broken one)."""
    root = workdir.resolve()
    dotgit = root / ".git"
    if dotgit.is_symlink():
        return None
    if dotgit.is_dir():
        if not (dotgit / "HEAD").is_file():
            return None
        common = common_dir(dotgit) or dotgit
        return GitLayout(root, dotgit, common)
    if dotgit.is_file():
        gitdir = pointed_gitdir(dotgit)
        if gitdir is None or not (gitdir / "HEAD").is_file():
            return None
        return GitLayout(root, gitdir, common_dir(gitdir) or gitdir, pointer=True)
    return None


# --- a git dir the model made ----------------------------------------------------------------

#: The config keys ``git init`` writes, and what each may hold.
_INIT_KEYS = {
    "core.repositoryformatversion": re.compile(r"[01]"),
    "core.filemode": re.compile(r"true|false"),
    "core.bare": re.compile(r"false"),
    "core.logallrefupdates": re.compile(r"true|false|always"),
    "core.ignorecase": re.compile(r"true|false"),
    "core.precomposeunicode": re.compile(r"true|false"),
    "core.symlinks": re.compile(r"true|false"),
    "extensions.objectformat": re.compile(r"sha1|sha256"),
}
_CONFIG_LINE = re.compile(
    r"^\s*(?:\[(?P<section>[A-Za-z0-9.-]+)\]|(?P<key>[A-Za-z][A-Za-z0-9-]*)"
    r"\s*=\s*(?P<value>[A-Za-z0-9]*)|[#;].*|)\s*$"
)


def init_only_config(text: str) -> dict[str, str] | None:
    """The keys of a config that holds nothing but what ``git init`` writes, else None.

    Read as plain text, narrowly: a section with a subsection, an include, a quoted or
    continued value, or any other key makes it more than ``git init``'s.
    """
    found: dict[str, str] = {}
    section = ""
    for line in text.splitlines():
        match = _CONFIG_LINE.match(line)
        if match is None:
            return None
        if match.group("section") is not None:
            section = match.group("section").lower()
            continue
        if match.group("key") is None:
            continue
        key = f"{section}.{match.group('key').lower()}"
        value = match.group("value").lower()
        wanted = _INIT_KEYS.get(key)
        if wanted is None or not wanted.fullmatch(value):
            return None
        found[key] = value
    return found


def clean_new_gitdir(dotgit: Path) -> list[tuple[str, str]]:
    """Make a ``.git`` the model created inert; return what was removed and why.

    A ``.git`` file or link (a pointer the model chose) is removed. In a folder, everything
    :func:`allowed` does not cover goes, except a config that holds only ``git init``'s keys,
    which is rewritten from those keys (so nothing else can hide in its syntax).
    """
    removed: list[tuple[str, str]] = []
    info = dotgit.lstat()
    if not stat.S_ISDIR(info.st_mode):
        dotgit.unlink()
        return [(".git", "a .git file or link the model wrote: git would follow it elsewhere")]
    for path in sorted(not_allowed(dotgit), reverse=True):
        relative = path.relative_to(dotgit).as_posix()
        if relative == "config" and path.is_file() and not path.is_symlink():
            text = path.read_text(encoding="utf-8", errors="replace")
            keys = init_only_config(text)
            if keys is not None:
                _rewrite_config(path, keys)
                continue
            # Rewritten from scratch as git init writes it: nothing of the model's survives.
            sha256 = re.search(r"(?im)^\s*objectformat\s*=\s*sha256\s*$", text) is not None
            _remove(path)
            _rewrite_config(path, _init_keys(sha256=sha256))
            removed.append((".git/config", "rewritten with git init's keys only"))
            continue
        _remove(path)
        removed.append((f".git/{relative}", "git would run or follow it outside the sandbox"))
    for folder in ("modules", "worktrees", "rebase-merge", "rebase-apply", "sequencer"):
        target = dotgit / folder
        if target.exists() or target.is_symlink():
            _remove(target)
    return removed


def _init_keys(*, sha256: bool) -> dict[str, str]:
    keys = {
        "core.repositoryformatversion": "1" if sha256 else "0",
        "core.filemode": "true",
        "core.bare": "false",
        "core.logallrefupdates": "true",
    }
    if sha256:
        keys["extensions.objectformat"] = "sha256"
    return keys


def _rewrite_config(path: Path, keys: dict[str, str]) -> None:
    sections: dict[str, list[str]] = {}
    for key, value in keys.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, []).append(f"\t{name} = {value}")
    text = "".join(
        f"[{section}]\n" + "\n".join(lines) + "\n" for section, lines in sections.items()
    )
    path.write_text(text, encoding="utf-8")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# --- gitlinks -----------------------------------------------------------------------------------

GITLINK_MODE = "160000"


def index_gitlinks(git_dir: Path, index: Path | None = None) -> set[str]:
    """The paths an index records as gitlinks (mode 160000): a nested repository's place."""
    from orchestrator.tools.products.git import GitFailed, run_git

    try:
        out = run_git(["ls-files", "-s", "-z"], git_dir=git_dir, index=index)
    except GitFailed:
        return set()
    found = set()
    for entry in out.stdout.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        if meta.startswith(GITLINK_MODE.encode()):
            found.add(path.decode("utf-8", "replace"))
    return found


def tree_gitlinks(git_dir: Path, treeish: str | None) -> set[str]:
    """The gitlinks a commit's tree holds (none for no commit)."""
    from orchestrator.tools.products.git import GitFailed, run_git

    if treeish is None:
        return set()
    try:
        out = run_git(["ls-tree", "-r", "-z", "--full-tree", treeish], git_dir=git_dir)
    except GitFailed:
        return set()
    found = set()
    for entry in out.stdout.split(b"\0"):
        meta, _, path = entry.partition(b"\t")
        if meta.startswith(GITLINK_MODE.encode()):
            found.add(path.decode("utf-8", "replace"))
    return found


def new_gitlinks(git_dir: Path, old: str | None, new: str) -> set[str] | None:
    """Gitlinks ``new``'s tree adds over ``old``'s (None: the trees cannot be compared)."""
    from orchestrator.tools.products.git import GitFailed, run_git

    if old is None:
        return tree_gitlinks(git_dir, new) if _is_commitish(git_dir, new) else None
    try:
        out = run_git(
            ["diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", old, new],
            git_dir=git_dir,
        )
    except GitFailed:
        return None
    if out.code != 0:
        return None
    fields = out.stdout.split(b"\0")
    found = set()
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.decode("ascii", "replace").lstrip(":").split()
        if len(parts) >= 2 and parts[1] == GITLINK_MODE and parts[0] != GITLINK_MODE:
            found.add(path.decode("utf-8", "replace"))
    return found


def _is_commitish(git_dir: Path, name: str) -> bool:
    from orchestrator.tools.products.git import GitFailed, run_git

    try:
        return run_git(["cat-file", "-e", f"{name}^{{tree}}"], git_dir=git_dir).code == 0
    except GitFailed:
        return False


def head_commit(git_dir: Path) -> str | None:
    """The commit ``HEAD`` names now (None on an unborn branch)."""
    from orchestrator.tools.products.git import GitFailed, run_git

    try:
        out = run_git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], git_dir=git_dir)
    except GitFailed:
        return None
    text = out.stdout.decode("ascii", "replace").strip()
    return text if out.code == 0 and text else None
