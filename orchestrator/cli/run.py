"""``run``, ``resume`` and ``demo``: one task through the loop, from the flags or a trace."""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import click

from orchestrator import report
from orchestrator.cli._click import CONTEXT_SETTINGS, FiniteFloatRange, InputError
from orchestrator.cli._common import (
    anthropic_model,
    how_i_was_called,
    new_session,
    options_from_flags,
    read_task,
    run_once,
    run_options,
    shared_options,
    stderr_if,
    warn,
)
from orchestrator.cli.sessions import read_trace, trace_argument

if TYPE_CHECKING:
    from orchestrator.agent import RunOptions
    from orchestrator.loop import LoopSettings

DEMO_TASK = "Refactor hello.py: add type hints, docstrings, and a main guard"


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task", required=False)
@run_options
@click.option(
    "--replay-model",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Play the model's recorded responses from this trace; tools run for real. "
    "Exit 1 if any result differs from the recording.",
)
def run(task: str | None, replay_model: Path | None, **kwargs: Any) -> int:
    """Run TASK (or - to read it from stdin) until it is done, fails or is interrupted."""
    task = read_task(task)
    options = options_from_flags(**kwargs)
    if replay_model is not None:
        from orchestrator.replay import ReplayModel, ResultComparer

        recorded = read_trace(replay_model)
        comparer = ResultComparer(recorded, lambda text: click.echo(text, err=True))
        session = new_session(options, ReplayModel(recorded), extra_sinks=(comparer,))
        code = run_once(session, task)
        if code == report.EXIT_DONE and comparer.differences:
            click.echo(
                f"orchestrator: {comparer.differences} tool result(s) differ from the recording",
                err=True,
            )
            return report.EXIT_FAILED
        return code
    session = new_session(options, anthropic_model(options))
    return run_once(session, task)


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("trace_name", metavar="TRACE|RUN_ID", required=False)
@click.argument("instruction", required=False)
@click.option("--last", is_flag=True, help="The newest session of the work directory.")
@shared_options(trace=False)
def resume(trace_name: str | None, instruction: str | None, last: bool, **kwargs: Any) -> int:
    """Continue the session in TRACE (or --last), with INSTRUCTION as the next message if given.

    Any session can go on: an interrupted or failed run picks up where it stopped; a finished
    one needs the next INSTRUCTION.

    What a resume keeps from the run: its work directory, conversation and board, and these
    settings unless a flag given here changes them: model, max_tokens, reminder_threshold,
    thinking, effort, compaction. Everything else comes from this command's flags, the
    environment and the files, as for a new run, the permissions above all: approval and
    sandbox are never taken from a trace (a file, which a model may have written), so a run
    started with --yes resumes asking unless --yes is given again. --max-rounds counts on from
    the round the run stopped at. The Python API's resume keeps the same.
    """
    from orchestrator.board.json_file import BoardFileError, keep_file, lock_board
    from orchestrator.plan import PlanBoard
    from orchestrator.replay import rebuild
    from orchestrator.sessions import SessionError, check_not_running, check_trace_appendable
    from orchestrator.trace_file import TraceError

    if last and trace_name is not None and instruction is None:
        instruction, trace_name = trace_name, None  # resume --last "next instruction"
    trace = trace_argument(trace_name, last, kwargs["workdir"])
    try:
        rebuilt = rebuild(read_trace(trace))
    except TraceError as error:
        raise InputError(str(error)) from None
    if not (instruction and instruction.strip()):
        # A finished run, or a chat cleared since (/clear): nothing is left to go on from.
        why = "that run finished (done)" if rebuilt.status == "done" else None
        if why is None and not rebuilt.conversation.messages:
            why = "the session was cleared (/clear) after its last run"
        if why is not None:
            raise InputError(
                f"{trace}: {why}; give the next instruction: "
                f'orchestrator resume {shlex.quote(str(trace))} "next instruction"'
            )
    if rebuilt.settings.workdir and kwargs["workdir"] is None:
        kwargs["workdir"] = Path(rebuilt.settings.workdir)
    options = _resumed_options(
        attrs.evolve(options_from_flags(**kwargs), trace=trace), rebuilt.settings
    )
    try:
        check_trace_appendable(trace)
        check_not_running(trace)  # said first; the session's own lock closes the race
    except SessionError as error:
        raise InputError(str(error)) from None
    board: dict[str, Any] = {"board": rebuilt.board}
    if not isinstance(rebuilt.board, PlanBoard):
        # A shared board lives in its store, not in the trace: it goes on from there.
        if options.config.board is None:
            raise InputError(
                f"{trace}: the run worked a shared board; give it again with --board URL"
            )
        board = {}
    elif options.config.board is not None:  # the trace holds the plan; the file follows it
        try:
            lock_board(Path(options.config.board))
        except BoardFileError as error:
            raise InputError(str(error)) from None
        keep_file(rebuilt.board, Path(options.config.board), warn)
    max_rounds = rebuilt.last_round + options.config.max_rounds
    session = new_session(
        options,
        anthropic_model(options),
        **board,
        conversation=rebuilt.conversation,
        settings=attrs.evolve(rebuilt.settings, max_rounds=max_rounds),
        resume_from=rebuilt,
    )
    return run_once(session, instruction.strip() if instruction else None)


def _resumed_options(options: RunOptions, settings: LoopSettings) -> RunOptions:
    """The run goes on as it was set up; a flag given to ``resume`` (``--max-tokens``) wins."""
    from orchestrator.agent import KEPT_ON_RESUME

    config = options.config
    kept = {
        name: getattr(settings, name)
        for name in KEPT_ON_RESUME
        if not config.sources[name].startswith("--")
    }
    source = f"{options.trace} [run.started]"
    return attrs.evolve(options, config=config.updated(kept, source=source))


@click.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Play it here (must not hold hello.py or test_hello.py).  [default: a new temp dir]",
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the trace here (a new file).  [default: the per-user state dir]",
)
@click.option("--quiet", "-q", is_flag=True, help="Show only the final answer and plan.")
@click.option("--json", "as_json", is_flag=True, help="Stream trace events to stdout.")
@click.option(
    "--pace",
    type=FiniteFloatRange(min=0),
    default=None,
    metavar="SECONDS",
    show_default="0.4 on a terminal, else 0",
    help="Seconds between scripted turns.",
)
def demo(
    workdir: Path | None, trace: Path | None, quiet: bool, as_json: bool, pace: float | None
) -> int:
    """Run the bundled SCRIPTED scenario offline: real tools in a fresh work directory."""
    from orchestrator.agent import RunOptions
    from orchestrator.config import load_config
    from orchestrator.script import ScriptedModel, parse_script

    scenario = resources.files("orchestrator.scenarios")
    script = parse_script(
        json.loads(scenario.joinpath("refactor_hello.json").read_text("utf-8")),
        source="refactor_hello.json",
    )
    files: Mapping[str, str] = json.loads(
        scenario.joinpath("refactor_hello.files.json").read_text("utf-8")
    )
    root = workdir or Path(tempfile.mkdtemp(prefix="orchestrator-demo-"))
    taken = [name for name in files if (root / name).exists()]
    if taken:
        raise InputError(
            f"--workdir {root}: already holds {', '.join(taken)}; the demo writes its own "
            "copies, so give it a new or empty directory"
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (root / name).write_text(content, encoding="utf-8")
    except OSError as error:
        raise InputError(f"--workdir {root}: cannot write there: {error.strerror}") from None
    say = stderr_if(as_json)
    say(f"[SCRIPTED scenario '{script.name}': not a recording of a real model]")
    say(f"task: {DEMO_TASK}\nworkdir: {root}\n")
    scripted = {"model": "scripted", "max_retries": 0, "approval": "auto"}
    config = load_config(root, scripted, env={}, user_file=False)
    options = RunOptions(
        root.resolve(),
        config,
        trace=trace,
        quiet=quiet,
        output_format="stream-json" if as_json else "text",
    )
    if pace is None:
        pace = 0.4 if sys.stdout.isatty() and not (quiet or as_json) else 0.0
    session = new_session(options, ScriptedModel(script, pace=pace), closing=False)
    code = run_once(session, DEMO_TASK)
    shown = shlex.quote(str(session.trace_path))
    me = how_i_was_called()
    say(f"\n[SCRIPTED scenario finished]\nwork directory: {root}\ntrace: {session.trace_path}")
    say(f"replay it:  {me} replay {shown}")
    say(f"diagram it: {me} diagram --trace {shown}")
    say(f"picture it: {me} show {shown} --html")
    return code
