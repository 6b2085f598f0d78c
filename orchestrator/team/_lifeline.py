"""A team's worker processes live no longer than their lead.

``team`` starts each ``orchestrator work`` child with the lead's pid in
:data:`LEAD_PID_VARIABLE` and the team's lock (an ``flock``) passed on as the descriptor named
in :data:`LOCK_FD_VARIABLE`. The worker, first thing, asks Linux for SIGTERM when its parent
dies (``PR_SET_PDEATHSIG``): a lead killed with SIGKILL leaves no worker claiming items for a
team nobody will merge. SIGTERM stops a worker the way the lead's own stop does (its work
committed, its item given back). Until the last worker has stopped, the team's lock is held by
the descriptor it inherited, so ``team --resume`` waits for them rather than working beside
them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Mapping

#: The lead's pid, in a worker's environment.
LEAD_PID_VARIABLE = "ORCHESTRATOR_TEAM_LEAD_PID"
#: The descriptor of the team's lock a worker inherited, in its environment.
LOCK_FD_VARIABLE = "ORCHESTRATOR_TEAM_LOCK_FD"
_PR_SET_PDEATHSIG = 1


def worker_environment(lock_fd: int) -> dict[str, str]:
    """What a worker's environment adds: the lead's pid and the lock's descriptor."""
    return {LEAD_PID_VARIABLE: str(os.getpid()), LOCK_FD_VARIABLE: str(lock_fd)}


def follow_lead(environ: Mapping[str, str] | None = None) -> None:
    """In a worker ``team`` started: end by SIGTERM when the lead dies; else nothing.

    A lead that died before this call ran (the worker's parent is no longer it) is SIGTERM
    now. The inherited lock is kept off the worker's own children (sandboxes, hooks): only
    the worker itself holds the team's lock.
    """
    environ = os.environ if environ is None else environ
    with contextlib.suppress(ValueError, OSError):
        os.set_inheritable(int(environ.get(LOCK_FD_VARIABLE, "")), False)
    try:
        lead = int(environ.get(LEAD_PID_VARIABLE, ""))
    except ValueError:
        return
    if sys.platform == "linux":
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    if os.getppid() != lead:
        os.kill(os.getpid(), signal.SIGTERM)
