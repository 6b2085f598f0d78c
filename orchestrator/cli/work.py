"""``work``: one worker process that claims a shared board's items and does them, one at a time."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FiniteFloatRange, InputError
from orchestrator.cli._common import agent_options
from orchestrator.inert import inert

#: The model name a ``--scripted`` worker's sessions run under (what ``demo`` uses too).
SCRIPTED_MODEL = "scripted"

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions
    from orchestrator.protocols import Model


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("url")
@click.option("--agent", required=True, metavar="NAME", help="This worker's name on the board.")
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Where the items are done; when it is the top of a git repository (a clean tree), "
    "each completed item is a commit there.",
)
@click.option(
    "--scripted",
    is_flag=True,
    help="The offline worker, SCRIPTED (no key; its model is named 'scripted'): for each item "
    "it writes the file the item's text names (Write notes/x.md … → notes/x.md) and completes "
    "it.",
)
@click.option(
    "--pace",
    type=FiniteFloatRange(min=0, max=60),
    default=0.0,
    metavar="SECONDS",
    help="With --scripted: seconds before each scripted turn (to watch it, or stop it mid-item).",
)
@click.option(
    "--lease",
    metavar="SECONDS",
    default="30",
    help="Seconds a claim holds unless renewed; a heartbeat renews it while the worker lives.",
)
@click.option(
    "--integrate",
    metavar="BRANCH",
    default=None,
    help="Merge each completed item's commit into BRANCH (in the work directory's repository) "
    "before the board marks it completed, and start each item from BRANCH's tip.",
)
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write each item's trace in this folder.  [default: the per-user state dir]",
)
@agent_options(
    cost="the cost it reports",
    protect="Files the agent may not change (gitignore-style, repeatable); a check fails while "
    "one differs.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Every line on stdout one JSON object (for team)."
)
@click.pass_context
def work(
    ctx: click.Context,
    *,
    url: str,
    agent: str,
    workdir: Path,
    scripted: bool,
    pace: float,
    lease: str,
    integrate: str | None,
    trace_dir: Path | None,
    model: str | None,
    price_per_mtok: str | None,
    trust: bool,
    protect: tuple[str, ...],
    as_json: bool,
) -> int:
    """Claim the board's ready items one at a time and do each as a session in the work directory.

    While nothing is ready but other agents hold items, it waits and looks again; it ends
    when the board has nothing left for it. Its lease is renewed by a heartbeat while it
    lives, so a dead worker's item is free again within --lease. In a repository each
    completed item is one commit (the item's id and text in its message); a commit that adds
    a gitlink, changes a file that decides what runs later, or holds a folder shaped like a
    git dir is refused, and nothing is committed once HEAD names another branch. The same
    command on two machines against one PostgreSQL board is a team across machines. An item
    a session ends without completing is given back to the board, never counted as done.
    The board must be there already (a URL that names none is exit 2; `board add` starts
    one). It ends naming each session's trace. Exit 0 when the board has nothing left for it
    and every item it took is completed, 1 when a session failed, 2 bad input, 3 when an
    item's work was refused, an item it took was given back unfinished, or items are left
    that can never start (they wait on a cancelled item), 130/143 when stopped (its work
    committed, its item given back).
    """
    from orchestrator.agent import SettingsError, anthropic_model, load_options
    from orchestrator.board.inputs import agent_problem
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, is_store_url
    from orchestrator.cli._common import setting_flag
    from orchestrator.harness_git import GitError
    from orchestrator.team._lifeline import follow_lead
    from orchestrator.team.integration import TeamError, in_git_dir
    from orchestrator.team.scripted import ScriptedItem
    from orchestrator.team.worker import Worker, WorkOutput, WorkPlan

    follow_lead()  # a worker of ``team`` stops when its lead dies (SIGKILL included)
    if not is_store_url(url):
        raise InputError(f"{url}: not a board store; give sqlite:///PATH or postgresql://…")
    if (problem := agent_problem(agent)) is not None:
        raise InputError(f"--agent: {problem}")
    lease_s = setting_flag("lease", lease, "--lease")
    prices = setting_flag("price_per_mtok", price_per_mtok, "--price-per-mtok")
    workdir = workdir.resolve()
    if not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    if in_git_dir(workdir):
        # A bare repository, or a folder inside a .git: the items' files would land among
        # git's own (its hooks, its config), where the next git command obeys them.
        raise InputError(
            f"--workdir {workdir}: is a git directory, not a work tree; give a clone's folder"
        )
    if trace_dir is not None:
        try:
            trace_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(f"--trace-dir {trace_dir}: {error.strerror}") from None
    settings = {
        "board": url,
        "agent": agent,
        "approval": "auto",
        # The offline worker's header and traces say so (as the demo's do), never a real name.
        "model": SCRIPTED_MODEL if scripted else model,
        "lease": lease_s,
        "price_per_mtok": prices,
        "protect": protect or None,
    }
    own = _own_files(workdir)

    def options(trace: Path | None) -> RunOptions:
        # Trusted only while its own files are what was trusted: an agent that rewrote them
        # (bash outside bwrap can) must not have its hooks or settings trusted next time.
        return load_options(
            workdir, settings, trust=trust and _own_files(workdir) == own, trace=trace
        )

    try:
        config = options(None).config  # every setting read once, before anything is claimed
        client = None if scripted else anthropic_model(config)
    except SettingsError as error:
        raise InputError(str(error)) from None

    def model_for(item_id: str, text: str) -> Model:
        if client is None:
            return ScriptedItem(agent, item_id, text, pace=pace)
        return client

    out = WorkOutput(sys.stdout, as_json=as_json)
    plan = WorkPlan(
        url,
        agent,
        workdir,
        float(config.lease),
        options,
        model_for,
        integrate=integrate,
        trace_dir=trace_dir.resolve() if trace_dir is not None else None,
    )
    try:
        worker = Worker(plan, out)
    except (TeamError, GitError, BoardError, BoardUrlError) as error:
        raise InputError(str(error)) from None
    stopped = ctx.obj
    result = worker.run(lambda: stopped.exit_code if stopped is not None else 130)
    if not as_json:
        # As ``run`` ends: where each session's trace is (``work.finished`` carries them too).
        for trace in result.traces:
            out.line(inert(f"trace: {trace}"))
    out.record(result.record(agent))
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
