"""Per-call control groups and the launcher that puts a command in its group before it runs.

Parsing is checked on the text of both layouts (a v1/v2 hybrid and a pure v2 host). The launcher
is run for real: it writes its pid into each group's ``cgroup.procs`` (plain files here, so this
needs no cgroup) and execs the command under the rlimits, with dash and with bash. Where a
hierarchy is writable here, a real group is made, joined, capped, emptied and removed; elsewhere
those tests skip with the reason.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.tools import cgroups, processes
from orchestrator.tools.cgroups import CallGroup, Controllers, Hierarchy
from orchestrator.tools.processes import LauncherShell, launcher
from orchestrator.tools.sandbox import Limits

HYBRID_MEMBERSHIP = """\
9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu:/
0::/
"""


def _hybrid_mounts(root: Path) -> str:
    return (
        f"tmpfs {root} tmpfs rw 0 0\n"
        f"cgroup {root}/cpu cgroup rw,relatime,cpu 0 0\n"
        f"cgroup {root}/memory cgroup rw,relatime,memory 0 0\n"
        f"cgroup {root}/pids cgroup rw,relatime,pids 0 0\n"
        f"cgroup2 {root}/unified cgroup2 rw,relatime 0 0\n"
        "proc /proc proc rw 0 0\n"
    )


def test_a_hybrid_host_offers_the_v1_pids_and_memory_hierarchies_and_the_unified_one(
    tmp_path: Path,
) -> None:
    (tmp_path / "unified").mkdir()
    (tmp_path / "unified" / "cgroup.controllers").write_text("\n", encoding="utf-8")
    found = cgroups.parse_hierarchies(_hybrid_mounts(tmp_path), HYBRID_MEMBERSHIP)
    assert found == [
        Hierarchy(1, tmp_path / "memory" / "process_api" / "abc", {"memory"}),
        Hierarchy(1, tmp_path / "pids", {"pids"}),
        Hierarchy(2, tmp_path / "unified", set()),
    ]


def test_a_pure_v2_host_offers_its_own_group_with_the_controllers_it_delegates(
    tmp_path: Path,
) -> None:
    group = tmp_path / "user.slice" / "my session.scope"
    group.mkdir(parents=True)
    (group / "cgroup.controllers").write_text("cpu io memory pids\n", encoding="utf-8")
    escaped = str(tmp_path).replace(" ", "\\040")
    mounts = f"cgroup2 {escaped} cgroup2 rw,nsdelegate 0 0\n"
    found = cgroups.parse_hierarchies(mounts, "0::/user.slice/my session.scope\n")
    assert found == [Hierarchy(2, group, {"memory", "pids"})]


def test_no_cgroup_mounts_offer_nothing_and_the_fallback_is_described() -> None:
    assert cgroups.parse_hierarchies("proc /proc proc rw 0 0\n", "0::/\n") == []
    assert cgroups.usable_hierarchies([]) == Controllers()
    assert "RLIMIT_NPROC (not for root)" in Controllers().describe()


def test_a_hierarchy_that_is_not_a_cgroup_is_not_usable(tmp_path: Path) -> None:
    # A plain directory takes the probe's mkdir but has no pids.max to write: no limit, no kill.
    assert cgroups.usable_hierarchies([Hierarchy(1, tmp_path, {"pids"})]) == Controllers()
    assert list(tmp_path.iterdir()) == []


# --- the launcher --------------------------------------------------------------------------------

SHELLS = {
    "dash": LauncherShell("/bin/dash", "-p", 512),
    "bash": LauncherShell("/bin/bash", "-u", 1024),
}


@pytest.fixture(params=sorted(SHELLS))
def shell(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> LauncherShell:
    chosen = SHELLS[request.param]
    if not os.access(chosen.path, os.X_OK):
        pytest.skip(f"{chosen.path} is not installed")
    monkeypatch.setattr(processes, "launcher_shell", lambda: chosen)
    return chosen


def _limit(limits_text: str, name: str) -> str:
    line = next(line for line in limits_text.splitlines() if line.startswith(name))
    return line[len(name) :].split()[0]


def _hard_limit(kind: int, value: int) -> int:
    hard = resource.getrlimit(kind)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


@pytest.mark.usefixtures("shell")
def test_the_launcher_joins_every_group_then_execs_the_command_under_the_rlimits(
    tmp_path: Path,
) -> None:
    groups = [tmp_path / "pids-group", tmp_path / "memory-group"]
    for group in groups:
        group.mkdir()
    limits = Limits(max_processes=77, max_file_bytes=3 << 20, max_memory_bytes=300 << 20)
    argv = launcher(
        ["bash", "-c", "echo $$; cat /proc/self/limits"], limits, CallGroup(tuple(groups))
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    pid, limits_text = done.stdout.split("\n", 1)
    # The command is the launcher itself, exec'd: the pid in the group is the one that runs.
    assert [(g / "cgroup.procs").read_text(encoding="utf-8") for g in groups] == [pid + "\n"] * 2
    processes_limit = str(_hard_limit(resource.RLIMIT_NPROC, 77))
    assert _limit(limits_text, "Max processes") == processes_limit
    assert _limit(limits_text, "Max file size") == str(_hard_limit(resource.RLIMIT_FSIZE, 3 << 20))
    assert _limit(limits_text, "Max data size") == str(_hard_limit(resource.RLIMIT_DATA, 300 << 20))
    assert _limit(limits_text, "Max core file size") == "0"


@pytest.mark.usefixtures("shell")
def test_the_launcher_runs_nothing_when_it_cannot_join_its_group(tmp_path: Path) -> None:
    missing = CallGroup((tmp_path / "removed-meanwhile",))
    argv = launcher(["touch", str(tmp_path / "ran")], Limits(), missing)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 125
    assert not (tmp_path / "ran").exists()


@pytest.mark.usefixtures("shell")
def test_without_a_group_the_launcher_only_sets_the_rlimits(tmp_path: Path) -> None:
    argv = launcher(["bash", "-c", "cat /proc/self/limits"], Limits(max_processes=55), None)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
    assert _limit(done.stdout, "Max processes") == str(_hard_limit(resource.RLIMIT_NPROC, 55))


# --- real groups, where this process may make them ----------------------------------------------


def _require(controller: str | None = None) -> Controllers:
    found = cgroups.available()
    if not found.usable:
        pytest.skip(f"no writable control group here ({found.describe()})")
    if controller is not None and not found.bounds(controller):
        pytest.skip(f"no writable {controller} controller here ({found.describe()})")
    return found


@contextlib.contextmanager
def _started_in(group: CallGroup, argv: list[str]) -> Iterator[subprocess.Popen[bytes]]:
    """``argv`` running in ``group``; afterwards, whatever happened, emptied and removed."""
    process = subprocess.Popen(launcher(argv, Limits(), group), start_new_session=True)
    try:
        yield process
    finally:
        cgroups.kill_members(group)
        process.wait(10)
        cgroups.remove(group)


def _assert_emptied(group: CallGroup, process: subprocess.Popen[bytes]) -> None:
    cgroups.kill_members(group)
    assert cgroups.members(group) == set()
    assert process.wait(10) == -9


def _run_in(group: CallGroup, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        launcher(argv, Limits(), group), capture_output=True, text=True, timeout=60, check=False
    )


def test_a_call_group_caps_processes_and_is_emptied_and_removed() -> None:
    found = _require("pids")
    group = cgroups.create_call_group(found, max_processes=6, max_memory_bytes=256 << 20)
    assert group is not None
    assert all(d.name.startswith(f"orchestrator-{os.getpid()}-") for d in group.directories)
    # Python's fork fails at once at the cap (bash would retry for seconds); each sleep leaves
    # for a session of its own, and outlives its parent.
    spawn = (
        "import subprocess\n"
        "started = 0\n"
        "for _ in range(20):\n"
        "    try:\n"
        "        subprocess.Popen(['sleep', '60'], start_new_session=True,\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "        started += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print(started)\n"
    )
    try:
        done = _run_in(group, ["python3", "-c", spawn])
        assert done.stdout == "5\n"  # the cap counts the spawner itself
        left = cgroups.members(group)
        assert len(left) == 5
        cgroups.kill_members(group)
        assert cgroups.members(group) == set()
    finally:
        cgroups.kill_members(group)
        cgroups.remove(group)
    assert not any(directory.exists() for directory in group.directories)


def test_a_call_group_caps_the_memory_of_all_its_processes_together() -> None:
    found = _require("memory")
    group = cgroups.create_call_group(found, max_processes=64, max_memory_bytes=64 << 20)
    assert group is not None
    hog = "import time; b = b'x' * (40 << 20); time.sleep(1)"
    script = (
        f'for i in 1 2 3; do python3 -c "{hog}" & done; '
        "for p in $(jobs -p); do wait $p; echo $?; done"
    )
    try:
        done = _run_in(group, ["bash", "-c", script])
    finally:
        cgroups.kill_members(group)
        cgroups.remove(group)
    # Each hog alone fits; three together do not, and the kernel kills some (SIGKILL: 137).
    assert "137" in done.stdout.split(), done.stdout + done.stderr


def test_groups_are_named_apart_for_commands_run_at_once() -> None:
    found = _require()
    first = cgroups.create_call_group(found, max_processes=8, max_memory_bytes=64 << 20)
    second = cgroups.create_call_group(found, max_processes=8, max_memory_bytes=64 << 20)
    assert first is not None and second is not None
    try:
        assert set(first.directories).isdisjoint(second.directories)
    finally:
        for group in (first, second):
            cgroups.remove(group)


def test_kill_members_ends_a_forking_loop_within_its_cap() -> None:
    found = _require("pids")
    group = cgroups.create_call_group(found, max_processes=12, max_memory_bytes=256 << 20)
    assert group is not None
    with _started_in(group, ["bash", "-c", "while :; do sleep 30 & done 2>/dev/null"]) as process:
        # Until the loop has run into the cap (a fork refused), however slowly it got there.
        deadline = time.monotonic() + 60
        while not _forks_refused(group) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _forks_refused(group)
        assert len(cgroups.members(group)) <= 12
        _assert_emptied(group, process)


def test_a_listed_pid_that_is_no_longer_a_member_is_not_killed() -> None:
    # As a member that ended and left its pid to a stranger between the listing and the kill:
    # the kill reaches only processes the group still holds once each is pinned by a pidfd.
    found = _require()
    group = cgroups.create_call_group(found, max_processes=8, max_memory_bytes=64 << 20)
    assert group is not None
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        with _started_in(group, ["sleep", "60"]) as member:
            deadline = time.monotonic() + 60
            while member.pid not in cgroups.members(group) and time.monotonic() < deadline:
                time.sleep(0.01)
            cgroups._kill_pinned(group, {stranger.pid, member.pid})
            assert member.wait(10) == -9
            # A SIGKILL sent would have ended it by now; one not sent never fails this.
            with pytest.raises(subprocess.TimeoutExpired):
                stranger.wait(1)
    finally:
        stranger.kill()
        stranger.wait()


def _forks_refused(group: CallGroup) -> bool:
    """Whether the group's ``pids.max`` has refused a fork (``max`` in ``pids.events``)."""
    for directory in group.directories:
        try:
            events = (directory / "pids.events").read_text(encoding="utf-8")
        except OSError:
            continue
        for line in events.splitlines():
            name, _, count = line.partition(" ")
            if name == "max" and int(count) > 0:
                return True
    return False


def test_groups_a_killed_harness_left_are_emptied_and_removed_by_the_next() -> None:
    found = _require()
    dead = subprocess.Popen(["true"])  # once reaped, its pid stands for a harness that died
    dead.wait()
    ours = cgroups.group_name(1).split("-")[2]  # this pid namespace
    left = CallGroup(
        tuple(h.parent / f"orchestrator-{dead.pid}-{ours}-1" for h in found.hierarchies)
    )
    # The same dead pid in another pid namespace may be a live harness there: never swept.
    elsewhere = tuple(h.parent / f"orchestrator-{dead.pid}-1-1" for h in found.hierarchies)
    for directory in elsewhere:
        directory.mkdir()
    for directory in left.directories:
        directory.mkdir()
    survivor = subprocess.Popen(launcher(["sleep", "60"], Limits(), left), start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while survivor.pid not in cgroups.members(left) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert survivor.pid in cgroups.members(left)
        swept = {d for group in cgroups.abandoned_groups(found) for d in group.directories}
        assert set(left.directories) <= swept
        assert not set(elsewhere) & swept
        cgroups.available.cache_clear()
        cgroups.available()
        assert survivor.wait(10) == -9
        assert not any(directory.exists() for directory in left.directories)
    finally:
        cgroups.kill_members(left)
        survivor.wait(10)
        cgroups.remove(left)
        cgroups.remove(CallGroup(elsewhere))


def test_a_group_named_for_no_possible_pid_is_passed_over_by_the_sweep() -> None:
    found = _require()
    ours = cgroups.group_name(1).split("-")[2]
    # Whoever can write the hierarchy (a root command outside bwrap) can leave these behind;
    # the next harness must neither raise on them nor take them for its own.
    crafted = CallGroup(
        tuple(
            h.parent / f"orchestrator-{pid}-{ours}-1"
            for h in found.hierarchies
            for pid in ("9" * 30, "\u00b2", "\u0663", "0", str(1 << 23))
        )
    )
    for directory in crafted.directories:
        directory.mkdir()
    try:
        swept = {d for group in cgroups.abandoned_groups(found) for d in group.directories}
        assert not set(crafted.directories) & swept
        cgroups.available.cache_clear()
        assert cgroups.available().usable
    finally:
        cgroups.remove(crafted)


def test_a_mount_point_that_is_not_utf8_leaves_bash_and_the_group_probe_working(
    tmp_path: Path,
) -> None:
    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare(1) to mount in a private mount namespace")
    odd = os.fsencode(tmp_path) + b"/label-\xff"
    os.mkdir(odd)
    # A mount namespace of its own, so the rest of the machine never sees the mount.
    check = (
        "import sys\n"
        "from pathlib import Path\n"
        "from orchestrator.tools import Workdir\n"
        "from orchestrator.tools.bash import BashTool\n"
        "from orchestrator.tools.cgroups import available\n"
        "print(available().describe())\n"
        "print(BashTool(Workdir(Path(sys.argv[1]))).run({'command': 'echo ran'}).text.strip())\n"
    )
    done = subprocess.run(
        [
            unshare,
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            'mount -t tmpfs none "$1" && exec "$2" -c "$3" "$4"',
            "mount",
            odd,
            sys.executable,
            check,
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "ran"


def test_a_v2_group_without_controllers_still_gives_membership_and_cgroup_kill() -> None:
    mounts = Path("/proc/self/mounts").read_text(encoding="utf-8")
    membership = Path("/proc/self/cgroup").read_text(encoding="utf-8")
    unified = [h for h in cgroups.parse_hierarchies(mounts, membership) if h.version == 2]
    found = cgroups.usable_hierarchies(unified)
    if not found.usable:
        pytest.skip(f"no writable v2 hierarchy with cgroup.kill here (candidates: {unified})")
    (hierarchy,) = found.hierarchies
    assert hierarchy.kills_at_once
    group = cgroups.create_call_group(found, max_processes=8, max_memory_bytes=64 << 20)
    assert group is not None and group.killer is not None
    with _started_in(group, ["bash", "-c", "setsid sleep 60 & setsid sleep 60 & wait"]) as process:
        deadline = time.monotonic() + 10
        while len(cgroups.members(group)) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(cgroups.members(group)) == 3
        _assert_emptied(group, process)
    assert not any(directory.exists() for directory in group.directories)


def test_a_cap_the_kernel_refuses_leaves_the_other_caps_in_force(tmp_path: Path) -> None:
    # On a v2 host one directory holds both caps: a refused pids.max (a value past the kernel's
    # pid limit) must not cost the call its memory cap.
    hierarchy = Hierarchy(2, tmp_path, frozenset({"pids", "memory"}))
    directory = tmp_path / "call"
    directory.mkdir()
    (directory / "pids.max").mkdir()  # any write to it fails, as a refused value would
    cgroups._set_limits(hierarchy, directory, 10**9, 64 << 20)
    assert (directory / "memory.max").read_text(encoding="utf-8") == str(64 << 20)
    assert (directory / "memory.swap.max").read_text(encoding="utf-8") == "0"
