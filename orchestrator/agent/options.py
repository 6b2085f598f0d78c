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
from orchestrator.hooks import Hook, HookConfigError
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
    #: The hooks in effect (issue 24; skipped ones too), and the project files whose hooks may
    #: not run (untrusted).
    hooks: tuple[Hook, ...] = ()
    hooks_untrusted: tuple[str, ...] = ()
    #: How the front end names a setting in a person's message: the CLI's ``--max-rounds``,
    #: the API's ``max_rounds=`` (with :func:`~orchestrator.config.given` for a value).
    label: Callable[[str], str] = flag_label
    #: What the hooks and MCP servers run from the work directory, as a person trusted it
    #: (relative path → sha256, or ``absent``; :mod:`orchestrator.pinning`).
    hook_files: Mapping[str, str] = attrs.field(factory=dict)

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

    A project file that widens anything, starts MCP servers or runs hooks needs the folder
    trusted: ``trust``, a recorded trust, or a yes from ``ask``, which is asked once with every
    command the folder's files would start. ``label(name)`` names a setting in errors (the
    CLI's ``--max-rounds``, the API's ``max_rounds=``).
    """
    from orchestrator.config import user_config_path
    from orchestrator.tools.mcp_config import load_servers
    from orchestrator.trust_scope import trust_scope

    if not workdir.is_dir():
        raise SettingsError(f"{_workdir_label(label)} {workdir}: no such directory")
    try:
        store = TrustStore(trust_file())
        scope = trust_scope(workdir, settings, label=label)
        recorded = store.record(workdir)
        trusted = trust or store.trusts(workdir)
        changed = store.changed_since_trusted(workdir)
        asking = not trusted and scope.needs_trust and ask is not None
        if asking and ask is not None and ask(scope.question(changed=changed)):
            store.add(workdir, scope.scripts)
            trusted, recorded = True, store.record(workdir)
        try:
            config = load_config(workdir, settings, trusted=trusted, label=label)
        except UntrustedConfig as error:
            since = " (it changed since the folder was trusted)" if changed and ask is None else ""
            raise SettingsError(f"{error}{since}") from None
        servers = load_servers(workdir, user_config_path(), trusted=trusted)
    except (ConfigError, HookConfigError, McpConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None
    hooks = scope.hooks
    untrusted: tuple[str, ...] = ()
    if not trusted:
        untrusted = tuple(dict.fromkeys(hook.origin for hook in scope.project_hooks))
        hooks = tuple(hook for hook in hooks if not hook.project)
    # The scripts a person has seen: all of them now when trusted for this run alone.
    seen = dict(scope.scripts) if trust else dict(recorded.files if recorded else {})
    return RunOptions(
        workdir=workdir.resolve(),
        config=config,
        mcp_servers=servers,
        mcp_trusted=trusted or not scope.servers,
        hooks=hooks,
        hooks_untrusted=untrusted,
        label=label or flag_label,
        hook_files=seen,
        **options,
    )


def _workdir_label(label: Callable[[str], str] | None) -> str:
    return "--workdir" if label is None else label("workdir")
