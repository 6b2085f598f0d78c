"""Starting a command inside its limits, and killing every process it started, wherever it went.

Where the call has a control group (:mod:`orchestrator.tools.cgroups`) membership says what
the command started. Elsewhere a grandchild that called setsid has left the process group, and
one that double-forked has left the process tree too; the fallback finds them by ancestry and by
the output pipe they hold.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs

from orchestrator.tools import _reaper, cgroups
from orchestrator.tools._reaper import descendants, process_ids
from orchestrator.tools.cgroups import CallGroup
from orchestrator.tools.sandbox import Limits

_KILL_ROUNDS = 10
_PR_SET_DUMPABLE = 4


def make_undumpable() -> bool:
    """Hide this process's memory, environment and descriptors from its own user's processes.

    A non-dumpable process's ``/proc/PID`` entries belong to root, so an unsandboxed command run
    by an ordinary user cannot read the harness's environment or memory, nor write through its
    file descriptors. Root reads them anyway. Returns whether the kernel accepted it.
    """
    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def with_reaper(argv: list[str]) -> list[str]:
    """``argv`` run under a per-call child subreaper that kills what it leaves behind.

    Per call, not the harness: the harness may run several commands at once (``eval --jobs``)
    and must not kill the others'.
    """
    return [sys.executable, "-I", "-S", str(Path(_reaper.__file__)), *argv]


@attrs.frozen
class LauncherShell:
    """The small shell that starts every command: joins its groups, sets rlimits, then execs.

    dash starts in well under a millisecond; bash is the fallback. Their ``ulimit`` differ in
    the process-count flag and in the file-size unit, so both are part of the value.
    """

    path: str
    process_flag: str
    file_block: int


@functools.cache
def launcher_shell() -> LauncherShell:
    """The launcher: dash where it is installed, else bash; looked up once, by absolute path."""
    for candidate in ("/bin/dash", "/usr/bin/dash"):
        if os.access(candidate, os.X_OK):
            return LauncherShell(candidate, "-p", 512)
    return LauncherShell(shutil.which("bash") or "/bin/bash", "-u", 1024)


def launcher(argv: list[str], limits: Limits, group: CallGroup | None) -> list[str]:
    """``argv`` started by a launcher that joins the call's group and sets its rlimits first.

    It replaces ``preexec_fn``, which makes Popen fork the whole harness instead of taking the
    vfork path, and it puts the command in its group before it runs anything, which Popen
    cannot. Rlimits: processes (which the kernel does not apply to root; the group's
    ``pids.max`` does), file size, data segments (not address space, which runtimes such as V8
    reserve by the gigabyte) and no core dumps, never above a hard limit already in force.
    """
    shell = launcher_shell()
    joins = group.procs_files if group is not None else ()
    steps = [f"echo $$ > {shlex.quote(str(procs))} || exit 125" for procs in joins]
    for kind, flag, value, unit in (
        (resource.RLIMIT_NPROC, shell.process_flag, limits.max_processes, 1),
        (resource.RLIMIT_FSIZE, "-f", limits.max_file_bytes, shell.file_block),
        (resource.RLIMIT_DATA, "-d", limits.max_memory_bytes, 1024),
        (resource.RLIMIT_CORE, "-c", 0, 1),
    ):
        bound = max(_bounded(kind, value) // unit, 0)
        steps.append(f"ulimit -S {flag} {bound} 2>/dev/null; ulimit -H {flag} {bound} 2>/dev/null")
    steps.append('exec "$@"')
    return [shell.path, "-c", "; ".join(steps), "orchestrator-launch", *argv]


def _bounded(kind: int, value: int) -> int:
    try:
        _soft, hard = resource.getrlimit(kind)
    except (ValueError, OSError):
        return value
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def stop_command(
    process: subprocess.Popen[bytes], pipe_inode: int, group: CallGroup | None
) -> None:
    """SIGKILL everything the command started: by group membership where it has a group."""
    if group is None:
        kill_everything(process, pipe_inode)
        return
    cgroups.kill_members(group)
    # A root command outside bwrap can move itself out of the group, not out of its session.
    with contextlib.suppress(OSError):  # the session is usually empty by now
        os.killpg(process.pid, signal.SIGKILL)


def has_exited(process: subprocess.Popen[Any]) -> bool:
    """Whether ``process`` has exited, leaving it unreaped: as a zombie its pid stays ours.

    Once reaped, its pid, and with it the process group id, can go to a stranger's new session
    before a kill by group that follows (the pid space can be as small as 32768, and a busy
    machine goes round it in seconds). Reap it (``wait``) after that kill.
    """
    if process.returncode is not None:
        return True
    try:
        found = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped elsewhere: Popen knows how it ended
        return process.poll() is not None
    return found is not None


def exit_fd(process: subprocess.Popen[Any]) -> int | None:
    """A descriptor that becomes readable when ``process`` exits, where the kernel has pidfds."""
    try:
        return os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return None  # an old kernel; exits are then seen by polling


def wait_unreaped(process: subprocess.Popen[Any], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``process`` to exit; it is left unreaped.

    See :func:`has_exited`. Woken by a pidfd where the kernel has one (5.3+), else by a poll.
    """
    deadline = time.monotonic() + timeout
    pidfd = exit_fd(process)
    try:
        pause = 0.001
        while not has_exited(process):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.05)
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads; a group already gone is no error.

    ``pid`` must be a child not yet reaped (:func:`has_exited`), or its group may be a stranger's.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def kill_everything(process: subprocess.Popen[bytes], pipe_inode: int | None) -> None:
    """SIGKILL the command's process group, its descendants and whoever holds its output pipe.

    A grandchild that called setsid has left the process group, and one that double-forked
    has left the process tree too, but both still hold the pipe (None: no pipe to look for).
    Everything found is stopped first so it cannot fork new children while the search goes on.
    """
    leader = process.pid
    # Once bash has been reaped its pid may belong to a stranger; only an unreaped one is ours.
    victims: set[int] = {leader} if process.returncode is None else set()
    for _ in range(_KILL_ROUNDS):
        found = descendants(victims)
        if pipe_inode is not None:
            found |= _pipe_holders(pipe_inode)
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


def _pipe_holders(pipe_inode: int) -> set[int]:
    target = f"pipe:[{pipe_inode}]"
    holders: set[int] = set()
    for pid in process_ids():
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
