"""The session's guard over the model's products: around every bash call and every check.

One :class:`ProductGuard` per session. Before a call it hands out the git dir's overlays
(under bwrap); after it, it lands their safe parts, cleans a git dir the model created, and
compares the protected files with the session's start. Each change is a ``protected.changed``
trace event and a note in the tool result; the session turns them into one warning each and
exit code 3. A check cannot pass while a protected file differs from the start: it proves
nothing about code whose tests, ``conftest.py`` or ``Makefile`` the model rewrote.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.tools.products.gitdir import clean_new_gitdir, find_layout
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
        if sandbox.mode == "bwrap" and layout is not None:
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
        return self.overlay.prepare() if self.overlay is not None else ()

    def after_call(self, *, ended: bool = True) -> str:
        """Land, clean, compare; the note the tool result gets (empty when nothing to say)."""
        landing = self.overlay.land(ended=ended) if self.overlay is not None else Landing()
        cleaned = self._clean_new_gitdir() if ended else ()
        landing = attrs.evolve(landing, dropped=(*landing.dropped, *cleaned))
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

    def changes(self) -> tuple[ProtectedChange, ...]:
        """The protected files as they differ now from the session's start."""
        self._latest = ProtectedSnapshot.take(self.covered, self._latest or self.baseline)
        return self.baseline.changes(self._latest)

    def fresh_changes(self) -> tuple[ProtectedChange, ...]:
        """Changes not logged before; each is logged as ``protected.changed`` now."""
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
        if self.overlay is not None:
            self.overlay.close()
