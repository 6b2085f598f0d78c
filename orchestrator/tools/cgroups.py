"""Per-call control groups: a process and memory cap that holds for root, and a kill by membership.

The kernel does not hold root to ``RLIMIT_NPROC``, and ``RLIMIT_DATA`` bounds one process, not a
command's whole tree, so each bash call gets its own group (:func:`group_name`) beneath the
harness's own group in every writable hierarchy: ``pids.max`` and the memory cap (v2
``memory.max``, v1 ``memory.limit_in_bytes``) bound the call, and afterwards every member is
killed (v2 ``cgroup.kill``; else ``pids.max`` lowered to 0, so none can fork again, and every
member in ``cgroup.procs`` SIGKILLed until empty) and the group removed. A double fork or
``setsid`` leaves the process tree and the session, not the group.

Both layouts are found from ``/proc/self/mounts`` and ``/proc/self/cgroup``: a v1/v2 hybrid
(``/sys/fs/cgroup/pids``, ``/sys/fs/cgroup/memory``, ``/sys/fs/cgroup/unified``) and a pure v2
host whose group delegates ``pids`` and ``memory``. Where nothing is writable (an ordinary user
without delegation) :func:`available` finds no hierarchy and the caller falls back to rlimits
and the per-call reaper. Found once per process; nothing is probed at import.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import itertools
import os
import re
import signal
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import attrs

from orchestrator.tools._reaper import running

#: The limits a call's group can carry.
CONTROLLERS = ("pids", "memory")
_KILL_SECONDS = 2.0
_REMOVE_SECONDS = 1.0
# Members usually leave within a millisecond of their SIGKILL (a bwrap tearing down its
# namespaces is the slow one), so waits start short and double up to a bound.
_FIRST_PAUSE = 0.0001
_LONGEST_PAUSE = 0.005
_PID = re.compile(r"[0-9]{1,8}")
# The kernel's bound on /proc/sys/kernel/pid_max (PID_MAX_LIMIT on 64-bit).
_PID_MAX_LIMIT = 1 << 22
# Numbers call groups within this process; next() on a count is atomic under the GIL, so
# commands run from several threads (eval --jobs) never share a name.
_serial = itertools.count(1)


def _frozenset(values: Iterable[str]) -> frozenset[str]:
    return frozenset(values)


@attrs.frozen
class Hierarchy:
    """One mounted hierarchy where call groups can be made, and what a group there bounds."""

    version: int = attrs.field(validator=attrs.validators.in_((1, 2)))
    #: The harness's own group in this hierarchy; call groups are made beneath it.
    parent: Path
    #: Which of :data:`CONTROLLERS` a group here enforces.
    controllers: frozenset[str] = attrs.field(converter=_frozenset)
    #: Whether a group here has ``cgroup.kill``, ending every member in one write (v2, 5.14+).
    kills_at_once: bool = False

    def describe(self) -> str:
        what = ", ".join(sorted(self.controllers)) or "membership only"
        kill = ", cgroup.kill" if self.kills_at_once else ""
        return f"{self.parent} (v{self.version}: {what}{kill})"


@attrs.frozen
class Controllers:
    """The hierarchies per-call groups go into; empty where nothing is writable."""

    hierarchies: tuple[Hierarchy, ...] = ()

    @property
    def usable(self) -> bool:
        return bool(self.hierarchies)

    def bounds(self, controller: str) -> bool:
        """Whether some hierarchy enforces ``controller`` (``pids`` or ``memory``)."""
        return any(controller in h.controllers for h in self.hierarchies)

    def describe(self) -> str:
        """One line for ``doctor``."""
        if not self.usable:
            return (
                "none writable: processes bounded by RLIMIT_NPROC (not for root), memory by "
                "RLIMIT_DATA per process, survivors found by the per-call reaper"
            )
        return "; ".join(h.describe() for h in self.hierarchies)


@attrs.frozen
class CallGroup:
    """One bash call's group: a directory in each hierarchy, made before the command starts."""

    directories: tuple[Path, ...]
    #: The v2 directory whose ``cgroup.kill`` ends every member at once, if any.
    killer: Path | None = None

    @property
    def procs_files(self) -> tuple[Path, ...]:
        """The files the launcher writes its pid into, so it joins before it runs anything."""
        return tuple(directory / "cgroup.procs" for directory in self.directories)


def parse_hierarchies(mounts: str, membership: str) -> list[Hierarchy]:
    """Candidate hierarchies from ``/proc/self/mounts`` and ``/proc/self/cgroup`` text.

    For v1, only mounts of the ``pids`` or ``memory`` controller; for v2, the unified mount, with
    the controllers its group offers to children (``cgroup.controllers``). Nothing is written.
    """
    groups_v1: dict[str, str] = {}
    group_v2: str | None = None
    for line in membership.splitlines():
        number, _, rest = line.partition(":")
        names, _, path = rest.partition(":")
        if number == "0" and names == "":
            group_v2 = path
        for name in names.split(","):
            groups_v1[name] = path
    found: list[Hierarchy] = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point, kind, options = _unescape(fields[1]), fields[2], fields[3].split(",")
        if kind == "cgroup":
            wanted = [name for name in CONTROLLERS if name in options and name in groups_v1]
            if wanted:
                parent = Path(mount_point) / groups_v1[wanted[0]].lstrip("/")
                found.append(Hierarchy(1, parent, wanted))
        elif kind == "cgroup2" and group_v2 is not None:
            parent = Path(mount_point) / group_v2.lstrip("/")
            found.append(Hierarchy(2, parent, _offered(parent)))
    return found


def _unescape(field: str) -> str:
    # /proc/self/mounts writes space, tab, newline and backslash as octal escapes.
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _offered(parent: Path) -> list[str]:
    try:
        offered = (parent / "cgroup.controllers").read_text(encoding="utf-8").split()
    except OSError:
        return []
    return [name for name in CONTROLLERS if name in offered]


def usable_hierarchies(candidates: Iterable[Hierarchy]) -> Controllers:
    """The candidates where a group can be made and given its limits here, probed once.

    A v2 group needs its controllers turned on for children (``cgroup.subtree_control``); a
    group that holds processes itself may refuse that (the no-internal-process rule), and then
    a child group still gives membership and ``cgroup.kill``, without the limits.
    """
    probed = [found for found in map(_probe, candidates) if found is not None]
    bounding = [hierarchy for hierarchy in probed if hierarchy.controllers]
    if bounding:
        # Membership alone is then already given; one more group per call would only cost.
        return Controllers(tuple(bounding))
    return Controllers(tuple(h for h in probed if h.kills_at_once)[:1])


def _probe(hierarchy: Hierarchy) -> Hierarchy | None:
    if hierarchy.version == 2:
        hierarchy = attrs.evolve(hierarchy, controllers=_delegated(hierarchy))
    probe = hierarchy.parent / group_name(f"probe-{next(_serial)}")
    try:
        probe.mkdir()
    except OSError:
        return None
    try:
        kept = [name for name in hierarchy.controllers if _limit_file(hierarchy, probe, name)]
        kills = hierarchy.version == 2 and os.access(probe / "cgroup.kill", os.W_OK)
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()
    return attrs.evolve(hierarchy, controllers=kept, kills_at_once=kills)


def _delegated(hierarchy: Hierarchy) -> list[str]:
    subtree = hierarchy.parent / "cgroup.subtree_control"
    try:
        enabled = subtree.read_text(encoding="utf-8").split()
    except OSError:
        return []
    for name in hierarchy.controllers:
        if name not in enabled:
            try:
                subtree.write_text(f"+{name}", encoding="utf-8")
                enabled.append(name)
            except OSError:
                continue  # processes in this group, or not delegated: membership only
    return [name for name in hierarchy.controllers if name in enabled]


def _limit_file(hierarchy: Hierarchy, group: Path, controller: str) -> Path | None:
    names = {
        ("pids", 1): "pids.max",
        ("pids", 2): "pids.max",
        ("memory", 1): "memory.limit_in_bytes",
        ("memory", 2): "memory.max",
    }
    path = group / names[controller, hierarchy.version]
    return path if os.access(path, os.W_OK) else None


@functools.cache
def available() -> Controllers:
    """The hierarchies this process makes call groups in, found and probed once.

    Groups a harness killed mid-call left beside its own (its pid gone) are emptied and removed
    on the way: SIGKILL gives the harness no chance to, and outside bwrap nothing else would.
    """
    try:
        # Paths are bytes: one mount point, or a group name, that is not UTF-8 (a drive's
        # label, a directory a root command made) must not fail every bash call after.
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="surrogateescape")
        membership = Path("/proc/self/cgroup").read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return Controllers()
    found = usable_hierarchies(parse_hierarchies(mounts, membership))
    for group in abandoned_groups(found):
        kill_members(group)
        remove(group)
    return found


def abandoned_groups(controllers: Controllers) -> list[CallGroup]:
    """Call groups whose harness is no longer running, one per hierarchy directory."""
    found = []
    for hierarchy in controllers.hierarchies:
        try:
            names = os.listdir(hierarchy.parent)
        except OSError:
            continue
        for name in names:
            owner = _owner(name)
            if owner is not None and owner != os.getpid() and not running(owner):
                found.append(CallGroup((hierarchy.parent / name,)))
    return found


def group_name(label: object) -> str:
    """``orchestrator-<pid>-<pid namespace>-<label>``: whose group it is, in which namespace.

    The pid means something only in its own pid namespace: a harness in another container that
    shares the hierarchy would take a live harness's pid for a dead one's, and sweep its group.
    """
    return f"orchestrator-{os.getpid()}-{_pid_namespace()}-{label}"


@functools.cache
def _pid_namespace() -> int:
    # Looked up once: the sweep asks for it again for every entry of a hierarchy's folder.
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def _owner(name: str) -> int | None:
    """The harness pid a group name gives, when the group is of this pid namespace."""
    parts = name.split("-")
    # Anyone who may write the hierarchy may make a directory of any name, and str.isdigit()
    # takes "²" (which int() refuses) and 10**30 (which os.kill() cannot take): only a number
    # a pid can be is read as one, or the sweep raises on every harness after.
    if len(parts) < 4 or parts[0] != "orchestrator" or not _PID.fullmatch(parts[1]):
        return None
    if parts[2] != str(_pid_namespace()):
        return None
    pid = int(parts[1])
    return pid if 0 < pid <= _PID_MAX_LIMIT else None


def create_call_group(
    controllers: Controllers, *, max_processes: int, max_memory_bytes: int
) -> CallGroup | None:
    """A new group in every usable hierarchy with its limits set, or None where none could be made.

    A hierarchy that refuses (its group removed meanwhile, out of descendants) is left out; the
    call still gets the others.
    """
    name = group_name(next(_serial))
    made: list[Path] = []
    killer: Path | None = None
    for hierarchy in controllers.hierarchies:
        directory = hierarchy.parent / name
        try:
            directory.mkdir()
        except OSError:
            continue
        made.append(directory)
        if hierarchy.kills_at_once:
            killer = directory
        _set_limits(hierarchy, directory, max_processes, max_memory_bytes)
    return CallGroup(tuple(made), killer) if made else None


def _set_limits(hierarchy: Hierarchy, directory: Path, processes: int, memory: int) -> None:
    """Write each cap on its own: one the kernel refuses leaves the others in force.

    A group without its caps still gives membership and the kill, and the rlimits stay.
    """
    caps: list[tuple[str, int]] = []
    if "pids" in hierarchy.controllers:
        caps.append(("pids.max", processes))
    # The swap caps keep the group from paging out past its memory cap instead of being stopped.
    if "memory" in hierarchy.controllers and hierarchy.version == 2:
        caps += [("memory.max", memory), ("memory.swap.max", 0)]
    elif "memory" in hierarchy.controllers:
        caps += [("memory.limit_in_bytes", memory), ("memory.memsw.limit_in_bytes", memory)]
    for name, value in caps:
        with contextlib.suppress(OSError):
            (directory / name).write_text(str(value), encoding="utf-8")


def members(group: CallGroup) -> set[int]:
    """Every process in the group, in any of its hierarchies."""
    found: set[int] = set()
    for procs in group.procs_files:
        with contextlib.suppress(OSError):
            found.update(int(pid) for pid in procs.read_text(encoding="utf-8").split())
    return found


def kill_members(group: CallGroup) -> None:
    """SIGKILL every member until the group is empty (bounded: ``pids.max`` caps each round).

    Without ``cgroup.kill`` the group's ``pids.max`` is lowered to 0 first: killed one by one
    while the rest ran, each death freed a slot that a fork bomb's waiting members filled again
    (a red-team bomb capped at 24 logged 31 starts on a loaded machine). Lower pids are killed
    first: mostly parents, and a child killed before its parent wakes the parent, which then
    runs on (bash ends its fork retries and exits 254). Stopping every member first (SIGSTOP)
    was tried and did the same: a stopped child's SIGCHLD woke its parent.
    """
    if group.killer is not None:
        with contextlib.suppress(OSError):
            (group.killer / "cgroup.kill").write_text("1", encoding="utf-8")
    else:
        _refuse_forks(group)
    deadline = time.monotonic() + _KILL_SECONDS
    for pause in _pauses():
        alive = members(group)
        if not alive:
            return
        if time.monotonic() > deadline:
            return  # stuck in the kernel (D state): nothing more a signal can do
        _kill_pinned(group, alive)
        time.sleep(pause)


def _kill_pinned(group: CallGroup, found: set[int]) -> None:
    """SIGKILL the members ``found``, each through a pidfd opened before it is known to be one.

    A member that ended since it was listed may have left its pid to a stranger: each pid is
    pinned first (a pidfd names one process, not a number), and signalled only if the group
    still lists it afterwards, so the pinned process is the member. In pid order.
    """
    pinned: dict[int, int] = {}
    try:
        for pid in sorted(found):
            try:
                pinned[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # gone already
            except (AttributeError, OSError):
                _kill_numbers(found)  # no pidfds (a kernel before 5.3): by number, as before
                return
        still = members(group)
        for pid, pidfd in pinned.items():
            if pid in still:
                with contextlib.suppress(OSError):  # it ended meanwhile
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        for pidfd in pinned.values():
            os.close(pidfd)


def _kill_numbers(found: set[int]) -> None:
    for pid in sorted(found):
        with contextlib.suppress(OSError):  # gone already
            os.kill(pid, signal.SIGKILL)


def _refuse_forks(group: CallGroup) -> None:
    """Lower the group's ``pids.max`` to 0: no member can fork again, whoever dies first."""
    for directory in group.directories:
        limit = directory / "pids.max"
        if limit.exists():
            with contextlib.suppress(OSError):  # the group is going; the kill still runs
                limit.write_text("0", encoding="ascii")


def remove(group: CallGroup) -> None:
    """Remove the group's directories; a dying member may keep one busy for a moment."""
    deadline = time.monotonic() + _REMOVE_SECONDS
    for directory in group.directories:
        for pause in _pauses():
            try:
                directory.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as error:
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    break  # an empty group left behind costs nothing and holds no process
                time.sleep(pause)


def _pauses() -> Iterator[float]:
    pause = _FIRST_PAUSE
    while True:
        yield pause
        pause = min(pause * 2, _LONGEST_PAUSE)
