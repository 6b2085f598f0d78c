"""``team``: a lead plans on a shared board; workers claim the items in their own worktrees."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions
    from orchestrator.protocols import Model

SCRIPTED_TASK = "Document greeter.py: a note per function, one on usage and testing, and an index"
MAX_WORKERS = 16


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task", required=False)
@click.option(
    "--workers",
    type=click.IntRange(1, MAX_WORKERS),
    default=2,
    show_default=True,
    metavar="N",
    help="Workers claiming items at once, each in its own git worktree and sandbox.",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="The git repository the team works on (a clean tree); the branches merge back here.",
)
@click.option(
    "--board",
    metavar="URL",
    default=None,
    help="The shared board: sqlite:///PATH or postgresql://…  [a new SQLite file in the state "
    "directory]",
)
@click.option(
    "--scripted",
    is_flag=True,
    help="The offline team demo, SCRIPTED (no key): it sets up a small repository in the work "
    "directory, which must be new or empty.",
)
@click.option("--model", metavar="NAME", default=None, help="Model name [ANTHROPIC_MODEL].")
@click.option("--trust", is_flag=True, help="Trust this folder's orchestrator.toml.")
@click.option(
    "--protect",
    multiple=True,
    metavar="GLOB",
    help="Files no agent may change (gitignore-style, repeatable); a check fails while one "
    "differs.",
)
def team(
    *,
    task: str | None,
    workers: int,
    workdir: Path,
    board: str | None,
    scripted: bool,
    model: str | None,
    trust: bool,
    protect: tuple[str, ...],
) -> int:
    """Run TASK as a team: a lead plans it on a shared board, workers do the items.

    Each worker claims ready items (the item machine's guarded start edge, one transaction)
    until none is left, in its own git worktree and branch; agents run without asking
    (--approval auto) inside their sandboxes. The harness then commits each worktree and
    merges the branches back, stopping at a conflict and naming its files. One trace per
    agent, the board's own log; exit 0, 1 when an agent failed, 3 when a branch did not merge
    or the board was left unfinished.
    """
    from orchestrator.agent import SettingsError, anthropic_model, load_options
    from orchestrator.board.stores import sqlite_url
    from orchestrator.scenarios import team as scripted_team
    from orchestrator.sessions import state_dir
    from orchestrator.team import TeamError, TeamPlan, prepare_scripted_repository, run_team
    from orchestrator.trace import new_run_id
    from orchestrator.trust import TrustError, TrustStore, trust_file

    if task is None and not scripted:
        raise InputError("give the TASK the team works on (or --scripted for the offline demo)")
    task = task or SCRIPTED_TASK
    workdir = workdir.resolve()
    if not scripted and not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    base = state_dir() / "team" / new_run_id()
    url = board or sqlite_url(base / "board.db")
    try:
        if scripted:
            prepare_scripted_repository(workdir, scripted_team.FILES)
        # The workers' worktrees are copies of this folder: its trust is theirs.
        trusted = trust or TrustStore(trust_file()).trusts(workdir)
    except (TeamError, TrustError, OSError) as error:
        raise InputError(str(error)) from None

    own_files = _own_files(workdir)

    def options(where: Path, agent: str) -> RunOptions:
        settings: dict[str, object] = {"board": url, "agent": agent, "approval": "auto"}
        settings.update(model=model, protect=protect or None)
        # Only while its own files are what was trusted: an agent that rewrote them (bash
        # outside bwrap can) must not have its hooks or settings trusted in a worktree.
        same = where == workdir or _own_files(where) == own_files
        return load_options(where, settings, trust=trusted and same, trace=base / f"{agent}.jsonl")

    def model_for(agent: str) -> Model:
        if scripted:
            if agent == "lead":
                return scripted_team.ScriptedLead()
            return scripted_team.ScriptedWorker(agent)
        return anthropic_model(options(workdir, agent).config)

    if scripted:
        click.echo(f"[SCRIPTED team demo: no model, {workers} workers]\nworkdir: {workdir}")
    live = None
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb":
        from rich.console import Console

        from orchestrator.team_view import TeamBoardView

        agents = ["lead", *(f"worker-{n}" for n in range(1, workers + 1))]
        live = TeamBoardView(Console(), url, agents)
    plan = TeamPlan(task, workers, workdir, url, base, options, model_for, sys.stdout, live)
    try:
        result = run_team(plan)
    except (TeamError, SettingsError) as error:
        raise InputError(str(error)) from None
    for line in result.closing_lines():
        click.echo(line)
    return result.exit_code


def _own_files(folder: Path) -> tuple[bytes | None, ...]:
    """The bytes of the files that need trust (the project config, ``.mcp.json``)."""
    from orchestrator.tools.protected import OWN_FILES

    found: list[bytes | None] = []
    for name in OWN_FILES:
        try:
            found.append((folder / name).read_bytes())
        except OSError:
            found.append(None)
    return tuple(found)
