"""``orchestrator board``: a shared board for people and scripts.

Each subcommand takes the board's URL first (``sqlite:///PATH``, a ``.db`` path, or
``postgresql://…``, each with an optional ``?board=NAME``) and ``--json`` for scripts. Bad
input is one line and exit 2, and changes nothing: a board that is not there is named, never
made (only ``add`` starts one, and says so). ``claim`` exits 4 when nothing is claimable;
``check`` exits 1 at the first violation.

A person's verbs (``cancel``, ``edit``, ``release --force``, ``add`` without ``--agent``) are
logged with the actor ``person:USER`` (:func:`orchestrator.board.inputs.person`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, FullHelpGroup, InputError
from orchestrator.inert import inert
from orchestrator.trace_file import json_text

if TYPE_CHECKING:
    from orchestrator.board.store import BoardItem, SqlBoardStore

#: ``board claim`` found nothing to claim.
EXIT_NOTHING_CLAIMABLE = 4
#: The longest line ``add --from`` reads: a JSON line holds a text and a check of up to
#: ``MAX_TEXT`` characters each, and JSON may spell one character in six (``\u00e9``).
MAX_FROM_LINE = 32_000
#: The most ``add --from`` reads from one file or stdin, in characters.
MAX_FROM_SIZE = 4_000_000


def _agent_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An agent's name: printable, not empty, not a person's (``person:…``)."""
    from orchestrator.board.inputs import agent_problem

    problem = None if value is None else agent_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


def _lease(ctx: click.Context, param: click.Parameter, value: str) -> float:
    """Seconds a claim holds: finite, 1 s to 24 h (``nan`` and ``inf`` are refused)."""
    from orchestrator.board.inputs import lease_problem

    try:
        seconds = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of seconds", ctx, param) from None
    problem = lease_problem(seconds)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return seconds


_url = click.argument("url", metavar="URL")
_as_json = click.option("--json", "as_json", is_flag=True, help="One JSON object (or line) out.")
_agent = click.option(
    "--agent", required=True, callback=_agent_name, metavar="NAME", help="The agent doing this."
)
_item_id = click.argument("item_id", metavar="ID")


@contextmanager
def _store(url: str, *, create: bool = False) -> Iterator[SqlBoardStore]:
    """The board at ``url``; bad input of any kind is one line and exit 2."""
    from orchestrator.board.store import BoardError, BoardUrlError
    from orchestrator.board.stores import open_existing, open_store

    try:
        store = open_store(url, create=True) if create else open_existing(url)
    except BoardUrlError as error:
        raise InputError(_one(str(error))) from None
    try:
        yield store
    except BoardError as error:
        raise InputError(_one(str(error))) from None
    finally:
        store.close()


def _line(item: BoardItem, done: frozenset[str] = frozenset(), check: str | None = None) -> str:
    from orchestrator.board.inputs import one_line
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
    return inert(one_line(f"{MARKERS[item.status]} #{item.id}: {item.text}{shown}"))


def _say_item(item: BoardItem, as_json: bool) -> None:
    click.echo(json_text(item.as_dict()) if as_json else _line(item))


def _one(message: str) -> str:
    """A message that may quote the store's text: one inert line."""
    from orchestrator.board.inputs import one_line

    return inert(one_line(message))


def _me() -> str:
    from orchestrator.board.inputs import person

    return person()


@click.group(name="board", cls=FullHelpGroup, context_settings=CONTEXT_SETTINGS)
def board_group() -> None:
    """A shared board several agents work: show, add, claim, complete, release, log, check.

    A person also cancels, edits and force-releases items (logged as person:USER).
    """


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
        click.echo(json_text({"board": url, "items": shown}))
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
@click.argument("text", required=False)
@click.option(
    "--blocked-by", multiple=True, metavar="ID", help="An item this one waits for (repeatable)."
)
@click.option(
    "--agent",
    callback=_agent_name,
    default=None,
    metavar="NAME",
    help="The agent that adds it (recorded in the log) [you, as person:USER].",
)
@click.option(
    "--check",
    "check_command",
    default=None,
    metavar="COMMAND",
    help="Its acceptance check: an agent's run completes it only once this passes where that "
    "agent's bash runs; no model can change or remove it.",
)
@click.option(
    "--from",
    "source",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="FILE",
    help="Add many items from FILE (- for stdin): a text a line, or JSON lines with text, "
    "blocked_by, check and id; all of them or, on any bad line, none.",
)
@_as_json
def add(
    *,
    url: str,
    text: str | None,
    blocked_by: tuple[str, ...],
    agent: str | None,
    check_command: str | None,
    source: Any,
    as_json: bool,
) -> int:
    """Add a pending item (or many, --from FILE) and print each new id.

    A path or database with no board yet starts a new one (said on stderr).
    """
    from orchestrator.board.inputs import text_problem
    from orchestrator.board.store import BoardError

    if source is not None:
        if text is not None or blocked_by or check_command is not None:
            raise InputError(
                "--from: give each item's blockers and check on its own JSON line, not TEXT, "
                "--blocked-by or --check"
            )
        wanted = _read_items(source)
    elif text is None:
        raise InputError("give the item's TEXT, or --from FILE for many")
    else:
        wanted = [(0, {"text": text, "blocked_by": list(blocked_by), "check": check_command})]
    for number, item in wanted:
        where = f"--from: line {number}: " if source is not None else ""
        problem = text_problem(item["text"].strip())
        if problem is None and item.get("check") is not None:
            problem = text_problem(item["check"].strip(), "check command")
            problem = problem and (f"{where}{problem}" if where else f"--check: {problem}")
        elif problem is not None:
            problem = where + problem
        if problem is not None:
            raise InputError(_one(problem))
    actor = agent or _me()
    new_file = _new_sqlite_file(url)
    added: list[tuple[BoardItem, str | None]] = []
    with _store(url, create=True) as store:
        if store.created:
            click.echo(_one(f"orchestrator: starting a new board at {url}"), err=True)
        try:
            with store.change() as change:
                for number, item in wanted:
                    try:
                        new = change.add(
                            item["text"],
                            agent=actor,
                            blocked_by=item.get("blocked_by") or (),
                            item_id=item.get("id"),
                            check=item.get("check"),
                        )
                    except BoardError as error:
                        refused = _add_refused(error, number, source is not None)
                        raise InputError(_one(refused)) from None
                    added.append((new, item.get("check")))
        except Exception:
            if new_file is not None:  # the file this command made: leave no empty board
                store.close()
                for suffix in ("", "-wal", "-shm", "-lock"):
                    Path(f"{new_file}{suffix}").unlink(missing_ok=True)
            raise
    for new, check in added:
        shown = {**new.as_dict(), "check": check}
        click.echo(json_text(shown) if as_json else new.id)
    return 0


def _add_refused(error: Exception, number: int, from_file: bool) -> str:
    """Why the store refused one item, said as the person gave it: a line, or the flags."""
    from orchestrator.board.store import UnknownBlocker

    if isinstance(error, UnknownBlocker):
        missing = error.item_id
        if from_file:
            return (
                f"--from: line {number}: blocked by #{missing}, but no item #{missing} is on the "
                "board or on an earlier line"
            )
        return f"--blocked-by {missing}: no item #{missing} on this board"
    return f"--from: line {number}: {error}" if from_file else str(error)


def _lines(source: Any) -> Iterator[tuple[int, str]]:
    """``source``'s lines, numbered, each read with a bound (``/dev/zero`` has no line end)."""
    from orchestrator.board.inputs import MAX_TEXT

    read = 0
    number = 0
    while True:
        try:
            line = source.readline(MAX_FROM_LINE + 2)
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(_one(f"--from: cannot read it: {error}")) from None
        if not line:
            return
        number += 1
        read += len(line)
        body = line.rstrip("\r\n")
        if len(body) > MAX_FROM_LINE:
            raise InputError(
                f"--from: line {number} is longer than {MAX_FROM_LINE:,} characters; an item's "
                f"text is one line of at most {MAX_TEXT:,}"
            )
        if read > MAX_FROM_SIZE:
            raise InputError(
                f"--from: more than {MAX_FROM_SIZE:,} characters by line {number}; add the items "
                "in parts"
            )
        yield number, body


def _read_items(source: Any) -> list[tuple[int, dict[str, Any]]]:
    """The items ``--from`` names, each with its line: a text a line, or JSON lines.

    Blank lines are skipped; an id given twice is named with both its lines.
    """
    wanted: list[tuple[int, dict[str, Any]]] = []
    given: dict[str, int] = {}
    for number, line in _lines(source):
        if not line.strip():
            continue
        if not line.lstrip().startswith("{"):
            wanted.append((number, {"text": line}))
            continue
        try:
            item = json.loads(line)
        except ValueError as error:
            raise InputError(f"--from: line {number} is not JSON: {error}") from None
        except RecursionError:  # ``[[[[…`` thousands deep: no item is
            raise InputError(f"--from: line {number} is nested too deeply to be an item") from None
        problem = _json_item_problem(item)
        if problem is not None:
            raise InputError(_one(f"--from: line {number}: {problem}"))
        item_id = item.get("id")
        if item_id is not None and item_id in given:
            raise InputError(
                _one(
                    f"--from: line {number}: the id {item_id} is given on line {given[item_id]} "
                    "too; each item's id is its own"
                )
            )
        if item_id is not None:
            given[item_id] = number
        wanted.append((number, item))
    if not wanted:
        raise InputError("--from: no items in it (a text a line, or JSON lines)")
    return wanted


def _json_item_problem(item: object) -> str | None:
    if not isinstance(item, dict):
        return "each JSON line is an object with text, and blocked_by, check, id if wanted"
    unknown = sorted(set(item) - {"text", "blocked_by", "check", "id"})
    if unknown:
        return f"unknown key {unknown[0]!r}; the keys are text, blocked_by, check and id"
    if not isinstance(item.get("text"), str):
        return "text must be the item's text"
    blockers = item.get("blocked_by", [])
    if not isinstance(blockers, list) or not all(isinstance(b, str) for b in blockers):
        return 'blocked_by must be a list of ids, like ["1", "2"]'
    for key in ("check", "id"):
        if item.get(key) is not None and not isinstance(item[key], str):
            return f"{key} must be text"
    return None


def _new_sqlite_file(url: str) -> Path | None:
    """The SQLite file ``url`` names when there is none yet (``add`` would make it)."""
    from orchestrator.board.store import BoardUrlError
    from orchestrator.board.stores import parse_url

    try:
        path = getattr(parse_url(url).dialect, "path", None)
    except BoardUrlError:
        return None  # _store says why
    return path if isinstance(path, Path) and not path.exists() else None


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@click.argument("item_id", metavar="[ID]", required=False)
@_agent
@click.option(
    "--lease",
    callback=_lease,
    default="120",
    metavar="SECONDS",
    help="Seconds the claim holds unless renewed (claiming it again renews it); 1 to 86400 (24 h).",
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
            click.echo(_one(f"orchestrator: {nothing}"), err=True)
            return EXIT_NOTHING_CLAIMABLE
    _say_item(item, as_json)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_item_id
@_agent
@click.option(
    "--skip-check",
    is_flag=True,
    help="Complete an item that has a check without running it (logged as such).",
)
@_as_json
def complete(*, url: str, item_id: str, agent: str, skip_check: bool, as_json: bool) -> int:
    """Mark ID completed; only the agent holding it may.

    An item with a check completes once a passing run of it is logged since it last started
    (an agent's run logs each one); completing it by hand otherwise needs --skip-check, because
    the check is not run here (a board's commands are not run on the machine of whoever reads
    it). The skip is logged on the completion, and board check reports it.
    """
    with _store(url) as store:
        check = store.checks().get(item_id)
        item = store.complete(item_id, agent=agent, skip_check=skip_check)
    if check is not None and skip_check and not as_json:
        click.echo(inert(f"orchestrator: #{item_id} completed without running its check"), err=True)
    _say_item(item, as_json)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_item_id
@click.option(
    "--agent", callback=_agent_name, default=None, metavar="NAME", help="The agent holding ID."
)
@click.option(
    "--force",
    is_flag=True,
    help="Free ID whoever holds it (a dead agent's), as you: logged as a forced release.",
)
@_as_json
def release(*, url: str, item_id: str, agent: str | None, force: bool, as_json: bool) -> int:
    """Give ID back (pending, owned by no one): the agent holding it, or a person with --force."""
    if agent is not None and force:
        raise InputError(
            "--agent and --force: choose one (--agent NAME: that agent gives back the item it "
            "holds; --force: you free it, whoever holds it)"
        )
    if agent is None and not force:
        raise InputError("give --agent NAME (the agent holding it) or --force (as a person)")
    with _store(url) as store:
        if force:
            item = store.release(item_id, agent=_me(), force=True)
        else:
            assert agent is not None
            item = store.release(item_id, agent=agent)
    _say_item(item, as_json)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_item_id
@_as_json
def cancel(url: str, item_id: str, as_json: bool) -> int:
    """Cancel ID, whoever holds it, as a person (logged as person:USER).

    Agents cannot cancel an item that carries a check a person set; a person can, here.
    """
    with _store(url) as store:
        item = store.cancel(item_id, agent=_me())
    _say_item(item, as_json)
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_item_id
@click.option("--text", default=None, metavar="WORDS", help="The item's new text (one line).")
@click.option(
    "--blocked-by",
    multiple=True,
    metavar="ID",
    help="The items it waits for, replacing the old list (repeatable; '' for none); a pending "
    "item's only.",
)
@click.option(
    "--check",
    "check_command",
    default=None,
    metavar="COMMAND",
    help="Its new acceptance check ('' removes it); now a person's check.",
)
@_as_json
def edit(
    *,
    url: str,
    item_id: str,
    text: str | None,
    blocked_by: tuple[str, ...],
    check_command: str | None,
    as_json: bool,
) -> int:
    """Change an unfinished item's text, blockers or check, as a person (logged as an edit)."""
    from orchestrator.board.inputs import text_problem

    if text is None and not blocked_by and check_command is None:
        raise InputError("say what to change: --text, --blocked-by or --check")
    if text is not None and (problem := text_problem(text.strip())) is not None:
        raise InputError(_one(f"--text: {problem}"))
    if check_command and (problem := text_problem(check_command.strip(), "check command")):
        raise InputError(_one(f"--check: {problem}"))
    blockers = None if not blocked_by else tuple(b for b in blocked_by if b.strip())
    with _store(url) as store:
        item = store.edit(item_id, agent=_me(), text=text, blocked_by=blockers, check=check_command)
        check = store.checks().get(item_id)
    if as_json:
        click.echo(json_text({**item.as_dict(), "check": check}))
    else:
        click.echo(_line(item, check=check))
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_as_json
def log(url: str, as_json: bool) -> int:
    """The board's log: one JSON object a line (seq, ts, agent, item, src, dst, trigger…)."""
    with _store(url) as store:
        entries = list(store.log())
    for entry in entries:
        click.echo(json_text(entry.as_dict()))
    return 0


@board_group.command(context_settings=CONTEXT_SETTINGS)
@_url
@_as_json
def check(url: str, as_json: bool) -> int:
    """Replay the log through fresh item machines; exit 1 at the first broken rule."""
    from orchestrator.board.check import check_contents

    with _store(url) as store:
        contents = store.contents()
    items, entries = contents.items, contents.log
    violation = check_contents(contents)
    if as_json:
        document: dict[str, Any] = {
            "ok": violation is None,
            "entries": len(entries),
            "items": len(items),
            "violation": None
            if violation is None
            else {"seq": violation.seq, "message": violation.message},
        }
        click.echo(json_text(document))
    elif violation is None:
        click.echo(f"board check: {len(entries)} log lines, {len(items)} items: every rule held")
    if violation is not None:
        click.echo(_one(f"orchestrator: board check failed at {violation}"), err=True)
        return 1
    return 0
