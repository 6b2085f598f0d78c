"""Which files a hook's command names, and what is in them.

A hook runs whatever is in the script it names when it runs, and a script in the work directory
is the model's to rewrite. So the files a command names inside the work directory are digested
(in the trust record, and when a session opens); a hook whose script changed does not run. The
files it names outside the work directory (``~/.claude/hooks/check.py``) are what the sandbox
must let it read. Naming is read from the words of the command as the shell would split them,
with ``~``, ``$HOME`` and ``$CLAUDE_PROJECT_DIR`` put in; a word that is no existing path is
no file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

import attrs

#: Folders every sandbox already shows (read-only) or replaces: never bound again by name,
#: least of all over the masked files under /etc.
_SYSTEM = tuple(
    Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
) + tuple(Path(p) for p in ("/proc", "/dev", "/sys", "/run"))
#: Top folders bound whole by no hook: they would hide the sandbox's own /tmp or show everyone's.
_TOPS = frozenset(Path(p) for p in ("/", "/tmp", "/home", "/root", "/var", "/opt", "/srv", "/mnt"))
_VARIABLE = re.compile(r"\$(?:\{(HOME|CLAUDE_PROJECT_DIR)\}|(HOME|CLAUDE_PROJECT_DIR)\b)")
_REDIRECT = re.compile(r"^[0-9]*[<>]+&?")


@attrs.frozen
class NamedFiles:
    """What a command names: the scripts it runs inside the work directory, paths outside it."""

    #: Programs and interpreters' scripts in the work directory (``./lint.sh``,
    #: ``python3 .claude/hooks/check.py``): what the hook's verdict comes from.
    inside: tuple[Path, ...] = ()
    #: Every existing path named outside the work directory: what a sandboxed hook may read.
    outside: tuple[Path, ...] = ()


def named_files(command: str, workdir: Path, home: Path | None = None) -> NamedFiles:
    """What ``command`` names, as the shell in ``workdir`` reads it."""
    home = Path.home() if home is None else home
    words = _words(command)
    inside: list[Path] = []
    for word in _programs(words):
        path = _as_path(word, workdir, home)
        if path is not None and path.is_relative_to(workdir) and path not in inside:
            inside.append(path)
    outside: list[Path] = []
    for word in _arguments(words):
        path = _as_path(word, workdir, home)
        if path is None or path in outside or path.is_relative_to(workdir):
            continue
        if _bindable(path, home):
            outside.append(path)
    return NamedFiles(tuple(path for path in inside if path != workdir), tuple(outside))


#: Words that run the next word: it is the program (or script), not an argument.
_WRAPPERS = frozenset({"env", "exec", "command", "nohup", "time", "nice", "setsid", "xargs"})
#: Interpreters whose first non-option argument is the script they run.
_INTERPRETERS = re.compile(
    r"(python|pypy|node|nodejs|deno|bun|tsx|ts-node|ruby|perl|php|lua|R|Rscript|"
    r"bash|sh|dash|zsh|ksh|fish|source|\.)[0-9.]*"
)
#: Shell operators after which a new command starts.
_SEPARATORS = frozenset({"&&", "||", "|", ";", "&", "(", ")", "{", "}", "!", "|&", ";;"})


def _programs(words: list[str]) -> list[str]:
    """The words that name what runs: each command's program, and an interpreter's script."""
    found: list[str] = []
    starting = True
    interpreter = False
    for word in words:
        if word in _SEPARATORS:
            starting, interpreter = True, False
        elif starting:
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word) or word in _WRAPPERS:
                continue  # VAR=value or a wrapper: the program is still to come
            found.append(word)
            starting = False
            interpreter = bool(_INTERPRETERS.fullmatch(Path(word).name))
        elif interpreter and word in ("-c", "-m", "-e", "--eval"):
            interpreter = False  # code or a module follows, not a file
        elif interpreter and not word.startswith("-"):
            found.append(word)
            interpreter = False
    return found


def _arguments(words: list[str]) -> list[str]:
    """Every word that may be a path (``--config=PATH`` gives its value too)."""
    found: list[str] = []
    for word in words:
        if word in _SEPARATORS:
            continue
        found.append(word)
        if word.startswith("-") and "=" in word:
            found.append(word.partition("=")[2])
    return found


def _words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # an unclosed quote: the shell refuses it too, but look anyway
        words = command.split()
    # A redirection's operator is no word of the command; its target is still a path.
    return [_REDIRECT.sub("", word) or word for word in words if _REDIRECT.sub("", word)]


def _as_path(word: str, workdir: Path, home: Path) -> Path | None:
    if not word or word.startswith("-") or "\x00" in word:
        return None
    values = {"HOME": str(home), "CLAUDE_PROJECT_DIR": str(workdir)}
    word = _VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], word)
    if word == "~" or word.startswith("~/"):
        word = str(home) + word[1:]
    if "$" in word or "*" in word:
        return None  # the shell decides what it is; nothing to pin or bind by name
    path = Path(os.path.normpath(workdir / word))
    try:
        path.lstat()
    except (OSError, ValueError):
        return None
    return path


def _bindable(path: Path, home: Path) -> bool:
    """Whether a path outside the work directory may be shown to a sandboxed hook by name.

    Never the root or the home folder itself (nor a folder above it): naming ``~`` must not
    hand a hook every credential under it.
    """
    if any(path == top or path.is_relative_to(top) for top in _SYSTEM):
        return False
    return not (path in _TOPS or home == path or home.is_relative_to(path))


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes; "" for a folder or a file that cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def digests(paths: Iterable[Path], workdir: Path) -> dict[str, str]:
    """Each file among ``paths`` by its path relative to ``workdir``, with its digest now."""
    found: dict[str, str] = {}
    for path in paths:
        if path.is_file():
            found[os.path.relpath(path, workdir)] = file_digest(path)
    return found


def changed(recorded: Mapping[str, str], workdir: Path) -> list[str]:
    """Which of ``recorded``'s files (relative to ``workdir``) differ from their digest now."""
    return [name for name, digest in recorded.items() if file_digest(workdir / name) != digest]
