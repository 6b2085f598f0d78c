"""Finding and killing every process a command started, wherever it went.

A grandchild that called setsid has left the process group, and one that double-forked has
left the process tree too; these helpers find them by ancestry and by the output pipe they hold.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from orchestrator.tools import _reaper
from orchestrator.tools._reaper import descendants, process_ids
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


def apply_limits(limits: Limits) -> None:
    """Set the command's rlimits; runs in the child between fork and exec.

    The kernel does not hold root to the process-count limit; the memory limit counts data
    segments (not address space, which runtimes such as V8 reserve by the gigabyte).
    """
    for kind, value in (
        (resource.RLIMIT_NPROC, limits.max_processes),
        (resource.RLIMIT_FSIZE, limits.max_file_bytes),
        (resource.RLIMIT_DATA, limits.max_memory_bytes),
        (resource.RLIMIT_CORE, 0),
    ):
        with contextlib.suppress(ValueError, OSError):  # never above an existing hard limit
            _soft, hard = resource.getrlimit(kind)
            bound = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (bound, bound))


def kill_everything(process: subprocess.Popen[bytes], pipe_inode: int) -> None:
    """SIGKILL the command's process group, its descendants and whoever holds its output pipe.

    A grandchild that called setsid has left the process group, and one that double-forked
    has left the process tree too, but both still hold the pipe. Everything found is stopped
    first so it cannot fork new children while the search goes on.
    """
    leader = process.pid
    # Once bash has been reaped its pid may belong to a stranger; only an unreaped one is ours.
    victims: set[int] = {leader} if process.returncode is None else set()
    for _ in range(_KILL_ROUNDS):
        found = descendants(victims) | _pipe_holders(pipe_inode)
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
