"""The session's guard over the model's products: around every bash call and every check.

One :class:`ProductGuard` per session. Before a call it hands out the git dir's overlays
(under bwrap); after it, it lands their safe parts, cleans a git dir the model created, moves
out of the work directory any other git dir the model made (:func:`~.gitdir.git_dir_shaped`),
removes the empty mount points bwrap left for board files that did not exist, and compares the
protected files with the session's start. Each change is a ``protected.changed`` trace event
and a note in the tool result; the session turns them into one warning each and exit code 3. A
check cannot pass while a protected file differs from the start: it proves nothing about code
whose tests, ``conftest.py`` or ``Makefile`` the model rewrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.tools.products.gitdir import (
    clean_new_gitdir,
    control_files,
    find_layout,
    git_dir_shaped,
)
from orchestrator.tools.products.landing import Dropped, GitOverlay, Landing, Overlay
from orchestrator.tools.products.snapshot import (
    ProtectedChange,
    ProtectedSet,
    ProtectedSnapshot,
    describe_changes,
)

if TYPE_CHECKING:
    from orchestrator.tools.sandbox import Sandbox

#: A trace sink: ``log(event, **fields)``.
Log = Callable[..., None]


@attrs.define
class ProductGuard:
    """One session's watch over the files the model leaves for later."""

    sandbox: Sandbox
    covered: ProtectedSet
    baseline: ProtectedSnapshot
    overlay: GitOverlay | None = None
    #: Why the git dir is read-only for bash under bwrap (no overlay here), or None.
    notice: str | None = None
    log: Log | None = None
    #: Every protected change logged so far, in order.
    seen: list[ProtectedChange] = attrs.Factory(list)
    #: Every write of the model's dropped from the git dir, in order.
    dropped: list[Dropped] = attrs.Factory(list)
    _latest: ProtectedSnapshot | None = None
    _had_gitdir: bool = True
    #: The git dirs below the top there were at the start, each with its control files then.
    _shapes: dict[Path, frozenset[Path]] = attrs.Factory(dict)
    #: Where git dirs the model made are moved (made when first needed; kept for the person).
    _quarantine: Path | None = None
    _moves: int = 0
    #: Board files missing before the call: bwrap makes an empty file to mount over each.
    _absent_stores: tuple[Path, ...] = ()
    #: Placeholder folders (a hooks folder to bind) and their parents this session made.
    _made_folders: tuple[Path, ...] = ()

    @classmethod
    def create(cls, sandbox: Sandbox, log: Log | None = None) -> ProductGuard:
        policy = sandbox.policy
        layout = find_layout(policy.workdir)
        skip = (*policy.hidden, *policy.stores, policy.workdir / ".orchestrator")
        covered = ProtectedSet(
            policy.workdir,
            policy.protected,
            policy.protect,
            layout,
            skip,
            gitlinks=sandbox.mode != "bwrap",  # under bwrap the landing refuses them
        )
        guard = cls(sandbox, covered, ProtectedSnapshot.take(covered), log=log)
        guard._had_gitdir = (policy.workdir / ".git").exists()
        if sandbox.mode == "bwrap":
            guard._shapes = {
                place: frozenset(control_files(place) if place.name != ".git" else ())
                for place in git_dir_shaped(policy.workdir, skip)
            }
            guard._made_folders = _missing_with_parents(policy.placeholders, policy.workdir)
            if layout is not None:
                guard._open_overlay(layout)
        return guard

    def _open_overlay(self, layout: Any) -> None:
        from orchestrator.tools.sandbox import probe_overlay

        assert self.sandbox.bwrap is not None
        problem = probe_overlay(self.sandbox.bwrap.path)
        if problem is None:
            self.overlay = GitOverlay.create(layout)
        else:
            self.notice = (
                f"git's folder is read-only for bash here (bwrap cannot mount an overlay: "
                f"{problem}); the agent cannot commit"
            )

    def before_call(self) -> tuple[Overlay, ...]:
        """The overlays for the next bash call (none outside bwrap, or without a git dir)."""
        if self.sandbox.mode == "bwrap":
            self._absent_stores = tuple(
                path
                for path in self.sandbox.policy.stores
                if not path.exists() and not path.is_symlink()
            )
        return self.overlay.prepare() if self.overlay is not None else ()

    def after_call(self, *, ended: bool = True) -> str:
        """Land, clean, compare; the note the tool result gets (empty when nothing to say)."""
        landing = self.overlay.land(ended=ended) if self.overlay is not None else Landing()
        self._remove_mount_points()
        cleaned = self._clean_new_gitdir() if ended else ()
        moved = self._move_git_dirs() if ended else ()
        landing = attrs.evolve(landing, dropped=(*landing.dropped, *cleaned, *moved))
        if (landing.landed or landing.dropped) and self.log is not None:
            self.log(
                "git.landed",
                landed=list(landing.landed),
                dropped=[item.as_dict() for item in landing.dropped],
            )
        self.dropped += landing.dropped
        notes = [landing.note()] if landing.dropped else []
        fresh = self.fresh_changes()
        if fresh:
            notes.append(
                f"[protected files changed: {describe_changes(fresh, self.covered.root)}; the "
                "person is warned, checks fail while they differ, and the run ends with exit "
                "code 3: put them back as they were]"
            )
        return "\n".join(notes)

    def _clean_new_gitdir(self) -> tuple[Dropped, ...]:
        """Under bwrap, a ``.git`` the model made is made inert, then overlaid from now on."""
        if self.sandbox.mode != "bwrap" or self._had_gitdir:
            return ()
        dotgit = self.covered.root / ".git"
        if not dotgit.exists() and not dotgit.is_symlink():
            return ()
        removed = tuple(Dropped(path, why) for path, why in clean_new_gitdir(dotgit))
        layout = find_layout(self.covered.root)
        if layout is not None:
            self._had_gitdir = True
            self.covered = attrs.evolve(self.covered, layout=layout)
            self._open_overlay(layout)
        return removed

    def _move_git_dirs(self) -> tuple[Dropped, ...]:
        """Under bwrap, move out of the work directory every git dir the model made below the top.

        A ``.git`` below the top, or a folder shaped like a git dir (``HEAD``, ``objects/``,
        ``refs/``; the work directory itself too), would have the user's next ``git status``
        there obey its config. The ones there at the start are read-only for bash; one made
        since loses what makes it a git dir (a ``.git`` entry whole; a shaped folder's ``HEAD``
        and ``commondir``, its other files stay), and a control file added to one from the start
        (a ``commondir`` pointing elsewhere) goes too. All of it goes to a folder outside the
        work directory, named in the note, so nothing is lost.
        """
        if self.sandbox.mode != "bwrap":
            return ()
        root = self.covered.root
        moved: list[Dropped] = []
        for place in git_dir_shaped(root, self.covered.skip):
            known = self._shapes.get(place)
            if place.name == ".git":
                targets = [place] if known is None else []
            elif known is None:
                targets = [p for p in (place / "HEAD", place / "commondir") if _present(p)]
            else:
                targets = [path for path in control_files(place) if path not in known]
            for target in targets:
                where = self._move_out(target)
                shown = target.relative_to(root).as_posix() if target != root else "."
                why = "it made a git dir that git run there would obey (config, hooks, fsmonitor)"
                moved.append(Dropped(shown, f"{why}; moved to {where}"))
        return tuple(moved)

    def _move_out(self, target: Path) -> str:
        """Move ``target`` into the quarantine folder; where it went, or why it could not."""
        if self._quarantine is None:
            self._quarantine = Path(tempfile.mkdtemp(prefix="orchestrator-quarantine-"))
        self._moves += 1
        relative = target.relative_to(self.covered.root)
        destination = self._quarantine / str(self._moves) / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(target, destination)
        except OSError:
            # Another file system: copied where it can be (files and links), then removed.
            with contextlib.suppress(OSError, shutil.Error):
                if target.is_dir() and not target.is_symlink():
                    shutil.copytree(target, destination, symlinks=True, copy_function=_copy_plain)
                else:
                    _copy_plain(str(target), str(destination))
            try:
                _remove(target)
            except OSError as error:
                return f"nowhere: it could not be removed ({error.strerror})"
        return str(destination)

    def _remove_mount_points(self) -> None:
        """Remove the empty read-only files bwrap made to mount over missing board files."""
        for path in self._absent_stores:
            if _is_mount_point_file(path):
                with contextlib.suppress(OSError):
                    path.unlink()
        self._absent_stores = ()

    def changes(self) -> tuple[ProtectedChange, ...]:
        """The protected files as they differ now from the session's start."""
        self._latest = ProtectedSnapshot.take(self.covered, self._latest or self.baseline)
        return self.baseline.changes(self._latest)

    def fresh_changes(self) -> tuple[ProtectedChange, ...]:
        """Changes not logged before; each is logged as ``protected.changed`` now.

        Under bwrap a git dir the file tools made since the last call is moved out first.
        """
        moved = self._move_git_dirs()
        if moved:
            self.dropped += moved
            if self.log is not None:
                self.log("git.landed", landed=[], dropped=[item.as_dict() for item in moved])
        fresh = [change for change in self.changes() if change not in self.seen]
        for change in fresh:
            self.seen.append(change)
            if self.log is not None:
                self.log(
                    "protected.changed",
                    path=str(change.path),
                    before=change.before,
                    after=change.after,
                    diff=list(change.diff),
                    **({"note": change.note} if change.note else {}),
                )
        return tuple(fresh)

    def check_refusal(self) -> str | None:
        """Why no check can pass now (protected files differ from the start), or None."""
        changes = self.changes()
        if not changes:
            return None
        named = describe_changes(changes, self.covered.root)
        return (
            f"protected files changed since the run started ({named}), so the check proves "
            "nothing; put them back as they were"
        )

    def close(self) -> None:
        """Remove the overlays' folder, and the placeholder folders made for binds if empty."""
        if self.overlay is not None:
            self.overlay.close()
        self._remove_mount_points()
        for folder in sorted(self._made_folders, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one


def _missing_with_parents(paths: tuple[Path, ...], root: Path) -> tuple[Path, ...]:
    """``paths`` that do not exist yet, with their missing parents up to ``root``."""
    found: list[Path] = []
    for path in paths:
        current = path
        while current != root and current.is_relative_to(root) and not _present(current):
            found.append(current)
            current = current.parent
    return tuple(dict.fromkeys(found))


def _present(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def _is_mount_point_file(path: Path) -> bool:
    """An empty, read-only regular file of ours: what bwrap makes to mount a file over."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_size == 0
        and stat.S_IMODE(info.st_mode) == 0o444
        and info.st_uid == os.getuid()
    )


def _copy_plain(source: str, destination: str) -> None:
    """Copy a regular file; anything else (a FIFO, a device) is left out."""
    if stat.S_ISREG(os.lstat(source).st_mode):
        shutil.copy2(source, destination, follow_symlinks=False)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
