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
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path, PurePosixPath

import attrs

from orchestrator.tools.products.git import GitFailed, run_git
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
    """Every file, link or special file in ``gitdir`` that :func:`allowed` does not cover.

    A folder that cannot be listed is yielded itself: what is in it cannot be vouched for
    (git may still run a hook by its path through a folder it cannot list).
    """
    stack = [gitdir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            if folder != gitdir and folder.exists():
                yield folder
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


# --- what git would take for a git dir ---------------------------------------------------------

#: The names git's ``is_git_directory`` looks for in a folder: a ``HEAD``, with ``objects`` and
#: ``refs`` (or a ``commondir`` that says where they are).
SHAPE_NAMES = frozenset({"HEAD", "objects", "refs", "commondir"})


def _shaped(names: Collection[str]) -> bool:
    return "HEAD" in names and (("objects" in names and "refs" in names) or "commondir" in names)


def git_dir_shaped(root: Path, skip: Iterable[Path] = ()) -> list[Path]:
    """Every place beneath ``root`` that git would take for a git dir, ``root/.git`` aside.

    In each folder from where it runs up to ``/``, git looks first for a ``.git`` (a folder, or a
    ``gitdir:`` file) and then at the folder itself (git's ``is_git_directory``: a ``HEAD``, with
    ``objects`` and ``refs`` or a ``commondir``). So ``cd src && git status`` obeys the config
    (``core.fsmonitor``, hooks) of a ``src/`` the model shaped like that, and of a ``.git`` in
    any folder below the top. Found: each ``.git`` entry below the top (folder, file or link;
    not entered), and each folder of that shape, ``root`` itself included. Links are not
    followed; ``skip`` (board stores, the harness's folder) is not entered. Sorted.
    """
    top = root.resolve()
    skipped = {str(path) for path in skip}
    found: list[Path] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        names = set()
        for entry in entries:
            names.add(entry.name)
            if entry.path in skipped:
                continue
            if entry.name == ".git":
                if folder != top:
                    found.append(Path(entry.path))
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
        if _shaped(names):
            found.append(folder)
    return sorted(found)


def control_files(folder: Path) -> list[Path]:
    """What decides what git runs in a git dir ``folder`` (config, hooks, where it looks).

    For a folder the model shaped into a git dir while it also holds ordinary files (``src/``),
    the rest of it is data: objects, refs, and whatever else is there.
    """
    found = []
    for name in _CONTROL_FILES:
        path = folder / name
        if path.exists() or path.is_symlink():
            found.append(path)
    return found


_CONTROL_FILES = (
    "HEAD",
    "config",
    "commondir",
    "config.worktree",
    "gitdir",
    "hooks",
    "info",
    "modules",
    "worktrees",
    "objects/info/alternates",
)


def shaped_folders(paths: Iterable[str]) -> set[str]:
    """The folders that checking out ``paths`` (an index's, a tree's) makes git dirs of.

    A folder (``""`` for the top) whose entries include ``HEAD`` and ``objects`` and ``refs`` (or
    ``commondir``), and any path with a ``.git`` component (git refuses to check one out; it is
    named all the same).
    """
    children: dict[str, set[str]] = {}
    found: set[str] = set()
    for path in paths:
        parts = path.split("/")
        for depth, name in enumerate(parts):
            if name.lower() == ".git":
                found.add("/".join(parts[: depth + 1]))
                break
            if name in SHAPE_NAMES:
                children.setdefault("/".join(parts[:depth]), set()).add(name)
    found.update(folder for folder, names in children.items() if _shaped(names))
    return found


# --- what an index or a tree records ----------------------------------------------------------

GITLINK_MODE = "160000"


@attrs.frozen
class Listing:
    """What an index or a tree records that git, outside the sandbox, acts on later."""

    #: Gitlinks (mode 160000): a nested repository's place, whose config the user's git obeys.
    gitlinks: frozenset[str] = frozenset()
    #: Index entries git is told not to look at in the work tree (skip-worktree,
    #: assume-unchanged): a change to the file there is hidden from ``git status`` and ``diff``.
    hidden: frozenset[str] = frozenset()
    #: Folders that checking the paths out makes git dirs of (:func:`shaped_folders`).
    shaped: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.gitlinks or self.hidden or self.shaped)

    def __sub__(self, other: Listing) -> Listing:
        return Listing(
            self.gitlinks - other.gitlinks,
            self.hidden - other.hidden,
            self.shaped - other.shaped,
        )


def read_index(git_dir: Path, index: Path | None = None) -> Listing | None:
    """What an index records (its shared index too, for a split one); None when git cannot read it.

    A refusal is decided on this, so a git error is never "nothing found".
    """
    try:
        out = run_git(["ls-files", "-s", "-v", "-z"], git_dir=git_dir, index=index)
    except GitFailed:
        return None
    if out.code != 0:
        return None
    gitlinks, hidden, paths = set(), set(), []
    for entry in out.stdout.split(b"\0"):
        if not entry:
            continue
        # -v -s: "TAG MODE OID STAGE\tPATH"; S is skip-worktree, a lower-case tag assume-unchanged.
        meta, _, raw = entry.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) < 2:
            return None
        path = raw.decode("utf-8", "surrogateescape")
        paths.append(path)
        if fields[1] == GITLINK_MODE.encode():
            gitlinks.add(path)
        if fields[0] == b"S" or fields[0][:1].islower():
            hidden.add(path)
    return Listing(frozenset(gitlinks), frozenset(hidden), frozenset(shaped_folders(paths)))


def read_tree(git_dir: Path, treeish: str | None) -> Listing | None:
    """What a commit's (or a tree's) tree records; empty for no commit, None when git fails."""
    if treeish is None:
        return Listing()
    try:
        out = run_git(["ls-tree", "-r", "-z", "--full-tree", treeish], git_dir=git_dir)
    except GitFailed:
        return None
    if out.code != 0:
        return None
    gitlinks, paths = set(), []
    for entry in out.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        path = raw.decode("utf-8", "surrogateescape")
        paths.append(path)
        if meta.startswith(GITLINK_MODE.encode()):
            gitlinks.add(path)
    return Listing(frozenset(gitlinks), frozenset(), frozenset(shaped_folders(paths)))


def index_gitlinks(git_dir: Path, index: Path | None = None) -> set[str] | None:
    """The paths an index records as gitlinks; None when git cannot read the index."""
    found = read_index(git_dir, index)
    return None if found is None else set(found.gitlinks)


def tree_gitlinks(git_dir: Path, treeish: str | None) -> set[str] | None:
    """The gitlinks a commit's tree holds (none for no commit); None when git cannot read it."""
    found = read_tree(git_dir, treeish)
    return None if found is None else set(found.gitlinks)


def tree_additions(git_dir: Path, old: str | None, new: str) -> Listing | None:
    """The gitlinks and git-dir-shaped folders ``new``'s tree adds over ``old``'s.

    None when the two cannot be compared (a missing object, a blob): the caller refuses.
    """
    if old is None:
        return read_tree(git_dir, new) if _is_treeish(git_dir, new) else None
    try:
        out = run_git(
            [
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                "--no-textconv",
                "--ignore-submodules=none",
                old,
                new,
            ],
            git_dir=git_dir,
        )
    except GitFailed:
        return None
    if out.code != 0:
        return None
    fields = out.stdout.split(b"\0")
    gitlinks: set[str] = set()
    shaped: set[str] = set()
    candidates: set[str] = set()
    for meta, raw in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.decode("ascii", "replace").lstrip(":").split()
        path = raw.decode("utf-8", "surrogateescape")
        if len(parts) < 5 or parts[4].startswith("D"):
            continue
        if parts[1] == GITLINK_MODE and parts[0] != GITLINK_MODE:
            gitlinks.add(path)
        names = path.split("/")
        for depth, name in enumerate(names):
            if name.lower() == ".git":
                shaped.add("/".join(names[: depth + 1]))
            elif name in SHAPE_NAMES:
                candidates.add("/".join(names[:depth]))
    if candidates:
        after = _shaped_in(git_dir, new, candidates)
        before = _shaped_in(git_dir, old, candidates)
        if after is None or before is None:
            return None
        shaped |= after - before
    return Listing(frozenset(gitlinks), frozenset(), frozenset(shaped))


def _shaped_in(git_dir: Path, treeish: str, folders: set[str]) -> set[str] | None:
    """Which of ``folders`` are git-dir-shaped in ``treeish``'s tree (None: git failed)."""
    wanted = [f"{folder}/{name}" if folder else name for folder in folders for name in SHAPE_NAMES]
    try:
        out = run_git(
            ["--literal-pathspecs", "ls-tree", "-z", "--name-only", treeish, "--", *wanted],
            git_dir=git_dir,
        )
    except GitFailed:
        return None
    if out.code != 0:
        return None
    present = [p.decode("utf-8", "surrogateescape") for p in out.stdout.split(b"\0") if p]
    return shaped_folders(present) & folders


def _is_treeish(git_dir: Path, name: str) -> bool:
    try:
        return run_git(["cat-file", "-e", f"{name}^{{tree}}"], git_dir=git_dir).code == 0
    except GitFailed:
        return False


def head_commit(git_dir: Path) -> str | None:
    """The commit ``HEAD`` names now (None on an unborn branch)."""
    try:
        out = run_git(["rev-parse", "--verify", "-q", "HEAD^{commit}"], git_dir=git_dir)
    except GitFailed:
        return None
    text = out.stdout.decode("ascii", "replace").strip()
    return text if out.code == 0 and text else None
