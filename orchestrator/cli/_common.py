"""What the command modules share: the run options as flags, input errors, the end of a run.

A person's mistake (a bad flag, a missing file, a wrong setting) is an :class:`InputError`:
one line on stderr, exit code 2, never a traceback.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from orchestrator import report
from orchestrator.cli._click import InputError
from orchestrator.config import SETTINGS, Choice
from orchestrator.signals import StopRecord
from orchestrator.trace_file import json_text

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions, Session
    from orchestrator.protocols import Model

USAGE_ERROR = report.EXIT_USAGE
OUTPUT_FORMATS = ("text", "json", "stream-json")

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _setting_options() -> list[Decorator]:
    """One flag per setting in :data:`config.SETTINGS`, so a new setting gets its flag here."""
    options: list[Decorator] = []
    for setting in SETTINGS:
        if setting.secret:
            continue  # a key on a command line ends up in shell history and ps
        kind: click.Choice[str] | None = None
        if isinstance(setting.parse, Choice):
            kind = click.Choice(setting.parse.allowed, case_sensitive=False)
        envs = ", ".join(setting.env)
        text = f"{setting.help}  [env: {envs}]" if envs else setting.help
        if setting.default is False:
            options.append(
                click.option(setting.flag, setting.name, is_flag=True, default=None, help=text)
            )
            continue
        if isinstance(setting.default, tuple):
            options.append(
                click.option(
                    setting.flag,
                    setting.name,
                    multiple=True,
                    metavar=setting.metavar or "TEXT",
                    help=text + " (repeatable)",
                )
            )
            continue
        if setting.default is not None:
            text += f"  [default: {_shown_default(setting.default)}]"
        options.append(
            click.option(
                setting.flag,
                setting.name,
                type=kind,
                default=None,
                show_default=False,
                metavar=None if kind else (setting.metavar or _metavar(setting.default)),
                help=text,
            )
        )
    return options


def agent_options(*, cost: str, protect: str) -> Decorator:
    """``--model``, ``--price-per-mtok``, ``--trust`` and ``--protect``, as team and work take them.

    ``cost`` says what the prices are for, ``protect`` what ``--protect`` keeps from whom.
    """
    options = (
        click.option("--model", metavar="NAME", default=None, help="Model name [ANTHROPIC_MODEL]."),
        click.option(
            "--price-per-mtok",
            metavar="IN,OUT,CACHE_READ,CACHE_WRITE",
            default=None,
            help=f"Dollars per million tokens, for {cost} [the model's list price].",
        ),
        click.option("--trust", is_flag=True, help="Trust this folder's orchestrator.toml."),
        click.option("--protect", multiple=True, metavar="GLOB", help=protect),
    )

    def apply(command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):  # listed in --help in the order written here
            command = option(command)
        return command

    return apply


def _shown_default(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _metavar(default: object) -> str:
    if isinstance(default, bool):
        return "BOOL"
    if isinstance(default, int):
        return "N"
    if isinstance(default, float):
        return "SECONDS"
    return "TEXT"


def _setting_names() -> tuple[str, ...]:
    return tuple(setting.name for setting in SETTINGS if not setting.secret)


def shared_options(*, trace: bool) -> Decorator:
    """The options of ``run``, ``chat`` and ``resume`` (which writes to its TRACE argument)."""
    path = click.Path(file_okay=False, path_type=Path)
    options: list[Decorator] = [
        click.option(
            "--workdir", type=path, default=None, help="Where the agent works.  [default: .]"
        ),
        *_setting_options(),
        click.option("--yes", "-y", is_flag=True, help="Same as --approval auto."),
        click.option(
            "--output-format",
            type=click.Choice(OUTPUT_FORMATS),
            default="text",
            help="text for people; json: one object at the end; stream-json: every event.",
        ),
        click.option(
            "--json", "as_json", is_flag=True, help="Same as --output-format stream-json."
        ),
        click.option("--quiet", "-q", is_flag=True, help="Show only the final answer and plan."),
        click.option("--verbose", "-v", is_flag=True, help="Show more of each tool's output."),
        click.option(
            "--trace-requests", is_flag=True, help="Record full request bodies in the trace."
        ),
        click.option(
            "--trust", is_flag=True, help="Trust this folder's orchestrator.toml and .mcp.json."
        ),
    ]
    if trace:
        options.insert(
            1,
            click.option(
                "--trace",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Write the trace here (a new file).  [default: the per-user state dir]",
            ),
        )

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


run_options = shared_options(trace=True)


def _ask(question: str) -> bool:
    return click.confirm(question, default=False, err=True)


def options_from_flags(**kwargs: Any) -> RunOptions:
    """The flags of ``run``, ``chat`` and ``resume``, merged with the environment and files."""
    from orchestrator.agent import SettingsError, load_options

    workdir: Path = kwargs.pop("workdir") or Path(".")
    # A repeatable flag given no times arrives as (), which means "not given".
    flags = {name: _given(kwargs.pop(name)) for name in _setting_names()}
    trust: bool = kwargs.pop("trust")
    yes, as_json = kwargs.pop("yes"), kwargs.pop("as_json")
    if yes:
        if flags["approval"] not in (None, "auto"):
            raise InputError(
                f"--yes means --approval auto; it contradicts --approval {flags['approval']}"
            )
        flags["approval"] = "auto"
    if as_json:
        if kwargs["output_format"] not in ("text", "stream-json"):
            raise InputError("--json means --output-format stream-json; pick one of the two")
        kwargs["output_format"] = "stream-json"
    terminal = sys.stdin is not None and sys.stdin.isatty()
    try:
        return load_options(workdir, flags, trust=trust, ask=_ask if terminal else None, **kwargs)
    except SettingsError as error:
        raise InputError(str(error)) from None


def setting_flag(name: str, value: str | None, flag: str) -> object:
    """A command's own flag read by the setting's rule (``nan`` is no lease); one line if bad."""
    if value is None:
        return None
    setting = next(found for found in SETTINGS if found.name == name)
    try:
        return setting.parse(value)
    except ValueError as error:
        raise InputError(f"{flag} {value}: expected {error}") from None


def _given(value: object) -> object:
    return None if value == () else value


def read_task(task: str | None) -> str:
    """TASK, or stdin for ``-`` or a missing TASK with a pipe; an empty task is refused."""
    if task is None or task == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("give the task as an argument, or pass - and pipe it on stdin")
        task = sys.stdin.read()
    if not task.strip():
        raise InputError("the task is empty; say what the agent should do")
    return task.strip()


def how_i_was_called() -> str:
    """The command a person can paste to run orchestrator again (``make demo`` puts it in .venv)."""
    program = Path(sys.argv[0])
    if program.name == "__main__.py":
        # -P: pasted in a work directory, a model's ``orchestrator.py`` there must not run.
        return f"{shlex.quote(sys.executable)} -P -m orchestrator"
    found = shutil.which("orchestrator")
    if found is not None and Path(found).resolve() == program.resolve():
        return "orchestrator"
    return shlex.quote(str(program)) if program.name == "orchestrator" else "orchestrator"


def stderr_if(to_stderr: bool) -> Callable[[str], None]:
    return lambda text: echo_safely(text, err=to_stderr)


def echo_safely(text: str, *, err: bool = False) -> None:
    """``click.echo``, but a terminal that is gone (hung up, a closed pipe) is not an error."""
    from orchestrator.trace import TERMINAL_GONE

    try:
        click.echo(text, err=err)
    except OSError as error:
        if error.errno not in TERMINAL_GONE:
            raise


def warn(message: str) -> None:
    click.echo(f"orchestrator: warning: {message}", err=True)


def new_session(options: RunOptions, model: Model, **kwargs: Any) -> Session:
    """The session a command runs, its lines going to the terminal as a CLI's do."""
    from orchestrator.agent import Session, SettingsError, new_board

    if "board" not in kwargs:
        try:
            kwargs["board"] = new_board(options.config, warn)
        except SettingsError as error:
            raise InputError(str(error)) from None
    return Session(
        options,
        model,
        notice=stderr_if(True),
        say=stderr_if(options.machine_output),
        me=how_i_was_called(),
        **kwargs,
    )


def anthropic_model(options: RunOptions) -> Model:
    from orchestrator.agent import SettingsError
    from orchestrator.agent import anthropic_model as make

    try:
        return make(options.config)
    except SettingsError as error:
        raise InputError(str(error)) from None


def stopped_record() -> StopRecord | None:
    return click.get_current_context().find_object(StopRecord)


def run_once(session: Session, task: str | None) -> int:
    """Run one message to its end and print the closing lines (or the JSON object)."""
    from orchestrator.agent import SettingsError

    try:
        outcome = session.turn(task)
    except SettingsError as error:
        raise InputError(str(error)) from None
    finally:
        session.close()
    stopped = stopped_record()
    result = session.report_for(outcome, stopped.exit_code if stopped else report.EXIT_INTERRUPTED)
    if session.options.output_format == "stream-json":  # the stream ends with the result
        echo_safely(json_text({**result.as_json(), "event": "result"}))
    if session.options.output_format == "json":
        echo_safely(json_text(result.as_json()))
        for line in result.closing_lines()[1:]:  # stdout is the program's; people read stderr
            if line.startswith("! plan unfinished"):
                echo_safely(line, err=True)
    elif session.closing:
        say = stderr_if(session.options.machine_output)
        for line in result.closing_lines():
            say(line)
    else:  # the demo prints its own ending; what did not happen is still said
        for line in result.closing_lines()[1:]:
            if line.startswith("!"):
                echo_safely(line, err=True)
    return result.exit_code
