"""A per-call child subreaper: runs one command and kills every process it leaves behind.

Run as a script (``python -I -S _reaper.py ARGV...``) so it starts fast and imports nothing of
the package; :mod:`orchestrator.tools.processes` imports :func:`descendants` from it. As a
child subreaper (``PR_SET_CHILD_SUBREAPER``) it adopts every orphan the command makes, so a
double fork no longer hands a background process to init, out of reach. Once the command exits,
the whole tree below is stopped, then killed, then reaped, and the command's status is passed on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Iterable

_PR_SET_CHILD_SUBREAPER = 36
_KILL_ROUNDS = 10


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            text = stat.read()
        # The command name sits in parentheses and may itself contain spaces or parentheses.
        return int(text[text.rindex(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def process_ids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []  # no /proc: the process-group kill is all that is left


def running(pid: int) -> bool:
    """Whether ``pid`` names a live process (one we may not signal counts: it is there)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def descendants(roots: Iterable[int]) -> set[int]:
    """Every live process below ``roots`` in the process tree."""
    children: dict[int, list[int]] = {}
    for pid in process_ids():
        parent = parent_of(pid)
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


def _signal(pid: int, signum: signal.Signals) -> None:
    with contextlib.suppress(OSError):  # already gone
        os.kill(pid, signum)


def main(argv: list[str]) -> None:
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(child, 0)
    me = os.getpid()
    victims: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        fresh = descendants({me}) - victims
        if not fresh:
            break
        for pid in fresh:  # stopped first, so none can fork away while the search goes on
            _signal(pid, signal.SIGSTOP)
        victims |= fresh
    for pid in victims:
        _signal(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        while True:
            os.waitpid(-1, 0)
    if os.WIFSIGNALED(status):
        with contextlib.suppress(OSError):  # SIGKILL has no handler to reset
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(me, os.WTERMSIG(status))
    sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
