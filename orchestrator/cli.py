"""The command-line interface: the one place that wires concrete classes together.

Exit codes: 0 done, 1 run failed, 2 usage or input error, 130 interrupted. A person's mistake
(a bad flag, a missing file) is one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import click

from orchestrator.console import PlainView, print_timeline
from orchestrator.conversation import Conversation
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import PlanBoard, TodoTool
from orchestrator.protocols import Approver, Model
from orchestrator.replay import (
    RebuiltRun,
    Replay,
    ReplayModel,
    ResultComparer,
    TraceError,
    TraceFile,
    read_trace,
    rebuild,
)
from orchestrator.script import ScriptedModel, ScriptError, parse_script
from orchestrator.tools import (
    BashTool,
    EditFileTool,
    ReadFileTool,
    ToolRegistry,
    Workdir,
    WriteFileTool,
)
from orchestrator.trace import (
    EventSink,
    default_trace_path,
    new_run_id,
    open_trace,
    secrets_from_environment,
)

DEFAULT_MODEL = "claude-sonnet-4-5"
EXIT_CODES = {"done": 0, "failed": 1, "interrupted": 130}
USAGE_ERROR = 2


class InputError(click.ClickException):
    """A person's mistake: shown as one line, exit code 2."""

    exit_code = USAGE_ERROR


@attrs.frozen
class RunOptions:
    """The options ``run``, ``chat`` and ``demo`` share, after parsing."""

    workdir: Path
    trace: Path | None
    model: str
    max_rounds: int
    yes: bool
    max_retries: int
    trace_requests: bool
    quiet: bool


def _run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default="."),
        click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None),
        click.option("--model", envvar="ANTHROPIC_MODEL", default=DEFAULT_MODEL, show_default=True),
        click.option("--max-rounds", type=click.IntRange(min=1), default=50, show_default=True),
        click.option("--yes", is_flag=True, help="Run bash and file edits without asking."),
        click.option("--max-retries", type=click.IntRange(min=0), default=4, show_default=True),
        click.option("--trace-requests", is_flag=True, help="Record full request bodies."),
        click.option("--quiet", is_flag=True, help="Show only the final answer and plan."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _options(**kwargs: Any) -> RunOptions:
    return RunOptions(**kwargs)


@click.group()
@click.version_option(package_name="orchestrator")
def cli() -> None:
    """Keep a coding agent on course with a guarded todo board and an auditing loop."""


@cli.command()
@click.argument("task")
@_run_options
@click.option(
    "--replay-model",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Play the model's recorded responses from this trace; tools run for real.",
)
def run(task: str, replay_model: Path | None, **kwargs: Any) -> int:
    """Run TASK with the model, until it is done, fails or is interrupted."""
    options = _options(**kwargs)
    if replay_model is not None:
        recorded = _read_trace(replay_model)
        comparer = ResultComparer(recorded, lambda text: click.echo(text, err=True))
        return _execute(_Session(task, ReplayModel(recorded), options, extra_sinks=(comparer,)))
    return _execute(_Session(task, _anthropic_model(options), options))


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@_run_options
def resume(trace: Path, **kwargs: Any) -> int:
    """Continue an interrupted or failed run from its TRACE, appending to the same trace."""
    options = _options(**kwargs)
    rebuilt = rebuild(_read_trace(trace))
    if rebuilt.status == "done":
        raise InputError(f"{trace}: that run finished (done); there is nothing to resume")
    settings = attrs.evolve(rebuilt.settings, max_rounds=rebuilt.last_round + options.max_rounds)
    workdir = Path(settings.workdir) if settings.workdir else options.workdir
    options = attrs.evolve(options, workdir=workdir, trace=trace, model=settings.model)
    session = _Session(
        None,
        _anthropic_model(options),
        options,
        board=rebuilt.board,
        conversation=rebuilt.conversation,
        settings=settings,
        resume_from=rebuilt,
    )
    return _execute(session)


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Print nothing; exit 1 at the first divergence.")
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON.")
def replay(trace: Path, check: bool, as_json: bool) -> int:
    """Re-drive fresh plan and loop machines from TRACE and check it comes out the same."""
    parsed = _read_trace(trace)
    replayer = Replay(parsed)
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


def _read_trace(path: Path) -> TraceFile:
    try:
        return read_trace(path)
    except TraceError as error:
        raise InputError(str(error)) from None


def _anthropic_model(options: RunOptions) -> Model:
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise InputError(
            "ANTHROPIC_API_KEY is not set; export it (ANTHROPIC_BASE_URL points the client at "
            "any Messages-API endpoint), or try `orchestrator demo`, which runs offline"
        )
    from orchestrator.anthropic_model import AnthropicModel

    return AnthropicModel(max_retries=options.max_retries)


@cli.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--quiet", is_flag=True)
def demo(workdir: Path | None, quiet: bool) -> int:
    """Run the bundled SCRIPTED scenario offline: real tools in a fresh work directory."""
    scenario = resources.files("orchestrator.scenarios")
    script = parse_script(
        json.loads(scenario.joinpath("refactor_hello.json").read_text("utf-8")),
        source="refactor_hello.json",
    )
    files: Mapping[str, str] = json.loads(
        scenario.joinpath("refactor_hello.files.json").read_text("utf-8")
    )
    root = workdir or Path(tempfile.mkdtemp(prefix="orchestrator-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (root / name).write_text(content, encoding="utf-8")
    task = "Refactor hello.py: add type hints, docstrings, and a main guard"
    click.echo(f"[scripted scenario: {script.name}; not a recording of a real model]")
    click.echo(f"task: {task}\nworkdir: {root}\n")
    options = RunOptions(
        workdir=root,
        trace=None,
        model="scripted",
        max_rounds=50,
        yes=True,
        max_retries=0,
        trace_requests=False,
        quiet=quiet,
    )
    return _execute(_Session(task, ScriptedModel(script), options, after=_demo_epilogue))


def _demo_epilogue(trace: Path, workdir: Path) -> None:
    click.echo(f"\n[scripted scenario finished]\nwork directory: {workdir}\ntrace: {trace}")
    click.echo(f"replay it:  orchestrator replay {shlex.quote(str(trace))}")
    click.echo(f"diagram it: orchestrator diagram --trace {shlex.quote(str(trace))}")


@attrs.frozen
class _Session:
    """Everything one run needs, assembled by a command and executed by :func:`_execute`."""

    task: str | None
    model: Model
    options: RunOptions
    board: PlanBoard = attrs.field(factory=PlanBoard)
    conversation: Conversation | None = None
    settings: LoopSettings | None = None
    resume_from: RebuiltRun | None = None
    extra_sinks: tuple[EventSink, ...] = ()
    after: Callable[[Path, Path], None] | None = None


def _execute(session: _Session) -> int:
    options = session.options
    workdir = options.workdir.resolve()
    if not workdir.is_dir():
        raise InputError(f"--workdir {options.workdir}: no such directory")
    confined = Workdir(workdir)
    registry = ToolRegistry(
        [
            BashTool(confined),
            ReadFileTool(confined),
            WriteFileTool(confined),
            EditFileTool(confined),
            TodoTool(session.board),
        ],
        approver=_approver(options.yes),
    )
    view = PlainView(quiet=options.quiet)
    resumed = session.resume_from
    run_id = resumed.run_id if resumed is not None else new_run_id()
    trace_path = options.trace or default_trace_path(workdir, run_id)
    settings = session.settings or LoopSettings(
        model=options.model,
        system=DEFAULT_SYSTEM.format(workdir=workdir),
        max_rounds=options.max_rounds,
        trace_requests=options.trace_requests,
        workdir=str(workdir),
    )
    with open_trace(
        trace_path,
        run_id=run_id,
        secrets=secrets_from_environment(),
        sinks=[view, *session.extra_sinks],
        append=resumed is not None,
        first_seq=resumed.last_seq if resumed is not None else 0,
    ) as trace:
        loop = Loop(
            model=session.model,
            tools=registry,
            plan=session.board,
            log=trace.log,
            settings=settings,
            on_text=view.on_text,
            conversation=session.conversation,
        )
        first_round = resumed.last_round if resumed is not None else 0
        outcome = loop.run(session.task, first_round=first_round)
    _report(outcome, session.board, options.quiet)
    if session.after is not None:
        session.after(trace_path, workdir)
    return EXIT_CODES[outcome.status]


def _report(outcome: RunOutcome, board: PlanBoard, quiet: bool) -> None:
    if quiet and outcome.text:
        click.echo(outcome.text)
    click.echo("\n" + board.render())
    if outcome.status != "done":
        click.echo(f"orchestrator: run {outcome.status}: {outcome.reason}", err=True)


def _approver(yes: bool) -> Approver | None:
    if yes:
        return None
    if sys.stdin.isatty():
        return _ask_in_terminal
    return _refuse_without_terminal


def _ask_in_terminal(tool: str, arguments: Mapping[str, Any]) -> bool:
    from orchestrator.guard import describe_arguments

    return click.confirm(f"run {tool} {describe_arguments(arguments)}?", default=False)


def _refuse_without_terminal(tool: str, arguments: Mapping[str, Any]) -> bool:
    # No terminal to ask and no --yes: side effects are refused, the run goes on.
    return False


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    try:
        code = cli.main(args=argv, prog_name="orchestrator", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("orchestrator: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as error:
        hint = ""
        if isinstance(error, click.UsageError) and error.ctx is not None:
            hint = f" (see: {error.ctx.command_path} --help)"
        click.echo(f"orchestrator: error: {error.format_message()}{hint}", err=True)
        sys.exit(USAGE_ERROR)
    except ScriptError as error:
        click.echo(f"orchestrator: error: {error}", err=True)
        sys.exit(USAGE_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
