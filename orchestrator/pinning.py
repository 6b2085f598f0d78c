"""What a configured command runs from the work directory, and pinning it by what it holds.

Hooks and MCP servers run commands a person wrote, and the model writes the work directory
those commands look in. So a command is read word by word, as the shell (or, for a server,
``exec``) would run it, and what it runs from the work directory is *pinned*: each path with
its :func:`state` (a file's sha256, :data:`ABSENT`) is kept in the trust record and when a
session opens, and :func:`pin_problem` says why a command may not run once one differs.

Interpreters are read by their own rules: ``python -c`` and ``node -e`` are code, ``sh -e``
is a flag and ``sh -c`` a command read in turn, ``python -W x`` and ``node -r x`` take an
argument. A ``python -m`` module or a ``node`` script's ``node_modules`` are looked up where
they would resolve inside the work directory: a ``node_modules`` folder that is not there is
pinned as absent. What runs from the work directory and cannot be pinned (a folder of modules,
a virtual environment, a word only the shell can expand, a form this reading does not know) is
named in :attr:`Reading.refusal`: a command that runs with the user's rights is refused for it.

``~``, ``$HOME`` and ``$CLAUDE_PROJECT_DIR`` are put in first; a word that is no existing path
is no file. Existing paths named outside the work directory are what a sandboxed hook may read.
What a pinned script itself reads, sources or imports by a path it sets is not followed.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

#: The state of a pinned path that is not there (a ``node_modules`` that must stay absent).
ABSENT = "absent"
#: The state of a pinned path that is a folder.
FOLDER = "folder"

#: Folders every sandbox already shows (read-only) or replaces: never bound again by name,
#: least of all over the masked files under /etc.
_SYSTEM = tuple(
    Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
) + tuple(Path(p) for p in ("/proc", "/dev", "/sys", "/run"))
#: Top folders bound whole by no hook: they would hide the sandbox's own /tmp or show everyone's.
_TOPS = frozenset(Path(p) for p in ("/", "/tmp", "/home", "/root", "/var", "/opt", "/srv", "/mnt"))
_VARIABLE = re.compile(r"\$(?:\{(HOME|CLAUDE_PROJECT_DIR)\}|(HOME|CLAUDE_PROJECT_DIR)\b)")
_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.DOTALL)
#: Characters that leave a word to the shell: a variable, a pattern, a substitution.
_EXPANDED = re.compile(r"[$*?`\[]")
#: What a command substitution is read as once its command is read apart: a variable no
#: environment sets, so the word it is in is one only the shell can expand.
SUBSTITUTED = "${__substituted__}"


def state(path: Path) -> str:
    """What ``path`` holds now: a file's sha256, :data:`ABSENT`, :data:`FOLDER` or a word."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return "a link to nothing" if os.path.lexists(path) else ABSENT
    except OSError:
        return "unreadable"
    if stat.S_ISDIR(info.st_mode):
        return FOLDER
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"  # a FIFO is never opened: it would block
    try:
        with path.open("rb") as stream:
            return hashlib.file_digest(stream, "sha256").hexdigest()
    except OSError:
        return "unreadable"


@attrs.frozen
class Reading:
    """What one command runs from the work directory, and what it names outside it."""

    #: Paths in the work directory whose state decides what runs (files; absent folders).
    pinned: tuple[Path, ...] = ()
    #: Existing paths named outside the work directory: what a sandboxed hook may read.
    outside: tuple[Path, ...] = ()
    #: What runs from the work directory and cannot be pinned, one phrase each.
    unpinnable: tuple[str, ...] = ()
    #: What of the command this reading does not follow, one phrase each.
    unclear: tuple[str, ...] = ()
    #: Whether a word names the work directory or something in it (or may: ``$(…)``, ``*``).
    names_inside: bool = False

    @property
    def refusal(self) -> str:
        """Why the command may not run with the user's rights; "" when all it runs is pinned."""
        if self.unpinnable:
            return f"what it runs cannot be pinned: {self.unpinnable[0]}"
        if self.unclear and self.names_inside:
            return (
                f"what it runs cannot be pinned: {self.unclear[0]}, and it may name the work "
                "directory (fail closed)"
            )
        return ""

    def pins(self, workdir: Path) -> dict[str, str]:
        """Each pinned path, relative to ``workdir``, with its state now."""
        return {os.path.relpath(path, workdir): state(path) for path in self.pinned}


def read_shell(
    command: str,
    workdir: Path,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Reading:
    """What ``command``, run by ``sh -c`` in ``workdir``, runs from ``workdir``."""
    reader = _Reader.start(workdir, workdir, home, environ)
    reader.shell(command)
    return reader.reading()


def read_argv(
    argv: Sequence[str],
    cwd: Path,
    workdir: Path,
    *,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Reading:
    """What ``argv``, started without a shell in ``cwd``, runs from ``workdir``."""
    reader = _Reader.start(workdir, cwd, home, environ)
    reader.command(list(argv), shell=False)
    return reader.reading()


def pin_problem(
    now: Mapping[str, str],
    workdir: Path,
    *,
    trusted: Mapping[str, str],
    started: Mapping[str, str] | None = None,
    outside: bool,
) -> str | None:
    """Why a command whose pinned paths hold ``now`` may not run, or None.

    ``trusted``: the states a person trusted (what they trusted wins, whatever a path held in
    between); ``started``: the states when the session opened (None for a command that starts
    once, at the start); ``outside``: it runs with the user's rights, so a file in the work
    directory nobody trusted does not run either.
    """
    for name in dict.fromkeys([*now, *(started or {})]):
        current = now[name] if name in now else state(workdir / name)
        recorded = trusted.get(name)
        if recorded is not None:
            if recorded != current:
                return f"{name} {_change(recorded, current)} since the folder was trusted"
            continue
        if started is not None and name not in started:
            if current != ABSENT:
                return f"{name} appeared during this run"
            continue
        if started is not None and started[name] != current:
            return f"{name} {_change(started[name], current)} during this run"
        if outside and current != ABSENT:
            return f"{name} is in the work directory and was not trusted"
    return None


def shown(now: str) -> str:
    """A pinned path's state as a person reads it."""
    if now == ABSENT:
        return "must stay absent"
    if now == FOLDER:
        return "a folder (what is in it is not pinned)"
    return f"sha256 {now}" if re.fullmatch(r"[0-9a-f]{64}", now) else now


def _change(before: str, after: str) -> str:
    if after == ABSENT:
        return "was removed"
    return "appeared" if before == ABSENT else "changed"


# --- how programs read their options ---------------------------------------------------------


@attrs.frozen
class _Options:
    """How one program reads its options; each maps an option to what its argument is.

    Roles: ``flag`` (takes nothing), ``attached`` (the rest of the word is its argument, if
    any), ``code`` (inline code: nothing to pin), ``command`` (a shell command, read in turn),
    ``commands`` (a shell's ``-c``: its first operand is a command), ``stdin`` (the script
    comes on stdin), ``value`` (an argument that is no code), ``module`` (a module it loads),
    ``path`` (a file or folder it loads code from), ``chdir``, ``script`` (the script itself).
    """

    kind: str
    short: Mapping[str, str] = attrs.field(factory=dict)
    long: Mapping[str, str] = attrs.field(factory=dict)
    #: Whether a long option this table does not name is a flag (node has hundreds).
    loose_long: bool = False
    #: Whether the first operand is the script (a wrapper's is the program it runs).
    operand_is_script: bool = True


def _letters(letters: str, role: str) -> dict[str, str]:
    return dict.fromkeys(letters, role)


_PYTHON = _Options(
    "python",
    {**_letters("bBdEhiIOPqsSuvVxR?", "flag"), "c": "code", "m": "module", "W": "value"}
    | {"X": "value"},
    {
        **dict.fromkeys(("--help", "--version", "--help-env", "--help-xoptions"), "flag"),
        "--help-all": "flag",
        "--check-hash-based-pycs": "value",
    },
)
_NODE = _Options(
    "node",
    {**_letters("civh", "flag"), "e": "code", "p": "code", "r": "module", "C": "value"},
    {
        "--eval": "code",
        "--print": "code",
        **dict.fromkeys(("--require", "--import", "--loader", "--experimental-loader"), "module"),
        **dict.fromkeys(
            (
                "--env-file",
                "--env-file-if-exists",
                "--openssl-config",
                "--snapshot-blob",
                "--icu-data-dir",
            ),
            "path",
        ),
        **dict.fromkeys(
            (
                "--input-type",
                "--title",
                "--conditions",
                "--inspect-port",
                "--debug-port",
                "--test-reporter",
                "--test-reporter-destination",
                "--test-name-pattern",
                "--redirect-warnings",
                "--diagnostic-dir",
                "--report-dir",
                "--watch-path",
            ),
            "value",
        ),
    },
    loose_long=True,
)
_SHELL = _Options(
    "shell",
    {**_letters("abefhkmnptuvxBCEHPilrT", "flag"), "c": "commands", "s": "stdin"}
    | {"o": "value", "O": "value"},
    {
        **dict.fromkeys(
            (
                "--norc",
                "--noprofile",
                "--login",
                "--posix",
                "--restricted",
                "--verbose",
                "--version",
                "--help",
                "--noediting",
                "--debugger",
                "--dump-strings",
                "--dump-po-strings",
                "--protected",
            ),
            "flag",
        ),
        "--rcfile": "path",
        "--init-file": "path",
    },
)
_PERL = _Options(
    "perl",
    {
        **_letters("acnpsStTuUwWXhv", "flag"),
        **_letters("l0123456789iFCDdxV", "attached"),
        "e": "code",
        "E": "code",
        "M": "value",  # perl's @INC has no "." (5.26 on): a module never comes from the folder
        "m": "value",
        "I": "path",
    },
)
_RUBY = _Options(
    "ruby",
    {
        **_letters("acdlnpsSvwyUh", "flag"),
        **_letters("W0FixKT", "attached"),
        "e": "code",
        "r": "module",
        "I": "path",
        "C": "chdir",
        "E": "value",
    },
    {
        **dict.fromkeys(
            ("--verbose", "--version", "--help", "--copyright", "--yjit", "--jit"), "flag"
        ),
        **dict.fromkeys(("--disable-gems", "--enable-gems", "--disable", "--enable"), "value"),
    },
)
_NPX = _Options(
    "npx",
    {"y": "flag", "q": "flag", "s": "flag", "p": "module", "c": "command"},
    {
        **dict.fromkeys(("--yes", "--no", "--quiet", "--silent", "--no-install"), "flag"),
        "--package": "module",
        "--call": "command",
    },
)
#: Programs that run the program named after their options.
_WRAPPERS: Mapping[str, _Options] = {
    "env": _Options(
        "env",
        {**_letters("i0v", "flag"), "u": "value", "C": "chdir", "S": "command"},
        {
            "--ignore-environment": "flag",
            "--null": "flag",
            "--unset": "value",
            "--chdir": "chdir",
            "--split-string": "command",
            "--debug": "flag",
        },
        operand_is_script=False,
    ),
    "exec": _Options("exec", {"c": "flag", "l": "flag", "a": "value"}, operand_is_script=False),
    "command": _Options("command", {"p": "flag"}, operand_is_script=False),
    "nohup": _Options("nohup", operand_is_script=False),
    "time": _Options("time", {"p": "flag"}, operand_is_script=False),
    "nice": _Options("nice", {"n": "value"}, {"--adjustment": "value"}, operand_is_script=False),
    "setsid": _Options("setsid", _letters("cfw", "flag"), operand_is_script=False),
    "stdbuf": _Options("stdbuf", _letters("ioe", "value"), operand_is_script=False),
    "timeout": _Options(
        "timeout",
        {"s": "value", "k": "value", "v": "flag"},
        {
            "--signal": "value",
            "--kill-after": "value",
            "--preserve-status": "flag",
            "--foreground": "flag",
            "--verbose": "flag",
        },
        operand_is_script=False,
    ),
    "xargs": _Options(
        "xargs",
        {**_letters("0optrx", "flag"), **_letters("dEeIiLlnPs", "value"), "a": "path"},
        {"--arg-file": "path", "--null": "flag", "--no-run-if-empty": "flag"},
        operand_is_script=False,
    ),
}
_INTERPRETERS: tuple[tuple[re.Pattern[str], _Options], ...] = (
    (re.compile(r"(python|pypy)[0-9.]*"), _PYTHON),
    (re.compile(r"node|nodejs|tsx|ts-node"), _NODE),
    (re.compile(r"sh|bash|dash|zsh|ksh|mksh|ash|yash|posh"), _SHELL),
    (re.compile(r"perl[0-9.]*"), _PERL),
    (re.compile(r"ruby[0-9.]*"), _RUBY),
    (re.compile(r"npx|bunx"), _NPX),
)
#: Interpreters and launchers this reading does not follow (their own module lookup, a
#: project file that says what runs): a command naming the work directory through one of
#: them is not understood.
_UNFOLLOWED = re.compile(
    r"php[0-9.]*|lua[0-9.]*|luajit|deno|bun|fish|tclsh[0-9.]*|wish|awk|gawk|mawk|nawk|osascript|"
    r"R|Rscript|julia|pwsh|powershell|java|sudo|doas|su|uv|uvx|poetry|pipenv|pdm|hatch|rye|"
    r"pipx|conda|mamba|npm|pnpm|yarn"
)
#: Shell builtins that run nothing by a path.
_BUILTINS = frozenset(
    {
        *("cd", "echo", "printf", "test", "[", "[[", "]]", "true", "false", "exit", "return"),
        *("export", "set", "unset", "read", ":", "shift", "trap", "wait", "kill", "pwd", "let"),
        *("local", "declare", "typeset", "alias", "ulimit", "umask", "getopts", "break"),
        *("continue", "times", "hash", "type", "readonly"),
    }
)
#: Programs whose words are data, never code they run: a file they name is read, not pinned.
_READERS = frozenset(
    {
        *("cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "jq", "touch", "mkdir", "rm"),
        *("rmdir", "cp", "mv", "ln", "ls", "stat", "date", "sleep", "tee", "diff", "cmp", "sort"),
        *("uniq", "cut", "tr", "basename", "dirname", "realpath", "readlink", "notify-send"),
        *("logger", "chmod", "file", "sha256sum", "md5sum", "base64"),
    }
)
#: Words after which the next word is a command's program.
_STARTS = frozenset({"if", "then", "elif", "else", "do", "while", "until", "!", "{", "("})
_ENDS = frozenset({"fi", "done", "esac", "}", ")"})
_UNFOLLOWED_KEYWORDS = frozenset({"for", "case", "select", "function", "coproc", "pushd", "popd"})
#: Shell operators after which a new command starts.
_SEPARATORS = frozenset({"&&", "||", "|", ";", "&", "|&", ";;", ";&", ";;&", "(", ")"})
#: Variables that make an interpreter load code from where they point.
_SEARCH_PATHS = frozenset({"PYTHONPATH", "NODE_PATH", "PERL5LIB", "RUBYLIB", "LD_LIBRARY_PATH"})
_LOADED_FILES = frozenset(
    {"NODE_OPTIONS", "PERL5OPT", "RUBYOPT", "LD_PRELOAD", "BASH_ENV", "ENV", "PYTHONSTARTUP"}
)
_PYTHONHOME = "PYTHONHOME"
#: What node tries after a path without its extension.
_NODE_EXTENSIONS = (".js", ".cjs", ".mjs", ".json", ".node")


# --- the reader --------------------------------------------------------------------------------


@attrs.define
class _Reader:
    """One command's reading as it goes; mutation is the point (it collects as it reads)."""

    workdir: Path
    home: Path
    environ: Mapping[str, str]
    #: The folders relative words may be taken from (``cd`` adds one; all are looked in).
    cwds: list[Path]
    pinned: list[Path] = attrs.Factory(list)
    outside: list[Path] = attrs.Factory(list)
    unpinnable: list[str] = attrs.Factory(list)
    unclear: list[str] = attrs.Factory(list)
    names_inside: bool = False

    @classmethod
    def start(
        cls,
        workdir: Path,
        cwd: Path,
        home: Path | None,
        environ: Mapping[str, str] | None,
    ) -> _Reader:
        root = Path(os.path.normpath(workdir.resolve()))
        reader = cls(
            root,
            Path.home() if home is None else home,
            os.environ if environ is None else environ,
            [Path(os.path.normpath(cwd if cwd.is_absolute() else root / cwd))],
        )
        for name, value in reader.environ.items():
            reader.variable(name, value)
        return reader

    def reading(self) -> Reading:
        return Reading(
            tuple(dict.fromkeys(self.pinned)),
            tuple(dict.fromkeys(self.outside)),
            tuple(dict.fromkeys(self.unpinnable)),
            tuple(dict.fromkeys(self.unclear)),
            self.names_inside,
        )

    # --- where a word points ---------------------------------------------------------------

    def inside(self, path: Path) -> bool:
        if path.is_relative_to(self.workdir):
            return True
        try:
            return path.resolve().is_relative_to(self.workdir)
        except (OSError, RuntimeError):
            return True  # a loop of links: not known, so not trusted to be elsewhere

    def relative(self, path: Path) -> str:
        return os.path.relpath(path, self.workdir)

    def candidates(self, word: str, *, shell: bool, strict: bool = True) -> list[Path]:
        """Where ``word`` may point (one path per folder it may be taken from); [] for none.

        A word the shell expands (a variable other than those put in, a pattern, what a
        substitution prints) points nowhere known: when it may point into the work directory
        and it is ``strict`` (it may run), that is said.
        """
        if not word or "\x00" in word:
            return []
        if shell:
            values = {"HOME": str(self.home), "CLAUDE_PROJECT_DIR": str(self.workdir)}
            word = _VARIABLE.sub(lambda m: values[m.group(1) or m.group(2)], word)
            if word == "~" or word.startswith("~/"):
                word = str(self.home) + word[1:]
            if _EXPANDED.search(word):
                literal = _EXPANDED.split(word, maxsplit=1)[0]
                if strict and self.may_be_inside(literal, word):
                    shown = word.replace(SUBSTITUTED, "$(…)")
                    self.unclear.append(f"`{shown}` is a word only the shell can expand")
                    self.names_inside = True
                return []
        if os.path.isabs(word):
            return [Path(os.path.normpath(word))]
        return [Path(os.path.normpath(cwd / word)) for cwd in self.cwds]

    def may_be_inside(self, literal: str, word: str) -> bool:
        """Whether a word the shell expands, starting with ``literal``, may be in the folder.

        One that starts with another variable (``$TOOLS/x``) is the user's to point; what a
        substitution prints is anyone's guess.
        """
        if not literal:
            return not word.startswith("$") or word.startswith(SUBSTITUTED)
        if not literal.startswith("/"):
            return True
        return self.inside(Path(os.path.normpath(literal))) or str(self.workdir).startswith(literal)

    def existing(self, word: str, *, shell: bool, strict: bool = True) -> list[Path]:
        found = []
        for path in self.candidates(word, shell=shell, strict=strict):
            if os.path.lexists(path):
                found.append(path)
                if self.inside(path):
                    self.names_inside = True
        return found

    def data(self, word: str, *, shell: bool, pin: bool) -> None:
        """A word a program reads: a path outside may be shown; a file inside, pinned.

        Unless ``pin``, the program only reads it (``cat``, a pinned script's arguments): a
        word only the shell can expand is then no matter.
        """
        if word.startswith("-"):
            _option, equals, value = word.partition("=")
            if equals and value:
                self.data(value, shell=shell, pin=pin)
            return
        for path in self.existing(word, shell=shell, strict=pin):
            if self.inside(path):
                if pin and path.is_file():
                    self.pinned.append(path)
            elif _bindable(path, self.home):
                self.outside.append(path)

    def loaded(self, word: str, what: str, *, shell: bool) -> None:
        """A file or folder code is loaded from: a file inside is pinned, a folder cannot be."""
        for path in self.candidates(word, shell=shell):
            if not self.inside(path):
                if os.path.lexists(path) and _bindable(path, self.home):
                    self.outside.append(path)
                continue
            self.names_inside = True
            self.pinned.append(path)  # a file, absent (it must stay so), or a folder (as one)
            if os.path.isdir(path):
                self.unpinnable.append(f"{what} loads code from the folder {self.relative(path)}/")

    # --- the environment ---------------------------------------------------------------------

    def variable(self, name: str, value: str) -> None:
        """A variable that makes an interpreter load code from where it points."""
        if not value:
            return
        if name in _SEARCH_PATHS:
            for part in value.split(":"):
                self.search_path(part or ".", f"${name}")
        elif name in _LOADED_FILES:
            for word in value.split():
                if not word.startswith("-"):
                    self.loaded(word, f"${name}", shell=False)
        elif name == _PYTHONHOME:
            self.search_path(value, f"${name}")

    def search_path(self, entry: str, what: str) -> None:
        for path in self.candidates(entry, shell=False):
            if self.inside(path):
                self.names_inside = True
                self.pinned.append(path)  # absent, it must stay so
                if os.path.lexists(path):
                    self.unpinnable.append(
                        f"{what} looks for modules in {self.relative(path) or '.'}/ in the work "
                        "directory"
                    )

    # --- the shell ---------------------------------------------------------------------------

    def shell(self, command: str) -> None:
        """A line ``sh -c`` runs: each simple command in turn."""
        command, substituted, why = _substitutions(command)
        if why:
            self.unclear.append(why)
            self.names_inside = True  # what it holds is known only when it runs
        for inner in substituted:
            self.shell(inner)
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            self.unclear.append("a quote is not closed")
            self.names_inside = True
            tokens = command.split()
        words: list[str] = []
        redirect = ""
        for token in tokens:
            if redirect:
                if "<" in redirect and not token.isdigit() and token != "-":
                    self.data(token, shell=True, pin=True)  # what the command reads
                redirect = ""
            elif token in _SEPARATORS or (token in _ENDS and not words):
                self.command(words, shell=True)
                words = []
            elif re.fullmatch(r"[<>&|;()]+", token):
                if "<" in token or ">" in token:
                    redirect = token
                else:  # an operator this reading does not split on: a new command all the same
                    self.command(words, shell=True)
                    words = []
            else:
                words.append(token)
        self.command(words, shell=True)

    # --- one command ------------------------------------------------------------------------

    def command(self, words: list[str], *, shell: bool) -> None:
        """One simple command: its assignments, its program, and what the program runs."""
        while words and shell and (match := _ASSIGNMENT.fullmatch(words[0])):
            self.variable(match.group(1), match.group(2))
            words = words[1:]
        if not words:
            return
        word, rest = words[0], words[1:]
        if shell and word in _STARTS:
            self.command(rest, shell=shell)
            return
        if shell and word in _ENDS:
            return
        if shell and word in _UNFOLLOWED_KEYWORDS:
            self.unclear.append(f"`{word}` is a form this reading does not follow")
            for other in rest:
                self.data(other, shell=shell, pin=True)
            return
        name = os.path.basename(word)
        if shell and word == "cd":
            self.change_directory(rest)
            return
        if shell and word in ("source", "."):
            if rest:
                self.script(rest[0], None, shell=shell)
            return
        if shell and word == "eval":
            self.shell(" ".join(rest))
            return
        if shell and word in _BUILTINS:
            for other in rest:
                self.data(other, shell=shell, pin=False)
            return
        if name in _READERS:
            self.program(word, shell=shell)
            for other in rest:
                self.data(other, shell=shell, pin=False)
            return
        if word in _WRAPPERS:
            self.options(_WRAPPERS[word], word, rest, shell=shell)
            return
        self.program(word, shell=shell)
        for pattern, options in _INTERPRETERS:
            if pattern.fullmatch(name):
                self.options(options, name, rest, shell=shell)
                return
        if _UNFOLLOWED.fullmatch(name):
            self.unclear.append(f"`{name}` runs what this reading does not follow")
        for other in rest:  # an unknown program may take any of these as code: pinned
            self.data(other, shell=shell, pin=True)

    def change_directory(self, rest: list[str]) -> None:
        target = [word for word in rest if not word.startswith("-")]
        if not target:
            self.cwds.append(self.home)
        elif target[0] == "-":
            self.unclear.append("`cd -` goes where this reading cannot follow")
        else:
            found = self.candidates(target[0], shell=True)
            if not found and _EXPANDED.search(target[0]):
                self.unclear.append(f"`cd {target[0]}` goes where this reading cannot follow")
            for path in found:
                if self.inside(path):
                    self.names_inside = True
                elif os.path.isdir(path) and _bindable(path, self.home):
                    self.outside.append(path)
                self.cwds.append(path)

    def program(self, word: str, *, shell: bool) -> None:
        """Where the program ``word`` is found; one in the work directory is pinned."""
        if shell and _EXPANDED.search(_VARIABLE.sub("", word)):
            self.candidates(word, shell=shell)  # says so when it may be in the work directory
            return
        if "/" in word:
            found = self.existing(word, shell=shell) or self.candidates(word, shell=shell)[:1]
        else:
            found = self.on_path(word)
        for path in found:
            if not self.inside(path):
                if "/" in word and os.path.lexists(path) and _bindable(path, self.home):
                    self.outside.append(path)  # ~/.claude/hooks/check.sh: shown to the sandbox
                continue
            self.pinned.append(path)  # absent now (a folder $PATH looks in first), it stays so
            if not os.path.lexists(path):
                continue
            self.names_inside = True
            for folder in path.parents:
                if not folder.is_relative_to(self.workdir):
                    break
                if (folder / "pyvenv.cfg").exists() or folder.name == "node_modules":
                    self.unpinnable.append(
                        f"it runs {self.relative(path)} from {self.relative(folder)}/ in the "
                        "work directory, with the packages installed there"
                    )
                    break

    def on_path(self, name: str) -> list[Path]:
        """``$PATH``'s ``name``: each place in the work directory looked in first, and it."""
        looked: list[Path] = []
        for entry in self.environ.get("PATH", os.defpath).split(":"):
            folder = Path(os.path.normpath(self.cwds[0] / (entry or ".")))
            candidate = folder / name
            if self.inside(candidate):
                looked.append(candidate)  # absent now, it must stay so; present, it runs
                if candidate.is_file():
                    return looked
            elif candidate.is_file() and os.access(candidate, os.X_OK):
                return looked
        return looked

    # --- an interpreter's or a wrapper's options ---------------------------------------------

    def options(self, table: _Options, name: str, words: list[str], *, shell: bool) -> None:
        """Read ``words`` as ``table`` says; then the script, or the program, and its words."""
        index, mode = 0, ""
        while index < len(words) and mode != "code":
            word = words[index]
            if word == "--":
                index += 1
                break
            if len(word) < 2 or word[0] not in "-+" or (word[0] == "+" and table.kind != "shell"):
                break
            read, taken = self.option_word(table, name, word, words[index + 1 : index + 2])
            index += 1 + taken
            for role, argument in read:
                mode = self.argument(table, name, role, argument, shell=shell) or mode
        self.operands(table, words[index:], mode, shell=shell)

    def option_word(
        self, table: _Options, name: str, word: str, following: list[str]
    ) -> tuple[list[tuple[str, str | None]], int]:
        """One option word (``--eval=x``, ``-Bu``, ``-Wignore``, ``-ec``, ``+o x``), read.

        Each option's role and argument, and how many words after it were its argument.
        """
        if word.startswith("--"):
            option, equals, value = word.partition("=")
            role = table.long.get(option)
            if role is None:
                if not table.loose_long:
                    self.unclear.append(f"`{name} {option}` is an option not known here")
                return [], 0
            if role == "flag" or equals:
                return [(role, value if equals else None)], 0
            return [(role, following[0] if following else None)], len(following)
        found: list[tuple[str, str | None]] = []
        letters = word[1:]
        for position, letter in enumerate(letters):
            role = table.short.get(letter)
            if role is None:
                self.unclear.append(f"`{name} {word[0]}{letter}` is an option not known here")
                break
            if role in ("flag", "commands", "stdin"):
                found.append((role, None))
                continue
            if role != "attached":  # an attached one's argument is the rest of the word, if any
                rest = letters[position + 1 :]
                if rest:
                    found.append((role, rest))
                else:
                    found.append((role, following[0] if following else None))
                    return found, len(following)
            break
        return found, 0

    def argument(
        self, table: _Options, name: str, role: str, argument: str | None, *, shell: bool
    ) -> str:
        """One option, by its role; the mode it puts the operands in.

        "code": they are data; "commands": the first is a shell command; "stdin": the script
        comes on stdin.
        """
        if role in ("commands", "stdin", "code"):
            return role
        if argument is None:
            return ""
        if role == "command":
            self.shell(argument)
            return "code"
        if role == "path":
            self.loaded(argument, f"`{name}`", shell=shell)
        elif role == "chdir":
            for path in self.candidates(argument, shell=shell):
                self.names_inside = self.names_inside or self.inside(path)
                self.cwds.append(path)
        elif role == "module":
            self.module(table, name, argument, shell=shell)
        elif role == "value":
            self.data(argument, shell=shell, pin=False)
        return ""

    def operands(self, table: _Options, operands: list[str], mode: str, *, shell: bool) -> None:
        """What follows the options: the program a wrapper runs, or the script and its words."""
        if not table.operand_is_script:
            if mode == "code":  # env -S: its string was the command; these are its words
                operands = []
            if table.kind == "timeout":
                operands = operands[1:]  # the duration
            while table.kind == "env" and operands and _ASSIGNMENT.fullmatch(operands[0]):
                variable, _, value = operands[0].partition("=")
                self.variable(variable, value)
                operands = operands[1:]
            self.command(operands, shell=shell)
            return
        if operands and mode == "commands":
            self.shell(operands[0])
            operands = operands[1:]
        elif operands and not mode:
            if table.kind == "npx":
                self.npx_package(operands[0])
            else:
                self.script(operands[0], table, shell=shell)
            operands = operands[1:]
        if table.kind == "node" and mode == "code":
            self.node_modules_from(self.cwds[0])  # the code's own require() looks from here
        for other in operands:
            self.data(other, shell=shell, pin=table.kind == "npx")

    # --- scripts and modules -----------------------------------------------------------------

    def script(self, word: str, table: _Options | None, *, shell: bool) -> None:
        """The script an interpreter runs: pinned in the work directory; a folder cannot be."""
        for path in self.candidates(word, shell=shell):
            if not self.inside(path):
                if os.path.lexists(path) and _bindable(path, self.home):
                    self.outside.append(path)
                continue
            if not os.path.lexists(path):
                continue  # no file yet: one that appears is seen then
            self.names_inside = True
            self.pinned.append(path)
            if os.path.isdir(path):
                self.unpinnable.append(f"it runs the folder {self.relative(path)}/")
                continue
            if table is not None and table.kind == "node":
                self.node_modules_from(path.parent)

    def module(self, table: _Options, name: str, module: str, *, shell: bool) -> None:
        """A module an option loads (``python -m``, ``node -r``, ``npx -p``, ``ruby -r``)."""
        by_path = module.startswith((".", "/"))
        if table.kind == "python":
            self.python_module(module)
        elif table.kind == "node" and by_path:
            self.node_file(module, shell=shell)
        elif table.kind == "node":
            self.node_modules_from(self.cwds[0])
        elif table.kind == "npx":
            self.npx_package(module)
        elif table.kind == "ruby" and by_path:
            file = module if module.endswith(".rb") else f"{module}.rb"
            self.loaded(file, f"`{name} -r`", shell=shell)

    def python_module(self, module: str) -> None:
        """``python -m MOD`` started in the work directory: a development install's module.

        ``PYTHONSAFEPATH`` keeps the working directory off ``sys.path``, but a project
        installed in development mode still resolves from the work directory, from its top
        folder or ``src/``. A module file there is pinned; a python that runs it with the
        user's rights is refused all the same, as it may load a cached copy from
        ``__pycache__``. Started elsewhere (a user's MCP server), the module is the user's.
        """
        if not any(cwd.is_relative_to(self.workdir) for cwd in self.cwds):
            return
        top = module.split(".", maxsplit=1)[0]
        for folder in (self.workdir, self.workdir / "src"):
            for path in (folder / f"{top}.py", folder / top):
                if not os.path.lexists(path):
                    continue
                self.names_inside = True
                self.pinned.append(path)
                self.unpinnable.append(
                    f"`python -m {module}` may load {self.relative(path)} from the work directory"
                )
                return

    def node_file(self, word: str, *, shell: bool) -> None:
        """A module named by path (``node -r ./setup``): the file node would load.

        The names node tries before it are pinned too: absent, they must stay so.
        """
        for path in self.candidates(word, shell=shell):
            for candidate in (path, *(Path(f"{path}{ext}") for ext in _NODE_EXTENSIONS)):
                if not self.inside(candidate):
                    if candidate.is_file() and _bindable(candidate, self.home):
                        self.outside.append(candidate)
                        break
                    continue
                self.names_inside = True
                self.pinned.append(candidate)
                if candidate.is_dir():
                    self.unpinnable.append(f"node loads the folder {self.relative(candidate)}/")
                    break
                if candidate.is_file():
                    break

    def node_modules_from(self, folder: Path) -> None:
        """The ``node_modules`` node looks in, from ``folder`` up, inside the work directory."""
        for current in (folder, *folder.parents):
            if not current.is_relative_to(self.workdir):
                break
            modules = current / "node_modules"
            self.pinned.append(modules)  # absent: a planted one would be loaded
            if os.path.lexists(modules):
                self.names_inside = True
                self.unpinnable.append(
                    f"node would load modules from {self.relative(modules)}/ in the work directory"
                )

    def npx_package(self, spec: str) -> None:
        """``npx PKG``: a copy in the work directory's ``node_modules`` would run first."""
        if spec.startswith((".", "/", "file:")):
            self.loaded(spec.removeprefix("file:"), "`npx`", shell=False)
            return
        scoped = spec.startswith("@")
        package = ("@" if scoped else "") + spec[1 if scoped else 0 :].split("@", maxsplit=1)[0]
        binary = package.rsplit("/", 1)[-1]
        for current in (self.cwds[0], *self.cwds[0].parents):
            if not current.is_relative_to(self.workdir):
                break
            for path in (
                current / "node_modules" / package,
                current / "node_modules" / ".bin" / binary,
            ):
                self.pinned.append(path)  # absent: a planted one would run
                if os.path.lexists(path):
                    self.names_inside = True
                    self.unpinnable.append(
                        f"npx would run {self.relative(path)} from the work directory"
                    )


def _substitutions(command: str) -> tuple[str, list[str], str]:
    """The line with each ``$(…)``, `` `…` ``, ``<(…)`` put aside, and their commands.

    Third, why the rest cannot be read: "", a here-document, a substitution not closed.
    """
    kept: list[str] = []
    bodies: list[str] = []
    quote = ""
    index = 0
    while index < len(command):
        character, pair = command[index], command[index : index + 2]
        if character == "\\" and quote != "'":
            kept.append(pair)
            index += 2
            continue
        if quote == "'":
            quote = "" if character == "'" else quote
            kept.append(character)
            index += 1
            continue
        if character in "'\"" and quote in ("", character):
            quote = "" if quote else character
            kept.append(character)
            index += 1
            continue
        if character == "`" or pair == "$(" or (not quote and pair in ("<(", ">(")):
            opened = index + (1 if character == "`" else 2)
            end = command.find("`", opened) if character == "`" else _closing(command, opened)
            if end < 0:
                return "".join(kept), bodies, "a substitution is not closed"
            bodies.append(command[opened:end])
            kept.append(SUBSTITUTED)
            index = end + 1
            continue
        if not quote and pair == "<<" and command[index + 2 : index + 3] != "<":
            return "".join(kept) + command[index:], bodies, "it reads a here-document"
        kept.append(character)
        index += 1
    return "".join(kept), bodies, ""


def _closing(command: str, start: int) -> int:
    """Where the ``)`` closing a ``(`` opened just before ``start`` is (-1: nowhere)."""
    depth, quote, index = 1, "", start
    while index < len(command):
        character = command[index]
        if character == "\\" and quote != "'":
            index += 2
            continue
        if quote:
            quote = "" if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character == "(":
            depth += 1
        elif character == ")":
            depth -= 1
            if depth == 0:
                return index
        index += 1
    return -1


def _bindable(path: Path, home: Path) -> bool:
    """Whether a path outside the work directory may be shown to a sandboxed hook by name.

    Never the root or the home folder itself (nor a folder above it): naming ``~`` must not
    hand a hook every credential under it.
    """
    if any(path == top or path.is_relative_to(top) for top in _SYSTEM):
        return False
    return not (path in _TOPS or home == path or home.is_relative_to(path))


def merged(pins: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """Several commands' pins as one record (a path two commands pin holds one state)."""
    found: dict[str, str] = {}
    for one in pins:
        found.update(one)
    return found
