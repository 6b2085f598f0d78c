"""``orchestrator board``: a shared board for people and scripts (show, add, claim, log, check).

Each subcommand takes the board's URL first (``sqlite:///PATH``, a ``.db`` path, or
``postgresql://…``) and ``--json`` for scripts. Bad input is one line and exit 2; ``claim``
exits 4 when nothing is claimable; ``check`` exits 1 at the first violation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FullHelpGroup, InputError
from orchestrator.inert import inert

if TYPE_CHECKING:
    from orchestrator.board.store import BoardItem, SqlBoardStore

#: ``board claim`` found nothing to claim.
EXIT_NOTHING_CLAIMABLE = 4

_url = click.argument("url", metavar="URL")
_as_json = click.option("--json", "as_json", is_flag=True, help="One JSON object (or line) out.")
_agent = click.option(
    "--agent", required=True, metavar="NAME", help="The agent (a name) doing this."
)


@contextmanager
def _store(url: str) -> Iterator[SqlBoardStore]:
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    try:
        store = open_store(url)
    except BoardUrlError as error:
        raise InputError(str(error)) from None
    try:
        yield store
    except BoardError as error:
        raise InputError(str(error)) from None
    finally:
        store.close()


def _line(item: BoardItem, done: frozenset[str] = frozenset(), check: str | None = None) -> str:
    from orchestrator.plan import MARKERS, Status

    notes = []
    if item.owner and item.status in (Status.IN_PROGRESS, Status.COMPLETED):
        notes.append(item.owner)
    waiting = [b for b in item.blocked_by if b not in done]
    if waiting and item.status == Status.PENDING:
        notes.append("blocked by " + ", ".join(f"#{b}" for b in waiting))
    if check:
        notes.append(f"check: {check}")
    shown = f"  ({'; '.join(notes)})" if notes else ""
    return inert(f"{MARKERS[item.status]} #{item.id}: {item.text}{shown}")


def _say_item(item: BoardItem, as_json: bool) -> None:
    click.echo(json.dumps(item.as_dict(), ensure_ascii=False) if as_json else _line(item))


@click.group(name="board", cls=FullHelpGroup, context_settings=CONTEXT_SETTINGS)
def board_group() -> None:
    """A shared board several agents work: show, add, claim, complete, release, log, check."""


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_as_json
@click.option(
    "--html",
    "html_out",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[OUT]",
    help="Write the board's log as one self-contained HTML page instead: a lane per agent and "
    "per item, each agent's page linked (OUT: a file or folder, - for stdout); print its path.  "
    "[default OUT: beside a SQLite board's file, else board.html here]",
)
def show(url: str, as_json: bool, html_out: str | None) -> int:
    """Every item with its status, owner, blockers and lease."""
    from orchestrator.board.store import items_as_json

    if html_out is not None:
        return _show_html(url, html_out or None)
    with _store(url) as store:
        items, checks = store.items(), store.checks()
    if as_json:
        shown = [{**item, "check": checks.get(str(item["id"]))} for item in items_as_json(items)]
        click.echo(json.dumps({"board": url, "items": shown}, ensure_ascii=False))
        return 0
    if not items:
        click.echo("No todos.")
        return 0
    done = frozenset(item.id for item in items if item.status.value == "completed")
    for item in items:
        click.echo(_line(item, done, checks.get(item.id)))
    click.echo(f"\n({len(done)}/{len(items)} completed)")
    return 0


def _show_html(url: str, out: str | None) -> int:
    from orchestrator.picture.pages import PageError, write_board_pages

    try:
        written = write_board_pages(url, out)
    except PageError as error:
        raise InputError(str(error)) from None
    for number, page in enumerate(written):
        if page is not None:
            click.echo(str(page), err=number > 0 and written[0] is None)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@click.argument("text")
@click.option(
    "--blocked-by", multiple=True, metavar="ID", help="An item this one waits for (repeatable)."
)
@click.option("--agent", default=None, metavar="NAME", help="Who adds it (recorded in the log).")
@click.option(
    "--check",
    "check_command",
    default=None,
    metavar="COMMAND",
    help="Its acceptance check: an agent's run completes it only once this passes where that "
    "agent's bash runs; no model can change or remove it.",
)
@_as_json
def add(
    *,
    url: str,
    text: str,
    blocked_by: tuple[str, ...],
    agent: str | None,
    check_command: str | None,
    as_json: bool,
) -> int:
    """Add a pending item and print its id."""
    if check_command is not None and not check_command.strip():
        raise InputError("--check: the command is empty; give one, or leave --check out")
    with _store(url) as store:
        item = store.add(text, agent=agent, blocked_by=blocked_by, check=check_command)
    shown = {**item.as_dict(), "check": check_command}
    click.echo(json.dumps(shown, ensure_ascii=False) if as_json else item.id)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@click.argument("item_id", metavar="[ID]", required=False)
@_agent
@click.option(
    "--lease",
    type=click.FloatRange(min=1),
    default=120.0,
    metavar="SECONDS",
    help="Seconds the claim holds unless renewed (claiming it again renews it).",
)
@_as_json
def claim(url: str, item_id: str | None, agent: str, lease: float, as_json: bool) -> int:
    """Claim the next ready item (or ID) for AGENT; exit 4 when nothing is claimable."""
    from orchestrator.board.store import NothingClaimable

    with _store(url) as store:
        try:
            item = store.claim(agent, lease=lease, item_id=item_id)
        except NothingClaimable as nothing:
            if as_json:
                click.echo(json.dumps({"claimed": None, "reason": nothing.reason}))
            click.echo(f"orchestrator: {nothing}", err=True)
            return EXIT_NOTHING_CLAIMABLE
    _say_item(item, as_json)
    return 0


def _mover(name: str, doc: str, act: Callable[[SqlBoardStore, str, str], BoardItem]) -> None:
    @board_group.command(name=name, context_settings=CONTEXT_SETTINGS, help=doc)
    @_url
    @click.argument("item_id", metavar="ID")
    @_agent
    @_as_json
    def command(url: str, item_id: str, agent: str, as_json: bool) -> int:
        with _store(url) as store:
            item = act(store, item_id, agent)
        _say_item(item, as_json)
        return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@click.argument("item_id", metavar="ID")
@_agent
@click.option(
    "--skip-check",
    is_flag=True,
    help="Complete an item that has a check without running it (said in the output).",
)
@_as_json
def complete(*, url: str, item_id: str, agent: str, skip_check: bool, as_json: bool) -> int:
    """Mark ID completed; only the agent holding it may.

    An item with a check completes when an agent's run passes it; completing it by hand needs
    --skip-check, because the check is not run here (a board's commands are not run on the
    machine of whoever reads it).
    """
    with _store(url) as store:
        check = store.checks().get(item_id)
        if check is not None and not skip_check:
            raise InputError(
                f"#{item_id} has a check ({inert(check)}); an agent's run completes it when the "
                "check passes, or pass --skip-check to complete it without running it"
            )
        item = store.complete(item_id, agent=agent)
    if check is not None and not as_json:
        click.echo(inert(f"orchestrator: #{item_id} completed without running its check"), err=True)
    _say_item(item, as_json)
    return 0


_mover(
    "release",
    "Give ID back (pending, owned by no one); only the agent holding it may.",
    lambda store, item_id, agent: store.release(item_id, agent=agent),
)


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_as_json
def log(url: str, as_json: bool) -> int:
    """The board's log: one JSON object a line (seq, ts, agent, item, src, dst, trigger)."""
    with _store(url) as store:
        for entry in store.log():
            click.echo(json.dumps(entry.as_dict(), ensure_ascii=False))
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_as_json
def check(url: str, as_json: bool) -> int:
    """Replay the log through fresh item machines; exit 1 at the first broken rule."""
    from orchestrator.board.check import check_log

    with _store(url) as store:
        items, entries = store.snapshot()
    violation = check_log(entries, items)
    if as_json:
        document: dict[str, Any] = {
            "ok": violation is None,
            "entries": len(entries),
            "items": len(items),
            "violation": None
            if violation is None
            else {"seq": violation.seq, "message": violation.message},
        }
        click.echo(json.dumps(document))
    elif violation is None:
        click.echo(f"board check: {len(entries)} log lines, {len(items)} items: every rule held")
    if violation is not None:
        click.echo(f"orchestrator: board check failed at {violation}", err=True)
        return 1
    return 0
