"""``orchestrator mcp list``: each configured MCP server, how it started (or why not), its tools.

The servers start once, as a run would start them, are listed and are stopped again. Exit 0
when every server started, 1 when one did not, 2 for a malformed file.
"""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FullHelpGroup, InputError
from orchestrator.config import ConfigError, load_config, user_config_path
from orchestrator.inert import inert
from orchestrator.tools.mcp import ServerStatus, check_servers
from orchestrator.tools.mcp_config import McpConfigError, load_servers
from orchestrator.trust import TrustError, TrustStore, trust_file

_HOW = {
    "running": "started",
    "stopped": "started",
    "failed": "did not start",
    "crashed": "stopped",
    "not_trusted": "not started",
    "starting": "did not start",
}


@click.group(name="mcp", cls=FullHelpGroup, context_settings=CONTEXT_SETTINGS)
def mcp_group() -> None:
    """MCP servers: what .mcp.json and [mcp_servers] name, and whether each starts."""


@mcp_group.command(name="list", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Read this directory's .mcp.json and orchestrator.toml.",
)
@click.option("--trust", is_flag=True, help="Trust this folder's files for this listing.")
def list_servers(workdir: Path, trust: bool) -> int:
    """Start each configured server, list its tools, and stop it again."""
    try:
        timeout = load_config(workdir, trusted=True).mcp_timeout
        trusted = trust or TrustStore(trust_file()).trusts(workdir)
        servers = load_servers(workdir, user_config_path(), trusted=trusted)
    except (ConfigError, McpConfigError, TrustError) as error:
        raise InputError(str(error)) from None
    if not servers:
        click.echo(
            "no MCP servers configured (.mcp.json, or [mcp_servers.NAME] in orchestrator.toml "
            f"or {user_config_path()})"
        )
        return 0
    statuses = check_servers(servers, workdir.resolve(), trusted=trusted, timeout=timeout)
    for status in statuses:
        for line in status_lines(status):
            click.echo(inert(line))
    return 0 if all(status_ok(status) for status in statuses) else 1


def status_ok(status: ServerStatus) -> bool:
    return status.state in ("running", "stopped")


def status_lines(status: ServerStatus) -> list[str]:
    """A server's lines: its name, how it starts and from where; then how it went, its tools."""
    lines = [f"{status.name}: {status.how}  ({status.origin})"]
    how = _HOW.get(status.state, status.state)
    if status_ok(status):
        count = len(status.tools)
        lines.append(f"  {how}, {count} tool{'s' if count != 1 else ''}")
        lines.extend(f"    {name}" for name in status.tools)
    elif status.state == "not_trusted":
        lines.append(f"  {how}: the folder is not trusted; pass --trust, or run and answer yes")
    else:
        lines.append(f"  {how}: {status.reason}")
    return lines
