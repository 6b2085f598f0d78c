"""Finding and killing every process a command started, wherever it went.

A grandchild that called setsid has left the process group, and one that double-forked has
left the process tree too; these helpers find them by ancestry and by the output pipe they hold.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

_KILL_ROUNDS = 10


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
