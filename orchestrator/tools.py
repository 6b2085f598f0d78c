"""The tool registry and the file and shell tools the model works with.

Every tool is confined to one work directory: paths the model sends go through
:meth:`Workdir.resolve`, which follows symlinks before checking, so a link the model planted
with ``bash`` cannot carry a read or a write outside. The registry is the single door the loop
dispatches through; whatever the model sends (an unknown tool, a list instead of an object, a
wrong field type, a handler that blows up), it answers with a :class:`ToolResult` whose text
starts with ``Error:`` and says how to fix the call, and never raises.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import attrs

from orchestrator.protocols import Approver, JSONObject, Refusal, Tool, ToolError, ToolResult

#: Tools that change the machine; the registry asks the approver before running them.
SIDE_EFFECT_TOOLS = frozenset({"bash", "write_file", "edit_file"})

_MAX_PATH_LENGTH = 4096
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
_READ_CHUNK = 65536
# How often the shell loop looks at whether bash has exited while its pipe is still open.
_POLL_SECONDS = 0.05
# A bound on bytes read after a timeout, in case a writer we could not kill keeps writing.
_DRAIN_LIMIT = 1 << 20
_KILL_ROUNDS = 10
# Files are read whole; anything bigger belongs to grep and sed.
_MAX_FILE_BYTES = 32 << 20

_JSON_TYPES: Mapping[str, tuple[type, ...]] = MappingProxyType(
    {
        "string": (str,),
        "integer": (int,),
        "number": (int, float),
        "boolean": (bool,),
        "array": (list, tuple),
        "object": (dict, Mapping),
        "null": (type(None),),
    }
)
_JSON_NAMES: Mapping[type, str] = MappingProxyType({str: "string", int: "integer", bool: "boolean"})

_Scalar = TypeVar("_Scalar", str, int, bool)


# ---------------------------------------------------------------------------------------------
# Confinement


def _resolved_root(root: str | os.PathLike[str]) -> Path:
    return Path(root).resolve()


def _quoted(path: str) -> str:
    # repr escapes NUL and control characters, which must not reach the API verbatim.
    shown = path if len(path) <= 80 else path[:77] + "..."
    return repr(shown)


@attrs.frozen
class Workdir:
    """The directory the model works in; every model-supplied path is resolved against it."""

    root: Path = attrs.field(converter=_resolved_root)
    #: ``--sandbox none`` turns confinement off: paths resolve anywhere the user can reach.
    confined: bool = True

    def resolve(self, path: str) -> Path:
        """Return the absolute, symlink-free location of ``path``, or raise :class:`ToolError`.

        Symlinks are followed before the check, so a link pointing outside the work
        directory (even one the model made itself) is refused rather than written through.
        """
        if not isinstance(path, str):
            raise ToolError(f"Error: path must be a string, got {_json_type(path)}")
        self._check_shape(path)
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = candidate.resolve(strict=False)
        except (OSError, RuntimeError, ValueError) as error:
            raise ToolError(
                f"Error: path {_quoted(path)} cannot be resolved ({error}); "
                "use a plain path inside the work directory"
            ) from error
        if self.confined and not resolved.is_relative_to(self.root):
            raise ToolError(
                f"Error: path {_quoted(path)} escapes the work directory {self.root}; "
                f"use a path inside it, e.g. {_quoted(_suggestion(path))}"
            )
        return resolved

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
            raise ToolError(f"Error: path {_quoted(path)} contains a NUL byte; remove it")
        if not self.confined:
            return
        if path.startswith("~"):
            raise ToolError(
                f"Error: path {_quoted(path)} starts with '~'; home directories are outside "
                f"the work directory {self.root}; use a path relative to it, "
                f"e.g. {_quoted(_suggestion(path))}"
            )
        if path == "/proc" or path.startswith("/proc/"):
            # /proc/self/root and friends are magic links that sidestep ordinary resolution.
            raise ToolError(
                f"Error: path {_quoted(path)} is under /proc, which is outside the work "
                f"directory {self.root}; use a path inside it"
            )


def _suggestion(path: str) -> str:
    name = Path(path.lstrip("~")).name
    return name if name not in ("", ".", "..") else "notes.txt"


# ---------------------------------------------------------------------------------------------
# Argument checking


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    for name in ("integer", "number", "string", "array", "object"):
        if isinstance(value, _JSON_TYPES[name]):
            return name
    return type(value).__name__


def _has_json_type(value: object, expected: str) -> bool:
    kinds = _JSON_TYPES.get(expected)
    if kinds is None:
        return True  # a schema type we do not model; let the handler judge
    if isinstance(value, bool) and expected != "boolean":
        return False  # JSON true is not a number, although Python's bool is an int
    return isinstance(value, kinds)


def _schema_problem(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str:
    """Return an ``Error:`` text for the first top-level schema violation, or ``""``."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    for field in schema.get("required", ()):
        if field not in arguments:
            expected = properties.get(field, {}).get("type", "value")
            return f"Error: {tool}: field '{field}' is required ({_type_label(expected)})"
    for field, spec in properties.items():
        value = arguments.get(field)
        expected = spec.get("type") if isinstance(spec, Mapping) else None
        if field not in arguments or expected is None:
            continue
        if value is None and field not in schema.get("required", ()):
            continue  # an explicit null for an optional field reads as "not given"
        options = [expected] if isinstance(expected, str) else list(expected)
        if not any(_has_json_type(value, option) for option in options):
            return (
                f"Error: {tool}: field '{field}' must be {_type_label(expected)}, "
                f"got {_json_type(value)}"
            )
    return ""


def _type_label(expected: object) -> str:
    return " or ".join(expected) if isinstance(expected, list) else str(expected)


def _required(arguments: Mapping[str, Any], tool: str, field: str, kind: type[_Scalar]) -> _Scalar:
    value = _optional(arguments, tool, field, kind)
    if value is None:
        raise ToolError(f"Error: {tool}: field '{field}' is required ({_JSON_NAMES[kind]})")
    return value


def _optional(
    arguments: Mapping[str, Any], tool: str, field: str, kind: type[_Scalar]
) -> _Scalar | None:
    value = arguments.get(field)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ToolError(
            f"Error: {tool}: field '{field}' must be {_JSON_NAMES[kind]}, got {_json_type(value)}"
        )
    return value


# ---------------------------------------------------------------------------------------------
# Registry


def _index_tools(tools: Iterable[Tool]) -> Mapping[str, Tool]:
    index: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in index:
            raise ValueError(f"two tools are named {tool.name!r}")
        index[tool.name] = tool
    return MappingProxyType(index)


@attrs.frozen
class ToolRegistry:
    """The tools the model may call, and the one place their calls are checked and run."""

    _tools: Mapping[str, Tool] = attrs.field(converter=_index_tools)
    approver: Approver | None = attrs.field(default=None, kw_only=True)
    needs_approval: frozenset[str] = attrs.field(default=SIDE_EFFECT_TOOLS, kw_only=True)
    # A tool's schema is fixed once it exists; built once here, not on every round.
    _schemas: Mapping[str, JSONObject] = attrs.field(init=False)

    @_schemas.default
    def _build_schemas(self) -> Mapping[str, JSONObject]:
        return MappingProxyType({name: tool.schema for name, tool in self._tools.items()})

    @property
    def schemas(self) -> list[JSONObject]:
        return list(self._schemas.values())

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def dispatch(self, name: str, arguments: object) -> ToolResult:
        """Run one tool call; every failure comes back as an error result, never an exception."""
        try:
            result = self._dispatch(name, arguments)
        except Exception as error:  # the loop must survive anything a tool does
            return _error(f"Error: {name} failed: {type(error).__name__}: {error}")
        if result.is_error and not result.text.startswith("Error:"):
            return _error(f"Error: {result.text}")
        return result

    def _dispatch(self, name: str, arguments: object) -> ToolResult:
        tool = self._tools.get(name) if isinstance(name, str) else None
        if tool is None:
            return _error(
                f"Error: unknown tool {_quoted(str(name))}; "
                f"available tools: {', '.join(self._tools)}"
            )
        schema: Mapping[str, Any] = self._schemas[name].get("input_schema", {})
        if not isinstance(arguments, dict):
            fields = ", ".join(schema.get("properties", {}))
            return _error(
                f"Error: {name}: arguments must be a JSON object with fields {fields}; "
                f"got {_json_type(arguments)}"
            )
        problem = _schema_problem(name, schema, arguments)
        if problem:
            return _error(problem)
        if name in self.needs_approval and self.approver is not None:
            verdict = self.approver(name, arguments)
            if isinstance(verdict, Refusal):
                return _error(verdict.message)
            if verdict is not True:
                return _error(
                    f"Error: {name} was not approved, so it did not run; do not retry the same "
                    "call: take another approach, or say in your answer what is left undone"
                )
        try:
            return tool.run(arguments)
        except ToolError as error:
            message = str(error)
            return _error(message if message.startswith("Error:") else f"Error: {message}")


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


# ---------------------------------------------------------------------------------------------
# bash


def scrub_environment(env: Mapping[str, str]) -> dict[str, str]:
    """Copy ``env`` without anything that looks like a credential.

    A variable is dropped when its name contains KEY, TOKEN, SECRET or PASSWORD in any case,
    which covers ``ANTHROPIC_API_KEY`` and the usual cloud and CI credentials.
    """
    return {name: value for name, value in env.items() if not looks_secret(name)}


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name marks a credential (the one rule for it)."""
    upper = name.upper()
    return any(marker in upper for marker in _SECRET_MARKERS)


@attrs.define
class _CappedText:
    """Output decoded as it arrives: the first ``limit`` characters kept, the rest counted."""

    limit: int
    kept: list[str] = attrs.field(factory=list)
    kept_chars: int = 0
    dropped_chars: int = 0
    decoder: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )

    def feed(self, chunk: bytes, *, final: bool = False) -> None:
        text = self.decoder.decode(chunk, final=final)
        room = self.limit - self.kept_chars
        if room > 0:
            self.kept.append(text[:room])
            self.kept_chars += min(room, len(text))
        self.dropped_chars += max(0, len(text) - max(room, 0))

    def render(self) -> str:
        self.feed(b"", final=True)
        text = "".join(self.kept)
        if self.dropped_chars:
            return _with_note(
                text,
                f"... [output truncated: {self.dropped_chars} more characters not shown; "
                "redirect the output to a file and read parts of it, or filter it with "
                "grep, head or tail]",
            )
        return text or "(no output)"


@attrs.frozen
class _Finish:
    """How the watch over a running command ended."""

    timed_out: bool = False
    # bash exited, but something it started in the background still holds the output pipe.
    detached: bool = False


@attrs.frozen
class BashTool:
    """Runs one shell command in the work directory with a timeout and a cap on output."""

    workdir: Workdir
    default_timeout: float = attrs.field(default=120.0, kw_only=True)
    max_timeout: float = attrs.field(default=600.0, kw_only=True)
    max_output: int = attrs.field(default=50_000, kw_only=True)
    # How long to keep reading after bash exits while a background process holds the pipe.
    background_grace: float = attrs.field(default=1.0, kw_only=True)

    @property
    def name(self) -> str:
        return "bash"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Run a shell command with bash in the work directory and return its combined "
                "stdout and stderr. Stdin is empty, so interactive programs get end-of-file. "
                f"Output beyond {self.max_output} characters is cut. A non-zero exit status is "
                "shown as [exit code N]. Background long-running programs with their output "
                "redirected to a file (cmd > log 2>&1 &)."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line to run."},
                    "timeout": {
                        "type": "integer",
                        "description": (
                            f"Seconds before the command and everything it started are killed "
                            f"(default {self.default_timeout:g}, at most {self.max_timeout:g})."
                        ),
                    },
                },
                "required": ["command"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        command = _required(arguments, self.name, "command", str)
        if not command.strip():
            raise ToolError("Error: bash: field 'command' is empty; pass a command such as 'ls'")
        if "\x00" in command:
            raise ToolError("Error: bash: field 'command' contains a NUL byte; remove it")
        timeout = self._timeout(_optional(arguments, self.name, "timeout", int))
        return self._execute(command, timeout)

    def _timeout(self, requested: int | None) -> float:
        if requested is None:
            return min(self.default_timeout, self.max_timeout)
        if requested <= 0:
            raise ToolError(
                f"Error: bash: field 'timeout' must be a positive number of seconds, "
                f"got {requested}"
            )
        # Compared before converting: an integer past float range would raise OverflowError.
        return float(min(requested, self.max_timeout))

    def _execute(self, command: str, timeout: float) -> ToolResult:
        try:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=self.workdir.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=scrub_environment(os.environ),
            )
        except OSError as error:
            if error.errno == errno.E2BIG:
                raise ToolError(
                    f"Error: bash: field 'command' is too long for one command line "
                    f"({len(command.encode('utf-8', 'replace'))} bytes); write the script to a "
                    "file with write_file and run it with 'bash script.sh'"
                ) from error
            raise ToolError(f"Error: bash: cannot start bash: {error.strerror}") from error
        assert process.stdout is not None  # guaranteed by stdout=PIPE
        pipe = process.stdout
        pipe_inode = os.fstat(pipe.fileno()).st_ino
        output = _CappedText(self.max_output)
        try:
            finish = _watch(process, pipe.fileno(), output, timeout, self.background_grace)
            if finish.timed_out:
                _kill_everything(process, pipe_inode)
                _drain(pipe.fileno(), output)
        except BaseException:
            # A Ctrl-C at the terminal never reaches the command, which has its own session.
            _kill_everything(process, pipe_inode)
            raise
        finally:
            pipe.close()
            _reap(process)
        return self._result(finish, output, process.returncode, timeout)

    def _result(
        self, finish: _Finish, output: _CappedText, returncode: int | None, timeout: float
    ) -> ToolResult:
        text = output.render()
        if finish.timed_out:
            return _error(
                f"Error: command timed out after {timeout:g}s; it and every process it started "
                f"were killed. Pass a larger timeout (at most {self.max_timeout:g}), or run long "
                "jobs in the background with output redirected to a file.\n"
                f"Output before the timeout:\n{text}"
            )
        if finish.detached:
            text = _with_note(
                text,
                "[background processes still hold the output; later output from them is not "
                "shown: redirect it to a file (cmd > log 2>&1 &)]",
            )
        if returncode is not None and returncode < 0:
            text = _with_note(text, f"[terminated by signal {-returncode}]")
        elif returncode:
            text = _with_note(text, f"[exit code {returncode}]")
        return ToolResult(text)


def _with_note(text: str, note: str) -> str:
    """Put a harness note on its own line after ``text``."""
    return f"{text}{note}" if text.endswith("\n") else f"{text}\n{note}"


def _watch(
    process: subprocess.Popen[bytes],
    fd: int,
    output: _CappedText,
    timeout: float,
    grace: float,
) -> _Finish:
    """Read the command's output until it exits and closes the pipe, or until the deadline."""
    deadline = time.monotonic() + timeout
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            now = time.monotonic()
            if process.poll() is not None:
                exited_at = now if exited_at is None else exited_at
                if now - exited_at >= grace or now >= deadline:
                    return _Finish(detached=True)
            elif now >= deadline:
                return _Finish(timed_out=True)
            if not selector.select(min(deadline - now, _POLL_SECONDS)):
                continue
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            output.feed(chunk)
    # End of output: bash closed its stdout, though it may still be running without it.
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return _Finish(timed_out=True)
    return _Finish()


def _drain(fd: int, output: _CappedText) -> None:
    """Read what the killed command left in the pipe, without blocking on a survivor."""
    drained = 0
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while drained < _DRAIN_LIMIT and selector.select(0):
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                return
            drained += len(chunk)
            output.feed(chunk)


def _reap(process: subprocess.Popen[bytes]) -> None:
    # One stuck in the kernel is left for Popen to reap later.
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(5)


def _kill_everything(process: subprocess.Popen[bytes], pipe_inode: int) -> None:
    """SIGKILL the command's process group, its descendants and whoever holds its output pipe.

    A grandchild that called setsid has left the process group, and one that double-forked
    has left the process tree too, but both still hold the pipe. Everything found is stopped
    first so it cannot fork new children while the search goes on.
    """
    leader = process.pid
    # Once bash has been reaped its pid may belong to a stranger; only an unreaped one is ours.
    victims: set[int] = {leader} if process.returncode is None else set()
    for _ in range(_KILL_ROUNDS):
        found = _descendants(victims) | _pipe_holders(pipe_inode)
        fresh = found - victims
        if not fresh:
            break
        for pid in fresh:
            _signal(pid, signal.SIGSTOP)
        victims |= fresh
    with contextlib.suppress(OSError):  # the group may already be empty
        os.killpg(leader, signal.SIGKILL)
    for pid in victims:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(OSError):  # already gone, or not ours to signal
        os.kill(pid, signum)


def _process_ids() -> list[int]:
    try:
        return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []  # no /proc: the process-group kill is all we can do


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
        # The command name sits in parentheses and may itself contain spaces or parentheses.
        return int(stat[stat.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _descendants(roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid in _process_ids():
        parent = _parent_of(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    pending = list(roots)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _pipe_holders(pipe_inode: int) -> set[int]:
    target = f"pipe:[{pipe_inode}]"
    holders: set[int] = set()
    for pid in _process_ids():
        if pid == os.getpid():
            continue  # we hold the read end of the same pipe
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    holders.add(pid)
                    break
            except OSError:
                continue
    return holders


# ---------------------------------------------------------------------------------------------
# Files


def _read_text(workdir: Workdir, tool: str, path: str) -> tuple[Path, str]:
    """Resolve ``path`` and return it with its text, read without newline translation."""
    target = _existing_file(workdir, tool, path)
    if target.stat().st_size > _MAX_FILE_BYTES:
        raise ToolError(
            f"Error: {tool}: {_quoted(path)} is larger than {_MAX_FILE_BYTES // 2**20} MiB; "
            f"look at parts of it with bash (e.g. 'head', 'sed -n', 'grep -n')"
        )
    try:
        data = target.read_bytes()
    except OSError as error:
        raise ToolError(f"Error: {tool}: cannot read {_quoted(path)}: {error.strerror}") from error
    return target, _decode(tool, path, data)


def _existing_file(workdir: Workdir, tool: str, path: str) -> Path:
    target = workdir.resolve(path)
    if not target.exists():
        raise ToolError(
            f"Error: {tool}: {_quoted(path)} does not exist; list the files with bash 'ls' "
            "and check the path"
        )
    if target.is_dir():
        raise ToolError(
            f"Error: {tool}: {_quoted(path)} is a directory, not a file; list it with bash "
            f"'ls {workdir.relative(target)}'"
        )
    if not target.is_file():
        # A FIFO or device would block the read or never end.
        raise ToolError(f"Error: {tool}: {_quoted(path)} is not a regular file")
    return target


def _decode(tool: str, path: str, data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise ToolError(
            f"Error: {tool}: {_quoted(path)} looks like a binary file; inspect it with bash "
            f"(e.g. 'file {path}' or 'xxd {path} | head')"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ToolError(
            f"Error: {tool}: {_quoted(path)} is not valid UTF-8 text (byte {error.start}); "
            f"inspect it with bash (e.g. 'file {path}')"
        ) from error


def _write_text(workdir: Workdir, tool: str, path: str, target: Path, content: str) -> int:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ToolError(
            f"Error: {tool}: the content has a character UTF-8 cannot store "
            f"(position {error.start}); remove it"
        ) from error
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as error:
        raise ToolError(
            f"Error: {tool}: cannot write {_quoted(path)}: {error.strerror or error}"
        ) from error
    return len(data)


def _lines(text: str) -> list[str]:
    # Split on "\n" only, so line numbers agree with sed, grep -n and wc -l.
    pieces = text.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    return [*lines, pieces[-1]] if pieces[-1] else lines


@attrs.frozen
class ReadFileTool:
    """Returns a range of lines of a text file, capped in size."""

    workdir: Workdir
    max_chars: int = attrs.field(default=50_000, kw_only=True)

    @property
    def name(self) -> str:
        return "read_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Read a UTF-8 text file in the work directory, exactly as stored. Long files "
                f"are cut at {self.max_chars} characters with a note saying which offset to "
                "read next."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "offset": {"type": "integer", "description": "First line to read (1-based)."},
                    "limit": {"type": "integer", "description": "How many lines to read."},
                },
                "required": ["path"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = _required(arguments, self.name, "path", str)
        offset = _optional(arguments, self.name, "offset", int)
        offset = 1 if offset is None else offset
        limit = _optional(arguments, self.name, "limit", int)
        if offset < 1:
            raise ToolError(f"Error: read_file: field 'offset' must be 1 or more, got {offset}")
        if limit is not None and limit < 1:
            raise ToolError(f"Error: read_file: field 'limit' must be 1 or more, got {limit}")
        _, text = _read_text(self.workdir, self.name, path)
        lines = _lines(text)
        if not lines:
            return ToolResult("(empty file)")
        if offset > len(lines):
            raise ToolError(
                f"Error: read_file: offset={offset} is past the end of {_quoted(path)}, "
                f"which has {len(lines)} lines"
            )
        return ToolResult(self._excerpt(lines, offset, limit))

    def _excerpt(self, lines: list[str], offset: int, limit: int | None) -> str:
        end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
        shown: list[str] = []
        size = 0
        capped = False
        for line in lines[offset - 1 : end]:
            if size + len(line) > self.max_chars:
                capped = True
                if not shown:  # one line longer than the cap: show its start
                    shown.append(line[: self.max_chars])
                break
            shown.append(line)
            size += len(line)
        last = offset - 1 + len(shown)
        text = "".join(shown)
        if last >= len(lines) and not capped:
            return text
        reason = f"output capped at {self.max_chars} characters; " if capped else ""
        return _with_note(
            text,
            f"... [{reason}showing lines {offset}-{last} of {len(lines)}; "
            f"use offset={last + 1} to read further]",
        )


@attrs.frozen
class WriteFileTool:
    """Creates or overwrites a file, making parent directories as needed."""

    workdir: Workdir

    @property
    def name(self) -> str:
        return "write_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Create or overwrite a file in the work directory with the given UTF-8 "
                "content, creating parent directories as needed."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "content": {"type": "string", "description": "The whole new file content."},
                },
                "required": ["path", "content"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = _required(arguments, self.name, "path", str)
        content = _required(arguments, self.name, "content", str)
        target = self.workdir.resolve(path)
        if target.is_dir():
            raise ToolError(
                f"Error: write_file: {_quoted(path)} is a directory; pass a file path inside it"
            )
        size = _write_text(self.workdir, self.name, path, target, content)
        return ToolResult(f"Wrote {size} bytes to {self.workdir.relative(target)}")


@attrs.frozen
class EditFileTool:
    """Replaces an exact piece of text in a file, refusing ambiguous or missing matches."""

    workdir: Workdir

    @property
    def name(self) -> str:
        return "edit_file"

    @property
    def schema(self) -> JSONObject:
        return {
            "name": self.name,
            "description": (
                "Replace old_text with new_text in a file. old_text must match the file "
                "exactly (whitespace included) and occur exactly once, unless replace_all is "
                "true. Read the file first and copy the text."
            ),
            "input_schema": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the work dir."},
                    "old_text": {"type": "string", "description": "Exact text to replace."},
                    "new_text": {"type": "string", "description": "Text to put in its place."},
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence (default false).",
                    },
                },
                "required": ["path", "old_text", "new_text"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        path = _required(arguments, self.name, "path", str)
        old_text = _required(arguments, self.name, "old_text", str)
        new_text = _required(arguments, self.name, "new_text", str)
        replace_all = _optional(arguments, self.name, "replace_all", bool) or False
        if not old_text:
            raise ToolError(
                "Error: edit_file: field 'old_text' is empty; copy the exact text to replace "
                "from the file, or use write_file to create a file"
            )
        if old_text == new_text:
            raise ToolError("Error: edit_file: old_text and new_text are the same; nothing to do")
        target, text = _read_text(self.workdir, self.name, path)
        shown = self.workdir.relative(target)
        count = text.count(old_text)
        if count == 0:
            raise ToolError(
                f"Error: old_text not found in {shown}; read the file and copy the exact text"
            )
        if count > 1 and not replace_all:
            raise ToolError(
                f"Error: old_text occurs {count} times in {shown}; include more context to make "
                "it unique, or pass replace_all=true"
            )
        # Checked before replacing: a short old_text and a long new_text multiply quickly.
        size = len(text) + count * (len(new_text) - len(old_text))
        if size > _MAX_FILE_BYTES:
            raise ToolError(
                f"Error: edit_file: the edit would make {shown} {size} characters long, over "
                f"the {_MAX_FILE_BYTES // 2**20} MiB limit; replace fewer occurrences at a time"
            )
        _write_text(self.workdir, self.name, path, target, text.replace(old_text, new_text))
        return ToolResult(f"Edited {shown} ({count} replacement{'s' if count > 1 else ''})")


def standard_tools(workdir: Workdir, *, bash: bool = True) -> list[Tool]:
    """The model's file and shell tools over ``workdir`` (``bash=False`` for ``--deny-bash``)."""
    tools: list[Tool] = [ReadFileTool(workdir), WriteFileTool(workdir), EditFileTool(workdir)]
    return [BashTool(workdir), *tools] if bash else tools
