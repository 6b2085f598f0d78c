"""The command-line interface: one module per command group, each a client of :mod:`agent`.

Exit codes (see :mod:`orchestrator.report`): 0 done, 1 run failed, 2 usage or input error,
3 done but side-effecting calls were refused, 130 interrupted, 143 terminated (SIGTERM),
129 hung up (SIGHUP). A person's mistake (a bad flag, a missing file, a wrong setting) is one
line on stderr, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from orchestrator.cli._common import CONTEXT_SETTINGS, USAGE_ERROR, InputError
from orchestrator.cli.board import board_group
from orchestrator.cli.chat import chat
from orchestrator.cli.diagnose import doctor, show_config
from orchestrator.cli.diagram import diagram
from orchestrator.cli.mcp import mcp_group
from orchestrator.cli.run import demo, resume, run
from orchestrator.cli.sessions import replay, sessions, show
from orchestrator.config import ConfigError
from orchestrator.eval.command import eval_group
from orchestrator.signals import stop_signals_interrupt

__all__ = ["InputError", "cli", "main"]


class _Group(click.Group):
    """Bare ``orchestrator`` prints the help and exits 0 (click 8.2+ would call it an error)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args:
            click.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)


@click.group(cls=_Group, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="orchestrator")
def cli() -> None:
    """Keep a coding agent on course with a guarded todo board and an auditing loop."""


for _command in (
    run,
    resume,
    chat,
    demo,
    replay,
    diagram,
    eval_group,
    mcp_group,
    board_group,
    show_config,
    sessions,
    show,
    doctor,
):
    cli.add_command(_command)


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

    click.echo(f"orchestrator: error: {reason}", err=True)
    if _wants_json(argv):
        document = {"status": "error", "exit_code": USAGE_ERROR, "reason": reason}
        click.echo(json.dumps(document, ensure_ascii=False))
    sys.exit(USAGE_ERROR)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    from orchestrator.script import ScriptError

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
        except (ScriptError, ConfigError) as error:
            _usage_error(str(error), argv)
    _flush_or_let_go()
    sys.exit(code if isinstance(code, int) else 0)


def _flush_or_let_go() -> None:
    """A closed stdout (``| head -1``) is not an error at exit: nothing is left to say there."""
    import os

    from orchestrator.trace import TERMINAL_GONE

    try:
        sys.stdout.flush()
    except OSError as error:
        if error.errno not in TERMINAL_GONE:
            raise
        # Point stdout at /dev/null so the interpreter's own flush at exit stays quiet too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
