"""What trusting a folder covers: its files, their digests, and every command they would start.

The trust question a terminal asks, ``orchestrator trust --show`` and ``orchestrator hooks`` all
read one :class:`TrustScope`: the project's ``orchestrator.toml`` and ``.mcp.json`` (with their
digests), the settings of that file that need trust, the MCP servers it would start (command and
arguments), the hooks in effect by event (marked when they run outside the sandbox), and the
files those hooks name inside the folder, whose digests the trust record keeps.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.config import CONFIG_FILE, UntrustedConfig, load_config, user_config_path
from orchestrator.hooks import Hook, load_hooks
from orchestrator.hooks.scripts import digests, file_digest, named_files
from orchestrator.inert import inert
from orchestrator.tools.mcp_config import MCP_JSON, McpServerConfig, load_servers
from orchestrator.trust import TrustStore


@attrs.frozen
class TrustScope:
    """Everything a folder's files would make a run do that needs the folder trusted."""

    folder: Path
    #: The project's own files (``orchestrator.toml``, ``.mcp.json``) with their digests now.
    files: tuple[tuple[Path, str], ...] = ()
    #: Settings of the project file that only a trusted folder may set.
    settings: tuple[str, ...] = ()
    #: The MCP servers the project's files start.
    servers: tuple[McpServerConfig, ...] = ()
    #: Every hook in effect here: the user's and the project's, skipped ones too.
    hooks: tuple[Hook, ...] = ()
    #: The files the hooks name inside the folder (relative path → digest now).
    scripts: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def project_hooks(self) -> tuple[Hook, ...]:
        return tuple(hook for hook in self.hooks if hook.project and hook.runs)

    @property
    def needs_trust(self) -> bool:
        """Whether anything here waits for trust: a widened setting, a server or a hook."""
        return bool(self.settings or self.servers or self.project_hooks)

    def commands(self) -> list[str]:
        """One line per command the folder's files would start, hooks by event (inert text)."""
        lines = [f"MCP server {server.name}: {_server_command(server)}" for server in self.servers]
        for hook in self.project_hooks:
            where = f" [{hook.matcher}]" if hook.matcher not in ("", "*") else ""
            outside = "  (OUTSIDE the sandbox, with your rights)" if hook.outside else ""
            lines.append(f"{hook.event} hook{where}: {hook.shown}{outside}")
        # The folder wrote these: one line each, so none can pose as the question's own lines.
        return [inert(line.replace("\n", "\\n")) for line in lines]

    def question(self, *, changed: bool) -> str:
        """The trust question: what the files set and every command they start, then the ask."""
        names = ", ".join(str(path) for path, _ in self.files) or str(self.folder)
        lines = [f"{names} would have this run:"]
        if self.settings:
            lines.append(f"  set {', '.join(self.settings)}")
        if self.scripts:
            lines.append(inert(f"  trust, by digest, the hook scripts {', '.join(self.scripts)}"))
        lines.extend(f"  start {line}" for line in self.commands())
        if changed:
            lines.append("It changed since you trusted this folder.")
        lines.append(f"Do you trust the files in this folder ({self.folder})?")
        return "\n".join(lines)


def _server_command(server: McpServerConfig) -> str:
    if server.transport == "http":
        return f"{server.url} (streamable HTTP)"
    return shlex.join([server.command, *server.args])


def trust_scope(
    workdir: Path, settings: Mapping[str, Any] | None = None, **config: Any
) -> TrustScope:
    """What trusting ``workdir`` would cover now; ``settings`` are the flags given.

    Raises what the loaders raise for a malformed file (``ConfigError``, ``HookConfigError``,
    ``McpConfigError``).
    """
    folder = workdir.resolve()
    widened: tuple[str, ...] = ()
    try:
        load_config(folder, settings, trusted=False, **config)
    except UntrustedConfig as error:
        widened = tuple(error.names)
    files = tuple(
        (folder / name, file_digest(folder / name))
        for name in (CONFIG_FILE, MCP_JSON)
        if (folder / name).is_file()
    )
    servers = tuple(s for s in load_servers(folder, user_config_path()) if s.project)
    hooks = load_hooks([(user_config_path(), False), (folder / CONFIG_FILE, True)])
    scripts: dict[str, str] = {}
    for hook in hooks:
        if hook.runs:
            scripts.update(digests(named_files(hook.shell_command(folder), folder).inside, folder))
    return TrustScope(folder, files, widened, servers, hooks, scripts)


def hook_rows(scope: TrustScope, store: TrustStore) -> list[dict[str, Any]]:
    """One row per hook in effect: what it is, where from, where it runs, and why not if not."""
    folder = scope.folder
    trusted = store.trusts(folder)
    record = store.record(folder)
    seen = record.files if record is not None else {}
    rows: list[dict[str, Any]] = []
    for hook in scope.hooks:
        scripts = digests(named_files(hook.shell_command(folder), folder).inside, folder)
        changed = [name for name, digest in scripts.items() if seen.get(name, digest) != digest]
        unseen = [name for name in scripts if name not in seen]
        why = hook.skipped
        if not why and hook.project and not trusted:
            why = "the folder is not trusted (orchestrator trust)"
        if not why and changed:
            why = f"{', '.join(changed)} changed since the folder was trusted"
        if not why and hook.outside and unseen:
            why = f"{', '.join(unseen)} in the folder was not trusted (orchestrator trust)"
        rows.append(
            {
                "event": hook.event,
                "matcher": hook.matcher,
                "command": hook.shown,
                "origin": hook.origin,
                "project": hook.project,
                "trusted": trusted if hook.project else True,
                "outside": hook.outside,
                "runs": not why,
                "why": why,
                "scripts": scripts,
            }
        )
    return rows
