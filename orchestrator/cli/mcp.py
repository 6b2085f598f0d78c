"""``orchestrator mcp list``: each configured MCP server, how it started (or why not), its tools.

The servers start once, as a run would start them (each in its own folder, not the work
directory), are listed and are stopped again; one whose command runs a file from the work
directory other than what a person trusted is not started. Exit 0 when every server started,
1 when one did not, 2 for a malformed file.
"""

from __future__ import annotations

from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FiniteFloatRange, FullHelpGroup, InputError
from orchestrator.config import ConfigError, load_config, user_config_path
from orchestrator.inert import inert
from orchestrator.pinning import merged
from orchestrator.tools.mcp import check_servers
from orchestrator.tools.mcp_config import McpConfigError, load_servers, server_reading
from orchestrator.trust import TrustError, TrustStore, trust_file


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
@click.option(
    "--mcp-timeout",
    type=FiniteFloatRange(min=0, min_open=True, max=3600),
    default=None,
    metavar="SECONDS",
    help="Seconds each server may take to start and list its tools, all told; one that takes "
    "longer is killed.  "
    "[default: the mcp_timeout setting, 30]",
)
def list_servers(workdir: Path, trust: bool, mcp_timeout: float | None) -> int:
    """Start each configured server, list its tools, and stop it again."""
    try:
        flags = {"mcp_timeout": mcp_timeout}
        timeout = load_config(workdir, flags, trusted=True).mcp_timeout
        store = TrustStore(trust_file())
        trusted = trust or store.trusts(workdir)
        servers = load_servers(workdir, user_config_path(), trusted=trusted)
        record = store.record(workdir)
    except (ConfigError, McpConfigError, TrustError) as error:
        raise InputError(str(error)) from None
    folder = workdir.resolve()
    # What the servers run from the folder: as a person trusted it, or as it is with --trust.
    files = dict(record.files) if record is not None else {}
    if trust:
        readings = (server_reading(server, folder) for server in servers)
        files = merged(reading.pins(folder) for reading in readings if reading is not None)
    if not servers:
        click.echo(
            "no MCP servers configured (.mcp.json, or [mcp_servers.NAME] in orchestrator.toml "
            f"or {user_config_path()})"
        )
        return 0
    statuses = check_servers(
        servers, trusted=trusted, timeout=timeout, workdir=folder, trusted_files=files
    )
    hint = "pass --trust, or record it with `orchestrator trust`"
    for status in statuses:
        for line in status.lines(untrusted_hint=hint):
            click.echo(inert(line))
    return 0 if all(status.ok for status in statuses) else 1
