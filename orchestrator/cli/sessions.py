"""``sessions``, ``show`` and ``replay``: what past runs did, read back from their traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from orchestrator.cli._click import CONTEXT_SETTINGS, InputError

if TYPE_CHECKING:
    from orchestrator.trace_file import TraceFile


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Only this work directory's sessions.  [default: every work directory]",
)
@click.option(
    "--limit", "-n", type=click.IntRange(min=1), default=20, metavar="N", help="How many to list."
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of objects, for scripts.")
def sessions(workdir: Path | None, limit: int, as_json: bool) -> int:
    """List recent sessions, newest first: time, status, rounds, cost, workdir, task, trace."""
    from orchestrator.config import ConfigError, load_config
    from orchestrator.sessions import print_sessions

    try:
        prices = load_config(workdir or Path(".")).price_per_mtok
    except ConfigError as error:
        raise InputError(str(error)) from None
    print_sessions(workdir, limit, prices, as_json=as_json)
    return 0


_last = click.option("--last", is_flag=True, help="The newest session of this directory.")


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("trace", metavar="TRACE|RUN_ID", required=False)
@_last
@click.option(
    "--round",
    "round_number",
    type=click.IntRange(min=0),
    default=None,
    metavar="N",
    help="Only this round.  [default: every round]",
)
@click.option("--full", is_flag=True, help="Show tool inputs and outputs whole, not clipped.")
@click.option(
    "--html",
    "html_out",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[OUT]",
    help="Write the run as one self-contained HTML page instead (OUT: a file or folder, - for "
    "stdout) and print its path.  [default OUT: RUN_ID.html beside the trace]",
)
def show(
    trace: str | None, last: bool, round_number: int | None, full: bool, html_out: str | None
) -> int:
    """Print what happened in TRACE: the model's text, tool calls and results, plan, reminders."""
    from orchestrator.transcript import TranscriptError, print_transcript

    if html_out is not None:
        if trace is None and not last and html_out not in ("", "-"):
            trace, html_out = html_out, ""  # `show --html RUN_ID`: the value is the run
        if round_number is not None or full:
            raise InputError("--round and --full shape the transcript; a page shows every round")
        return _show_html(trace_argument(trace, last), html_out or None)
    path = trace_argument(trace, last)
    try:
        print_transcript(read_trace(path), round_number=round_number, full=full)
    except TranscriptError as error:
        raise InputError(str(error)) from None
    _say_if_killed(path)
    return 0


def _show_html(path: Path, out: str | None) -> int:
    from orchestrator.config import ConfigError, load_config
    from orchestrator.picture.pages import PageError, TraceError, write_run_pages

    try:
        prices = load_config(Path(".")).price_per_mtok
        written = write_run_pages(read_trace(path), out, prices)
    except (ConfigError, PageError, TraceError) as error:
        raise InputError(str(error)) from None
    for number, page in enumerate(written):
        if page is not None:
            # With the page asked for on stdout, the others' paths go to stderr.
            click.echo(str(page), err=number > 0 and written[0] is None)
    return 0


def _say_if_killed(path: Path) -> None:
    from orchestrator.sessions import killed_note

    note = killed_note(path)
    if note is not None:
        click.echo(f"orchestrator: warning: {note}", err=True)


@click.command()
@click.argument("trace_name", metavar="TRACE|RUN_ID", required=False)
@_last
@click.option("--check", is_flag=True, help="Print nothing; exit 1 at the first divergence.")
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON.")
def replay(trace_name: str | None, last: bool, check: bool, as_json: bool) -> int:
    """Re-drive fresh plan and loop machines from TRACE and check it comes out the same."""
    from orchestrator.console import print_timeline
    from orchestrator.replay import Replay
    from orchestrator.trace_file import TraceError

    trace = trace_argument(trace_name, last)
    parsed = read_trace(trace)
    if not check:  # --check prints nothing but a divergence
        _say_if_killed(trace)
    replayer = Replay(parsed, timeline=not check)
    try:
        divergence = replayer.check()
    except TraceError as error:
        raise InputError(str(error)) from None
    if check:
        if divergence is not None:
            click.echo(f"orchestrator: replay diverged at {divergence}", err=True)
        return 0 if divergence is None else 1
    for warning in parsed.warnings:
        click.echo(f"orchestrator: warning: {warning}", err=True)
    if as_json:
        document = {
            "trace": str(trace),
            "ok": divergence is None,
            "divergence": None if divergence is None else str(divergence),
            "unknown_events": parsed.unknown_events,
            "truncated_tail": parsed.truncated_tail,
            "timeline": [row.as_dict() for row in replayer.timeline],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        print_timeline(replayer.timeline)
        if divergence is None:
            click.echo("replay: every transition and reminder came out the same")
    if divergence is not None:
        click.echo(f"orchestrator: replay diverged at {divergence}", err=True)
    return 0 if divergence is None else 1


def read_trace(path: Path) -> TraceFile:
    from orchestrator.trace_file import TraceError, read_trace

    try:
        return read_trace(path)
    except TraceError as error:
        raise InputError(str(error)) from None


def trace_argument(value: str | None, last: bool, workdir: Path | None = None) -> Path:
    """TRACE as given (a path or a run id), or ``--last``: the newest session of the workdir."""
    from orchestrator.sessions import latest_trace, trace_named

    if last:
        if value is not None:
            raise InputError("give either TRACE or --last, not both")
        where = (workdir or Path(".")).resolve()
        newest = latest_trace(where)
        if newest is None:
            raise InputError(f"no sessions for {where} yet; see `orchestrator sessions`")
        return newest
    if value is None:
        raise InputError("give a TRACE (a path or a run id), or --last for the newest one here")
    found = trace_named(value)
    if found is None:
        raise InputError(
            f"{value}: no such trace file or run id; `orchestrator sessions` lists them"
        )
    return found
