"""The command-line interface: the one place that wires concrete classes together.

Exit codes: 0 done, 1 run failed, 2 usage or input error, 130 interrupted. A person's mistake
(a bad flag, a missing file, a wrong setting) is one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
import click

from orchestrator.board_file import BoardFileError, keep_file, open_board
from orchestrator.config import Config, ConfigError, UntrustedConfig, load_config
from orchestrator.console import View, choose_view, print_timeline
from orchestrator.context import ContextManager, resolve_limits
from orchestrator.conversation import Conversation
from orchestrator.eval.command import eval_group
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import EdgePolicy, PlanBoard, TodoTool
from orchestrator.protocols import Approver, Model, ModelLimits
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
from orchestrator.tools import ToolRegistry, Workdir, standard_tools
from orchestrator.tools.processes import make_undumpable
from orchestrator.tools.sandbox import (
    SandboxChoice,
    SandboxPolicy,
    SandboxUnavailable,
    choose_sandbox,
)
from orchestrator.trace import (
    EventSink,
    Trace,
    default_trace_path,
    new_run_id,
    open_trace,
    secrets_from_environment,
)
from orchestrator.trust import TrustError, TrustStore, trust_file

EXIT_CODES = {"done": 0, "failed": 1, "interrupted": 130}
USAGE_ERROR = 2
DEMO_TASK = "Refactor hello.py: add type hints, docstrings, and a main guard"


class InputError(click.ClickException):
    """A person's mistake: shown as one line, exit code 2."""

    exit_code = USAGE_ERROR


@attrs.frozen
class RunOptions:
    """What ``run``, ``chat``, ``resume`` and ``demo`` share, once flags and config are merged."""

    workdir: Path
    config: Config
    trace: Path | None = None
    yes: bool = False
    trace_requests: bool = False
    quiet: bool = False
    as_json: bool = False


_FLAG_SETTINGS = (
    "model",
    "max_rounds",
    "max_retries",
    "sandbox",
    "deny_bash",
    "allow_network",
    "ro_path",
    "env",
    "max_tokens",
    "context_window",
    "compaction",
    "thinking",
    "effort",
    "board",
)


def _shared_options(*, trace: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of ``run``, ``chat`` and ``resume`` (which writes to its TRACE argument)."""
    path = click.Path(file_okay=False, path_type=Path)
    options = [
        click.option("--workdir", type=path, default=".", help="Where the agent works."),
        click.option("--model", default=None, help="Model name [ANTHROPIC_MODEL]."),
        click.option("--max-rounds", type=click.IntRange(min=1), default=None),
        click.option("--max-retries", type=click.IntRange(min=0), default=None),
        click.option("--yes", is_flag=True, help="Run bash and file edits without asking."),
        click.option("--trace-requests", is_flag=True, help="Record full request bodies."),
        click.option("--quiet", is_flag=True, help="Show only the final answer and plan."),
        click.option("--json", "as_json", is_flag=True, help="Stream trace events to stdout."),
        click.option(
            "--sandbox",
            type=click.Choice(["auto", "bwrap", "workdir", "none"]),
            default=None,
            help="Where bash runs [auto: bwrap where it works, else workdir].",
        ),
        click.option("--deny-bash", is_flag=True, default=None, help="Refuse every bash call."),
        click.option(
            "--allow-network", is_flag=True, default=None, help="Let sandboxed bash reach the net."
        ),
        click.option(
            "--ro-path",
            multiple=True,
            type=click.Path(file_okay=False, path_type=str),
            help="A directory sandboxed bash may read (repeatable).",
        ),
        click.option(
            "--env", multiple=True, help="A variable passed into sandboxed bash (repeatable)."
        ),
        click.option("--trust", is_flag=True, help="Trust this folder's orchestrator.toml."),
        click.option("--max-tokens", type=click.IntRange(min=1), default=None),
        click.option(
            "--context-window",
            type=click.IntRange(min=1000),
            default=None,
            help="The model's input window in tokens [asked of the Models API].",
        ),
        click.option(
            "--compaction",
            type=click.Choice(["auto", "client", "server", "off"]),
            default=None,
            help="How the context is kept inside the window [auto].",
        ),
        click.option(
            "--thinking", default=None, metavar="adaptive|off|N", help="Extended thinking [off]."
        ),
        click.option("--effort", type=click.Choice(["low", "medium", "high", "max"]), default=None),
        click.option(
            "--board",
            type=click.Path(dir_okay=False),
            default=None,
            help="Keep the plan in this JSON file: loaded at start, written after each update.",
        ),
    ]
    if trace:
        options.insert(1, click.option("--trace", type=click.Path(dir_okay=False, path_type=Path)))

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


_run_options = _shared_options(trace=True)


def _options(**kwargs: Any) -> RunOptions:
    workdir: Path = kwargs.pop("workdir")
    # A repeatable flag given no times arrives as (), which means "not given".
    flags = {name: _given(kwargs.pop(name)) for name in _FLAG_SETTINGS}
    trust: bool = kwargs.pop("trust")
    if not workdir.is_dir():
        raise InputError(f"--workdir {workdir}: no such directory")
    config = _trusted_config(workdir, flags, trust=trust)
    return RunOptions(workdir=workdir.resolve(), config=config, **kwargs)


def _given(value: object) -> object:
    return None if value == () else value


def _trusted_config(workdir: Path, flags: Mapping[str, Any], *, trust: bool) -> Config:
    """Load the settings; a project file that widens anything needs the folder trusted."""
    try:
        store = TrustStore(trust_file())
        try:
            return load_config(workdir, flags, trusted=trust or store.trusts(workdir))
        except UntrustedConfig as error:
            if not sys.stdin.isatty():
                raise InputError(str(error)) from None
            question = (
                f"{error.path} sets {', '.join(error.names)}. "
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
    config = options.config
    policy = SandboxPolicy(
        options.workdir,
        allow_network=config.allow_network,
        ro_paths=config.ro_path,
        env_names=config.env,
        hidden=tuple(hidden),
    )
    try:
        return choose_sandbox(config.sandbox, policy)
    except SandboxUnavailable as error:
        raise InputError(str(error)) from None


@click.group()
@click.version_option(package_name="orchestrator")
def cli() -> None:
    """Keep a coding agent on course with a guarded todo board and an auditing loop."""


# --- running ---------------------------------------------------------------------------------


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
        session = _Session(options, ReplayModel(recorded), extra_sinks=(comparer,))
    else:
        session = _Session(options, _anthropic_model(options))
    return _run_once(session, task)


@cli.command()
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@_shared_options(trace=False)
def resume(trace: Path, **kwargs: Any) -> int:
    """Continue an interrupted or failed run from TRACE, appending to the same trace."""
    try:
        rebuilt = rebuild(_read_trace(trace))
    except TraceError as error:
        raise InputError(str(error)) from None
    if rebuilt.status == "done":
        raise InputError(f"{trace}: that run finished (done); there is nothing to resume")
    if rebuilt.settings.workdir and kwargs["workdir"] == Path("."):
        kwargs["workdir"] = Path(rebuilt.settings.workdir)
    options = attrs.evolve(_options(**kwargs), trace=trace)
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
    return _run_once(session, None)


@cli.command()
@_run_options
def chat(**kwargs: Any) -> int:
    """Talk to the agent turn by turn; the plan persists across turns."""
    import readline

    options = _options(**kwargs)
    session = _Session(options, _anthropic_model(options))
    history = options.workdir / ".orchestrator" / "chat_history"
    if history.is_file():
        readline.read_history_file(history)
    click.echo("orchestrator chat: /plan, /reset, /diagram, /exit (or an empty line) to leave")
    status = "done"
    with session.open() as loop:
        while True:
            try:
                line = input("you> ").strip()
            except EOFError:
                click.echo()
                break
            if line in ("", "/exit"):
                break
            if line.startswith("/"):
                _chat_command(line, session)
                continue
            outcome = _run_turn(session, loop, line)
            status = outcome.status
            if status == "interrupted":
                break
    history.parent.mkdir(parents=True, exist_ok=True)
    readline.write_history_file(history)
    return EXIT_CODES[status] if status == "interrupted" else 0


def _chat_command(line: str, session: _Session) -> None:
    if line == "/plan":
        click.echo(session.board.render())
    elif line == "/reset":
        session.board.reset()
        click.echo("plan cleared")
    elif line == "/diagram":
        from orchestrator.diagram import render_diagram

        click.echo(render_diagram("item", "mermaid"))
    else:
        click.echo(f"unknown command {line}; try /plan, /reset, /diagram or /exit")


@cli.command()
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--quiet", is_flag=True, help="Show only the final answer and plan.")
@click.option("--json", "as_json", is_flag=True, help="Stream trace events to stdout.")
@click.option(
    "--pace",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds between scripted turns [0.4 on a terminal, else 0].",
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
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (root / name).write_text(content, encoding="utf-8")
    say = _stderr_if(as_json)
    say(f"[SCRIPTED scenario '{script.name}': not a recording of a real model]")
    say(f"task: {DEMO_TASK}\nworkdir: {root}\n")
    config = load_config(root, {"model": "scripted", "max_retries": 0}, env={})
    options = RunOptions(
        root.resolve(), config, trace=trace, yes=True, quiet=quiet, as_json=as_json
    )
    if pace is None:
        pace = 0.4 if sys.stdout.isatty() and not (quiet or as_json) else 0.0
    session = _Session(options, ScriptedModel(script, pace=pace))
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


@cli.command()
@click.option("--machine", type=click.Choice(["item", "loop", "all"]), default="all")
@click.option("--format", "fmt", type=click.Choice(["mermaid", "dot"]), default="mermaid")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@click.option("--trace", type=click.Path(dir_okay=False, path_type=Path), default=None)
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
    from orchestrator.diagram import DiagramError, render_diagram
    from orchestrator.diagram import write_statecharts as write_all

    try:
        if write_statecharts is not None:
            for path in write_all(write_statecharts):
                click.echo(f"wrote {path}")
            return 0
        text = render_diagram(machine, fmt, trace=trace)  # type: ignore[arg-type]
    except DiagramError as error:
        raise InputError(str(error)) from None
    if output is not None:
        output.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=not text.endswith("\n"))
    return 0


cli.add_command(eval_group)


@cli.command(name="config")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=".")
def show_config(workdir: Path) -> int:
    """Print the effective settings, where each comes from, with secrets masked."""
    from orchestrator.doctor import sandbox_in_effect

    config = _inspected_config(workdir)
    rows = config.shown()
    width = max(len(name) for name, _, _ in rows)
    for name, value, source in rows:
        click.echo(f"{name:<{width}}  {value}  ({source})")
    in_effect = sandbox_in_effect(workdir, config).removeprefix("sandbox: ")
    click.echo(f"{'sandbox_in_effect':<{width}}  {in_effect}  (checked here)")
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
    """The parts of a session; :meth:`open` wires them into a loop writing one trace."""

    options: RunOptions
    model: Model
    board: PlanBoard = attrs.field(
        default=attrs.Factory(lambda self: _new_board(self.options.config), takes_self=True)
    )
    conversation: Conversation | None = None
    settings: LoopSettings | None = None
    resume_from: RebuiltRun | None = None
    extra_sinks: tuple[EventSink, ...] = ()
    view: View = attrs.field(
        default=attrs.Factory(
            lambda self: choose_view(quiet=self.options.quiet, as_json=self.options.as_json),
            takes_self=True,
        )
    )
    trace_path: Path | None = None
    sandbox: SandboxChoice | None = None

    @contextmanager
    def open(self) -> Iterator[Loop]:
        options, config = self.options, self.options.config
        resumed = self.resume_from
        run_id = resumed.run_id if resumed is not None else new_run_id()
        self.trace_path = options.trace or default_trace_path(options.workdir, run_id)
        self.sandbox = _choose_sandbox(options, [self.trace_path])
        if self.sandbox.sandbox.mode != "bwrap":
            make_undumpable()  # bwrap hides the harness's /proc entirely
        say = _stderr_if(True)
        if self.sandbox.warning is not None:
            say(f"orchestrator: {self.sandbox.warning}")
        if config.allow_network and not config.deny_bash:
            shown = self.sandbox.sandbox.describe()
            say(f"orchestrator: network is on for bash (--allow-network); {shown}")
        limits = _limits(self.model, config)
        settings = self.settings or LoopSettings(
            model=config.model,
            system=DEFAULT_SYSTEM.format(workdir=options.workdir),
            max_tokens=config.max_tokens,
            max_rounds=config.max_rounds,
            reminder_threshold=config.reminder_threshold,
            trace_requests=options.trace_requests,
            workdir=str(options.workdir),
            context_window=limits.max_input_tokens,
            compaction=_compaction_mode(limits, config),
            thinking=config.thinking,
            effort=config.effort,
        )
        secrets = _secret_values(config)
        trace: Trace = open_trace(
            self.trace_path,
            run_id=run_id,
            secrets=secrets,
            sinks=[self.view, *self.extra_sinks],
            append=resumed is not None,
            first_seq=resumed.last_seq if resumed is not None else 0,
        )
        with trace:
            yield Loop(
                model=self.model,
                tools=self._registry(secrets),
                plan=self.board,
                log=trace.log,
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
                ),
            )

    def _registry(self, secrets: Sequence[str]) -> ToolRegistry:
        config = self.options.config
        assert self.sandbox is not None  # chosen in open()
        sandbox = self.sandbox.sandbox
        workdir = Workdir(self.options.workdir, confined=sandbox.confined)
        tools = [
            *standard_tools(workdir, bash=not config.deny_bash, sandbox=sandbox),
            TodoTool(self.board),
        ]
        return ToolRegistry(
            tools, approver=_approver(self.options.yes, self.view), secrets=tuple(secrets)
        )


def _secret_values(config: Config) -> list[str]:
    """Every secret value this process holds: these never reach a trace or a request body."""
    found = secrets_from_environment()
    if config.api_key:
        found.append(config.api_key)
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
    with session.open() as loop:
        resumed = session.resume_from
        outcome = _run_turn(
            session,
            loop,
            task,
            first_round=resumed.last_round if resumed is not None else 0,
            rounds_since_update=resumed.rounds_since_update if resumed is not None else 0,
        )
    return EXIT_CODES[outcome.status]


def _run_turn(
    session: _Session,
    loop: Loop,
    task: str | None,
    first_round: int = 0,
    rounds_since_update: int = 0,
) -> RunOutcome:
    with session.view:
        outcome = loop.run(task, first_round=first_round, rounds_since_update=rounds_since_update)
    say = _stderr_if(session.options.as_json)
    if session.options.quiet and outcome.text:
        say(outcome.text)
    say("\n" + session.board.render())
    if outcome.status != "done":
        click.echo(f"orchestrator: run {outcome.status}: {outcome.reason}", err=True)
    return outcome


def _read_trace(path: Path) -> TraceFile:
    try:
        return read_trace(path)
    except TraceError as error:
        raise InputError(str(error)) from None


def _anthropic_model(options: RunOptions) -> Model:
    config = options.config
    if not config.api_key:
        raise InputError(
            "ANTHROPIC_API_KEY is not set; export it (ANTHROPIC_BASE_URL points the client at "
            "any Messages-API endpoint), or try `orchestrator demo`, which runs offline"
        )
    from orchestrator.anthropic_model import AnthropicModel

    return AnthropicModel(
        max_retries=config.max_retries,
        timeout=config.timeout,
        api_key=config.api_key,
        base_url=config.base_url,
    )


def _approver(yes: bool, view: View) -> Approver | None:
    if yes:
        return None
    if sys.stdin.isatty():
        return _TerminalApprover(view)
    return _refuse_without_terminal


@attrs.frozen
class _TerminalApprover:
    """Asks at the terminal before a side-effecting call, with the live view paused."""

    view: View

    def __call__(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        from orchestrator.guard import describe_arguments

        with self.view.paused():
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
        sys.exit(EXIT_CODES["interrupted"])
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
