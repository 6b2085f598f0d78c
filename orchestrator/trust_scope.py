"""What trusting a folder covers: its files, their digests, and every command they would start.

The trust question a terminal asks, ``orchestrator trust --show`` and ``orchestrator hooks`` all
read one :class:`TrustScope`: the project's ``orchestrator.toml`` and ``.mcp.json`` (with their
digests), the settings of that file that need trust, the MCP servers it would start (command and
arguments), the hooks in effect by event (marked when they run outside the sandbox), and what
those hooks and servers run from the folder (:mod:`orchestrator.pinning`), whose digests the
trust record keeps, with those that cannot run for it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from orchestrator.config import CONFIG_FILE, UntrustedConfig, load_config, user_config_path
from orchestrator.hooks import Hook, load_hooks
from orchestrator.inert import inert
from orchestrator.pinning import ABSENT, merged, pin_problem, shown, state
from orchestrator.tools.mcp_config import MCP_JSON, McpServerConfig, load_servers, server_reading
from orchestrator.trust import TrustStore


@attrs.frozen
class Pinned:
    """One command the folder's files start, and what it runs from the folder."""

    #: ``PreToolUse hook `./check.sh``` or ``MCP server notes``.
    what: str
    #: It runs with the user's rights (an ``outside`` hook, any MCP server).
    outside: bool
    #: What it runs from the folder: relative path → sha256, or ``absent``.
    pins: Mapping[str, str] = attrs.field(factory=dict)
    #: Why it may not run with the user's rights ("" when all it runs is pinned).
    refusal: str = ""

    def lines(self, trusted: Mapping[str, str] | None) -> list[str]:
        """What ``trust --show`` says of it (inert); ``trusted``: the record's files, if any."""
        lines = []
        for name, now in self.pins.items():
            recorded = None if trusted is None else trusted.get(name)
            note = "" if recorded in (None, now) else "  (changed since it was trusted)"
            lines.append(f"pins {name}  {shown(now)}{note}  ({self.what})")
        if self.refusal:
            lines.append(f"does not run the {self.what}: {self.refusal}")
        return [inert(line.replace("\n", "\\n")) for line in lines]


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
    #: What each hook and server runs from the folder.
    pinned: tuple[Pinned, ...] = ()

    @property
    def scripts(self) -> dict[str, str]:
        """What the hooks and servers run from the folder (relative path → state now)."""
        return merged(pinned.pins for pinned in self.pinned)

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
        files = [name for name, state in self.scripts.items() if state != ABSENT]
        if files:
            lines.append(inert(f"  trust, by digest, the files they run: {', '.join(files)}"))
        lines.extend(f"  start {line}" for line in self.commands())
        lines.extend(
            inert(f"  not run: the {pinned.what}: {pinned.refusal}")
            for pinned in self.pinned
            if pinned.refusal and pinned.outside
        )
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
        (folder / name, state(folder / name))
        for name in (CONFIG_FILE, MCP_JSON)
        if (folder / name).is_file()
    )
    every_server = load_servers(folder, user_config_path())
    servers = tuple(s for s in every_server if s.project)
    hooks = load_hooks([(user_config_path(), False), (folder / CONFIG_FILE, True)])
    pinned = [_hook_pinned(hook, folder) for hook in hooks if hook.runs]
    for server in every_server:
        reading = server_reading(server, folder)
        if reading is not None:
            what = f"MCP server {server.name}"
            pinned.append(Pinned(what, True, reading.pins(folder), reading.refusal))
    return TrustScope(folder, files, widened, servers, hooks, tuple(pinned))


def _hook_pinned(hook: Hook, folder: Path) -> Pinned:
    reading = hook.reading(folder)
    refusal = reading.refusal if hook.outside else ""
    return Pinned(f"{hook.event} hook `{hook.shown}`", hook.outside, reading.pins(folder), refusal)


def hook_rows(scope: TrustScope, store: TrustStore) -> list[dict[str, Any]]:
    """One row per hook in effect: what it is, where from, where it runs, and why not if not."""
    folder = scope.folder
    trusted = store.trusts(folder)
    record = store.record(folder)
    seen = record.files if record is not None else {}
    rows: list[dict[str, Any]] = []
    for hook in scope.hooks:
        pinned = _hook_pinned(hook, folder)
        why = hook.skipped
        if not why and hook.project and not trusted:
            why = "the folder is not trusted (orchestrator trust)"
        if not why and pinned.refusal:
            why = pinned.refusal
        if not why:
            problem = pin_problem(pinned.pins, folder, trusted=seen, outside=hook.outside)
            why = f"{problem} (orchestrator trust)" if problem else ""
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
                "scripts": dict(pinned.pins),
            }
        )
    return rows
