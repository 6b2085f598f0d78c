"""``orchestrator trust``: record that a folder's files are trusted, without a terminal to ask on.

A run asks "Do you trust the files in this folder?" only where a person can answer; CI and ssh
sessions record trust here instead, after ``--show`` has listed what it covers: the project's
files and their digests, the settings they widen, every command they would start, what those
commands run from the folder (pinned by digest), and the commands that cannot run outside the
sandbox because what they run from it cannot be pinned.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError
from orchestrator.inert import inert


@click.command(name="trust", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="The folder whose orchestrator.toml, .mcp.json and the files its hooks and MCP servers "
    "run are trusted.",
)
@click.option("--show", is_flag=True, help="Only show what trusting the folder covers.")
def trust(workdir: Path, show: bool) -> int:
    """Trust a folder's files (orchestrator.toml, .mcp.json, what hooks run) without a terminal.

    Lists the files with their digests, the settings they widen, every command they would
    start (MCP servers, hooks by event) and what each runs from the folder, pinned by digest
    (a node_modules that must stay absent too), and the hooks and servers that do not run
    outside the sandbox because what they run from the folder cannot be pinned. Then records
    the folder as trusted with exactly these files, as a yes at the run's question does. A file
    changed later is asked about again; a hook or server whose file changed does not run. With
    --show nothing is recorded.
    """
    from orchestrator.config import ConfigError
    from orchestrator.hooks import HookConfigError
    from orchestrator.tools.mcp_config import McpConfigError
    from orchestrator.trust import TrustError, TrustStore, trust_file
    from orchestrator.trust_scope import trust_scope

    if not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    try:
        store = TrustStore(trust_file())
        scope = trust_scope(workdir)
        recorded = store.record(workdir)
        state = (
            "trusted"
            if store.trusts(workdir)
            else "changed since it was trusted"
            if store.changed_since_trusted(workdir)
            else "not trusted"
        )
        say: Callable[[str], None] = click.echo
        say(f"folder {scope.folder}: {state}")
        for path, digest in scope.files:
            say(f"  file {inert(path.name)}  sha256 {digest}")
        if scope.settings:
            say(f"  sets {', '.join(scope.settings)}")
        for line in scope.commands():
            say(f"  starts {line}")
        seen = recorded.files if recorded is not None else None
        for pinned in scope.pinned:
            for line in pinned.lines(seen):
                say(f"  {line}")
        if not (scope.files or scope.scripts):
            say("  nothing here needs trust: no orchestrator.toml, .mcp.json or file a hook runs")
        if show:
            return 0
        store.add(workdir, scope.scripts)
    except (ConfigError, HookConfigError, McpConfigError, TrustError) as error:
        raise InputError(str(error)) from None
    click.echo(f"recorded: {scope.folder} is trusted with these files, in {store.path}")
    return 0
