"""``team``: a lead plans on a shared board; worker processes claim the items in their worktrees."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FiniteFloatRange, InputError
from orchestrator.cli._common import agent_options
from orchestrator.cli.work import SCRIPTED_MODEL

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions
    from orchestrator.protocols import Model
    from orchestrator.team.view import TeamBoardView

SCRIPTED_TASK = "Document greeter.py: a note per function, one on usage and testing, and an index"
MAX_WORKERS = 16


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task", required=False)
@click.option(
    "--workers",
    type=click.IntRange(1, MAX_WORKERS),
    default=None,
    metavar="N",
    help="Worker processes claiming items at once, each in its own git worktree and sandbox."
    "  [default: 2; a resumed team: as many as before]",
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="The git repository the team works on (a clean tree); its work merges back here.",
)
@click.option(
    "--board",
    metavar="URL",
    default=None,
    help="The shared board: sqlite:///PATH or postgresql://…  [a new SQLite file in the state "
    "directory]",
)
@click.option(
    "--lease",
    metavar="SECONDS",
    default="30",
    help="Seconds a worker's claim holds unless its heartbeat renews it; a dead worker's item "
    "is free again within this.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Pick up the unfinished team on --board (or on the board given as TASK): its items "
    "and the branches there are.",
)
@click.option(
    "--scripted",
    is_flag=True,
    help="The offline team demo, SCRIPTED (no key): it sets up a small repository in the work "
    "directory, which must be new or empty (or one the demo set up before; never a repository "
    "of yours).",
)
@click.option(
    "--pace",
    type=FiniteFloatRange(min=0, max=60),
    default=0.0,
    metavar="SECONDS",
    help="With --scripted: seconds before each scripted worker's turn (to watch the team).",
)
@agent_options(
    cost="the closing lines' cost",
    protect="Files no agent may change (gitignore-style, repeatable); a check fails while one "
    "differs.",
)
@click.pass_context
def team(
    ctx: click.Context,
    *,
    task: str | None,
    workers: int | None,
    workdir: Path,
    board: str | None,
    lease: str,
    resume: bool,
    scripted: bool,
    pace: float,
    model: str | None,
    price_per_mtok: str | None,
    trust: bool,
    protect: tuple[str, ...],
) -> int:
    """Run TASK as a team: a lead plans it on a shared board, workers do the items.

    Each worker is an `orchestrator work` process with its own git worktree, branch, sandbox
    and traces; it claims ready items (the item machine's guarded start edge, one
    transaction) until none is left, and each item's commit merges into the team's
    integration branch before the board marks it completed, so work that builds on other
    work starts from it. At the end the integration branch merges into the work directory.
    Agents run without asking (--approval auto) inside their sandboxes. Ctrl-C stops every
    worker (each commits its work and gives its item back); `kill -INT PID` stops one. Exit
    0, 1 when an agent failed, 2 bad input (or a board another unfinished team works on), 3
    when work did not merge or the board was left unfinished, 130/143 when stopped.
    """
    from orchestrator.agent import SettingsError, anthropic_model, load_options
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError
    from orchestrator.cli._common import setting_flag
    from orchestrator.inert import inert_line
    from orchestrator.sessions import state_dir
    from orchestrator.team import scripted as scripted_team
    from orchestrator.team.lead import TeamError, TeamPlan, run_team
    from orchestrator.trust import TrustError, TrustStore, trust_file

    task, board = _task_and_board(task, board, resume=resume, scripted=scripted)
    lease_s = setting_flag("lease", lease, "--lease")
    prices = setting_flag("price_per_mtok", price_per_mtok, "--price-per-mtok")
    workdir = workdir.resolve()
    # The demo sets up its own repository and merges its notes there: never a user's.
    fresh_demo = scripted and _demo_sets_up(workdir) and not resume
    if not fresh_demo and not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    settings_of = {
        "approval": "auto",
        # The scripted lead's header and trace say it is scripted (its workers' say so too).
        "model": SCRIPTED_MODEL if scripted else model,
        "lease": lease_s,
        "price_per_mtok": prices,
        "protect": protect or None,
    }
    try:  # a missing key or a bad setting is said before anything starts
        # A resumed team's lead does not run again; its record says what its workers run.
        needs_key = not scripted and not resume
        client = anthropic_model(load_options(workdir, settings_of).config) if needs_key else None
    except SettingsError as error:
        raise InputError(str(error)) from None

    def trusted() -> bool:
        # The workers' worktrees are copies of this folder: its trust is theirs.
        return trust or TrustStore(trust_file()).trusts(workdir)

    def options(where: Path, agent: str, trace: Path, url: str) -> RunOptions:
        settings = {**settings_of, "board": url, "agent": agent}
        return load_options(where, settings, trust=trusted(), trace=trace)

    def model_for(agent: str) -> Model:
        return scripted_team.ScriptedLead() if client is None else client

    def prepare() -> None:
        scripted_team.prepare_scripted_repository(workdir, scripted_team.FILES)
        click.echo(f"[SCRIPTED team demo: no model]\nworkdir: {inert_line(str(workdir))}")

    flags: list[str] = [f"--pace={pace:g}"] if scripted and pace else []
    if model:
        flags += ["--model", model]
    if price_per_mtok:
        flags += ["--price-per-mtok", price_per_mtok]
    for glob in protect:
        flags.append(f"--protect={glob}")
    if trust or (workdir.is_dir() and trusted()):
        # The worktrees are other folders: the trust this folder has is passed on outright.
        flags.append("--trust")
    live = None
    if sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb":
        live = _live_view
    stopped = ctx.obj
    plan = TeamPlan(
        task=task or (SCRIPTED_TASK if scripted else None),
        workers=workers,
        workdir=workdir,
        board=board,
        base=state_dir() / "team",
        options=options,
        model=model_for,
        out=sys.stdout,
        live=live,
        lease=float(cast("float", lease_s)),
        scripted=scripted,
        resume=resume,
        worker_flags=tuple(flags),
        stopped=(lambda: stopped.exit_code) if stopped is not None else (lambda: 130),
        prepare=prepare if fresh_demo else None,
    )
    try:
        result = run_team(plan)
    except (TeamError, SettingsError, BoardError, BoardUrlError, TrustError, OSError) as error:
        raise InputError(str(error)) from None
    for line in result.closing_lines():
        click.echo(line)
    return result.exit_code


def _task_and_board(
    task: str | None, board: str | None, *, resume: bool, scripted: bool
) -> tuple[str | None, str | None]:
    """TASK and --board as given; ``team --resume URL`` names the board where TASK goes."""
    from orchestrator.board.stores import is_store_url

    if resume and board is None and task is not None:
        board, task = task, None
    if resume and board is None:
        raise InputError("--resume needs the board: --resume --board URL (or --resume URL)")
    if board is not None and not is_store_url(board):
        raise InputError(
            f"--board {board}: not a board store; give sqlite:///PATH or postgresql://…"
        )
    if task is not None and not task.strip():
        task = None  # only blanks: no task at all, and named as such below
    if task is None and not scripted and board is None:
        raise InputError("give the TASK the team works on (or --scripted for the offline demo)")
    return task, board


def _demo_sets_up(workdir: Path) -> bool:
    """For ``--scripted``: whether the demo makes its repository in ``workdir`` (new or empty).

    False for a repository the demo made before (it runs there again); InputError for any
    other folder, a user's repository above all: the demo would merge its notes into it.
    """
    from orchestrator.team.scripted import made_by_demo

    if made_by_demo(workdir):
        return False
    try:
        empty = not workdir.exists() or (workdir.is_dir() and not any(workdir.iterdir()))
    except OSError as error:
        raise InputError(f"--workdir {workdir}: {error.strerror}") from None
    if empty:
        return True
    raise InputError(
        f"--workdir {workdir}: not empty, and not a repository the scripted demo set up; "
        "--scripted makes its own small repository, so give a new or empty folder "
        "(--workdir /tmp/team-demo)"
    )


def _live_view(url: str, agents: Sequence[str]) -> TeamBoardView:
    from rich.console import Console

    from orchestrator.team.view import TeamBoardView

    return TeamBoardView(Console(), url, agents)
