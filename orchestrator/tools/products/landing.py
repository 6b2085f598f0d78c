"""The git dir under bwrap: an overlay whose safe parts the harness lands after each call.

Inside the sandbox the git dir is an overlay: git reads the real repository and every write
goes to an upper folder in a temporary directory of the harness, outside the work directory.
``.git`` is then a mount point, so it cannot be renamed aside. After the call (bwrap's pid
namespace has ended, so nothing is still writing) :meth:`GitOverlay.land` reads the upper
folder and lands only what ``git add``, ``git commit`` and ``git switch -c`` write:

- loose objects whose content hashes to their name, and packs (plain files, by name);
- refs and ``packed-refs``, each value checked (an object id of an existing object, a branch
  at a commit, or ``ref: refs/…``) and applied with ``git update-ref`` against the value the
  call started from; the branch another worktree has checked out is left alone;
- ``HEAD`` (``git symbolic-ref`` / ``update-ref --no-deref``), the index, the reflogs (each
  line checked) and git's bookkeeping files (``ORIG_HEAD``, ``COMMIT_EDITMSG``, …);

and not a commit or an index that adds a gitlink (mode 160000) that ``HEAD`` does not have: a
nested repository whose config the superproject's ``git status`` would run. Everything else
(config, ``config.worktree``, ``commondir``, hooks, ``info/``, ``modules/``, ``worktrees/``,
deletions of any of them) is dropped and named. Then the upper folder is emptied.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import stat
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import attrs

from orchestrator.tools.products.git import GitFailed, run_git
from orchestrator.tools.products.gitdir import (
    GitLayout,
    Listing,
    head_commit,
    read_index,
    read_tree,
    tree_additions,
)

_OBJECT = re.compile(r"objects/([0-9a-f]{2})/([0-9a-f]{38}|[0-9a-f]{62})")
_PACK = re.compile(
    r"objects/pack/pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.(pack|idx|rev|mtimes|keep|promisor)"
)
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_SHARED_INDEX = re.compile(r"sharedindex\.(?:[0-9a-f]{40}|[0-9a-f]{64})")
_REFLOG_LINE = re.compile(r"(?:[0-9a-f]{40}|[0-9a-f]{64}) (?:[0-9a-f]{40}|[0-9a-f]{64}) [^\0\n]*")
_BAD_REF = re.compile(r"(?:^|/)\.|\.\.|[\x00-\x20\x7f~^:?*\[\\]|@\{|\.lock(?:/|$)|/$|//|\.$")
#: Pseudo-refs landed as files, each line an object id.
_PSEUDO_REFS = ("ORIG_HEAD", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "AUTO_MERGE")
#: Message files landed as text.
_MESSAGES = ("COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG", "TAG_EDITMSG", "MERGE_MODE")
_MESSAGE_LIMIT = 1 << 20
#: Left behind without a word: locks, git's own housekeeping, derived indexes.
_QUIET = re.compile(
    r"(?:.*\.lock|gc\.pid|gc\.log|FETCH_HEAD|description|objects/info/(?:packs|commit-graph.*)"
    r"|objects/pack/(?:multi-pack-index.*|tmp_.*|\.tmp.*)|objects/[0-9a-f]{2}/tmp_.*"
    r"|objects/tmp_.*|objects/incoming-.*|logs/.*|hooks/[^/]+\.sample|info/(?:refs|exclude))"
)
_OPAQUE = (b"user.overlay.opaque", b"trusted.overlay.opaque")
_OBJECT_LIMIT = 4 << 30


@attrs.frozen
class Overlay:
    """One overlay mount: the real git dir (lower layer and mount point), upper and work."""

    dest: Path
    upper: Path
    work: Path


@attrs.frozen
class Dropped:
    """A write of the model's that did not reach the repository, and why."""

    path: str
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "why": self.why}


@attrs.frozen
class Landing:
    """What one call's git writes came to: landed (refs, the index …) and dropped."""

    landed: tuple[str, ...] = ()
    dropped: tuple[Dropped, ...] = ()

    def note(self, limit: int = 12) -> str:
        """The lines for the tool result: what was dropped and why (empty when nothing was)."""
        if not self.dropped:
            return ""
        lines = [f"  {item.path}: {item.why}" for item in self.dropped[:limit]]
        if len(self.dropped) > limit:
            lines.append(f"  … {len(self.dropped) - limit} more (see the trace)")
        return (
            "[git: only objects, refs, logs, the index and HEAD reach the repository; these "
            "writes were dropped:\n" + "\n".join(lines) + "]"
        )


@attrs.frozen
class _Entry:
    relative: PurePosixPath
    path: Path
    kind: str  # file, whiteout, link, dir, opaque, special


@attrs.define
class GitOverlay:
    """The overlays of one session's git dirs, and the landing after each call."""

    layout: GitLayout
    root: Path
    _number: int = 0
    _current: tuple[Overlay, ...] = ()
    _start_refs: dict[str, str] = attrs.field(factory=dict)
    _start_head: str | None = None
    _start_commit: str | None = None
    _hex: int | None = None
    #: The branch ``HEAD`` named when the session began: this worktree's own.
    home_branch: str | None = None
    #: Branches the model made here (landed as new): its own, like ``home_branch``.
    made: set[str] = attrs.field(factory=set)

    @classmethod
    def create(cls, layout: GitLayout) -> GitOverlay:
        """A new temporary folder for the uppers, outside the work directory."""
        head = _read_text(layout.gitdir / "HEAD") or ""
        home = head.strip().removeprefix("ref: ") if head.startswith("ref: ") else None
        return cls(layout, Path(tempfile.mkdtemp(prefix="orchestrator-git-")), home_branch=home)

    @property
    def linked(self) -> bool:
        """Whether this is a linked worktree (a team worker's): other worktrees share its refs."""
        return self.layout.gitdir != self.layout.common

    def prepare(self) -> tuple[Overlay, ...]:
        """Fresh upper and work folders for the next call, and the refs it starts from."""
        self._number += 1
        call = self.root / f"call-{self._number}"
        overlays = []
        for index, dest in enumerate(self.layout.mounts):
            upper, work = call / f"upper-{index}", call / f"work-{index}"
            upper.mkdir(parents=True)
            work.mkdir()
            overlays.append(Overlay(dest, upper, work))
        self._current = tuple(overlays)
        self._start_refs = _refs(self.layout.common, None)
        self._start_head = _read_text(self.layout.gitdir / "HEAD")
        self._start_commit = head_commit(self.layout.gitdir)
        return self._current

    def land(self, *, ended: bool = True) -> Landing:
        """Land the last call's safe writes, drop the rest, and empty the uppers.

        ``ended=False`` (the call's processes could not be seen to end): nothing is landed,
        and the uppers are left to the folder's removal at the end.
        """
        overlays, self._current = self._current, ()
        if not overlays:
            return Landing()
        if not ended:
            return Landing(dropped=(Dropped(".git", "the command did not end; nothing landed"),))
        landed: list[str] = []
        dropped: list[Dropped] = []
        try:
            for overlay in overlays:
                entries = list(_walk(overlay.upper))
                if not any(entry.kind != "dir" for entry in entries):
                    continue
                _Lander(self, overlay, entries, landed, dropped).run()
        finally:
            for overlay in overlays:
                _empty(overlay.upper.parent)
        return Landing(tuple(landed), tuple(dropped))

    def close(self) -> None:
        """Remove the temporary folder (the overlays' work folders are made unreadable)."""
        _empty(self.root)

    def hex_length(self) -> int:
        if self._hex is None:
            try:
                out = run_git(["rev-parse", "--show-object-format"], git_dir=self.layout.gitdir)
                name = out.stdout.decode("ascii", "replace").strip()
            except GitFailed:
                name = "sha1"
            self._hex = 64 if name == "sha256" else 40
        return self._hex


# --- one landing ----------------------------------------------------------------------------


@attrs.define
class _Lander:
    owner: GitOverlay
    overlay: Overlay
    entries: list[_Entry]
    landed: list[str]
    dropped: list[Dropped]

    @property
    def layout(self) -> GitLayout:
        return self.owner.layout

    def shown(self, relative: PurePosixPath | str) -> str:
        dest = self.overlay.dest
        if dest == self.layout.workdir / ".git":
            return f".git/{relative}"
        return str(dest / str(relative))

    def drop(self, relative: PurePosixPath | str, why: str) -> None:
        self.dropped.append(Dropped(self.shown(relative), why))

    def run(self) -> None:
        common = self.overlay.dest == self.layout.common
        own = self._own_prefix()
        handled: set[PurePosixPath] = set()
        if common:
            handled |= self._objects()
            handled |= self._refs()
        if own is not None:
            handled |= self._own(own)
        for entry in self.entries:
            if entry.relative in handled or entry.kind == "dir":
                continue
            text = entry.relative.as_posix()
            if _QUIET.fullmatch(text) or (own is not None and _QUIET.fullmatch(_strip(text, own))):
                continue
            what = {
                "whiteout": "deleting it",
                "opaque": "replacing the folder",
                "link": "a symbolic link",
            }.get(entry.kind)
            why = "git would run or follow it outside the sandbox"
            self.drop(text, f"{what} is not landed: {why}" if what else why)

    def _own_prefix(self) -> PurePosixPath | None:
        if self.overlay.dest == self.layout.gitdir:
            return PurePosixPath()
        if self.overlay.dest == self.layout.common:
            return self.layout.own_prefix
        return None

    # objects ------------------------------------------------------------------------------

    def _objects(self) -> set[PurePosixPath]:
        handled = set()
        packs: list[_Entry] = []
        count = 0
        hex_length = self.owner.hex_length()
        for entry in self.entries:
            text = entry.relative.as_posix()
            if not text.startswith("objects/"):
                continue
            match = _OBJECT.fullmatch(text)
            if match is not None and entry.kind == "file":
                handled.add(entry.relative)
                name = match.group(1) + match.group(2)
                if len(name) != hex_length:
                    self.drop(text, "not an object id of this repository's format")
                elif not _object_matches(entry.path, name):
                    self.drop(text, "its content does not hash to its name")
                elif _copy_in(entry.path, self.layout.common / text, mode=0o444):
                    count += 1
            elif _PACK.fullmatch(text) and entry.kind == "file":
                handled.add(entry.relative)
                if entry.relative.suffix == ".pack":
                    packs.append(entry)
                elif entry.relative.suffix not in (".idx", ".rev"):
                    self.drop(text, "only a pack and the index the harness computes for it land")
            elif entry.kind == "whiteout" or _QUIET.fullmatch(text):
                handled.add(entry.relative)  # git pruned or repacked: the objects stay
        landed_packs = sum(self._pack(entry) for entry in packs)
        if count or landed_packs:
            self.landed.append(f"{count} objects, {landed_packs} packs")
        return handled

    def _pack(self, entry: _Entry) -> bool:
        """Land a pack with the index ``git index-pack --strict`` computes from its content.

        The model's ``.idx`` (and ``.rev``) is never read: an index maps object ids to places in
        the pack, so a forged one would serve other content under a committed file's id.
        """
        text = entry.relative.as_posix()
        name = entry.relative.stem  # pack-<checksum>
        folder = self.owner.root / f"verify-{secrets.token_hex(6)}"
        folder.mkdir()
        try:
            pack = folder / f"{name}.pack"
            if not _copy_in(entry.path, pack, mode=0o444):
                self.drop(text, "cannot be read")
                return False
            why = _index_pack(self.layout.common, pack, name.removeprefix("pack-"))
            if why is not None:
                self.drop(text, why)
                return False
            target = self.layout.common / "objects" / "pack"
            for suffix in (".pack", ".rev", ".idx"):  # the index last: then git sees the pack
                made = folder / f"{name}{suffix}"
                if made.exists():
                    _copy_in(made, target / made.name, mode=0o444)
            return True
        finally:
            _empty(folder)

    # refs ---------------------------------------------------------------------------------

    def _refs(self) -> set[PurePosixPath]:
        handled = {
            e.relative
            for e in self.entries
            if e.relative.parts[:1] == ("refs",) and e.kind != "link"
        }
        handled |= {e.relative for e in self.entries if e.relative.as_posix() == "packed-refs"}
        start = self.owner._start_refs
        after = _refs(self.layout.common, self.overlay.upper)
        changed = sorted(
            name for name in set(start) | set(after) if start.get(name) != after.get(name)
        )
        if not changed:
            self._reflogs(set())
            return handled
        busy = self._checked_out_elsewhere()
        own_branch = self._own_branch_after()
        types = _object_types(
            self.layout.gitdir, [v for n in changed if _SHA.fullmatch(v := after.get(n, ""))]
        )
        applied: set[str] = set()
        for name in changed:
            old, new = start.get(name), after.get(name)
            why = self._refuse_ref(name, old, new, types, busy, own_branch)
            if why is not None:
                self.drop(_ref_path(name), why)
                continue
            if self._apply_ref(name, old, new):
                applied.add(name)
                if name.startswith("refs/heads/") and new is not None:
                    if old is None:
                        self.owner.made.add(name)
                elif new is None:
                    self.owner.made.discard(name)
        if applied:
            self.landed.append("refs: " + ", ".join(sorted(applied)))
        self._reflogs(applied)
        return handled

    def _refuse_ref(  # noqa: PLR0917 (one ref's whole case, read in one place)
        self,
        name: str,
        old: str | None,
        new: str | None,
        types: Mapping[str, str],
        busy: set[str],
        own_branch: str | None,
    ) -> str | None:
        if not name.startswith("refs/") or _BAD_REF.search(name):
            return "not a valid ref name"
        if name.startswith("refs/replace/"):
            return (
                "a replace ref makes git show one object in place of another (a tree with a "
                "gitlink for HEAD's); none is landed"
            )
        if name in busy:
            return "another worktree has this branch checked out"
        foreign = self._foreign_branch(name, old)
        if foreign is not None:
            return foreign
        if new is None:
            return "the branch HEAD names cannot be deleted" if name == own_branch else None
        if new.startswith("ref: "):
            target = new.removeprefix("ref: ")
            if not (name.startswith("refs/remotes/") and name.endswith("/HEAD")):
                return "only refs/remotes/*/HEAD may be a symbolic ref"
            return (
                None
                if target.startswith("refs/") and not _BAD_REF.search(target)
                else "a bad target"
            )
        if not _SHA.fullmatch(new):
            return "its value is neither an object id nor 'ref: refs/…'"
        kind = types.get(new)
        if kind is None:
            return f"it names {new[:12]}, which is not in the repository"
        if name.startswith("refs/heads/") and kind != "commit":
            return f"a branch must name a commit, and {new[:12]} is a {kind}"
        if kind in ("commit", "tag", "tree"):
            base = old if old is not None and _SHA.fullmatch(old) else self.owner._start_commit
            added = tree_additions(self.layout.gitdir, base, new)
            if added is None:
                return "its tree cannot be compared with the one before"
            if added:
                return _addition_reason(added)
        return None

    def _foreign_branch(self, name: str, old: str | None) -> str | None:
        """Why a branch is not this worktree's to move, or None.

        ``refs/heads/team/…`` belong to a team's harness: only the one this worktree had
        checked out when the session began may move. In a linked worktree (a team worker's;
        the others share its refs) only that branch and the branches the model made here may
        move, or be made: an integration branch nobody has checked out is not the model's.
        """
        owner = self.owner
        if not name.startswith("refs/heads/") or name == owner.home_branch:
            return None
        if name.startswith("refs/heads/team/"):
            return "a team's branch (refs/heads/team/…) that is not this worktree's own"
        if owner.linked and old is not None and name not in owner.made:
            return (
                "in a linked worktree only the branch checked out here and branches made here "
                "may move"
            )
        return None

    def _apply_ref(self, name: str, old: str | None, new: str | None) -> bool:
        old_value = old if old is not None and _SHA.fullmatch(old) else ""
        if new is None:
            args = ["update-ref", "-d", name, *([old_value] if old_value else [])]
        elif new.startswith("ref: "):
            args = ["symbolic-ref", name, new.removeprefix("ref: ")]
        else:
            # Against the value the call started from ("" = must not exist yet), so a ref
            # another process moved meanwhile is not overwritten.
            args = ["update-ref", "-m", "orchestrator: landed from the sandbox", name, new]
            if old is None or old_value:
                args.append(old_value)
        try:
            out = run_git(args, git_dir=self.layout.gitdir)
        except GitFailed as error:
            self.drop(_ref_path(name), f"git refused it: {error}")
            return False
        if out.code != 0:
            last = out.stderr.splitlines()[-1] if out.stderr else f"exit code {out.code}"
            self.drop(_ref_path(name), f"git refused it ({last})")
            return False
        return True

    def _reflogs(self, applied: set[str]) -> None:
        """Copy the call's reflogs of the refs that exist now (each line checked).

        A stash lives in ``refs/stash``'s reflog, so the logs are copied, not rewritten.
        """
        logs = [e for e in self.entries if e.relative.as_posix().startswith("logs/refs/")]
        if not any(entry.kind == "file" for entry in logs):
            return
        existing = _refs(self.layout.common, None)
        for entry in logs:
            name = entry.relative.as_posix().removeprefix("logs/")
            if entry.kind == "file" and (name in applied or name in existing):
                _copy_reflog(entry.path, self.layout.common / entry.relative.as_posix())

    def _checked_out_elsewhere(self) -> set[str]:
        heads = [self.layout.common / "HEAD"]
        worktrees = self.layout.common / "worktrees"
        with contextlib.suppress(OSError):
            heads += [child / "HEAD" for child in worktrees.iterdir()]
        own = self.layout.gitdir / "HEAD"
        found = set()
        for head in heads:
            if head == own:
                continue
            text = _read_text(head)
            if text is not None and text.startswith("ref: "):
                found.add(text.removeprefix("ref: ").strip())
        return found

    def _own_branch_after(self) -> str | None:
        prefix = self._own_prefix()
        text = None
        if prefix is not None:
            upper_head = self.overlay.upper / str(prefix) / "HEAD"
            if upper_head.is_file() and not upper_head.is_symlink():
                text = _read_text(upper_head)
        text = text if text is not None else _read_text(self.layout.gitdir / "HEAD")
        return text.removeprefix("ref: ").strip() if text and text.startswith("ref: ") else None

    # the own gitdir: HEAD, the index, bookkeeping -------------------------------------------

    def _own(self, prefix: PurePosixPath) -> set[PurePosixPath]:
        handled: set[PurePosixPath] = set()
        by_name = {
            _strip(entry.relative.as_posix(), prefix): entry
            for entry in self.entries
            if prefix == PurePosixPath() or entry.relative.is_relative_to(prefix)
        }
        gitdir = self.layout.gitdir
        shared = {
            name: entry
            for name, entry in by_name.items()
            if _SHARED_INDEX.fullmatch(name) and entry.kind == "file"
        }
        handled |= {entry.relative for entry in shared.values()}
        head = by_name.get("HEAD")
        if head is not None:
            handled.add(head.relative)
            self._head(head)
        index = by_name.get("index")
        landed_index = False
        if index is not None:
            handled.add(index.relative)
            landed_index = self._index(index, shared)
        if not landed_index:
            for name in shared:
                self.drop(name, "a shared index lands only with the index it was checked with")
        for name in _PSEUDO_REFS + _MESSAGES:
            kept = by_name.get(name)
            if kept is None:
                continue
            handled.add(kept.relative)
            self._bookkeeping(name, kept)
        log = by_name.get("logs/HEAD")
        if log is not None and log.kind == "file":
            handled.add(log.relative)
            _copy_reflog(log.path, gitdir / "logs" / "HEAD")
        return handled

    def _head(self, entry: _Entry) -> None:
        if entry.kind != "file":
            self.drop("HEAD", "only a HEAD that is a plain file is landed")
            return
        text = (_read_text(entry.path) or "").strip()
        if text == (self.owner._start_head or "").strip():
            return
        gitdir = self.layout.gitdir
        if text.startswith("ref: "):
            target = text.removeprefix("ref: ")
            if not target.startswith("refs/heads/") or _BAD_REF.search(target):
                self.drop("HEAD", "HEAD may only name a branch (ref: refs/heads/…)")
                return
            if target in self._checked_out_elsewhere():
                self.drop("HEAD", f"another worktree has {target} checked out")
                return
            if target.startswith("refs/heads/team/") and target != self.owner.home_branch:
                self.drop("HEAD", f"{target} is a team's branch, not this worktree's own")
                return
            args = ["symbolic-ref", "-m", "orchestrator: landed from the sandbox", "HEAD", target]
        elif _SHA.fullmatch(text):
            if _object_types(gitdir, [text]).get(text) != "commit":
                self.drop("HEAD", f"{text[:12]} is not a commit in the repository")
                return
            added = tree_additions(gitdir, self.owner._start_commit, text)
            if added is None or added:
                why = "its tree cannot be compared with the one before"
                self.drop("HEAD", why if added is None else _addition_reason(added))
                return
            args = [
                "update-ref",
                "--no-deref",
                "-m",
                "orchestrator: landed from the sandbox",
                "HEAD",
                text,
            ]
        else:
            self.drop("HEAD", "its content is neither 'ref: refs/heads/…' nor an object id")
            return
        out = run_git(args, git_dir=gitdir)
        if out.code == 0:
            self.landed.append("HEAD")
        else:
            self.drop(
                "HEAD",
                f"git refused it ({out.stderr.splitlines()[-1] if out.stderr else out.code})",
            )

    def _index(self, entry: _Entry, shared: Mapping[str, _Entry]) -> bool:
        """Land the index (and the shared indexes beside it) once git has read them together.

        Read with the real git dir's shared indexes first, then the call's (git looks beside the
        index file too), as the user's git will read them once landed. Refused: an index git
        cannot read, one that adds a gitlink or a folder a checkout makes a git dir, and one
        that marks entries skip-worktree or assume-unchanged that were not so before (they hide
        a file's change from ``git status`` and ``git diff``).
        """
        if entry.kind != "file":
            self.drop("index", "only an index that is a plain file is landed")
            return False
        gitdir = self.layout.gitdir
        real = gitdir / "index"
        with contextlib.suppress(OSError):
            if real.read_bytes() == entry.path.read_bytes():
                return False
        after = read_index(gitdir, index=entry.path)
        if after is None:
            self.drop(
                "index",
                "git cannot read it (a split index whose shared index is missing?); not landed",
            )
            return False
        before = read_index(gitdir) if real.exists() else Listing()
        added = after - (before if before is not None else Listing())
        if added.gitlinks or added.shaped:
            # HEAD's tree may have them already (a checkout of HEAD): those are not new.
            start = read_tree(gitdir, self.owner._start_commit)
            added = added - (start if start is not None else Listing())
        if added:
            self.drop("index", _addition_reason(added))
            return False
        for name, kept in shared.items():
            if not _shared_index_named(kept.path, name):
                self.drop(name, "its content does not hash to its name")
                return False
        for name, kept in shared.items():
            _copy_in(kept.path, gitdir / name, mode=0o644)
        lock = gitdir / "index.lock"
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            self.drop("index", "index.lock is held by another git; not landed")
            return False
        try:
            with os.fdopen(fd, "wb") as out, _open_regular(entry.path) as source:
                shutil.copyfileobj(source, out)
            os.replace(lock, real)
        except OSError as error:
            with contextlib.suppress(OSError):
                lock.unlink()
            self.drop("index", f"cannot be written: {error.strerror}")
            return False
        self.landed.append("index")
        return True

    def _bookkeeping(self, name: str, entry: _Entry) -> None:
        target = self.layout.gitdir / name
        if entry.kind == "whiteout":
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
            return
        if entry.kind != "file":
            self.drop(name, "only a plain file is landed")
            return
        try:
            with _open_regular(entry.path) as source:
                data = source.read(_MESSAGE_LIMIT + 1)
        except OSError:
            self.drop(name, "cannot be read")
            return
        text = data.decode("utf-8", "replace")
        if len(data) > _MESSAGE_LIMIT or "\0" in text:
            self.drop(name, "too large, or not text")
            return
        if name in _PSEUDO_REFS and not all(_SHA.fullmatch(line) for line in text.split()):
            self.drop(name, "a line is not an object id")
            return
        _write_atomically(target, data)


# --- reading an overlay's upper folder -------------------------------------------------------


def _walk(upper: Path) -> Iterator[_Entry]:
    stack = [upper]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            relative = PurePosixPath(path.relative_to(upper).as_posix())
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                kind = "opaque" if _opaque(path) else "dir"
                stack.append(path)
            elif stat.S_ISREG(info.st_mode):
                kind = "file"
            elif stat.S_ISLNK(info.st_mode):
                kind = "link"
            elif stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                kind = "whiteout"
            else:
                kind = "special"
            yield _Entry(relative, path, kind)


def _opaque(path: Path) -> bool:
    for name in _OPAQUE:
        with contextlib.suppress(OSError):
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
    return False


def _refs(common: Path, upper: Path | None) -> dict[str, str]:
    """Every ref's value as the overlay shows it (the real repository when ``upper`` is None).

    Loose refs win over ``packed-refs``; in the upper folder a whiteout hides a deleted loose
    ref, an opaque folder hides all that was below it, a new ``packed-refs`` replaces the old.
    """
    packed_file: Path | None = common / "packed-refs"
    candidate = None if upper is None else upper / "packed-refs"
    if candidate is not None and (candidate.exists() or candidate.is_symlink()):
        # The upper's entry replaces the real one; a whiteout or a link means none.
        packed_file = candidate if candidate.is_file() and not candidate.is_symlink() else None
    refs = _packed(packed_file) if packed_file is not None else {}
    loose: dict[str, str] = {}
    for name, path in _loose(common / "refs", "refs"):
        if upper is None or not _hidden(upper, PurePosixPath(name)):
            value = _read_text(path)
            if value is not None:
                loose[name] = value.strip()
    if upper is not None:
        for name, path in _loose(upper / "refs", "refs"):
            value = _read_text(path)
            if value is not None:
                loose[name] = value.strip()
    refs.update(loose)
    return refs


def _loose(folder: Path, prefix: str) -> Iterator[tuple[str, Path]]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        name = f"{prefix}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from _loose(Path(entry.path), name)
        elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock"):
            yield name, Path(entry.path)


def _hidden(upper: Path, relative: PurePosixPath) -> bool:
    """Whether the upper folder hides the lower ``relative`` (a whiteout, a replaced folder)."""
    parts = relative.parts
    for depth in range(1, len(parts) + 1):
        candidate = upper.joinpath(*parts[:depth])
        try:
            info = candidate.lstat()
        except OSError:
            return False
        if depth == len(parts):
            return True  # the upper has its own entry here (or a whiteout)
        if not stat.S_ISDIR(info.st_mode) or _opaque(candidate):
            return True
    return False


def _packed(path: Path) -> dict[str, str]:
    text = _read_text(path)
    found: dict[str, str] = {}
    for line in (text or "").splitlines():
        if not line or line.startswith(("#", "^")):
            continue
        value, _, name = line.partition(" ")
        if name:
            found[name.strip()] = value.strip()
    return found


def _ref_path(name: str) -> str:
    return name


def _addition_reason(added: Listing) -> str:
    """Why a tree or an index with ``added`` is refused, naming what it adds."""
    if added.gitlinks:
        shown = ", ".join(sorted(added.gitlinks)[:5])
        return (
            f"it adds a gitlink (mode 160000) that HEAD does not have: {shown}; the user's git "
            "would treat that folder as a submodule and run what its own config says"
        )
    if added.shaped:
        shown = ", ".join(sorted(path or "." for path in added.shaped)[:5])
        return (
            f"it adds a folder that a checkout makes a git dir (HEAD, objects/, refs/): {shown}; "
            "git run there would obey its config"
        )
    shown = ", ".join(sorted(added.hidden)[:5])
    return (
        f"it marks {shown} skip-worktree or assume-unchanged, which it was not: git status and "
        "git diff would no longer show a change to it"
    )


def _shared_index_named(path: Path, name: str) -> bool:
    """Whether a shared index's checksum (its last bytes) is its name and its content's hash."""
    digest = name.removeprefix("sharedindex.")
    size = len(digest) // 2
    hasher = hashlib.sha256() if size == 32 else hashlib.sha1()
    try:
        with _open_regular(path) as source:
            data = source.read(_OBJECT_LIMIT + 1)
    except OSError:
        return False
    if len(data) <= size or len(data) > _OBJECT_LIMIT:
        return False
    hasher.update(data[:-size])
    return data[-size:].hex() == digest and hasher.hexdigest() == digest


def _object_types(git_dir: Path, names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    try:
        out = run_git(
            ["cat-file", "--batch-check"],  # "<name> <type> <size>", or "<name> missing"
            git_dir=git_dir,
            stdin=("\n".join(dict.fromkeys(names)) + "\n").encode(),
        )
    except GitFailed:
        return {}
    found = {}
    for line in out.stdout.decode("ascii", "replace").splitlines():
        name, _, rest = line.partition(" ")
        kind = rest.split(" ", 1)[0]
        if kind and kind != "missing":
            found[name] = kind
    return found


def _index_pack(common: Path, pack: Path, checksum: str) -> str | None:
    """Index ``pack`` with ``git index-pack --strict`` beside it; why not, or None when it did.

    Strict: every object well formed, every object it names there (in the pack or the
    repository). The checksum git computes must be the one the pack's name says.
    """
    index = pack.with_suffix(".idx")
    try:
        out = run_git(
            ["index-pack", "--strict", "-o", str(index), str(pack)],
            git_dir=common,
            cwd=pack.parent,
        )
    except GitFailed as error:
        return f"git index-pack failed: {error}"
    if out.code != 0:
        last = out.stderr.splitlines()[-1] if out.stderr else f"exit code {out.code}"
        return f"git index-pack (strict) refused it ({last})"
    said = out.stdout.decode("ascii", "replace").split()
    if not said or said[-1] != checksum:
        return "its name is not its checksum"
    return None


def _object_matches(path: Path, name: str) -> bool:
    """Whether a loose object's inflated content hashes to ``name``."""
    hasher = hashlib.sha256() if len(name) == 64 else hashlib.sha1()
    inflate = zlib.decompressobj()
    total = 0
    try:
        with _open_regular(path) as source:
            while chunk := source.read(1 << 20):
                data = inflate.decompress(chunk, 1 << 22)
                while True:
                    total += len(data)
                    if total > _OBJECT_LIMIT:
                        return False
                    hasher.update(data)
                    if not inflate.unconsumed_tail:
                        break
                    data = inflate.decompress(inflate.unconsumed_tail, 1 << 22)
            hasher.update(inflate.flush())
    except (OSError, zlib.error):
        return False
    return inflate.eof and hasher.hexdigest() == name


@contextlib.contextmanager
def _open_regular(path: Path) -> Iterator[BinaryIO]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            yield handle
    finally:
        os.close(fd)


def _copy_in(source: Path, target: Path, *, mode: int) -> bool:
    """Copy ``source`` to ``target`` unless it is there already (a link makes it atomic)."""
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.parent / f"tmp_orchestrator_{secrets.token_hex(6)}"
    try:
        with _open_regular(source) as reader, open(temporary, "xb") as writer:
            shutil.copyfileobj(reader, writer)
        os.chmod(temporary, mode)
        try:
            os.link(temporary, target)
        except FileExistsError:
            return False
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _copy_reflog(source: Path, target: Path) -> None:
    try:
        with _open_regular(source) as reader:
            data = reader.read(64 << 20)
    except OSError:
        return
    text = data.decode("utf-8", "replace")
    if not all(_REFLOG_LINE.fullmatch(line) for line in text.splitlines()):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(target, data)


def _write_atomically(target: Path, data: bytes) -> None:
    temporary = target.parent / f".orchestrator-{secrets.token_hex(6)}.tmp"
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            temporary.unlink()


def _read_text(path: Path) -> str | None:
    try:
        with _open_regular(path) as handle:
            return handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None


def _strip(text: str, prefix: PurePosixPath) -> str:
    if prefix == PurePosixPath():
        return text
    return text.removeprefix(prefix.as_posix() + "/")


def _empty(folder: Path) -> None:
    """Remove ``folder``; an overlay's work folder (mode 000 inside) is opened up first."""
    if not folder.exists():
        return
    for path, dirs, _files in os.walk(folder):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(Path(path) / name, 0o700, follow_symlinks=False)
    shutil.rmtree(folder, ignore_errors=True)
