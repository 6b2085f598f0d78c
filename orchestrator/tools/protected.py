"""Protected paths: files in the work directory that run later, outside any sandbox.

A model that writes ``.git/hooks/post-commit`` or ``core.fsmonitor`` into ``.git/config`` has
its command run by the user's next ``git status``; one that writes ``orchestrator.toml`` or
``.mcp.json`` changes what our own next run starts. These paths are read-only for bash under
bwrap (bound read-only over the writable work directory), refused for the file tools in every
mode, and, where bash cannot be stopped (``workdir``, ``none``), their digests are compared
before and after the run: a change is a loud warning and exit code 3.

Objects, refs, the index, ``HEAD`` and logs stay writable, so ``git add`` and ``git commit``
still work. ``--allow-write PATH`` lifts the rule for a path the user chooses.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

#: Our own files that decide what the next run starts.
OWN_FILES = ("orchestrator.toml", ".mcp.json")
#: What one protected file's change shows of its diff, at most.
DIFF_LINES = 12

_PATH_KEYS = re.compile(
    r"^\s*(?:\[(?P<section>[^\]]+)\]|(?P<key>hookspath|path)\s*=\s*(?P<value>.*?)\s*)$",
    re.IGNORECASE,
)


def protected_paths(workdir: Path, allow: Iterable[Path] = ()) -> tuple[Path, ...]:
    """Every protected path of ``workdir`` (existing or not), less the ``allow``-ed ones."""
    root = workdir.resolve()
    found: list[Path] = [root / name for name in OWN_FILES]
    dotgit = root / ".git"
    gitdirs: list[Path] = []
    if dotgit.is_dir() and not dotgit.is_symlink():
        gitdirs.append(dotgit)
    elif dotgit.is_file():
        found.append(dotgit)  # the pointer a worktree or submodule follows
        gitdir = _pointed(dotgit)
        if gitdir is not None:
            gitdirs.append(gitdir)
            common = _common_dir(gitdir)
            if common is not None:
                gitdirs.append(common)
    for gitdir in gitdirs:
        config = gitdir / "config"
        found += [gitdir / "hooks", config]
        found += _named_by(config, root, gitdir)
    allowed = [path.resolve() for path in allow]
    unique = dict.fromkeys(path.resolve() for path in found)
    return tuple(
        path for path in unique if not any(path == a or path.is_relative_to(a) for a in allowed)
    )


def _pointed(dotgit: Path) -> Path | None:
    """The gitdir a ``.git`` file names (``gitdir: PATH``)."""
    try:
        first = dotgit.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    target = Path(first.removeprefix("gitdir:").strip())
    return (dotgit.parent / target).resolve() if not target.is_absolute() else target


def _common_dir(gitdir: Path) -> Path | None:
    try:
        text = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    target = Path(text)
    return (gitdir / target).resolve() if not target.is_absolute() else target


def _named_by(config: Path, root: Path, gitdir: Path) -> list[Path]:
    """``core.hooksPath`` and ``include``/``includeIf`` targets inside the work directory.

    Read as text, never by running git on a config the model may have written.
    """
    try:
        lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    section = ""
    named: list[Path] = []
    for line in lines:
        match = _PATH_KEYS.match(line)
        if match is None:
            continue
        if match.group("section") is not None:
            section = match.group("section").strip().lower()
            continue
        key, value = match.group("key").lower(), match.group("value").strip().strip('"')
        if not value:
            continue
        if key == "hookspath" and section == "core":
            base = root  # a relative hooksPath is relative to where git runs
        elif key == "path" and section.startswith(("include", "includeif")):
            base = config.parent  # an include is relative to the file naming it
        else:
            continue
        target = Path(os.path.expanduser(value))
        resolved = (base / target).resolve() if not target.is_absolute() else target.resolve()
        if resolved.is_relative_to(root) or resolved.is_relative_to(gitdir):
            named.append(resolved)
    return named


def is_protected(target: Path, protected: Sequence[Path]) -> Path | None:
    """The protected path ``target`` lies at or under, or None."""
    for path in protected:
        if target == path or target.is_relative_to(path):
            return path
    return None


def why_protected(path: Path, root: Path) -> str:
    """The rule, in a few words, for an error or a warning."""
    name = path.name
    if name in OWN_FILES:
        return "orchestrator's next run reads it to decide what to start"
    if name == ".git":
        return "git follows it to the repository's hooks and config"
    return "git runs what it says outside the sandbox (hooks, fsmonitor, aliases)"


# --- before and after: the digests ---------------------------------------------------------


@attrs.frozen
class ProtectedChange:
    """One protected path the run changed: what it was, what it is, a short diff."""

    path: Path
    before: str | None
    after: str | None
    diff: tuple[str, ...] = ()

    def describe(self, root: Path) -> str:
        shown = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        if self.before is None:
            what = "created"
        elif self.after is None:
            what = "removed"
        else:
            what = "changed"
        return f"the run {what} {shown}"


@attrs.frozen
class ProtectedSnapshot:
    """Each protected path's digest (a folder's: every file in it), taken at one moment."""

    digests: Mapping[Path, str | None]
    texts: Mapping[Path, str]

    @classmethod
    def take(cls, paths: Sequence[Path]) -> ProtectedSnapshot:
        digests: dict[Path, str | None] = {}
        texts: dict[Path, str] = {}
        for path in paths:
            digest, text = _digest(path)
            digests[path] = digest
            if text is not None:
                texts[path] = text
        return cls(digests, texts)

    def changes(self) -> tuple[ProtectedChange, ...]:
        """What differs now from this snapshot."""
        later = ProtectedSnapshot.take(tuple(self.digests))
        found = []
        for path, before in self.digests.items():
            after = later.digests[path]
            if after == before:
                continue
            diff = difflib.unified_diff(
                self.texts.get(path, "").splitlines(),
                later.texts.get(path, "").splitlines(),
                lineterm="",
                n=0,
            )
            lines = [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]
            found.append(ProtectedChange(path, before, after, tuple(lines[:DIFF_LINES])))
        return tuple(found)


_TEXT_LIMIT = 65_536


def _digest(path: Path) -> tuple[str | None, str | None]:
    """A digest of ``path`` (None when it is missing), and its text when it is a small file."""
    try:
        if path.is_symlink():
            return "link:" + os.readlink(path), None
        if path.is_dir():
            hasher = hashlib.sha256()
            for child in sorted(path.rglob("*")):
                hasher.update(os.fsencode(child.relative_to(path)) + b"\0")
                if child.is_symlink():
                    hasher.update(b"link:" + os.fsencode(os.readlink(child)))
                elif child.is_file():
                    hasher.update(hashlib.sha256(child.read_bytes()).digest())
                    hasher.update(oct(child.stat().st_mode & 0o777).encode())
            return "dir:" + hasher.hexdigest(), None
        if path.is_file():
            data = path.read_bytes()
            text = data[:_TEXT_LIMIT].decode("utf-8", "replace")
            return hashlib.sha256(data).hexdigest() + oct(path.stat().st_mode & 0o777), text
    except OSError:
        return "unreadable", None
    return None, None
