"""What a session needs once arguments, the environment and config files are merged.

The folder's trust is asked here: a project file that widens a setting, starts MCP servers
or runs hooks needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.config import (
    Config,
    ConfigError,
    SettingsError,
    UntrustedConfig,
    flag_label,
    load_config,
)
from orchestrator.hooks import (
    Hook,
    HookConfigError,
    load_hooks,
)
from orchestrator.tools.mcp_config import McpConfigError, McpServerConfig
from orchestrator.trust import TrustError, TrustStore, trust_file


@attrs.frozen
class RunOptions:
    """What a session needs once arguments, the environment and config files are merged."""

    workdir: Path
    config: Config
    trace: Path | None = None
    trace_requests: bool = False
    quiet: bool = False
    verbose: bool = False
    output_format: str = "text"
    #: The MCP servers the files name, and whether the project's may start (issue 22).
    mcp_servers: tuple[McpServerConfig, ...] = ()
    mcp_trusted: bool = False
    #: The hooks that may run (issue 24), and the project files whose hooks may not (untrusted).
    hooks: tuple[Hook, ...] = ()
    hooks_untrusted: tuple[str, ...] = ()
    #: How the front end names a setting in a person's message: the CLI's ``--max-rounds``,
    #: the API's ``max_rounds=`` (with :func:`~orchestrator.config.given` for a value).
    label: Callable[[str], str] = flag_label

    @property
    def machine_output(self) -> bool:
        """Stdout belongs to a program (json, stream-json): people's lines go to stderr."""
        return self.output_format != "text"


#: ``ask(question) -> yes``: how a front end asks a person; None where nobody can answer.
Asker = Callable[[str], bool] | None


def load_options(
    workdir: Path,
    settings: Mapping[str, Any],
    *,
    trust: bool = False,
    ask: Asker = None,
    label: Callable[[str], str] | None = None,
    **options: Any,
) -> RunOptions:
    """Settings from ``settings`` (None: not given), the environment and the config files.

    A project file that widens anything, or starts MCP servers, needs the folder trusted:
    ``trust``, a recorded trust, or a yes from ``ask``. ``label(name)`` names a setting in
    errors (the CLI's ``--max-rounds``, the API's ``max_rounds=``).
    """
    if not workdir.is_dir():
        raise SettingsError(f"{_workdir_label(label)} {workdir}: no such directory")
    config = _trusted_config(workdir, settings, trust=trust, ask=ask, label=label)
    servers, trusted = _mcp_servers(workdir, trust=trust, ask=ask)
    hooks, untrusted = _hooks(workdir, trust=trust)
    return RunOptions(
        workdir=workdir.resolve(),
        config=config,
        mcp_servers=servers,
        mcp_trusted=trusted,
        hooks=hooks,
        hooks_untrusted=untrusted,
        label=label or flag_label,
        **options,
    )


def _hooks(workdir: Path, *, trust: bool) -> tuple[tuple[Hook, ...], tuple[str, ...]]:
    """The user's hooks, and the project's when the folder is trusted (they run commands)."""
    from orchestrator.config import CONFIG_FILE, user_config_path

    try:
        hooks = load_hooks([(user_config_path(), False), (workdir / CONFIG_FILE, True)])
        if trust or not any(hook.project for hook in hooks):
            return hooks, ()
        if TrustStore(trust_file()).trusts(workdir):
            return hooks, ()
    except (HookConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None
    files = tuple(dict.fromkeys(hook.origin for hook in hooks if hook.project))
    return tuple(hook for hook in hooks if not hook.project), files


def _workdir_label(label: Callable[[str], str] | None) -> str:
    return "--workdir" if label is None else label("workdir")


def _trusted_config(
    workdir: Path,
    settings: Mapping[str, Any],
    *,
    trust: bool,
    ask: Asker,
    label: Callable[[str], str] | None,
) -> Config:
    """Load the settings; a project file that widens anything needs the folder trusted."""
    try:
        store = TrustStore(trust_file())
        try:
            return load_config(
                workdir, settings, trusted=trust or store.trusts(workdir), label=label
            )
        except UntrustedConfig as error:
            changed = store.changed_since_trusted(workdir)
            if ask is None:
                since = " (it changed since the folder was trusted)" if changed else ""
                raise SettingsError(f"{error}{since}") from None
            question = (
                f"{error.path} sets {', '.join(error.names)}."
                f"{' It changed since you trusted this folder.' if changed else ''} "
                f"Do you trust the files in this folder ({workdir.resolve()})?"
            )
            if not ask(question):
                raise SettingsError(str(error)) from None
            store.add(workdir)
            return load_config(workdir, settings, trusted=True, label=label)
    except (ConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None


def _mcp_servers(
    workdir: Path, *, trust: bool, ask: Asker
) -> tuple[tuple[McpServerConfig, ...], bool]:
    """The configured MCP servers, and whether the project's may start."""
    from orchestrator.config import user_config_path
    from orchestrator.tools.mcp_config import load_servers

    try:
        servers = load_servers(workdir, user_config_path())
        store = TrustStore(trust_file())
        project = [server for server in servers if server.project]
        if trust or not project or store.trusts(workdir):
            return servers, True
        untrusted = load_servers(workdir, user_config_path(), trusted=False)
        if ask is None:
            return untrusted, False  # the run says so in one line as it starts
        files = ", ".join(dict.fromkeys(server.origin for server in project))
        changed = (
            " It changed since you trusted this folder."
            if store.changed_since_trusted(workdir)
            else ""
        )
        question = (
            f"{files} start{'s' if len(project) == 1 else ''} MCP servers "
            f"({', '.join(server.name for server in project)}).{changed} "
            f"Do you trust the files in this folder ({workdir.resolve()})?"
        )
        if not ask(question):
            return untrusted, False
        store.add(workdir)
        return servers, True
    except (McpConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None
