"""Protected paths: files in the work directory that run later, outside any sandbox.

A model that writes ``core.fsmonitor`` into a git config, a hook into ``.husky/`` or into the
folder any git config level names as ``core.hooksPath``, or our own ``orchestrator.toml``, has
its command run by the user's next ``git status`` or the next run. These paths are read-only
for bash under bwrap, refused to the file tools in every mode, and their digests are compared
after each call (:mod:`.snapshot`): a change is a loud warning and exit code 3.

The ``protect`` globs (gitignore-style, relative to the work directory) add files the person
says the model may not change, such as tests. Board stores inside the work directory are hidden
from bash and refused to the file tools. ``--allow-write PATH`` lifts the rule for a path the
user chooses.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from pathspec import PathSpec

#: Our own files that decide what the next run starts.
OWN_FILES = ("orchestrator.toml", ".mcp.json")
_LEFTHOOK_EXTENSIONS = ("yml", "yaml", "json", "jsonc", "toml")
_JS_EXTENSIONS = ("js", "cjs", "mjs", "ts", "cts", "mts")
#: What git hook managers run from, at the top of the work tree: husky (``.husky/``, v4's
#: ``.huskyrc*``), pre-commit, lefthook (every name and place it reads, ``-local`` too),
#: lint-staged (which a husky hook runs), simple-git-hooks, overcommit, captainhook.
HOOK_MANAGER_FILES = (
    ".husky",
    ".huskyrc",
    *(f".huskyrc.{ext}" for ext in ("json", "yaml", "yml", *_JS_EXTENSIONS)),
    *(f"husky.config.{ext}" for ext in _JS_EXTENSIONS),
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    *(
        f"{where}{name}.{ext}"
        for name in ("lefthook", "lefthook-local")
        for where in ("", ".", ".config/")
        for ext in _LEFTHOOK_EXTENSIONS
    ),
    ".lefthook",
    ".lefthook-local",
    ".lintstagedrc",
    *(f".lintstagedrc.{ext}" for ext in ("json", "yaml", "yml", *_JS_EXTENSIONS)),
    *(f"lint-staged.config.{ext}" for ext in _JS_EXTENSIONS),
    ".simple-git-hooks.json",
    *(f".simple-git-hooks.{ext}" for ext in ("cjs", "js")),
    "simple-git-hooks.json",
    *(f"simple-git-hooks.{ext}" for ext in ("cjs", "js")),
    ".overcommit.yml",
    ".git-hooks",
    "captainhook.json",
)
#: The parts of a git config value that name a program git runs (``alias.x = !cmd`` too).
_COMMAND_KEY = re.compile(
    r"(?:^core\.(?:fsmonitor|sshcommand|editor|pager|askpass|alternaterefscommand)$"
    r"|^sequence\.editor$|^diff\.external$|^gpg\.(?:[^.]+\.)?program$"
    r"|^credential\.(?:.+\.)?helper$|^uploadpack\.packobjectshook$|^submodule\..+\.update$"
    r"|\.(?:textconv|clean|smudge|process|driver|command|cmd|path)$|^pager\.)",
    re.IGNORECASE,
)
_PATH_KEYS = re.compile(
    r"^\s*(?:\[(?P<section>[^\]]+)\]|(?P<key>hookspath|path)\s*=\s*(?P<value>.*?)\s*)$",
    re.IGNORECASE,
)


def protected_paths(
    workdir: Path, allow: Iterable[Path] = (), *, git_config: bool = True
) -> tuple[Path, ...]:
    """Every protected path of ``workdir`` (existing or not), less the ``allow``-ed ones.

    ``git_config=False`` skips asking git for what its config names (the file tools' quick
    refusal list, where the session's list is not at hand).
    """
    root = workdir.resolve()
    found: list[Path] = [root / name for name in (*OWN_FILES, *HOOK_MANAGER_FILES)]
    dotgit = root / ".git"
    gitdirs: list[Path] = []
    if dotgit.is_dir() and not dotgit.is_symlink():
        gitdirs.append(dotgit)
    elif dotgit.is_file():
        found.append(dotgit)  # the pointer a worktree or submodule follows
        gitdir = pointed_gitdir(dotgit)
        if gitdir is not None:
            gitdirs.append(gitdir)
            common = common_dir(gitdir)
            if common is not None:
                gitdirs.append(common)
    for gitdir in gitdirs:
        config = gitdir / "config"
        found += [gitdir / "hooks", config]
        found += _named_by(config, root, gitdir)
    found += git_dirs_below(root)
    if git_config:
        found += named_by_git_config(root)
    allowed = [path.resolve() for path in allow]
    unique = dict.fromkeys(path.resolve() for path in found)
    return tuple(
        path for path in unique if not any(path == a or path.is_relative_to(a) for a in allowed)
    )


def git_dirs_below(root: Path) -> list[Path]:
    """The git dirs below the top of ``root`` there are now, as paths to keep read-only.

    A ``.git`` below the top whole (a nested repository, a submodule's pointer), and of a
    folder shaped like a git dir (``tests/fixtures/repo.git``) what decides what git runs there.
    """
    from orchestrator.tools.products.gitdir import control_files, git_dir_shaped

    found: list[Path] = []
    for place in git_dir_shaped(root, [root / ".orchestrator"]):
        found += [place] if place.name == ".git" else control_files(place)
    return found


def hooks_directories(workdir: Path) -> tuple[Path, ...]:
    """The ``core.hooksPath`` folders, from any config level, that lie inside ``workdir``."""
    from orchestrator.tools.products.git import toplevel, user_config_values

    root = workdir.resolve()
    top = toplevel(root) or root
    found = []
    for _origin, key, value in user_config_values(root):
        if key.lower() == "core.hookspath" and value:
            target = _resolve_value(value, top)
            if target.is_relative_to(root):
                found.append(target)
    return tuple(dict.fromkeys(found))


def named_by_git_config(workdir: Path) -> list[Path]:
    """Files inside ``workdir`` that any level of git config runs or reads as config.

    ``core.hooksPath`` (relative to the top of the work tree), a program named by path
    (``core.fsmonitor = ./watch``, ``alias.x = !tools/x.sh``, a filter, a credential helper),
    and the config files themselves (an include of a file in the work directory).
    """
    from orchestrator.tools.products.git import toplevel, user_config_values

    root = workdir.resolve()
    values = user_config_values(root)
    if not values:
        return []
    top = toplevel(root) or root
    found: list[Path] = []
    origins: set[str] = set()
    for origin, key, value in values:
        if origin:
            origins.add(origin)
        lowered = key.lower()
        if lowered == "core.hookspath" and value:
            found.append(_resolve_value(value, top))
            continue
        if lowered.startswith("alias."):
            if not value.startswith("!"):
                continue  # a git subcommand, not a shell command
            command = value[1:]
        elif _COMMAND_KEY.search(lowered):
            command = value
        else:
            continue
        found += _named_in_command(command, top, root)
    for origin in origins:
        path = Path(origin)
        path = path if path.is_absolute() else (root / path)
        found.append(path.resolve())
        found += _named_by(path, root, path.parent)
    return [path for path in found if path.is_relative_to(root)]


def _named_in_command(command: str, top: Path, root: Path) -> list[Path]:
    """The files inside ``root`` a shell command names (git runs it from the top, ``top``).

    Parsed as the shell would split it (``sh -c '…'`` strings are split again): the first word
    when it is a path (``./watch``, ``tools/x.sh``), and any other word that is a path
    (``sh scripts/lint.sh``) or names a file there. Options, shell operators, the work
    directory itself and folders that hold it are not: they name no program.
    """
    found: list[Path] = []
    for index, word in enumerate(_words(command)):
        if not word or word.startswith("-") or all(c in "&|;<>()" for c in word):
            continue
        pathlike = "/" in word or word.startswith("~")
        target = _resolve_value(word, top)
        if not target.is_relative_to(root) or target == root:
            continue
        if (pathlike and (index == 0 or not target.is_dir())) or target.is_file():
            found.append(target)
    return found


def _words(command: str, depth: int = 0) -> list[str]:
    """The words of a shell command, a quoted command inside it split again (``sh -c '…'``)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        words = command.split()
    found: list[str] = []
    for word in words:
        if depth < 3 and any(c.isspace() for c in word):
            found += _words(word, depth + 1)
        else:
            found.append(word)
    return found


def _resolve_value(value: str, base: Path) -> Path:
    target = Path(os.path.expanduser(value))
    return (base / target).resolve() if not target.is_absolute() else target.resolve()


def pointed_gitdir(dotgit: Path) -> Path | None:
    """The gitdir a ``.git`` file names (``gitdir: PATH``)."""
    try:
        first = dotgit.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return None
    if not first.startswith("gitdir:"):
        return None
    target = Path(first.removeprefix("gitdir:").strip())
    return (dotgit.parent / target).resolve() if not target.is_absolute() else target.resolve()


def common_dir(gitdir: Path) -> Path | None:
    """The common git dir a worktree's gitdir names in its ``commondir`` file."""
    try:
        text = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    target = Path(text)
    return (gitdir / target).resolve() if not target.is_absolute() else target.resolve()


def _named_by(config: Path, root: Path, gitdir: Path) -> list[Path]:
    """``core.hooksPath`` and ``include``/``includeIf`` targets inside the work directory.

    Read as text, so a conditional include that is not active today is covered too.
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
        resolved = _resolve_value(value, base)
        if resolved.is_relative_to(root) or resolved.is_relative_to(gitdir):
            named.append(resolved)
    return named


def is_protected(target: Path, protected: Sequence[Path]) -> Path | None:
    """The protected path ``target`` lies at or under, or None."""
    for path in protected:
        if target == path or target.is_relative_to(path):
            return path
    return None


def in_git_dir(target: Path, root: Path) -> bool:
    """Whether ``target`` is a ``.git`` entry, or inside one, anywhere beneath ``root``."""
    if not target.is_relative_to(root):
        return False
    return ".git" in target.relative_to(root).parts


def why_protected(path: Path, root: Path) -> str:
    """The rule, in a few words, for an error or a warning."""
    name = path.name
    if name in OWN_FILES:
        return "orchestrator's next run reads it to decide what to start"
    if name == ".git" or in_git_dir(path, root):
        return "git reads it outside the sandbox (hooks, config, the repository's layout)"
    if path.is_relative_to(root) and str(path.relative_to(root)) in HOOK_MANAGER_FILES:
        return "a git hook manager runs what it says when the user commits"
    return "git runs what it says outside the sandbox (hooks, fsmonitor, aliases)"


# --- the person's globs --------------------------------------------------------------------


#: The names GNU make reads in a folder, in its order: a pattern naming one names them all.
MAKEFILE_NAMES = ("GNUmakefile", "makefile", "Makefile")


def _with_make_names(patterns: Sequence[str]) -> tuple[str, ...]:
    """``patterns``, each one that names a makefile followed by GNU make's other names for it.

    ``make`` reads ``GNUmakefile`` and then ``makefile`` before ``Makefile``, so protecting
    only ``Makefile`` would let the model put its own ``test`` target in front of it.
    """
    found: list[str] = []
    for pattern in patterns:
        found.append(pattern)
        head, slash, last = pattern.rpartition("/")
        if last in MAKEFILE_NAMES:
            found += [f"{head}{slash}{name}" for name in MAKEFILE_NAMES if name != last]
    return tuple(dict.fromkeys(found))


@attrs.frozen
class ProtectGlobs:
    """The ``protect`` setting: gitignore-style patterns relative to the work directory.

    A pattern that names a makefile names GNU make's other names for it too
    (:data:`MAKEFILE_NAMES`).
    """

    patterns: tuple[str, ...] = attrs.field(default=(), converter=_with_make_names)

    @property
    def empty(self) -> bool:
        return not self.patterns

    def matches(self, relative: str) -> bool:
        """Whether the path (relative to the work directory, ``/``-separated) is protected."""
        if not self.patterns:
            return False
        return bool(_spec(self.patterns).match_file(relative))

    def whole_directories(self, root: Path) -> tuple[Path, ...]:
        """Folders every file of which is protected (``tests/**``, ``tests/``): bound whole."""
        found = []
        for pattern in self.patterns:
            stem = pattern.removesuffix("/**").removesuffix("/")
            if stem == pattern or not stem or any(c in stem for c in "*?[!\\"):
                continue
            folder = (root / stem.lstrip("/")).resolve()
            if folder.is_dir() and folder.is_relative_to(root) and folder != root:
                found.append(folder)
        return tuple(found)

    def files(self, root: Path, skip: Sequence[Path] = ()) -> Iterator[Path]:
        """Every file or link beneath ``root`` a pattern matches (git dirs and ``skip`` not)."""
        if not self.patterns:
            return
        spec = _spec(self.patterns)
        skipped = {str(path) for path in skip}
        stack = [root]
        while stack:
            folder = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if entry.name == ".git" or entry.path in skipped:
                    continue
                relative = os.path.relpath(entry.path, root)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif spec.match_file(relative):
                    yield Path(entry.path)


_SPECS: dict[tuple[str, ...], PathSpec[Any]] = {}


def _spec(patterns: tuple[str, ...]) -> PathSpec[Any]:
    spec = _SPECS.get(patterns)
    if spec is None:
        import pathspec

        spec = pathspec.GitIgnoreSpec.from_lines(patterns)
        _SPECS[patterns] = spec
    return spec


# --- board stores ----------------------------------------------------------------------------

#: The files SQLite keeps beside a database, and the one its writers queue on (``-lock``).
_SQLITE_SIDECARS = ("-wal", "-shm", "-journal", "-lock")


def store_files(board: str | None, cwd: Path | None = None) -> tuple[Path, ...]:
    """The files a ``board`` setting keeps the board in; none for PostgreSQL or no board.

    A JSON file, or a SQLite file and its ``-wal``, ``-shm``, ``-journal`` and ``-lock``.
    """
    if not board or board.startswith(("postgresql://", "postgres://")):
        return ()
    base = cwd if cwd is not None else Path.cwd()
    if board.startswith("sqlite://"):
        raw = board.removeprefix("sqlite://")
        if not raw.startswith("/") or raw == "/":
            return ()
        raw = raw[1:] if raw.startswith("//") else raw
        database = Path(raw)
    elif board.endswith(".db"):
        database = Path(board)
    else:
        return ((base / board).resolve(),)
    database = (base / database).resolve()
    return (database, *(Path(f"{database}{suffix}") for suffix in _SQLITE_SIDECARS))


def stores_inside(board: str | None, workdir: Path) -> tuple[Path, ...]:
    """The store files of ``board`` that lie beneath ``workdir``."""
    root = workdir.resolve()
    return tuple(path for path in store_files(board) if path.is_relative_to(root))
