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
import time
from pathlib import Path

import attrs

from orchestrator.tools.sandbox import Limits

_KILL_ROUNDS = 10
_PR_SET_CHILD_SUBREAPER = 36
_REAP_SECONDS = 2.0
_REAP_POLL = 0.01


def become_subreaper() -> bool:
    """Make this process adopt its descendants' orphans (Linux ``PR_SET_CHILD_SUBREAPER``).

    A double fork then no longer hands a background process to init, out of reach: it lands
    here, where :func:`kill_orphans` finds it. Returns whether the kernel accepted it.
    """
    return _subreaper.enable()


@attrs.define
class _Subreaper:
    enabled: bool = False

    def enable(self) -> bool:
        if self.enabled:
            return True
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            self.enabled = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
        except (OSError, AttributeError):
            self.enabled = False
        return self.enabled


_subreaper = _Subreaper()


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


def children_of(pid: int) -> set[int]:
    """The live children of ``pid``."""
    return {child for child in _process_ids() if _parent_of(child) == pid}


def kill_orphans(known: set[int]) -> None:
    """SIGKILL every child of this process not in ``known``, with all of its descendants.

    After a command ends, those are the background processes it left, adopted here because
    this process is a subreaper. Each is stopped first so it cannot fork away mid-search.
    """
    me = os.getpid()
    victims: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        adopted = children_of(me) - known
        found = adopted | _descendants(adopted | victims)
        fresh = found - victims
        if not fresh:
            break
        for pid in fresh:
            _signal(pid, signal.SIGSTOP)
        victims |= fresh
    for pid in victims:
        _signal(pid, signal.SIGKILL)
    _reap_children(children_of(me) & victims | (victims - known))


def _reap_children(pids: set[int]) -> None:
    # Only our own children can be reaped; waitpid on a stranger's pid fails at once.
    deadline = time.monotonic() + _REAP_SECONDS
    pending = set(pids)
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, _status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pending.discard(pid)
                continue
            if done:
                pending.discard(pid)
        if pending:
            time.sleep(_REAP_POLL)


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
