"""The work directory: where model-supplied paths are resolved and confined.

Paths the model sends go through :meth:`Workdir.resolve`, which follows symlinks before
checking, so a link the model planted with ``bash`` cannot carry a read or a write outside.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePath

import attrs

from orchestrator.protocols import ToolError
from orchestrator.tools.arguments import json_type, quoted, suggestion
from orchestrator.tools.products.paths import ProtectGlobs

_MAX_PATH_LENGTH = 4096


def _resolved_root(root: str | os.PathLike[str]) -> Path:
    return Path(root).resolve()


@attrs.frozen
class Workdir:
    """The directory the model works in; every model-supplied path is resolved against it."""

    root: Path = attrs.field(converter=_resolved_root)
    #: ``--sandbox none`` turns confinement off: paths resolve anywhere the user can reach.
    confined: bool = True
    #: Whether the model has bash to look around with; without it (``--deny-bash``) error
    #: texts point at the ``list_files`` tool instead, so no hint names a tool it lacks.
    has_bash: bool = True
    #: Paths that run later (git hooks and config, our own files): never written by a tool.
    protected: tuple[Path, ...] = ()
    #: The person's ``protect`` globs: files no tool writes.
    protect: ProtectGlobs = attrs.Factory(ProtectGlobs)
    #: Files no tool reads or writes: a board's store inside the work directory, the trace.
    hidden: tuple[Path, ...] = ()

    def refusal(self, target: Path, *, writing: bool) -> str | None:
        """Why no tool may open ``target`` (a result of :meth:`resolve`) this way, or None."""
        from orchestrator.tools.products.paths import in_git_dir, is_protected, why_protected

        if any(target == path or target.is_relative_to(path) for path in self.hidden):
            return "it holds the harness's own records (the board, the trace), which no tool opens"
        if target.is_relative_to(self.root / ".orchestrator"):
            return "it is the harness's own folder (traces), which no tool opens"
        if not writing:
            return None
        guarded = is_protected(target, self.protected)
        if guarded is not None:
            return why_protected(guarded, self.root)
        if in_git_dir(target, self.root):
            return why_protected(target, self.root)
        if target.is_relative_to(self.root) and self.protect.matches(
            target.relative_to(self.root).as_posix()
        ):
            return "the person protected it (the protect setting): the model may not change it"
        return None

    def how_to_list(self, path: str = ".") -> str:
        """The call that lists ``path``, in the words of the tools the model has."""
        if self.has_bash:
            return f"bash 'ls {path}'" if path != "." else "bash 'ls'"
        return f"list_files (path {path!r})" if path != "." else "list_files"

    def resolve(self, path: str) -> Path:
        """Return the absolute, symlink-free location of ``path``, or raise :class:`ToolError`.

        Symlinks are followed before the check, so a link pointing outside the work
        directory (even one the model made itself) is refused rather than written through.
        """
        if not isinstance(path, str):
            raise ToolError(f"Error: path must be a string, got {json_type(path)}")
        self._check_shape(path)
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError, ValueError) as error:
            raise ToolError(
                f"Error: path {quoted(path)} cannot be resolved ({error}); "
                "use a plain path inside the work directory"
            ) from error
        if self.confined and not resolved.is_relative_to(self.root):
            raise ToolError(
                f"Error: path {quoted(path)} escapes the work directory {self.root}; "
                f"use a path inside it, e.g. {quoted(suggestion(path))}"
            )
        return resolved

    def anchor(self, path: Path) -> tuple[Path, PurePath]:
        """Split a result of :meth:`resolve` into the directory opens start from and the rest.

        Confined, that directory is the root, so no open can climb out of it; unconfined, it
        is ``/``.
        """
        base = self.root if self.confined and path.is_relative_to(self.root) else Path("/")
        return base, PurePath(path.relative_to(base))

    def relative(self, path: Path) -> str:
        """Name ``path`` (a result of :meth:`resolve`) the way the model should refer to it."""
        if path == self.root:
            return "."
        return (
            path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)
        )

    def _check_shape(self, path: str) -> None:
        if not path:
            raise ToolError("Error: path is empty; pass a path inside the work directory")
        if len(path) > _MAX_PATH_LENGTH:
            raise ToolError(
                f"Error: path is {len(path)} characters long; the limit is {_MAX_PATH_LENGTH}"
            )
        if "\x00" in path:
            raise ToolError(f"Error: path {quoted(path)} contains a NUL byte; remove it")
        if not self.confined:
            return
        if path.startswith("~"):
            raise ToolError(
                f"Error: path {quoted(path)} starts with '~'; home directories are outside "
                f"the work directory {self.root}; use a path relative to it, "
                f"e.g. {quoted(suggestion(path))}"
            )
        if path == "/proc" or path.startswith("/proc/"):
            # /proc/self/root and friends are magic links that sidestep ordinary resolution.
            raise ToolError(
                f"Error: path {quoted(path)} is under /proc, which is outside the work "
                f"directory {self.root}; use a path inside it"
            )
