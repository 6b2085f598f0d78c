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

from orchestrator.tools.products.gitdir import (
    GitLayout,
    control_files,
    git_dir_shaped,
    init_only_config,
    not_allowed,
)
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
    #: Whether the index and HEAD's tree are watched for gitlinks, git-dir-shaped folders and
    #: hidden entries (where bash can write the index).
    gitlinks: bool = False

    def findings(
        self, earlier: ProtectedSnapshot | None
    ) -> tuple[frozenset[Finding], tuple[object, ...]]:
        """What the index and ``HEAD``'s tree record that the user's git acts on, and the key.

        Gitlinks and git-dir-shaped folders of both, and the index's hidden entries
        (skip-worktree, assume-unchanged); a ``("unreadable", …)`` finding when git cannot read
        one (a split index whose shared index went missing is not "nothing found"). A later
        snapshot with the same key (the index's and its shared indexes' stat, ``HEAD``'s
        commit) skips git.
        """
        from orchestrator.tools.products.gitdir import head_commit, read_index, read_tree

        layout = self.layout
        if not self.gitlinks or layout is None:
            return frozenset(), ()
        # Read as files every time (no git): a replace ref changes what HEAD's tree shows.
        replaced = {("replace", name) for name in replace_refs(layout.common)}
        key = (_index_signature(layout.gitdir), head_commit(layout.gitdir))
        if earlier is not None and earlier.findings_key == key:
            kept = {finding for finding in earlier.findings if finding[0] != "replace"}
            return frozenset(kept | replaced), key
        found: set[Finding] = set(replaced)
        index = read_index(layout.gitdir)
        if index is None and (layout.gitdir / "index").exists():
            found.add(("unreadable", "the index"))
        tree = read_tree(layout.gitdir, key[1])
        if tree is None:
            found.add(("unreadable", "HEAD's tree"))
        for listing in (index, tree):
            if listing is not None:
                found |= {("gitlink", path) for path in listing.gitlinks}
                found |= {("shaped", path) for path in listing.shaped}
        if index is not None:
            found |= {("hidden", path) for path in index.hidden}
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
        for place in git_dir_shaped(self.root, self.skip):
            if place.name == ".git":
                yield place
                if place.is_dir() and not place.is_symlink():
                    yield from not_allowed(place)
            else:
                for path in control_files(place):
                    yield from _under(path)


def replace_refs(common: Path) -> set[str]:
    """The ``refs/replace/…`` refs of a repository, loose and packed (read as files)."""
    found = set()
    for path, _dirs, files in os.walk(common / "refs" / "replace"):
        for name in files:
            found.add((Path(path) / name).relative_to(common).as_posix())
    try:
        packed = (common / "packed-refs").read_text(encoding="utf-8", errors="replace")
    except OSError:
        packed = ""
    for line in packed.splitlines():
        name = line.partition(" ")[2].strip()
        if name.startswith("refs/replace/"):
            found.add(name)
    return found


def _index_signature(gitdir: Path) -> tuple[object, ...]:
    """The stat of the index and of every shared index beside it (a split index reads one)."""
    found: list[object] = []
    try:
        names = sorted(
            name
            for name in os.listdir(gitdir)
            if name == "index" or name.startswith("sharedindex.")
        )
    except OSError:
        return ()
    for name in names:
        try:
            info = os.lstat(gitdir / name)
        except OSError:
            continue
        found.append((name, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return tuple(found)


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
    findings: frozenset[Finding] = frozenset()
    findings_key: tuple[object, ...] = ()

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
        findings, key = covered.findings(earlier)
        return cls(covered, states, findings, key)

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
        for kind, where in sorted(later.findings - self.findings):
            found.append(_finding_change(self.covered.root, kind, where))
        return tuple(found)


#: One thing the index or ``HEAD``'s tree records: ``(kind, path)``.
Finding = tuple[str, str]

_FINDING_NOTES = {
    "gitlink": (
        "+160000 gitlink {}",
        "added a gitlink (mode 160000: a nested repository git runs) at",
    ),
    "shaped": (
        "+git dir {}",
        "recorded a folder that a checkout makes a git dir (git there obeys its config):",
    ),
    "hidden": (
        "+skip-worktree {}",
        "marked skip-worktree or assume-unchanged (git status and diff no longer show it):",
    ),
    "unreadable": (
        "+unreadable {}",
        "left what git cannot read (so nothing in it is vouched for):",
    ),
    "replace": (
        "+replace {}",
        "made a replace ref (git shows another object in place of the one named):",
    ),
}


def _finding_change(root: Path, kind: str, where: str) -> ProtectedChange:
    line, note = _FINDING_NOTES[kind]
    shown = where if kind in ("unreadable", "replace") else (where or ".")
    return ProtectedChange(root / shown, None, kind, (line.format(shown),), note=note)


def _note(path: Path, root: Path, before: FileState | None, after: FileState | None) -> str:
    if path == root / ".git" and before is not None and after is not None:
        return "replaced the git dir"
    if before is None and after is not None and _shape_marker(path, root):
        return "made a git dir (git run there obeys its config, hooks, fsmonitor):"
    return ""


def _shape_marker(path: Path, root: Path) -> bool:
    """Whether ``path`` is what makes its place a git dir: a ``.git`` below the top, a ``HEAD``."""
    if path.name == ".git":
        return path.parent != root
    return path.name == "HEAD" and path.parent != root / ".git"


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
