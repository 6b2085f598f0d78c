"""The bash tool: one shell command in the work directory, with a timeout and capped output.

With a :class:`~orchestrator.tools.products.guard.ProductGuard` (a session's), each command's
git writes are landed afterwards and its protected-file changes named in the result; checks
run the same way with ``PYTHONSAFEPATH=1`` and fail while a protected file differs.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import functools
import os
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator.protocols import CheckResult, JSONObject, ToolError, ToolResult
from orchestrator.signals import interrupt_mark, raise_if_interrupted_since
from orchestrator.tools import cgroups
from orchestrator.tools.arguments import error_result, optional, required, with_note
from orchestrator.tools.cgroups import CallGroup
from orchestrator.tools.processes import (
    exit_fd,
    has_exited,
    launcher,
    stop_command,
    with_reaper,
)
from orchestrator.tools.products.guard import ProductGuard
from orchestrator.tools.sandbox import Sandbox, SandboxPolicy
from orchestrator.tools.workdir import Workdir

if TYPE_CHECKING:
    from orchestrator.tools.products.landing import Overlay

_READ_CHUNK = 65536
# How often the shell loop looks at whether bash has exited while its pipe is still open.
_POLL_SECONDS = 0.05
# A bound on bytes read after a timeout, in case a writer we could not kill keeps writing.
_DRAIN_LIMIT = 1 << 20
#: A check's environment on top of bash's: a ``pytest.py`` in the work directory must not
#: shadow ``python -m pytest`` (the current directory leaves ``sys.path``).
CHECK_ENVIRONMENT = {"PYTHONSAFEPATH": "1"}


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
            return with_note(
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
    #: Where commands run; by default ``workdir`` mode (or ``none`` for an unconfined workdir).
    sandbox: Sandbox = attrs.field(
        default=attrs.Factory(lambda self: _default_sandbox(self.workdir), takes_self=True),
        kw_only=True,
    )
    default_timeout: float = attrs.field(default=120.0, kw_only=True)
    max_timeout: float = attrs.field(default=600.0, kw_only=True)
    max_output: int = attrs.field(default=50_000, kw_only=True)
    # How long to keep reading after bash exits while a background process holds the pipe.
    background_grace: float = attrs.field(default=1.0, kw_only=True)
    #: The session's guard: lands git writes, names protected changes (None: neither).
    guard: ProductGuard | None = attrs.field(default=None, kw_only=True)

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
                "shown as [exit code N]. Every process the command starts, background ones "
                "included, is stopped when the command ends: a server started here does not "
                "outlive the call, so start it, use it and stop it within one command."
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
        command = required(arguments, self.name, "command", str)
        if not command.strip():
            raise ToolError("Error: bash: field 'command' is empty; pass a command such as 'ls'")
        if "\x00" in command:
            raise ToolError("Error: bash: field 'command' contains a NUL byte; remove it")
        timeout = self._timeout(optional(arguments, self.name, "timeout", int))
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
        finish, output, returncode, note = self._contained(command, timeout)
        result = self._result(finish, output, returncode, timeout)
        return attrs.evolve(result, text=with_note(result.text, note)) if note else result

    def run_check(self, command: str, timeout: float) -> CheckResult:
        """Run a check command as bash runs the model's (sandbox, limits, cap); its outcome.

        A timeout is exit code 124, as ``timeout(1)`` reports it. While a protected file
        differs from the session's start the check does not run and fails; one that changes a
        protected file fails too. Python runs with ``PYTHONSAFEPATH=1``.
        """
        started = time.perf_counter()
        refused = self.guard.check_refusal() if self.guard is not None else None
        if refused is not None:
            return CheckResult(command, 1, f"[the check did not run: {refused}]", 0.0)
        finish, output, returncode, note = self._contained(
            command, timeout, extra_env=CHECK_ENVIRONMENT
        )
        text = output.render()
        code = _shell_code(returncode)
        if finish.timed_out:
            code = 124
            text = with_note(text, f"[timed out after {timeout:g}s; killed]")
        if note:
            text = with_note(text, note)
        after = self.guard.check_refusal() if self.guard is not None else None
        if after is not None and code == 0:
            code = 1
            text = with_note(text, f"[the check does not count: {after}]")
        return CheckResult(command, code, text, time.perf_counter() - started)

    def _contained(
        self, command: str, timeout: float, extra_env: Mapping[str, str] | None = None
    ) -> tuple[_Finish, _CappedText, int | None, str]:
        guard = self.guard
        overlays = guard.before_call() if guard is not None else ()
        ended = False
        try:
            finish, output, returncode = self._run_contained(command, timeout, overlays, extra_env)
            ended = returncode is not None
        finally:
            # Landing only once every process of the call is gone (bwrap's pid namespace ended
            # with bash); after an interrupt nothing lands.
            note = guard.after_call(ended=ended) if guard is not None else ""
        return finish, output, returncode, note

    def _run_contained(
        self,
        command: str,
        timeout: float,
        overlays: tuple[Overlay, ...],
        extra_env: Mapping[str, str] | None,
    ) -> tuple[_Finish, _CappedText, int | None]:
        argv, env = self.sandbox.command(
            command, os.environ, overlays=overlays, extra_env=extra_env
        )
        limits = self.sandbox.policy.limits
        group = cgroups.create_call_group(
            cgroups.available(),
            max_processes=limits.max_processes,
            max_memory_bytes=limits.max_memory_bytes,
        )
        if group is None and self.sandbox.mode != "bwrap":
            # bwrap's pid namespace ends with the command; without a group a reaper does that.
            argv = with_reaper(argv)
        try:
            return self._supervise(command, launcher(argv, limits, group), env, timeout, group)
        finally:
            if group is not None:
                cgroups.remove(group)

    def _supervise(
        self,
        command: str,
        argv: list[str],
        env: dict[str, str],
        timeout: float,
        group: CallGroup | None,
    ) -> tuple[_Finish, _CappedText, int | None]:
        # A stop signal whose interrupt Python swallowed (in a finalizer, say) still ends the
        # wait: the watch loop raises it again.
        mark = interrupt_mark()
        try:
            # No preexec_fn: the launcher joins the group and sets the limits, so Popen can
            # take its vfork path instead of copying the whole harness.
            process = subprocess.Popen(
                argv,
                cwd=self.workdir.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
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
        finish: _Finish | None = None
        try:
            # With a group, what bash left behind is killed the moment it exits, as the reaper
            # or bwrap's pid namespace does elsewhere, so its output pipe closes at once.
            exited = None if group is None else functools.partial(cgroups.kill_members, group)
            finish = _watch(
                process,
                pipe.fileno(),
                output,
                timeout,
                self.background_grace,
                exited=exited,
                interrupt_mark=mark,
            )
            if finish.timed_out:
                stop_command(process, pipe_inode, group)
                _drain(pipe.fileno(), output)
        finally:
            # Background processes end with the command, in every mode; after a Ctrl-C too,
            # which never reaches the command in its own session. A clean end leaves nothing
            # to look for: the group was emptied when bash exited, or the reaper or bwrap's
            # pid namespace ended the rest.
            if finish is None or finish.detached:
                stop_command(process, pipe_inode, group)
            pipe.close()
            _reap(process)
        assert finish is not None  # set unless the watch raised, which leaves through here
        return finish, output, process.returncode

    def _result(
        self, finish: _Finish, output: _CappedText, returncode: int | None, timeout: float
    ) -> ToolResult:
        text = output.render()
        if finish.timed_out:
            timed_out = error_result(
                f"Error: command timed out after {timeout:g}s; it and every process it started "
                f"were killed. Pass a larger timeout (at most {self.max_timeout:g}), or split "
                "the work into shorter commands (background processes end with their command "
                "too).\n"
                f"Output before the timeout:\n{text}"
            )
            return attrs.evolve(timed_out, exit_code=124)  # as timeout(1) reports it
        if finish.detached:
            text = with_note(
                text,
                "[background processes still held the output when the command ended; they "
                "were stopped: start, use and stop a server within one command]",
            )
        if returncode is not None and returncode < 0:
            text = with_note(text, f"[terminated by signal {-returncode}]")
        elif returncode:
            text = with_note(text, f"[exit code {returncode}]")
        return ToolResult(text, exit_code=_shell_code(returncode))


def _shell_code(returncode: int | None) -> int:
    """The exit code as a shell reports it: 128 + N for a process killed by signal N."""
    if returncode is None:
        return 1
    return 128 - returncode if returncode < 0 else returncode


def _watch(
    process: subprocess.Popen[bytes],
    fd: int,
    output: _CappedText,
    timeout: float,
    grace: float,
    *,
    exited: Callable[[], None] | None = None,
    interrupt_mark: int | None = None,
) -> _Finish:
    """Read the command's output until it exits and closes the pipe, or until the deadline.

    ``exited`` runs once, when bash is first seen to have exited. Its exit is watched through a
    pidfd where the kernel has one (5.3+), so it is seen at once rather than at the next poll.
    A stop signal counted since ``interrupt_mark`` is raised again at each poll.
    """
    deadline = time.monotonic() + timeout
    exited_at: float | None = None
    output_open = True
    with contextlib.ExitStack() as cleanup, selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        pidfd = exit_fd(process)
        if pidfd is not None:
            cleanup.callback(os.close, pidfd)
            selector.register(pidfd, selectors.EVENT_READ)
        while True:
            if interrupt_mark is not None:
                raise_if_interrupted_since(interrupt_mark)
            now = time.monotonic()
            if exited_at is None and has_exited(process):
                exited_at = now
                if pidfd is not None:
                    selector.unregister(pidfd)  # readable from now on: nothing more to say
                if exited is not None:
                    exited()
            if exited_at is not None and not output_open:
                return _Finish()
            if exited_at is not None and (now - exited_at >= grace or now >= deadline):
                return _Finish(detached=True)
            if now >= deadline:
                # Output closed or not, bash is still running.
                return _Finish(timed_out=True)
            for key, _events in selector.select(min(deadline - now, _POLL_SECONDS)):
                if key.fd != fd:
                    continue  # the pidfd: bash exited, seen by has_exited() at the top
                chunk = os.read(fd, _READ_CHUNK)
                if chunk:
                    output.feed(chunk)
                else:
                    output_open = False
                    selector.unregister(fd)


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


def _default_sandbox(workdir: Workdir) -> Sandbox:
    return Sandbox("workdir" if workdir.confined else "none", SandboxPolicy(workdir.root))
