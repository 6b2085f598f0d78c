"""The command-line interface: the one place that wires concrete classes together.

Exit codes: 0 done, 1 run failed, 2 usage or input error, 130 interrupted. A person's mistake
(a bad flag, a missing file) is one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import click

from orchestrator.console import PlainView
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import PlanBoard, TodoTool
from orchestrator.protocols import Approver, Model
from orchestrator.script import ScriptedModel, ScriptError, parse_script
from orchestrator.tools import (
    BashTool,
    EditFileTool,
    ReadFileTool,
    ToolRegistry,
    Workdir,
    WriteFileTool,
)
from orchestrator.trace import default_trace_path, new_run_id, open_trace, secrets_from_environment

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
def run(task: str, **kwargs: Any) -> int:
    """Run TASK with the model, until it is done, fails or is interrupted."""
    options = _options(**kwargs)
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise InputError(
            "ANTHROPIC_API_KEY is not set; export it (ANTHROPIC_BASE_URL points the client at "
            "any Messages-API endpoint), or try `orchestrator demo`, which runs offline"
        )
    from orchestrator.anthropic_model import AnthropicModel

    model = AnthropicModel(max_retries=options.max_retries)
    return _execute(task, model, options)


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
    return _execute(task, ScriptedModel(script), options, after=_demo_epilogue)


def _demo_epilogue(trace: Path, workdir: Path) -> None:
    click.echo(f"\n[scripted scenario finished]\nwork directory: {workdir}\ntrace: {trace}")
    click.echo("replay it:  orchestrator replay " + _quote(trace))
    click.echo("diagram it: orchestrator diagram --trace " + _quote(trace))


def _quote(path: Path) -> str:
    text = str(path)
    return text if text.replace("/", "").replace("-", "").replace(".", "").isalnum() else repr(text)


def _execute(
    task: str,
    model: Model,
    options: RunOptions,
    *,
    after: Callable[[Path, Path], None] | None = None,
) -> int:
    workdir = options.workdir.resolve()
    if not workdir.is_dir():
        raise InputError(f"--workdir {options.workdir}: no such directory")
    board = PlanBoard()
    registry = ToolRegistry(
        [
            BashTool(Workdir(workdir)),
            ReadFileTool(Workdir(workdir)),
            WriteFileTool(Workdir(workdir)),
            EditFileTool(Workdir(workdir)),
            TodoTool(board),
        ],
        approver=_approver(options.yes),
    )
    view = PlainView(quiet=options.quiet)
    run_id = new_run_id()
    trace_path = options.trace or default_trace_path(workdir, run_id)
    settings = LoopSettings(
        model=options.model,
        system=DEFAULT_SYSTEM.format(workdir=workdir),
        max_rounds=options.max_rounds,
        trace_requests=options.trace_requests,
    )
    with open_trace(
        trace_path, run_id=run_id, secrets=secrets_from_environment(), sinks=[view]
    ) as trace:
        loop = Loop(
            model=model,
            tools=registry,
            plan=board,
            log=trace.log,
            settings=settings,
            on_text=view.on_text,
        )
        outcome = loop.run(task)
    _report(outcome, board, options.quiet)
    if after is not None:
        after(trace_path, workdir)
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
