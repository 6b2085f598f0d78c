"""The command-line interface: the one place that wires concrete classes together.

Exit codes (see :mod:`orchestrator.report`): 0 done, 1 run failed, 2 usage or input error,
3 done but side-effecting calls were refused, 130 interrupted, 143 terminated (SIGTERM),
129 hung up (SIGHUP). A person's mistake (a bad flag, a missing file, a wrong setting) is one
line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import click

from orchestrator import report
from orchestrator.approval import (
    Answer,
    ApprovalPolicy,
    ask_at_terminal,
    asks_about,
    no_terminal_notice,
)
from orchestrator.board_file import BoardFileError, keep_file, open_board
from orchestrator.config import (
    SETTINGS,
    Choice,
    Config,
    ConfigError,
    UntrustedConfig,
    load_config,
)
from orchestrator.console import View, choose_view, print_timeline
from orchestrator.context import ContextManager, resolve_limits
from orchestrator.conversation import Conversation
from orchestrator.eval.command import eval_group
from orchestrator.instructions import load_instructions
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.mcp_command import mcp_group
from orchestrator.plan import EdgePolicy, PlanBoard, TodoTool
from orchestrator.pricing import UsageTotals
from orchestrator.protocols import Model, ModelLimits, ToolSource
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
from orchestrator.sessions import SessionError, check_new_trace, check_trace_appendable
from orchestrator.signals import StopRecord, stop_signals_interrupt
from orchestrator.tools import ToolRegistry, Workdir, standard_tools
from orchestrator.tools.mcp import McpServers
from orchestrator.tools.mcp_config import (
    McpConfigError,
    McpServerConfig,
    load_servers,
    mcp_secret_values,
)
from orchestrator.tools.processes import make_undumpable
from orchestrator.tools.sandbox import (
    SandboxChoice,
    SandboxUnavailable,
    choose_sandbox,
)
from orchestrator.trace import EventSink, Trace, new_run_id, open_trace, secrets_from_environment
from orchestrator.trust import TrustError, TrustStore, trust_file

USAGE_ERROR = report.EXIT_USAGE
DEMO_TASK = "Refactor hello.py: add type hints, docstrings, and a main guard"
OUTPUT_FORMATS = ("text", "json", "stream-json")
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "show_default": True}


class InputError(click.ClickException):
    """A person's mistake: shown as one line, exit code 2."""

    exit_code = USAGE_ERROR


@attrs.frozen
class RunOptions:
    """What ``run``, ``chat``, ``resume`` and ``demo`` share, once flags and config are merged."""

    workdir: Path
    config: Config
    trace: Path | None = None
    trace_requests: bool = False
    quiet: bool = False
    verbose: bool = False
    output_format: str = "text"
    #: The MCP servers the files name, and whether the project's may start (issue 22).
    mcp_servers: tuple[McpServerConfig, ...] = ()
    mcp_trusted: bool = False

    @property
    def machine_output(self) -> bool:
        """Stdout belongs to a program (json, stream-json): people's lines go to stderr."""
        return self.output_format != "text"


def _setting_options() -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """One flag per setting in :data:`config.SETTINGS`, so a new setting gets its flag here."""
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = []
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
                    metavar="TEXT",
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
                metavar=None if kind else _metavar(setting.default),
                help=text,
            )
        )
    return options


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


def _shared_options(*, trace: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of ``run``, ``chat`` and ``resume`` (which writes to its TRACE argument)."""
    path = click.Path(file_okay=False, path_type=Path)
    options: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
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


_run_options = _shared_options(trace=True)


def _options(**kwargs: Any) -> RunOptions:
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
    if not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    config = _trusted_config(workdir, flags, trust=trust)
    servers, trusted = _mcp_servers(workdir, trust=trust)
    return RunOptions(
        workdir=workdir.resolve(),
        config=config,
        mcp_servers=servers,
        mcp_trusted=trusted,
        **kwargs,
    )


def _mcp_servers(workdir: Path, *, trust: bool) -> tuple[tuple[McpServerConfig, ...], bool]:
    """The configured MCP servers, and whether the project's may start (asked on a terminal)."""
    from orchestrator.config import user_config_path

    try:
        servers = load_servers(workdir, user_config_path())
        store = TrustStore(trust_file())
        project = [server for server in servers if server.project]
        if trust or not project or store.trusts(workdir):
            return servers, True
        untrusted = load_servers(workdir, user_config_path(), trusted=False)
        if not sys.stdin.isatty():
            return untrusted, False  # the run says so in one line as it starts
        files = ", ".join(dict.fromkeys(server.origin for server in project))
        changed = (
            " It changed since you trusted this folder."
            if store.changed_since_trusted(workdir)
            else ""
        )
        question = (
            f"{files} start{'s' if len(project) == 1 else ''} MCP servers "
            f"({', '.join(server.name for server in project)}).{changed} "
            f"Do you trust the files in this folder ({workdir.resolve()})?"
        )
        if not click.confirm(question, default=False, err=True):
            return untrusted, False
        store.add(workdir)
        return servers, True
    except (McpConfigError, TrustError) as error:
        raise InputError(str(error)) from None


def _given(value: object) -> object:
    return None if value == () else value


def _trusted_config(workdir: Path, flags: Mapping[str, Any], *, trust: bool) -> Config:
    """Load the settings; a project file that widens anything needs the folder trusted."""
    try:
        store = TrustStore(trust_file())
        try:
            return load_config(workdir, flags, trusted=trust or store.trusts(workdir))
        except UntrustedConfig as error:
            changed = store.changed_since_trusted(workdir)
            if not sys.stdin.isatty():
                since = " (it changed since the folder was trusted)" if changed else ""
                raise InputError(f"{error}{since}") from None
            question = (
                f"{error.path} sets {', '.join(error.names)}."
                f"{' It changed since you trusted this folder.' if changed else ''} "
                f"Do you trust the files in this folder ({workdir.resolve()})?"
            )
            if not click.confirm(question, default=False, err=True):
                raise InputError(str(error)) from None
            store.add(workdir)
            return load_config(workdir, flags, trusted=True)
    except (ConfigError, TrustError) as error:
        raise InputError(str(error)) from None


def _choose_sandbox(options: RunOptions, hidden: Sequence[Path]) -> SandboxChoice:
    """The sandbox bash runs in; ``--sandbox bwrap`` that cannot run here is exit 2."""
    from orchestrator.doctor import sandbox_policy

    policy = sandbox_policy(options.workdir, options.config, hidden)
    try:
        return choose_sandbox(options.config.sandbox, policy)
    except SandboxUnavailable as error:
        raise InputError(str(error)) from None


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


# --- running ---------------------------------------------------------------------------------


def _read_task(task: str | None) -> str:
    """TASK, or stdin for ``-`` or a missing TASK with a pipe; an empty task is refused."""
    if task is None or task == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("give the task as an argument, or pass - and pipe it on stdin")
        task = sys.stdin.read()
    if not task.strip():
        raise InputError("the task is empty; say what the agent should do")
    return task.strip()


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("task", required=False)
@_run_options
@click.option(
    "--replay-model",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Play the model's recorded responses from this trace; tools run for real. "
    "Exit 1 if any result differs from the recording.",
)
def run(task: str | None, replay_model: Path | None, **kwargs: Any) -> int:
    """Run TASK (or - to read it from stdin) until it is done, fails or is interrupted."""
    task = _read_task(task)
    options = _options(**kwargs)
    if replay_model is not None:
        recorded = _read_trace(replay_model)
        comparer = ResultComparer(recorded, lambda text: click.echo(text, err=True))
        session = _Session(options, ReplayModel(recorded), extra_sinks=(comparer,))
        code = _run_once(session, task)
        if code == report.EXIT_DONE and comparer.differences:
            click.echo(
                f"orchestrator: {comparer.differences} tool result(s) differ from the recording",
                err=True,
            )
            return report.EXIT_FAILED
        return code
    session = _Session(options, _anthropic_model(options))
    return _run_once(session, task)


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.argument("instruction", required=False)
@click.option("--last", is_flag=True, help="The newest session of the work directory.")
@_shared_options(trace=False)
def resume(trace: Path | None, instruction: str | None, last: bool, **kwargs: Any) -> int:
    """Continue the session in TRACE (or --last), with INSTRUCTION as the next message if given.

    Any session can go on: an interrupted or failed run picks up where it stopped; a finished
    one needs the next INSTRUCTION. The run keeps its model, max tokens, reminder threshold,
    thinking, effort and compaction unless a flag given here changes them.
    """
    from orchestrator.sessions import latest_trace

    if last:
        if trace is not None and instruction is None:
            instruction, trace = str(trace), None
        elif trace is not None:
            raise InputError("give either TRACE or --last, not both")
        workdir = (kwargs["workdir"] or Path(".")).resolve()
        trace = latest_trace(workdir)
        if trace is None:
            raise InputError(f"no sessions for {workdir} yet; see `orchestrator sessions`")
    elif trace is None:
        raise InputError("give the session's TRACE, or --last for the newest one here")
    try:
        rebuilt = rebuild(_read_trace(trace))
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
    options = _resumed_options(attrs.evolve(_options(**kwargs), trace=trace), rebuilt.settings)
    try:
        check_trace_appendable(trace)
    except SessionError as error:
        raise InputError(str(error)) from None
    if options.config.board is not None:  # the trace holds the plan; the file follows it
        keep_file(rebuilt.board, Path(options.config.board), _warn)
    max_rounds = rebuilt.last_round + options.config.max_rounds
    session = _Session(
        options,
        _anthropic_model(options),
        board=rebuilt.board,
        conversation=rebuilt.conversation,
        settings=attrs.evolve(rebuilt.settings, max_rounds=max_rounds),
        resume_from=rebuilt,
    )
    return _run_once(session, instruction.strip() if instruction else None)


#: What a resumed run keeps from its trace's settings unless a flag of this resume says otherwise.
_KEPT_ON_RESUME = ("model", "max_tokens", "reminder_threshold", "thinking", "effort", "compaction")


def _resumed_options(options: RunOptions, settings: LoopSettings) -> RunOptions:
    """The run goes on as it was set up; a flag given to ``resume`` (``--max-tokens``) wins."""
    config = options.config
    kept = {
        name: getattr(settings, name)
        for name in _KEPT_ON_RESUME
        if not config.sources[name].startswith("--")
    }
    source = f"{options.trace} [run.started]"
    return attrs.evolve(options, config=config.updated(kept, source=source))


@cli.command(context_settings=CONTEXT_SETTINGS)
@_run_options
def chat(**kwargs: Any) -> int:
    """Talk to the agent turn by turn; the plan persists across turns.

    Enter sends; Alt-Enter or Esc Enter starts a new line; a paste is one message. Ctrl-C stops
    the turn; Ctrl-C at an empty prompt, Ctrl-D or /exit leaves.
    """
    from orchestrator.chat import ChatSession, run_chat
    from orchestrator.sessions import state_dir

    options = _options(**kwargs)
    session = _Session(options, _anthropic_model(options))
    return run_chat(
        ChatSession(
            run_turn=session.turn,
            board=session.board,
            model=lambda: session.model_name,
            set_model=session.set_model,
            clear=session.clear,
            close=session.close,
            cost_line=lambda: session.report_for(None).cost_line(),
            farewell=lambda: session.report_for(None).closing_lines() if session.trace_path else [],
            stopped=click.get_current_context().find_object(StopRecord),
        ),
        history=state_dir() / "chat_history",
    )


@cli.command(context_settings=CONTEXT_SETTINGS)
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
    type=click.FloatRange(min=0),
    default=None,
    show_default="0.4 on a terminal, else 0",
    help="Seconds between scripted turns.",
)
def demo(
    workdir: Path | None, trace: Path | None, quiet: bool, as_json: bool, pace: float | None
) -> int:
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
    say = _stderr_if(as_json)
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
    session = _Session(options, ScriptedModel(script, pace=pace), closing=False)
    code = _run_once(session, DEMO_TASK)
    shown = shlex.quote(str(session.trace_path))
    me = _how_i_was_called()
    say(f"\n[SCRIPTED scenario finished]\nwork directory: {root}\ntrace: {session.trace_path}")
    say(f"replay it:  {me} replay {shown}")
    say(f"diagram it: {me} diagram --trace {shown}")
    return code


def _how_i_was_called() -> str:
    """The command a person can paste to run orchestrator again (``make demo`` puts it in .venv)."""
    program = Path(sys.argv[0])
    if program.name == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m orchestrator"
    found = shutil.which("orchestrator")
    if found is not None and Path(found).resolve() == program.resolve():
        return "orchestrator"
    return shlex.quote(str(program)) if program.name == "orchestrator" else "orchestrator"


def _stderr_if(to_stderr: bool) -> Callable[[str], None]:
    return lambda text: click.echo(text, err=to_stderr)


# --- inspecting ------------------------------------------------------------------------------


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--check", is_flag=True, help="Print nothing; exit 1 at the first divergence.")
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON.")
def replay(trace: Path, check: bool, as_json: bool) -> int:
    """Re-drive fresh plan and loop machines from TRACE and check it comes out the same."""
    parsed = _read_trace(trace)
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


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--machine",
    type=click.Choice(["item", "loop", "all"]),
    default="all",
    help="Which machine; all gives two documents (Markdown on stdout, or two files).",
)
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid")
@click.option(
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="A file (.mmd, .dot; .svg or .png rendered by Graphviz) or a folder for both machines.",
)
@click.option(
    "--trace",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Highlight the states and edges this run visited.",
)
@click.option(
    "--write-statecharts",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Regenerate the documentation folder (make statecharts).",
)
def diagram(
    machine: str, fmt: str, output: Path | None, trace: Path | None, write_statecharts: Path | None
) -> int:
    """Draw the machines from their live definitions, or one run's path through them."""
    from orchestrator.diagram import DiagramError, diagram_output
    from orchestrator.diagram import write_statecharts as write_all

    try:
        if write_statecharts is not None:
            for path in write_all(write_statecharts):
                click.echo(f"wrote {path}")
            return 0
        text, written = diagram_output(machine, fmt, trace=trace, output=output)  # type: ignore[arg-type]
    except DiagramError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"--output {output}: {error.strerror}") from None
    for path in written:
        click.echo(f"wrote {path}")
    if text:
        click.echo(text, nl=not text.endswith("\n"))
    return 0


cli.add_command(eval_group)
cli.add_command(mcp_group)


@cli.command(name="config", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    help="Read this directory's orchestrator.toml.",
)
def show_config(workdir: Path) -> int:
    """Print the effective settings, where each comes from, and its variables; secrets masked."""
    from orchestrator.config import CONFIG_FILE, user_config_path
    from orchestrator.doctor import sandbox_in_effect

    config = _inspected_config(workdir)
    rows = config.shown()
    width = max(len(name) for name, _, _ in rows)
    variables = {setting.name: ", ".join(setting.env) for setting in SETTINGS}
    for name, value, source in rows:
        click.echo(f"{name:<{width}}  {value}  ({source})  [env: {variables[name]}]")
    click.echo(f"\nproject file: {workdir / CONFIG_FILE}\nuser file:    {user_config_path()}")
    in_effect = sandbox_in_effect(workdir, config).removeprefix("sandbox: ")
    click.echo(f"sandbox in effect: {in_effect} (checked here)")
    return 0


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Only this work directory's sessions.  [default: every work directory]",
)
@click.option("--limit", "-n", type=click.IntRange(min=1), default=20, help="How many to list.")
def sessions(workdir: Path | None, limit: int) -> int:
    """List recent sessions, newest first: time, status, rounds, cost, workdir, task, trace."""
    from orchestrator.sessions import print_sessions

    try:
        prices = load_config(workdir or Path(".")).price_per_mtok
    except ConfigError as error:
        raise InputError(str(error)) from None
    print_sessions(workdir, limit, prices)
    return 0


@cli.command(context_settings=CONTEXT_SETTINGS)
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--round",
    "round_number",
    type=click.IntRange(min=0),
    default=None,
    help="Only this round.  [default: every round]",
)
@click.option("--full", is_flag=True, help="Show tool inputs and outputs whole, not clipped.")
def show(trace: Path, round_number: int | None, full: bool) -> int:
    """Print what happened in TRACE: the model's text, tool calls and results, plan, reminders."""
    from orchestrator.transcript import TranscriptError, print_transcript

    try:
        print_transcript(_read_trace(trace), round_number=round_number, full=full)
    except TranscriptError as error:
        raise InputError(str(error)) from None
    return 0


@cli.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=".")
def doctor(workdir: Path) -> int:
    """Say which sandbox bash runs in here: the bwrap used, whether it works, and why."""
    from orchestrator.doctor import report

    return report(workdir, _inspected_config(workdir), click.echo)


def _inspected_config(workdir: Path) -> Config:
    """The settings as a run would see them; an untrusted file's widening is shown, flagged."""
    try:
        trusted = TrustStore(trust_file()).trusts(workdir)
        try:
            return load_config(workdir, trusted=trusted)
        except UntrustedConfig as error:
            click.echo(f"warning: {error} (a run refuses to start)", err=True)
            return load_config(workdir, trusted=True)
    except (ConfigError, TrustError) as error:
        raise InputError(str(error)) from None


# --- wiring ----------------------------------------------------------------------------------


@attrs.define
class _Session:
    """The parts of a session; :meth:`turn` runs one message through a lazily opened loop."""

    options: RunOptions
    model: Model
    board: PlanBoard = attrs.field(
        default=attrs.Factory(lambda self: _new_board(self.options.config), takes_self=True)
    )
    conversation: Conversation | None = None
    settings: LoopSettings | None = None
    resume_from: RebuiltRun | None = None
    extra_sinks: tuple[EventSink, ...] = ()
    closing: bool = True
    view: View = attrs.field(
        default=attrs.Factory(
            lambda self: choose_view(
                quiet=self.options.quiet or self.options.output_format == "json",
                as_json=self.options.output_format == "stream-json",
                stream=sys.stderr if self.options.output_format == "json" else None,
                verbose=self.options.verbose,
            ),
            takes_self=True,
        )
    )
    totals: UsageTotals = attrs.Factory(UsageTotals)
    approval: ApprovalPolicy = attrs.field(
        default=attrs.Factory(lambda self: self._approval_policy(), takes_self=True)
    )
    trace_path: Path | None = None
    sandbox: SandboxChoice | None = None
    mcp: McpServers | None = None
    _trace: Trace | None = None
    _loop: Loop | None = None
    _first_round: int = 0
    _stale: int = 0

    def _approval_policy(self) -> ApprovalPolicy:
        mode = self.options.config.approval
        terminal = sys.stdin is not None and sys.stdin.isatty()
        asker = None
        if terminal and asks_about(mode):
            view, workdir = self.view, self.options.workdir

            def asker(tool: str, arguments: Mapping[str, Any]) -> Answer:
                with view.paused():
                    return ask_at_terminal(tool, arguments, workdir)

        return ApprovalPolicy(mode, asker, auto_approve=self.options.config.auto_approve)

    def _open(self) -> Loop:
        """Open the trace and build the loop, at the first message (chat sends none at first)."""
        if self._loop is not None:
            return self._loop
        options, config = self.options, self.options.config
        resumed = self.resume_from
        run_id = resumed.run_id if resumed is not None else new_run_id()
        if resumed is not None:
            self._first_round, self._stale = resumed.last_round, resumed.rounds_since_update
        say = _stderr_if(options.machine_output)
        limits = _limits(self.model, config)
        settings = self.settings
        if settings is not None:  # resumed: the trace's settings, as resume's flags amend them
            settings = attrs.evolve(settings, **_model_settings(config, limits))
        else:
            instructions = load_instructions(options.workdir)
            if instructions.files:
                say(f"project instructions: {', '.join(instructions.files)}")
            settings = LoopSettings(
                system=instructions.system_prompt(DEFAULT_SYSTEM.format(workdir=options.workdir)),
                max_rounds=config.max_rounds,
                trace_requests=options.trace_requests,
                workdir=str(options.workdir),
                **_model_settings(config, limits),
            )
        path = options.trace
        try:
            if resumed is None:
                if path is None:
                    from orchestrator.sessions import new_trace_path

                    path = new_trace_path(options.workdir, run_id)
                    try:
                        check_new_trace(path, flag="trace")
                    except SessionError as error:
                        raise SessionError(
                            f"{error}; set ORCHESTRATOR_STATE_DIR to a writable folder, or pass "
                            "--trace FILE"
                        ) from None
                else:
                    check_new_trace(path)
            assert path is not None
            self.sandbox = _choose_sandbox(options, [path])
            secrets = [*_secret_values(config), *mcp_secret_values(options.mcp_servers)]
            self._trace = open_trace(
                path,
                run_id=run_id,
                secrets=secrets,
                sinks=[self.view, self.totals, *self.extra_sinks],
                append=resumed is not None,
                first_seq=resumed.last_seq if resumed is not None else 0,
            )
        except SessionError as error:
            raise InputError(str(error)) from None
        except OSError as error:
            raise InputError(f"{path}: cannot write the trace: {error.strerror}") from None
        self.trace_path = path
        if self.sandbox.sandbox.mode != "bwrap":
            make_undumpable()  # bwrap hides the harness's /proc entirely
        if self.sandbox.warning is not None:
            click.echo(f"orchestrator: {self.sandbox.warning}", err=True)
        if config.allow_network and not config.deny_bash:
            shown = self.sandbox.sandbox.describe()
            click.echo(f"orchestrator: network is on for bash (--allow-network); {shown}", err=True)
        notice = no_terminal_notice(
            config.approval,
            has_terminal=sys.stdin is not None and sys.stdin.isatty(),
            mcp=bool(options.mcp_servers),
        )
        if notice:
            click.echo(notice, err=True)
        self._loop = Loop(
            model=self.model,
            tools=self._registry(secrets),
            plan=self.board,
            log=self._trace.log,
            settings=settings,
            on_text=self.view.on_text,
            conversation=self.conversation,
            context=ContextManager(
                settings.context_window,
                model=settings.model,
                mode=settings.compaction,
                summary_max_tokens=min(4096, settings.max_tokens),
                origin={
                    "max_tokens": limits.max_tokens,
                    "source": limits.source,
                    "reason": limits.reason,
                },
                owners=dict(resumed.owners) if resumed is not None else {},
            ),
        )
        return self._loop

    def _start_mcp(self) -> None:
        """Start the configured MCP servers, once, before the loop's first round."""
        options = self.options
        if not options.mcp_servers or self.mcp is not None:
            return
        assert self._trace is not None  # opened first: the servers' events go to it
        view = self.view

        def notify(line: str) -> None:
            with view.paused():
                click.echo(f"orchestrator: {line}", err=True)

        self.mcp = McpServers(
            options.mcp_servers,
            options.workdir,
            timeout=options.config.mcp_timeout,
            trusted=options.mcp_trusted,
            log=self._trace.log,
        )
        self.mcp.open(notify)

    def turn(self, task: str | None) -> RunOutcome:
        """Run one message (None: go on from a resumed conversation) to its end."""
        loop = self._open()
        with self.view:
            outcome = loop.run(task, first_round=self._first_round, rounds_since_update=self._stale)
        self._first_round, self._stale = outcome.rounds, 0
        say = _stderr_if(self.options.machine_output)
        if self.options.quiet and outcome.text and self.options.output_format == "text":
            say(outcome.text)
        say("\n" + self.board.render())
        if outcome.status != "done":
            click.echo(f"orchestrator: run {outcome.status}: {outcome.reason}", err=True)
        return outcome

    @property
    def model_name(self) -> str:
        if self._loop is not None:
            return self._loop.settings.model
        return self.settings.model if self.settings else self.options.config.model

    def set_model(self, name: str) -> None:
        """Ask another model from the next message on (chat's ``/model NAME``)."""
        if self._loop is not None:
            self._loop.settings = attrs.evolve(self._loop.settings, model=name)
        self.options = attrs.evolve(
            self.options,
            config=attrs.evolve(
                self.options.config, values={**self.options.config.values, "model": name}
            ),
        )
        if self.settings is not None:
            self.settings = attrs.evolve(self.settings, model=name)

    def clear(self) -> None:
        """Forget the conversation and the plan (chat's /clear); the trace goes on."""
        self.board.reset()
        if self._loop is not None:
            self._loop.conversation = Conversation()
        self.conversation = None

    def close(self) -> None:
        if self.mcp is not None:  # before the trace: stopping may still log
            self.mcp.close()
        if self._trace is not None:
            self._trace.close()
            self._trace = None

    def report_for(
        self, outcome: RunOutcome | None, stopped: StopRecord | None = None
    ) -> report.RunReport:
        status = outcome.status if outcome is not None else "chat"
        refused = tuple(self.approval.refused)
        code = report.exit_code(
            status, len(refused), stopped.exit_code if stopped else report.EXIT_INTERRUPTED
        )
        return report.RunReport(
            status=status,
            reason=outcome.reason if outcome is not None else "",
            answer=outcome.text if outcome is not None else "",
            rounds=outcome.rounds if outcome is not None else self._first_round,
            totals=self.totals,
            model=self.options.config.model,
            trace=self.trace_path,
            refused=refused,
            exit_code=code,
            me=_how_i_was_called(),
            prices=self.options.config.price_per_mtok,
        )

    def _registry(self, secrets: Sequence[str]) -> ToolRegistry:
        config = self.options.config
        assert self.sandbox is not None  # chosen in _open()
        sandbox = self.sandbox.sandbox
        workdir = Workdir(
            self.options.workdir, confined=sandbox.confined, has_bash=not config.deny_bash
        )
        tools = [
            *standard_tools(workdir, bash=not config.deny_bash, sandbox=sandbox),
            TodoTool(self.board),
        ]
        if config.deny_bash:
            from orchestrator.list_files import ListFilesTool

            tools.append(ListFilesTool(workdir))  # without bash, the one way to look around
        policy = None if config.approval == "auto" else self.approval
        self._start_mcp()
        sources: list[ToolSource] = [] if self.mcp is None else [self.mcp]
        return ToolRegistry(tools, approver=policy, secrets=tuple(secrets), sources=sources)


def _model_settings(config: Config, limits: ModelLimits) -> dict[str, Any]:
    """The loop settings that come from the configuration and the model's limits."""
    return {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "reminder_threshold": config.reminder_threshold,
        "thinking": config.thinking,
        "effort": config.effort,
        "context_window": limits.max_input_tokens,
        "compaction": _compaction_mode(limits, config),
    }


def _secret_values(config: Config) -> list[str]:
    """Every secret value this process holds: these never reach a trace or a request body."""
    found = secrets_from_environment()
    found.extend(value for value in (config.api_key, config.auth_token) if value)
    # What the user passes into bash with --env is theirs to use, not to show the model.
    found.extend(os.environ[name] for name in config.env if os.environ.get(name))
    return found


def _limits(model: Model, config: Config) -> ModelLimits:
    """The model's limits, and a usage error for a setting the model cannot honour."""
    thinking = config.thinking
    if thinking not in ("off", "adaptive") and int(thinking) >= config.max_tokens:
        raise InputError(
            f"--thinking {thinking}: the budget must be below --max-tokens ({config.max_tokens})"
        )
    limits = resolve_limits(
        model, config.model, config.context_window, config.sources["context_window"]
    )
    for problem in _unsupported(limits, config):
        raise InputError(problem)
    return limits


def _unsupported(limits: ModelLimits, config: Config) -> list[str]:
    """What the model's advertised capabilities refuse (nothing when they are unknown)."""
    if not limits.capabilities:
        if config.compaction == "server":
            return [f"--compaction server: {limits.reason or 'the model has no capabilities'}"]
        return []
    problems = []
    thinking, name = config.thinking, config.model
    if thinking == "adaptive" and not limits.supports("thinking", "types", "adaptive"):
        problems.append(f"--thinking adaptive: {name} does not support adaptive thinking")
    budget = thinking not in ("off", "adaptive")
    if budget and not limits.supports("thinking", "types", "enabled"):
        problems.append(
            f"--thinking {thinking}: {name} does not take a thinking budget; "
            "try --thinking adaptive"
        )
    if config.effort is not None and not limits.supports("effort", config.effort):
        problems.append(f"--effort {config.effort}: {name} does not support it")
    if config.compaction == "server" and not _server_compaction(limits):
        problems.append(
            f"--compaction server: {name} does not advertise server-side compaction "
            "(compact_20260112); use --compaction client"
        )
    if limits.max_tokens is not None and config.max_tokens > limits.max_tokens:
        problems.append(
            f"--max-tokens {config.max_tokens}: {name} allows at most {limits.max_tokens}"
        )
    return problems


def _server_compaction(limits: ModelLimits) -> bool:
    return limits.supports("context_management", "compact_20260112")


def _compaction_mode(limits: ModelLimits, config: Config) -> str:
    """``auto`` becomes ``server`` where the model advertises it, ``client`` elsewhere."""
    if config.compaction == "auto":
        return "server" if _server_compaction(limits) else "client"
    return str(config.compaction)


def _new_board(config: Config) -> PlanBoard:
    policy = EdgePolicy(config.plan_policy)
    if config.board is None:
        return PlanBoard(limit=config.plan_limit, policy=policy)
    try:
        return open_board(
            Path(config.board), limit=config.plan_limit, policy=policy, on_write_error=_warn
        )
    except BoardFileError as error:
        raise InputError(str(error)) from None


def _warn(message: str) -> None:
    click.echo(f"orchestrator: warning: {message}", err=True)


def _run_once(session: _Session, task: str | None) -> int:
    try:
        outcome = session.turn(task)
    finally:
        session.close()
    stopped = click.get_current_context().find_object(StopRecord)
    result = session.report_for(outcome, stopped)
    if session.options.output_format == "json":
        click.echo(json.dumps(result.as_json(), ensure_ascii=False))
    elif session.closing:
        say = _stderr_if(session.options.machine_output)
        for line in result.closing_lines():
            say(line)
    elif result.refused:
        click.echo(result.closing_lines()[1], err=True)
    return result.exit_code


def _read_trace(path: Path) -> TraceFile:
    try:
        return read_trace(path)
    except TraceError as error:
        raise InputError(str(error)) from None


def _anthropic_model(options: RunOptions) -> Model:
    config = options.config
    if not (config.api_key or config.auth_token):
        raise InputError(
            "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set; export it "
            "(ANTHROPIC_BASE_URL points the client at any Messages-API endpoint), or try "
            "`orchestrator demo`, which runs offline"
        )
    from orchestrator.anthropic_model import AnthropicModel

    return AnthropicModel(
        max_retries=config.max_retries,
        timeout=config.timeout,
        connect_timeout=config.connect_timeout,
        read_timeout=config.read_timeout,
        api_key=config.api_key,
        auth_token=config.auth_token,
        base_url=config.base_url,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point: run the CLI and turn every outcome into an exit code."""
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
            click.echo(f"orchestrator: error: {error.format_message()}{hint}", err=True)
            sys.exit(USAGE_ERROR)
        except ScriptError as error:
            click.echo(f"orchestrator: error: {error}", err=True)
            sys.exit(USAGE_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
