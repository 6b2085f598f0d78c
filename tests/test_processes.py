"""Waiting for a child without reaping it: its pid, and its process group's id, stay ours.

Once a child is reaped its pid goes back to the kernel, and on a machine whose pid space is
32768 a busy suite goes round it in seconds: a kill by that process group afterwards could end a
stranger's new session. These are the helpers every kill-by-group site waits with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.tools.processes import has_exited, kill_group, wait_unreaped


def _state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return stat[stat.rindex(")") + 2]


@pytest.fixture(params=["pidfd", "polling"])
def pidfd(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways a wait is woken: a pidfd (5.3+), or polling where the kernel has none."""
    if request.param == "polling":

        def no_pidfd(_pid: int) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    return str(request.param)


def test_an_exited_child_is_seen_and_left_a_zombie_holding_its_pid(pidfd: str) -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"], start_new_session=True)
    assert wait_unreaped(child, 60)
    assert has_exited(child)
    # Not reaped: the kernel keeps the pid, so no stranger's session can take it meanwhile.
    assert child.returncode is None
    assert _state(child.pid) == "Z"
    kill_group(child.pid)  # the group of a zombie leader: harmless, and still ours
    assert child.wait(5) == 7
    assert not Path(f"/proc/{child.pid}").exists() or _state(child.pid) != "Z"


def test_a_running_child_is_not_taken_for_exited_and_the_wait_ends_at_its_timeout(
    pidfd: str,
) -> None:
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert not has_exited(child)
        assert not wait_unreaped(child, 0.05)
        assert _state(child.pid) in "SR"
    finally:
        kill_group(child.pid)
        child.wait()
    assert has_exited(child)


def test_a_child_someone_else_reaped_counts_as_exited() -> None:
    child = subprocess.Popen(["true"])
    os.waitpid(child.pid, 0)  # as a SIGCHLD handler elsewhere might
    assert has_exited(child)
    assert wait_unreaped(child, 0)
