"""``orchestrator hooks``: the hooks in effect in a folder, and whether and where each runs.

One row per hook of the user's ``config.toml`` and the folder's ``orchestrator.toml``: its
event, matcher and command, the file it comes from, whether that file is trusted, whether it
runs in the sandbox or outside it, what it runs from the folder (pinned by digest), and why
not when it does not run (an event this harness does not have, an untrusted folder, a script
changed since it was trusted, an outside hook whose command runs something from the folder that
cannot be pinned).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError
from orchestrator.inert import inert


@click.command(name="hooks", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Read this directory's orchestrator.toml (and your config.toml).",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per hook, in a list.")
def hooks(workdir: Path, as_json: bool) -> int:
    """List the hooks in effect: event, matcher, command, file, trusted or not, where each runs.

    Nothing runs: the files are read as a run would read them. A project file's hooks run only
    in a trusted folder; a hook whose script in the folder changed since it was trusted does
    not run, nor does an outside hook that runs something from the folder that cannot be
    pinned; events and hook types orchestrator does not have are listed as skipped.
    """
    from orchestrator.config import ConfigError
    from orchestrator.hooks import HookConfigError
    from orchestrator.tools.mcp_config import McpConfigError
    from orchestrator.trust import TrustError, TrustStore, trust_file
    from orchestrator.trust_scope import hook_rows, trust_scope

    if not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    try:
        store = TrustStore(trust_file())
        scope = trust_scope(workdir)
        rows = hook_rows(scope, store)
    except (ConfigError, HookConfigError, McpConfigError, TrustError) as error:
        raise InputError(str(error)) from None
    if as_json:
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        click.echo(f"no hooks: none in {workdir / 'orchestrator.toml'} or your config.toml")
    for row in rows:
        click.echo(inert(_line(row)))
    return 0


def _line(row: dict[str, Any]) -> str:
    from orchestrator.pinning import shown

    matcher = f" [{row['matcher']}]" if row["matcher"] else ""
    where = "outside the sandbox" if row["outside"] else "in the sandbox"
    trusted = "yours" if not row["project"] else "trusted" if row["trusted"] else "not trusted"
    runs = "runs" if row["runs"] else f"does not run: {row['why']}"
    lines = [
        f"{row['event']}{matcher}: {row['command']}",
        f"    {row['origin']} · {trusted} · {where} · {runs}",
    ]
    for name, state in row["scripts"].items():
        lines.append(f"    pins {name}  {shown(state)}")
    return "\n".join(lines)
