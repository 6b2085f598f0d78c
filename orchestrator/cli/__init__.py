"""The command-line interface: one module per command group, each a client of :mod:`agent`.

Exit codes (see :mod:`orchestrator.report`, and the table in docs/cli.md from
:data:`orchestrator.cli_docs.EXIT_CODES`): 0 done, 1 run failed, 2 usage or input error, 3 done
but not everything it reports happened (calls refused, the plan unfinished, a protected file
changed), 4 ``board claim`` found nothing to claim, 130 interrupted, 143 terminated (SIGTERM),
129 hung up (SIGHUP). A person's mistake (a bad flag, a missing file, a wrong setting) is one
line on stderr, never a traceback; in a JSON mode also one object on stdout with
``"status": "error"``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from orchestrator import __version__
from orchestrator.cli._click import LazyGroup

__all__ = ["COMMANDS", "cli", "main"]


#: Every command: its module, its attribute there, and the summary ``orchestrator -h`` lists.
#: Each module is imported when its command runs, so ``--version`` and ``-h`` stay fast; a test
#: holds each summary to the first sentence of its command's docstring.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": (
        "orchestrator.cli.run",
        "run",
        "Run TASK (or - to read it from stdin) until it is done, fails or is interrupted.",
    ),
    "resume": (
        "orchestrator.cli.run",
        "resume",
        "Continue the session in TRACE (or --last), with INSTRUCTION as the next message if given.",
    ),
    "chat": (
        "orchestrator.cli.chat",
        "chat",
        "Talk to the agent turn by turn; the plan persists across turns.",
    ),
    "demo": (
        "orchestrator.cli.run",
        "demo",
        "Run the bundled SCRIPTED scenario offline: real tools in a fresh work directory.",
    ),
    "replay": (
        "orchestrator.cli.sessions",
        "replay",
        "Re-drive fresh plan and loop machines from TRACE and check it comes out the same.",
    ),
    "diagram": (
        "orchestrator.cli.diagram",
        "diagram",
        "Draw the machines from their live definitions, or one run's path through them.",
    ),
    "eval": (
        "orchestrator.eval.command",
        "eval_group",
        "Measure whether the board helps: run a suite under several arms and compare them.",
    ),
    "mcp": (
        "orchestrator.cli.mcp",
        "mcp_group",
        "MCP servers: what .mcp.json and [mcp_servers] name, and whether each starts.",
    ),
    "board": (
        "orchestrator.cli.board",
        "board_group",
        "A shared board several agents work: show, add, claim, complete, release, log, check.",
    ),
    "hooks": (
        "orchestrator.cli.hooks",
        "hooks",
        "List the hooks in effect: event, matcher, command, file, trusted or not, where each runs.",
    ),
    "trust": (
        "orchestrator.cli.trust",
        "trust",
        "Trust a folder's files (orchestrator.toml, .mcp.json, what hooks run) without a terminal.",
    ),
    "config": (
        "orchestrator.cli.diagnose",
        "show_config",
        "The settings in effect, where each comes from, bad ones flagged.",
    ),
    "sessions": (
        "orchestrator.cli.sessions",
        "sessions",
        "List recent sessions, newest first: time, status, rounds, cost, workdir, task, trace.",
    ),
    "show": (
        "orchestrator.cli.sessions",
        "show",
        "Print what happened in TRACE: the model's text, tool calls and results, plan, reminders.",
    ),
    "team": (
        "orchestrator.cli.team",
        "team",
        "Run TASK as a team: a lead plans it on a shared board, workers do the items.",
    ),
    "work": (
        "orchestrator.cli.work",
        "work",
        "Claim the board's ready items one at a time and do each as a session in the work "
        "directory.",
    ),
    "doctor": (
        "orchestrator.cli.diagnose",
        "doctor",
        "Check the key, base URL, model, state directory and sandbox.",
    ),
}


class _Group(LazyGroup):
    """Bare ``orchestrator`` prints the help and exits 0 (click 8.2+ would call it an error)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)


@click.group(
    cls=_Group,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(__version__, prog_name="orchestrator")
def cli() -> None:
    """Keep a coding agent on course with a guarded todo board and an auditing loop."""


def _wants_json(argv: Sequence[str] | None) -> bool:
    """Whether the command line asked for machine output (``--output-format json``, ``--json``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    command = next((arg for arg in args if not arg.startswith("-")), "")
    for index, arg in enumerate(args):
        if arg in ("--output-format=json", "--output-format=stream-json"):
            return True
        # --json is stream-json for the commands that run; elsewhere it is a listing's format.
        if arg == "--json" and command in ("run", "chat", "resume", "demo"):
            return True
        following = args[index + 1] if index + 1 < len(args) else ""
        if arg == "--output-format" and following in ("json", "stream-json"):
            return True
    return False


def _usage_error(reason: str, argv: Sequence[str] | None) -> None:
    """One line on stderr, exit 2; in a JSON mode also one JSON object on stdout for the parser."""
    import json

    from orchestrator.inert import inert_line
    from orchestrator.report import EXIT_USAGE

    # A path, an argument or a stored text in the reason may hold a newline or a terminal's
    # escape: the line stays one line, and the terminal shows them rather than obeys them.
    reason = inert_line(reason)
    click.echo(f"orchestrator: error: {reason}", err=True)
    if _wants_json(argv):
        document = {"status": "error", "exit_code": EXIT_USAGE, "reason": reason}
        click.echo(json.dumps(document, ensure_ascii=False))
    sys.exit(EXIT_USAGE)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    from orchestrator.signals import stop_signals_interrupt

    with stop_signals_interrupt() as stopped:
        try:
            code = cli.main(args=argv, prog_name="orchestrator", standalone_mode=False, obj=stopped)
        except click.exceptions.Abort:
            name = {129: "hung up", 143: "terminated"}.get(stopped.exit_code, "interrupted")
            click.echo(f"orchestrator: {name}", err=True)
            sys.exit(stopped.exit_code)
        except click.exceptions.Exit as done:
            sys.exit(done.exit_code)
        except click.ClickException as error:
            hint = ""
            if isinstance(error, click.UsageError) and error.ctx is not None:
                hint = f" (see: {error.ctx.command_path} --help)"
            _usage_error(f"{error.format_message()}{hint}", argv)
        except Exception as error:
            if not _is_a_persons_mistake(error):
                raise
            _usage_error(str(error), argv)
    _flush_or_let_go()
    sys.exit(code if isinstance(code, int) else 0)


def _is_a_persons_mistake(error: Exception) -> bool:
    """A bad setting or script: imported only now, so a fast command never loads them."""
    from orchestrator.config import ConfigError
    from orchestrator.script import ScriptError

    return isinstance(error, ScriptError | ConfigError)


def _flush_or_let_go() -> None:
    """A closed stdout (``| head -1``) is not an error at exit: nothing is left to say there."""
    try:
        sys.stdout.flush()
    except OSError as error:
        import os

        from orchestrator.trace import TERMINAL_GONE

        if error.errno not in TERMINAL_GONE:
            raise
        # Point stdout at /dev/null so the interpreter's own flush at exit stays quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
