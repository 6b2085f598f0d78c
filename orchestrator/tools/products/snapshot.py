"""Digests of the protected files, taken at one moment, and what changed since.

A :class:`ProtectedSet` says which files count: the protected paths (a folder counts as every
file in it), the files the ``protect`` globs match now, every file in a git dir that its
allow-list does not cover, and the ``.git`` entry itself (so a git dir renamed aside and
replaced shows). :meth:`ProtectedSnapshot.take` digests them; :meth:`ProtectedSnapshot.changes`
lists each file created, changed or removed since, with its added lines first: a warning about
``.git/config`` leads with the ``fsmonitor`` line the model added, not with what it removed.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import attrs

from orchestrator.tools.products.gitdir import GitLayout, init_only_config, not_allowed
from orchestrator.tools.products.paths import ProtectGlobs

#: What one change keeps of its diff: every added line comes first.
DIFF_LINES = 40
_TEXT_LIMIT = 65_536
#: Texts kept for diffs, over all files: past it a change is named without its lines.
_TEXT_BUDGET = 16 << 20


@attrs.frozen
class ProtectedChange:
    """One protected file the run created, changed or removed, with a short diff."""

    path: Path
    before: str | None
    after: str | None
    #: Added lines (``+…``) first, then removed ones (``-…``).
    diff: tuple[str, ...] = ()
    #: What the change is, when not a file's content (a gitlink, a git dir replaced).
    note: str = ""

    def describe(self, root: Path) -> str:
        shown = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        if self.note:
            return f"the run {self.note} {shown}"
        if self.before is None:
            what = "created"
        elif self.after is None:
            what = "removed"
        else:
            what = "changed"
        return f"the run {what} {shown}"

    def summary(self, limit: int = 12) -> str:
        """Every added line (up to ``limit``), then how many lines went: for one warning line."""
        added = [line for line in self.diff if line.startswith("+")]
        removed = sum(1 for line in self.diff if line.startswith("-"))
        parts = added[:limit]
        if len(added) > limit:
            parts.append(f"… {len(added) - limit} more added")
        if removed:
            parts.append(f"({removed} line{'s' if removed != 1 else ''} removed)")
        return "; ".join(parts)


@attrs.frozen
class FileState:
    digest: str
    text: str | None = attrs.field(default=None, eq=False)
    signature: tuple[int, ...] = attrs.field(default=(), eq=False)


@attrs.frozen
class ProtectedSet:
    """Which files are protected in one work directory."""

    root: Path
    paths: tuple[Path, ...] = ()
    globs: ProtectGlobs = attrs.Factory(ProtectGlobs)
    layout: GitLayout | None = None
    #: Paths a walk for the globs never enters (hidden stores, the harness's folder).
    skip: tuple[Path, ...] = ()
    #: Whether gitlinks in the index and in HEAD are watched (where bash can write the index).
    gitlinks: bool = False

    def gitlink_paths(
        self, earlier: ProtectedSnapshot | None
    ) -> tuple[frozenset[str], tuple[object, ...]]:
        """The gitlinks of the index and of HEAD's tree, and the key they were read under.

        A later snapshot with the same key (the index's stat, HEAD's commit) skips git.
        """
        from orchestrator.tools.products.gitdir import head_commit, index_gitlinks, tree_gitlinks

        layout = self.layout
        if not self.gitlinks or layout is None:
            return frozenset(), ()
        try:
            index = (layout.gitdir / "index").stat()
            signature: tuple[object, ...] = (
                index.st_ino,
                index.st_size,
                index.st_mtime_ns,
                index.st_ctime_ns,
            )
        except OSError:
            signature = ()
        key = (signature, head_commit(layout.gitdir))
        if earlier is not None and earlier.gitlink_key == key:
            return earlier.gitlinks, key
        found = index_gitlinks(layout.gitdir) | tree_gitlinks(layout.gitdir, key[1])
        return frozenset(found), key

    def files(self) -> Iterator[Path]:
        """Every file that counts now (links and special files included)."""
        for path in self.paths:
            yield from _under(path)
        yield from self.globs.files(self.root, self.skip)
        dotgit = self.root / ".git"
        yield dotgit
        gitdirs = {dotgit} if dotgit.is_dir() and not dotgit.is_symlink() else set()
        if self.layout is not None:
            gitdirs |= {self.layout.gitdir, self.layout.common}
        for gitdir in sorted(gitdirs):
            yield from not_allowed(gitdir)


def _under(path: Path) -> Iterator[Path]:
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            dirs.sort()
            for name in sorted(files):
                yield Path(folder) / name
            for name in dirs:
                if (Path(folder) / name).is_symlink():
                    yield Path(folder) / name
    else:
        yield path


@attrs.frozen
class ProtectedSnapshot:
    """Each protected file's digest at one moment."""

    covered: ProtectedSet
    states: Mapping[Path, FileState]
    gitlinks: frozenset[str] = frozenset()
    gitlink_key: tuple[object, ...] = ()

    @classmethod
    def take(
        cls, covered: ProtectedSet, earlier: ProtectedSnapshot | None = None
    ) -> ProtectedSnapshot:
        """Digest every file ``covered`` names.

        A file whose stat is as ``earlier`` saw it is not read again (its change time moves
        with any write).
        """
        states: dict[Path, FileState] = {}
        budget = [_TEXT_BUDGET]
        known = earlier.states if earlier is not None else {}
        for path in dict.fromkeys(covered.files()):
            state = _state(path, known.get(path), budget)
            if state is not None:
                states[path] = state
        gitlinks, key = covered.gitlink_paths(earlier)
        return cls(covered, states, gitlinks, key)

    def changes(self, later: ProtectedSnapshot | None = None) -> tuple[ProtectedChange, ...]:
        """What differs in ``later`` (by default: now) from this snapshot."""
        later = later if later is not None else ProtectedSnapshot.take(self.covered, self)
        found = []
        new_gitdir = _new_gitdir(self, later)
        for path in sorted(set(self.states) | set(later.states)):
            before, after = self.states.get(path), later.states.get(path)
            if before == after:
                continue
            if (
                before is None
                and after is not None
                and new_gitdir is not None
                and _inert_in_new_gitdir(path, new_gitdir, after)
            ):
                continue
            found.append(
                ProtectedChange(
                    path,
                    None if before is None else before.digest,
                    None if after is None else after.digest,
                    _diff(before, after),
                    note=_note(path, self.covered.root, before, after),
                )
            )
        for link in sorted(later.gitlinks - self.gitlinks):
            found.append(
                ProtectedChange(
                    self.covered.root / link,
                    None,
                    "gitlink",
                    ("+160000 gitlink " + link,),
                    note="added a gitlink (mode 160000: a nested repository git runs) at",
                )
            )
        return tuple(found)


def _note(path: Path, root: Path, before: FileState | None, after: FileState | None) -> str:
    if path == root / ".git" and before is not None and after is not None:
        return "replaced the git dir"
    return ""


def _new_gitdir(earlier: ProtectedSnapshot, later: ProtectedSnapshot) -> Path | None:
    """``workdir/.git`` when it is a folder that did not exist at the earlier snapshot."""
    dotgit = earlier.covered.root / ".git"
    if dotgit in earlier.states or dotgit not in later.states:
        return None
    return dotgit if later.states[dotgit].digest.startswith("dir:") else None


def _inert_in_new_gitdir(path: Path, dotgit: Path, state: FileState) -> bool:
    """A git dir the model made is judged as ``git init`` leaves it: only more is reported."""
    if path == dotgit:
        return True
    if path == dotgit / "config" and state.text is not None:
        return init_only_config(state.text) is not None
    return False


def _diff(before: FileState | None, after: FileState | None) -> tuple[str, ...]:
    old = before.text if before is not None and before.text is not None else ""
    new = after.text if after is not None and after.text is not None else ""
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    body = [line for line in lines if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    added = [line for line in body if line.startswith("+")]
    removed = [line for line in body if line.startswith("-")]
    return tuple((added + removed)[:DIFF_LINES])


def _state(path: Path, known: FileState | None, budget: list[int]) -> FileState | None:
    """``path``'s digest (None when it is missing), its text when small, its stat signature."""
    try:
        info = path.lstat()
    except OSError:
        return None
    signature = (
        info.st_mode,
        info.st_ino,
        info.st_dev,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )
    if known is not None and known.signature == signature:
        return known
    if stat.S_ISLNK(info.st_mode):
        try:
            return FileState("link:" + os.readlink(path), None, signature)
        except OSError:
            return FileState("unreadable", None, signature)
    if stat.S_ISDIR(info.st_mode):
        # Only the .git entry is taken as a folder: its identity, not its content.
        return FileState(f"dir:{info.st_dev}:{info.st_ino}", None, signature)
    if not stat.S_ISREG(info.st_mode):
        return FileState(f"special:{stat.S_IFMT(info.st_mode)}", None, signature)
    try:
        data = path.read_bytes()
    except OSError:
        return FileState("unreadable", None, signature)
    text = None
    if len(data) <= _TEXT_LIMIT and budget[0] >= len(data):
        budget[0] -= len(data)
        text = data.decode("utf-8", "replace")
    digest = hashlib.sha256(data).hexdigest() + oct(info.st_mode & 0o777)
    return FileState(digest, text, signature)


def describe_changes(changes: Sequence[ProtectedChange], root: Path, limit: int = 8) -> str:
    """One note naming the changes, for a tool result or a failed check."""
    shown = [change.describe(root) for change in changes[:limit]]
    if len(changes) > limit:
        shown.append(f"{len(changes) - limit} more")
    return "; ".join(shown)
