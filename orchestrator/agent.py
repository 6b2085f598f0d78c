"""The public Python API, and the one place that wires model, tools, board, context and sandbox.

``Agent(model=…, workdir=…, tools=[…]).run(task)`` is what a program embeds; the CLI's
``run``, ``resume``, ``chat`` and ``demo`` build the same :class:`Session` underneath, so the
wiring exists once. Settings take the CLI's names (``max_rounds``, ``sandbox``, ``approval``…)
and the environment and config files apply as they do for the CLI.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import attrs

from orchestrator import report
from orchestrator.approval import (
    Answer,
    ApprovalPolicy,
    ask_at_terminal,
    asks_about,
    no_terminal_notice,
)
from orchestrator.board.shared import SharedBoard
from orchestrator.config import (
    SETTINGS,
    Config,
    ConfigError,
    SettingsError,
    UntrustedConfig,
    load_config,
)
from orchestrator.console import View, choose_view
from orchestrator.context import ContextManager, LimitsSource, resolve_limits, window_label
from orchestrator.conversation import Conversation
from orchestrator.hooks import (
    Hook,
    HookConfigError,
    HookedTools,
    HookRunner,
    load_hooks,
    stop_check,
    task_completed_check,
)
from orchestrator.inert import inert
from orchestrator.instructions import load_instructions
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import EdgePolicy, PlanBoard, TodoTool
from orchestrator.pricing import UsageTotals, format_cost, prices_for
from orchestrator.protocols import (
    CheckResult,
    Model,
    ModelError,
    ModelLimits,
    Tool,
    ToolResult,
    Tools,
    ToolSource,
    UnknownModel,
)
from orchestrator.sessions import SessionError, SessionLock, check_new_trace
from orchestrator.tools import ToolRegistry, Workdir, standard_tools
from orchestrator.tools.mcp_config import McpConfigError, McpServerConfig, mcp_secret_values
from orchestrator.tools.python import FunctionTool, tool
from orchestrator.trace import EventSink, Trace, new_run_id, open_trace, secrets_from_environment
from orchestrator.trust import TrustError, TrustStore, trust_file

if TYPE_CHECKING:
    from orchestrator.replay import RebuiltRun
    from orchestrator.tools.mcp import McpServers
    from orchestrator.tools.protected import ProtectedChange, ProtectedSnapshot
    from orchestrator.tools.sandbox import SandboxChoice

__all__ = ["Agent", "RunOptions", "RunResult", "Session", "SettingsError", "tool"]

_log = logging.getLogger("orchestrator")


@attrs.frozen
class RunOptions:
    """What a session needs once arguments, the environment and config files are merged."""

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
    #: The hooks that may run (issue 24), and the project files whose hooks may not (untrusted).
    hooks: tuple[Hook, ...] = ()
    hooks_untrusted: tuple[str, ...] = ()

    @property
    def machine_output(self) -> bool:
        """Stdout belongs to a program (json, stream-json): people's lines go to stderr."""
        return self.output_format != "text"


#: ``ask(question) -> yes``: how a front end asks a person; None where nobody can answer.
Asker = Callable[[str], bool] | None


def load_options(
    workdir: Path,
    settings: Mapping[str, Any],
    *,
    trust: bool = False,
    ask: Asker = None,
    label: Callable[[str], str] | None = None,
    **options: Any,
) -> RunOptions:
    """Settings from ``settings`` (None: not given), the environment and the config files.

    A project file that widens anything, or starts MCP servers, needs the folder trusted:
    ``trust``, a recorded trust, or a yes from ``ask``. ``label(name)`` names a setting in
    errors (the CLI's ``--max-rounds``, the API's ``max_rounds=``).
    """
    if not workdir.is_dir():
        raise SettingsError(f"{_workdir_label(label)} {workdir}: no such directory")
    config = _trusted_config(workdir, settings, trust=trust, ask=ask, label=label)
    servers, trusted = _mcp_servers(workdir, trust=trust, ask=ask)
    hooks, untrusted = _hooks(workdir, trust=trust)
    return RunOptions(
        workdir=workdir.resolve(),
        config=config,
        mcp_servers=servers,
        mcp_trusted=trusted,
        hooks=hooks,
        hooks_untrusted=untrusted,
        **options,
    )


def _hooks(workdir: Path, *, trust: bool) -> tuple[tuple[Hook, ...], tuple[str, ...]]:
    """The user's hooks, and the project's when the folder is trusted (they run commands)."""
    from orchestrator.config import CONFIG_FILE, user_config_path

    try:
        hooks = load_hooks([(user_config_path(), False), (workdir / CONFIG_FILE, True)])
        if trust or not any(hook.project for hook in hooks):
            return hooks, ()
        if TrustStore(trust_file()).trusts(workdir):
            return hooks, ()
    except (HookConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None
    files = tuple(dict.fromkeys(hook.origin for hook in hooks if hook.project))
    return tuple(hook for hook in hooks if not hook.project), files


def _workdir_label(label: Callable[[str], str] | None) -> str:
    return "--workdir" if label is None else label("workdir")


def _trusted_config(
    workdir: Path,
    settings: Mapping[str, Any],
    *,
    trust: bool,
    ask: Asker,
    label: Callable[[str], str] | None,
) -> Config:
    """Load the settings; a project file that widens anything needs the folder trusted."""
    try:
        store = TrustStore(trust_file())
        try:
            return load_config(
                workdir, settings, trusted=trust or store.trusts(workdir), label=label
            )
        except UntrustedConfig as error:
            changed = store.changed_since_trusted(workdir)
            if ask is None:
                since = " (it changed since the folder was trusted)" if changed else ""
                raise SettingsError(f"{error}{since}") from None
            question = (
                f"{error.path} sets {', '.join(error.names)}."
                f"{' It changed since you trusted this folder.' if changed else ''} "
                f"Do you trust the files in this folder ({workdir.resolve()})?"
            )
            if not ask(question):
                raise SettingsError(str(error)) from None
            store.add(workdir)
            return load_config(workdir, settings, trusted=True, label=label)
    except (ConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None


def _mcp_servers(
    workdir: Path, *, trust: bool, ask: Asker
) -> tuple[tuple[McpServerConfig, ...], bool]:
    """The configured MCP servers, and whether the project's may start."""
    from orchestrator.config import user_config_path
    from orchestrator.tools.mcp_config import load_servers

    try:
        servers = load_servers(workdir, user_config_path())
        store = TrustStore(trust_file())
        project = [server for server in servers if server.project]
        if trust or not project or store.trusts(workdir):
            return servers, True
        untrusted = load_servers(workdir, user_config_path(), trusted=False)
        if ask is None:
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
        if not ask(question):
            return untrusted, False
        store.add(workdir)
        return servers, True
    except (McpConfigError, TrustError) as error:
        raise SettingsError(str(error)) from None


def _choose_sandbox(options: RunOptions, hidden: Sequence[Path]) -> SandboxChoice:
    """The sandbox bash runs in; ``sandbox="bwrap"`` that cannot run here is a settings error."""
    from orchestrator.doctor import sandbox_policy
    from orchestrator.tools.sandbox import SandboxUnavailable, choose_sandbox

    policy = sandbox_policy(options.workdir, options.config, hidden)
    try:
        return choose_sandbox(options.config.sandbox, policy)
    except SandboxUnavailable as error:
        raise SettingsError(str(error)) from None


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _stdout(text: str) -> None:
    print(text, flush=True)


@attrs.define
class Session:
    """The parts of a session; :meth:`turn` runs one message through a lazily opened loop."""

    options: RunOptions
    model: Model
    board: PlanBoard | SharedBoard = attrs.field(
        default=attrs.Factory(lambda self: new_board(self.options.config), takes_self=True)
    )
    conversation: Conversation | None = None
    settings: LoopSettings | None = None
    resume_from: RebuiltRun | None = None
    extra_sinks: tuple[EventSink, ...] = ()
    #: The caller's own tools (``@tool`` functions, anything with the tool protocol).
    extra_tools: tuple[Tool, ...] = ()
    #: Whether the model gets the todo tool (an eval's no-board arm does not).
    board_tool: bool = True
    #: Whether a run may end only with the plan settled (chat's turns may leave items open).
    settle_plan: bool = True
    #: Chat: a turn that ends well says no more than its answer (the plan only when it changed).
    turns: bool = False
    #: Another reason to stop between rounds (a team interrupted), or None to go on.
    stop_when: Callable[[], str | None] | None = None
    closing: bool = True
    #: Where a person's one-line notices go (warnings, the sandbox chosen).
    notice: Callable[[str], None] = _stderr
    #: Where the start's status and header lines go (model, workdir, sandbox, window).
    header: Callable[[str], None] = _stderr
    #: Where the end of a turn (the plan, the answer in --quiet) goes; stderr in JSON modes.
    say: Callable[[str], None] = attrs.field(
        default=attrs.Factory(
            lambda self: _stderr if self.options.machine_output else _stdout, takes_self=True
        )
    )
    #: Whether a person can answer approval prompts here.
    interactive: bool = attrs.field(
        default=attrs.Factory(lambda: sys.stdin is not None and sys.stdin.isatty())
    )
    me: str = "orchestrator"
    view: View = attrs.field(
        default=attrs.Factory(
            lambda self: choose_view(
                quiet=self.options.quiet or self.options.output_format == "json",
                as_json=self.options.output_format == "stream-json",
                stream=sys.stderr if self.options.output_format == "json" else None,
                verbose=self.options.verbose,
                turns=self.turns,
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
    #: The protected paths' digests when the session opened, and what the runs changed.
    _protected: ProtectedSnapshot | None = None
    protected_changes: tuple[ProtectedChange, ...] = ()
    _trace: Trace | None = None
    _lock: SessionLock | None = None
    _run_id: str | None = None
    _loop: Loop | None = None
    _hooks: HookRunner | None = None
    _hook_context: str = ""
    _first_round: int = 0
    _stale: int = 0

    def _approval_policy(self) -> ApprovalPolicy:
        mode = self.options.config.approval
        asker = None
        if self.interactive and asks_about(mode):
            view, workdir = self.view, self.options.workdir

            def asker(tool: str, arguments: Mapping[str, Any]) -> Answer:
                with view.paused():
                    return ask_at_terminal(tool, arguments, workdir)

        return ApprovalPolicy(mode, asker, auto_approve=self.options.config.auto_approve)

    @property
    def run_id(self) -> str | None:
        return None if self._trace is None else self._trace.run_id

    def _open(self) -> Loop:
        """Open the trace and build the loop, at the first message (chat sends none at first)."""
        if self._loop is not None:
            return self._loop
        options, config = self.options, self.options.config
        resumed = self.resume_from
        run_id = resumed.run_id if resumed is not None else new_run_id()
        if resumed is not None:
            self._first_round, self._stale = resumed.last_round, resumed.rounds_since_update
        # What a person can get wrong is said before the model is looked up (a slow step).
        path = options.trace
        try:
            if resumed is None:
                path = _new_trace(options, run_id)
        except SessionError as error:
            raise SettingsError(str(error)) from None
        assert path is not None
        self.sandbox = _choose_sandbox(options, [path])
        _check_thinking(config)
        if config.max_cost is not None and prices_for(config.model, config.price_per_mtok) is None:
            raise SettingsError(
                f"--max-cost {config.max_cost:g}: the price of {config.model} is unknown, so the "
                "spend cannot be counted; set --price-per-mtok in,out,cache_read,cache_write"
            )
        if isinstance(self.model, LimitsSource):
            # The lookup is bounded (about 10 s), but a silent endpoint should not look hung.
            self.header(f"orchestrator: checking model {inert(config.model)}…")
        limits = _limits(self.model, config)
        learned = resumed.learned_window if resumed is not None else None
        if learned is not None and learned < limits.max_input_tokens:
            # A refusal in this session proved the window smaller: the resumed run keeps to it.
            why = "a refusal earlier in this session named the real limit"
            limits = attrs.evolve(limits, max_input_tokens=learned, source="refusal", reason=why)
        settings = self._loop_settings(limits)
        try:
            secrets = [*_secret_values(config), *mcp_secret_values(options.mcp_servers)]
            self._run_id = run_id
            self._lock = SessionLock(path)
            self._lock.take()  # before the trace: two processes never write one session
            self._trace = open_trace(
                path,
                run_id=run_id,
                secrets=secrets,
                sinks=[self.view, self.totals, *self.extra_sinks],
                append=resumed is not None,
                first_seq=resumed.last_seq if resumed is not None else 0,
            )
        except SessionError as error:
            raise SettingsError(str(error)) from None
        except OSError as error:
            raise SettingsError(f"{path}: cannot write the trace: {error.strerror}") from None
        self.trace_path = path
        if self.sandbox.sandbox.mode != "bwrap":
            from orchestrator.tools.processes import make_undumpable

            make_undumpable()  # bwrap hides the harness's /proc entirely
        self.header(self._header_line(limits))
        self._say_how_it_runs()
        self._protected = _snapshot(self.sandbox)
        self._loop = self._new_loop(settings, limits, self._hook_runner(run_id, path, secrets))
        return self._loop

    def _new_loop(self, settings: LoopSettings, limits: ModelLimits, hooks: HookRunner) -> Loop:
        """The loop, its tools, checks and context keeper wired, the hooks where they meet it."""
        config, resumed = self.options.config, self.resume_from
        assert self._trace is not None and self.sandbox is not None
        secrets = hooks.secrets
        tools: Tools = self._registry(secrets)
        if hooks.has("PreToolUse") or hooks.has("PostToolUse"):
            tools = HookedTools(tools, hooks)
        run_check = self._check_runner(secrets)
        # Checks run where the model's bash runs, on either kind of board.
        self.board.run_check = run_check
        if isinstance(self.board, PlanBoard) and self.board.default_check is None:
            self.board.default_check = config.completion_check
        if hooks.has("TaskCompleted"):
            self.board.task_completed = task_completed_check(hooks)
        return Loop(
            model=self.model,
            tools=tools,
            run_check=run_check,
            stop_check=stop_check(hooks) if hooks.has("Stop") else None,
            before_compact=(
                (lambda: hooks.run("PreCompact", {"trigger": "auto"}))
                if hooks.has("PreCompact")
                else None
            ),
            budget=self._budget,
            setup={"sandbox": self.sandbox.sandbox.mode, "approval": config.approval},
            plan=self.board,
            log=self._trace.log,
            settings=settings,
            on_text=_quiet_when_gone(self.view.on_text),
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

    def _hook_runner(self, run_id: str, trace: Path, secrets: Sequence[str]) -> HookRunner:
        """The session's hooks, started with ``SessionStart``; said when a project's may not run."""
        options = self.options
        for origin in options.hooks_untrusted:
            self.notice(
                f"orchestrator: the hooks in {inert(origin)} do not run: this folder is not "
                "trusted (pass --trust to trust it)"
            )
        self._hooks = runner = HookRunner(
            options.hooks,
            options.workdir,
            session_id=run_id,
            transcript_path=str(trace),
            secrets=tuple(secrets),
            notice=self.notice,
        )
        if runner.has("SessionStart"):
            started = runner.run(
                "SessionStart", {"source": "resume" if self.resume_from else "startup"}
            )
            self._hook_context = started.context
        return runner

    def _loop_settings(self, limits: ModelLimits) -> LoopSettings:
        """A new run's settings; a resumed run's as its trace had them, amended by the flags."""
        options, config = self.options, self.options.config
        if self.settings is not None:
            return attrs.evolve(
                self.settings, **_model_settings(config, limits), settle_plan=self._settles(config)
            )
        instructions = load_instructions(options.workdir)
        if instructions.files:
            self.say(f"project instructions: {', '.join(instructions.files)}")
        return LoopSettings(
            system=instructions.system_prompt(DEFAULT_SYSTEM.format(workdir=options.workdir)),
            settle_plan=self._settles(config),
            max_rounds=config.max_rounds,
            trace_requests=options.trace_requests,
            workdir=str(options.workdir),
            **_model_settings(config, limits),
        )

    def _budget(self) -> str | None:
        """Why the session must stop now (--max-cost, --max-duration spent), or None."""
        if self.stop_when is not None and (why := self.stop_when()) is not None:
            return why
        config = self.options.config
        if config.max_cost is not None:
            spent = self.totals.cost(config.price_per_mtok, config.model)
            if spent is not None and spent >= config.max_cost:
                return f"it has spent {format_cost(spent)}, reaching --max-cost {config.max_cost:g}"
        elapsed = self.totals.elapsed
        if config.max_duration is not None and elapsed >= config.max_duration:
            return f"it has run {elapsed:.0f} s, reaching --max-duration {config.max_duration:g} s"
        return None

    def _settles(self, config: Config) -> bool:
        """Whether ``done`` needs the plan settled: not in chat, nor on a shared board.

        On a shared board other agents hold items this run cannot settle.
        """
        return self.settle_plan and config.settle_plan and not isinstance(self.board, SharedBoard)

    def _header_line(self, limits: ModelLimits) -> str:
        """One line that says how this run works: what a person checks first when it misbehaves."""
        options, config = self.options, self.options.config
        assert self.sandbox is not None
        parts = [
            f"model {config.model}",
            f"workdir {options.workdir}",
            f"sandbox {self.sandbox.sandbox.mode}",
            f"approval {config.approval}",
            f"window {window_label(limits)}",
        ]
        resumed = self.resume_from
        if resumed is not None:
            task = " ".join(resumed.task.split())
            shown = task if len(task) <= 60 else task[:59] + "…"
            parts.append(
                f"resuming session {resumed.run_id} after round {resumed.last_round}: {shown}"
            )
        return inert("orchestrator: " + " · ".join(parts))

    def _say_how_it_runs(self) -> None:
        """The one-line notices of a start: a sandbox fallback, the network, approvals."""
        options, config = self.options, self.options.config
        assert self.sandbox is not None
        if self.sandbox.warning is not None:
            self.notice(f"orchestrator: {self.sandbox.warning}")
        if config.allow_network and not config.deny_bash:
            shown = self.sandbox.sandbox.describe()
            self.notice(f"orchestrator: network is on for bash (--allow-network); {shown}")
        notice = no_terminal_notice(
            config.approval, has_terminal=self.interactive, mcp=bool(options.mcp_servers)
        )
        if notice:
            self.notice(notice)

    def _check_runner(self, secrets: Sequence[str]) -> Callable[[str], CheckResult]:
        """Checks run where the model's bash runs (the model may have written them)."""
        from orchestrator.tools.bash import BashTool
        from orchestrator.tools.secrets import redact, redactable

        assert self.sandbox is not None
        workdir = Workdir(self.options.workdir, confined=self.sandbox.sandbox.confined)
        bash = BashTool(workdir, sandbox=self.sandbox.sandbox)
        hidden = redactable(tuple(secrets))
        timeout = self.options.config.check_timeout

        def run(command: str) -> CheckResult:
            result = bash.run_check(command, timeout)
            return attrs.evolve(result, output=redact(ToolResult(result.output), hidden).text)

        return run

    def _start_mcp(self) -> None:
        """Start the configured MCP servers, once, before the loop's first round."""
        options = self.options
        if not options.mcp_servers or self.mcp is not None:
            return
        from orchestrator.tools.mcp import McpServers

        assert self._trace is not None  # opened first: the servers' events go to it
        view, notice = self.view, self.notice

        def notify(line: str) -> None:
            with view.paused():
                notice(f"orchestrator: {line}")

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
        first = self._loop is None
        loop = self._open()
        revision = self.board.revision
        if first and task is not None and self.resume_from is None:
            task = self._with_loaded_board(task)
        if task is not None:
            refused = self._prompt_hooks(task)
            if isinstance(refused, RunOutcome):
                return refused
            task = refused
        with self.view:
            outcome = loop.run(task, first_round=self._first_round, rounds_since_update=self._stale)
        self._first_round, self._stale = outcome.rounds, 0
        self._check_protected()
        # The model's answer and the items' texts are untrusted: shown, never obeyed.
        if self.options.quiet and outcome.text and self.options.output_format == "text":
            self.say(inert(outcome.text))
        if not self.turns or (self.board.revision != revision and not self.board.is_empty):
            self.say("\n" + inert(self.board.render()))
        if outcome.status != "done":
            self.notice(f"orchestrator: run {outcome.status}: {inert(outcome.reason)}")
        return outcome

    def _prompt_hooks(self, task: str) -> str | RunOutcome:
        """The message as the ``UserPromptSubmit`` hooks leave it, or the turn they refuse."""
        hooks, context = self._hooks, self._hook_context
        self._hook_context = ""  # SessionStart's words go with the first message only
        if hooks is not None and hooks.has("UserPromptSubmit"):
            outcome = hooks.run("UserPromptSubmit", {"prompt": task})
            if outcome.blocked:
                reason = f"a UserPromptSubmit hook refused the message: {outcome.reason}"
                self.notice(f"orchestrator: {inert(reason)}")
                self._drop_empty_trace()
                return RunOutcome("failed", self._first_round, reason, "")
            context = "\n".join(part for part in (context, outcome.context) if part)
        return f"{task}\n\n{context}" if context else task

    def _drop_empty_trace(self) -> None:
        """A new session that never ran leaves no trace: nothing to replay or resume."""
        path = self.trace_path
        if path is None or self.resume_from is not None:
            return
        try:
            if path.stat().st_size == 0:
                path.unlink()
                self.trace_path = None
        except OSError:
            pass  # gone already, or not ours to remove: an empty trace is harmless

    def _with_loaded_board(self, task: str) -> str:
        """The first message, with a board that started full (``--board``) rendered in it.

        The model then knows its plan before its first update, and the user sees it loaded.
        """
        if self.board.is_empty or self.options.config.board is None:
            return task
        where = (
            self.board.store.url
            if isinstance(self.board, SharedBoard)
            else Path(self.options.config.board).name
        )
        count = len(self.board.items)
        self.notice(f"board: {count} item{'s' if count != 1 else ''} from {inert(where)}")
        return f"{task}\n\nThe plan so far (loaded from {where}):\n{self.board.render()}"

    def _check_protected(self) -> None:
        """Compare the protected paths with the start: a change is a loud warning, exit 3."""
        if self._protected is None or self._trace is None:
            return
        changes = self._protected.changes()
        fresh = [change for change in changes if change not in self.protected_changes]
        root = self.options.workdir
        for change in fresh:
            self._trace.log.info(
                "protected.changed",
                path=str(change.path),
                before=change.before,
                after=change.after,
                diff=list(change.diff),
            )
            shown = "; ".join(line for line in change.diff[:3]) or "see the file"
            self.notice(
                f"! {change.describe(root)}: {inert(shown)}; review it before you run git or "
                "orchestrator here (exit code 3)"
            )
        self.protected_changes = (*self.protected_changes, *fresh)

    @property
    def model_name(self) -> str:
        if self._loop is not None:
            return self._loop.settings.model
        return self.settings.model if self.settings else self.options.config.model

    @property
    def conversation_now(self) -> Conversation | None:
        """The conversation as it stands (the loop's once a message has gone through)."""
        return self._loop.conversation if self._loop is not None else self.conversation

    def set_model(self, name: str) -> None:
        """Ask another model from the next message on (chat's ``/model NAME``).

        The name is checked with the Models API first: a :class:`SettingsError` when the
        endpoint does not know it. An endpoint without a Models API cannot say; its first
        answer will.
        """
        if isinstance(self.model, LimitsSource):
            try:
                self.model.limits(name)
            except UnknownModel as error:
                raise SettingsError(f"the endpoint does not know model {name!r}: {error}") from None
            except ModelError:
                pass
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
        if self._hooks is not None and self._hooks.has("SessionEnd"):
            self._hooks.run("SessionEnd", {"reason": "exit"})
        self._hooks = None
        if self.mcp is not None:  # before the trace: stopping may still log
            self.mcp.close()
        if isinstance(self.board, SharedBoard):
            self.board.close()
        elif self.options.config.board is not None:
            from orchestrator.board_file import release_board

            release_board(Path(self.options.config.board))
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def report_for(self, outcome: RunOutcome | None, interrupted_code: int) -> report.RunReport:
        status = outcome.status if outcome is not None else "chat"
        refused = tuple(self.approval.refused)
        unfinished = outcome.unfinished if outcome is not None else ()
        code = report.exit_code(
            status, len(refused) + len(self.protected_changes), interrupted_code, len(unfinished)
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
            me=self.me,
            prices=self.options.config.price_per_mtok,
            unfinished=unfinished,
            progress=self.board.progress,
            run_id=self._run_id,
            plan=tuple(item.as_dict() for item in self.board.items),
        )

    def _registry(self, secrets: Sequence[str]) -> ToolRegistry:
        config = self.options.config
        assert self.sandbox is not None  # chosen in _open()
        sandbox = self.sandbox.sandbox
        workdir = Workdir(
            self.options.workdir,
            confined=sandbox.confined,
            has_bash=not config.deny_bash,
            protected=self.sandbox.sandbox.policy.protected,
        )
        tools: list[Tool] = list(
            standard_tools(workdir, bash=not config.deny_bash, sandbox=sandbox)
        )
        if self.board_tool:
            tools.append(TodoTool(self.board))
        if config.deny_bash:
            from orchestrator.list_files import ListFilesTool

            tools.append(ListFilesTool(workdir))  # without bash, the one way to look around
        tools.extend(self.extra_tools)
        tools.extend(_configured_tools(config))
        policy = None if config.approval == "auto" else self.approval
        self._start_mcp()
        sources: list[ToolSource] = [] if self.mcp is None else [self.mcp]
        try:
            return ToolRegistry(tools, approver=policy, secrets=tuple(secrets), sources=sources)
        except ValueError as error:  # a tool of the caller's named like a built-in one
            raise SettingsError(f"tools: {error}") from None


def _new_trace(options: RunOptions, run_id: str) -> Path:
    """Where a new session's trace goes: ``--trace``, else the state directory; never over one."""
    if options.trace is not None:
        check_new_trace(options.trace)
        return options.trace
    from orchestrator.sessions import new_trace_path

    path = new_trace_path(options.workdir, run_id)
    try:
        check_new_trace(path, flag="trace")
    except SessionError as error:
        raise SessionError(
            f"{error}; set ORCHESTRATOR_STATE_DIR to a writable folder, or pass --trace FILE"
        ) from None
    return path


def _quiet_when_gone(write: Callable[[str], None]) -> Callable[[str], None]:
    """The model's streamed text to the console, until the terminal is gone (then nowhere)."""
    from orchestrator.trace import TERMINAL_GONE

    gone = False

    def on_text(text: str) -> None:
        nonlocal gone
        if gone:
            return
        try:
            write(text)
        except OSError as error:
            if error.errno not in TERMINAL_GONE:
                raise
            gone = True

    return on_text


def _snapshot(sandbox: SandboxChoice) -> ProtectedSnapshot:
    """The protected paths' digests as the session opens (compared after each run)."""
    from orchestrator.tools.protected import ProtectedSnapshot

    return ProtectedSnapshot.take(sandbox.sandbox.policy.protected)


def _configured_tools(config: Config) -> list[Tool]:
    """The ``@tool`` functions of the modules the ``tools`` setting names."""
    from orchestrator.tools.python import tools_from_modules

    try:
        return list(tools_from_modules(config.tools))
    except ImportError as error:
        raise SettingsError(f"tools: {error}") from None


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
        "done_check": config.done_check,
        "done_check_retries": config.done_check_retries,
    }


def _secret_values(config: Config) -> list[str]:
    """Every secret value this process holds: these never reach a trace or a request body."""
    found = secrets_from_environment()
    found.extend(value for value in (config.api_key, config.auth_token) if value)
    # What the user passes into bash with --env is theirs to use, not to show the model.
    found.extend(os.environ[name] for name in config.env if os.environ.get(name))
    return found


def _check_thinking(config: Config) -> None:
    """A thinking budget the output cap cannot hold is the person's mistake, said before a call."""
    thinking = config.thinking
    if thinking not in ("off", "adaptive") and int(thinking) >= config.max_tokens:
        raise SettingsError(
            f"--thinking {thinking}: the budget must be below --max-tokens ({config.max_tokens})"
        )


def _limits(model: Model, config: Config) -> ModelLimits:
    """The model's limits, and a settings error for a setting the model cannot honour."""
    _check_thinking(config)
    limits = resolve_limits(
        model, config.model, config.context_window, config.sources["context_window"]
    )
    for problem in _unsupported(limits, config):
        raise SettingsError(problem)
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


def new_board(config: Config, warn: Callable[[str], None] | None = None) -> PlanBoard | SharedBoard:
    """The board the ``board`` setting names (a store, a JSON file), else one in memory."""
    from orchestrator.board.stores import is_store_url
    from orchestrator.board_file import BoardFileError, open_board

    if config.board is not None and is_store_url(config.board):
        return _shared_board(config)

    policy = EdgePolicy(config.plan_policy)
    if config.board is None:
        return PlanBoard(limit=config.plan_limit, policy=policy)
    try:
        return open_board(
            Path(config.board),
            limit=config.plan_limit,
            policy=policy,
            on_write_error=warn or _warn,
        )
    except BoardFileError as error:
        raise SettingsError(str(error)) from None


def _shared_board(config: Config) -> SharedBoard:
    """The agent's view of the shared store ``--board`` names, its claims kept alive."""
    from orchestrator.board.store import BoardError
    from orchestrator.board.stores import BoardUrlError, open_store

    url = str(config.board)
    agent = config.agent or f"agent-{os.getpid()}"
    try:
        board = SharedBoard(open_store(url), agent, lease=config.lease)
    except (BoardUrlError, BoardError) as error:
        raise SettingsError(f"--board {error}") from None
    board.start_renewing(lambda: open_store(url))
    return board


def _warn(message: str) -> None:
    _stderr(f"orchestrator: warning: {message}")


def anthropic_model(config: Config) -> Model:
    """The real Messages-API client, or a settings error naming the missing key."""
    if not (config.api_key or config.auth_token):
        raise SettingsError(
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


# --- the public API ---------------------------------------------------------------------------


@attrs.frozen
class RunResult:
    """How a run ended, as the CLI's ``--output-format json`` reports it."""

    #: ``done``, ``failed`` or ``interrupted``.
    status: str
    #: The model's final text.
    answer: str
    #: Rounds in the session so far.
    rounds: int
    #: The board at the end: one ``{"id", "content", "status", …}`` per item.
    plan: tuple[Mapping[str, Any], ...]
    #: Tokens by kind (``input_tokens``, ``output_tokens``, cache reads and writes).
    usage: Mapping[str, int]
    #: The price of those tokens, or None for a model whose price is unknown.
    cost_usd: float | None
    #: The trace file (one JSON event per line; ``orchestrator replay`` reads it).
    trace: Path | None
    reason: str = ""
    exit_code: int = 0
    run_id: str | None = None
    #: The conversation at the end, as the Messages API takes it.
    messages: tuple[Mapping[str, Any], ...] = ()
    #: Items a ``done`` run left neither completed nor cancelled (``exit_code`` 3).
    unfinished: tuple[str, ...] = ()


class _SilentView:
    """The console of an embedded agent: nothing on the terminal unless asked for."""

    def __call__(self, event: Mapping[str, Any]) -> None:
        pass

    def on_text(self, text: str) -> None:
        pass

    def __enter__(self) -> _SilentView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def paused(self) -> nullcontext[None]:
        return nullcontext()


def silent_view() -> View:
    """A console that shows nothing (an embedded agent, an eval's runs)."""
    return _SilentView()


def _api_label(name: str) -> str:
    return f"{name}="


class _OnClassOrInstance:
    """``Agent.resume(trace)`` (a default agent) and ``agent.resume(trace)`` (this one's)."""

    def __init__(self, method: Callable[..., RunResult]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    def __get__(self, instance: Agent | None, owner: type[Agent]) -> Callable[..., RunResult]:
        target = instance if instance is not None else owner()
        return functools.partial(self.method, target)


class Agent:
    """A coding agent with a guarded todo board, embedded in a program.

    ``Agent(model="claude-…", workdir="proj", tools=[add], approval="auto").run(task)``.

    Keyword settings are the CLI's, under the same names (``max_rounds``, ``sandbox``,
    ``approval``, ``board``, ``context_window``, ``thinking``…); what is not given comes from
    the environment and config files as for the CLI. ``tools`` takes ``@tool`` functions,
    plain typed functions, objects with the tool protocol, and module names (as the ``tools``
    setting does). ``on_event`` receives every trace event as it is written. ``client``
    replaces the Messages-API client with any :class:`~orchestrator.protocols.Model` (a
    scripted model, for tests). Each :meth:`run` is a session of its own, with its own trace;
    :meth:`resume` continues one.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        workdir: str | os.PathLike[str] = ".",
        tools: Iterable[Tool | Callable[..., Any] | str] = (),
        on_event: EventSink | None = None,
        trace: str | os.PathLike[str] | None = None,
        trust: bool = False,
        console: bool | TextIO = False,
        client: Model | None = None,
        **settings: Any,
    ) -> None:
        known = {setting.name for setting in SETTINGS if not setting.secret}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(
                f"Agent() got unknown setting(s) {', '.join(unknown)}; "
                f"the settings are: {', '.join(sorted(known))}"
            )
        tools = list(tools)
        modules = tuple(item for item in tools if isinstance(item, str))
        if modules:
            settings["tools"] = modules
        if model is not None:
            settings["model"] = model
        self.settings: dict[str, Any] = settings
        self.workdir = Path(workdir)
        self._workdir_given = workdir != "."
        self.tools = tuple(_as_tool(item) for item in tools if not isinstance(item, str))
        self.on_event = on_event
        self.trace = None if trace is None else Path(trace)
        self.trust = trust
        self.console = console
        self.client = client

    def run(self, task: str) -> RunResult:
        """Run ``task`` until it is done, fails or is interrupted; the result says which.

        A setting that cannot work here raises :class:`SettingsError`; everything that goes
        wrong during the run (a tool, the model, the API) ends in the result's ``status``.
        """
        if not task.strip():
            raise SettingsError("the task is empty; say what the agent should do")
        return self._run(self._session(self._options(self.trace)), task.strip())

    async def arun(self, task: str) -> RunResult:
        """:meth:`run` without blocking the event loop; async tools run on the caller's loop."""
        loop = asyncio.get_running_loop()
        for item in self.tools:
            if isinstance(item, FunctionTool):
                item.bind_loop(loop)
        try:
            return await asyncio.to_thread(self.run, task)
        finally:
            for item in self.tools:
                if isinstance(item, FunctionTool):
                    item.bind_loop(None)

    def _resume(self, trace: str | os.PathLike[str], instruction: str | None = None) -> RunResult:
        """Continue the session recorded in ``trace``, with ``instruction`` as the next message.

        ``Agent.resume(trace)`` goes on as the run was set up; ``agent.resume(trace)`` with
        this agent's settings and tools. An interrupted or failed run picks up where it
        stopped; a finished one needs the next ``instruction``. The run keeps the model and
        settings it was recorded with, and its work directory, unless this agent was given them.
        """
        from orchestrator.replay import rebuild
        from orchestrator.sessions import check_not_running, check_trace_appendable
        from orchestrator.trace_file import TraceError, read_trace

        path = Path(trace)
        try:
            rebuilt = rebuild(read_trace(path))
            check_trace_appendable(path)
            check_not_running(path)
        except (TraceError, SessionError) as error:
            raise SettingsError(str(error)) from None
        next_message = instruction.strip() if instruction and instruction.strip() else None
        if next_message is None and rebuilt.status == "done":
            raise SettingsError(f"{path}: that run finished (done); give the next instruction")
        if not self._workdir_given and rebuilt.settings.workdir:
            self.workdir = Path(rebuilt.settings.workdir)
        options = self._options(path)
        kept = {
            name: getattr(rebuilt.settings, name)
            for name in KEPT_ON_RESUME
            if name not in self.settings
        }
        options = attrs.evolve(
            options, config=options.config.updated(kept, source=f"{path} [run.started]")
        )
        board: dict[str, Any] = {"board": rebuilt.board}
        if not isinstance(rebuilt.board, PlanBoard):  # a shared board goes on in its store
            if options.config.board is None:
                raise SettingsError(f"{path}: the run worked a shared board; give board= again")
            board = {}
        session = self._session(
            options,
            **board,
            conversation=rebuilt.conversation,
            settings=attrs.evolve(
                rebuilt.settings, max_rounds=rebuilt.last_round + options.config.max_rounds
            ),
            resume_from=rebuilt,
        )
        return self._run(session, next_message)

    resume = _OnClassOrInstance(_resume)

    def _options(self, trace: Path | None) -> RunOptions:
        return load_options(
            self.workdir,
            self.settings,
            trust=self.trust,
            label=_api_label,
            trace=trace,
            quiet=not self.console,
        )

    def _session(self, options: RunOptions, **kwargs: Any) -> Session:
        view: View = _SilentView()
        if self.console:
            stream = None if isinstance(self.console, bool) else self.console
            view = choose_view(quiet=False, as_json=False, stream=stream or sys.stderr)
        if "board" not in kwargs:
            kwargs["board"] = new_board(options.config, _log.warning)
        model = self.client if self.client is not None else anthropic_model(options.config)
        return Session(
            options,
            model,
            extra_sinks=() if self.on_event is None else (self.on_event,),
            extra_tools=self.tools,
            view=view,
            say=_stderr if self.console else _nowhere,
            notice=_stderr if self.console else _log.warning,
            header=_stderr if self.console else _nowhere,
            interactive=False,
            **kwargs,
        )

    @staticmethod
    def _run(session: Session, task: str | None) -> RunResult:
        try:
            outcome = session.turn(task)
            run_id = session.run_id
        finally:
            session.close()
        ended = session.report_for(outcome, report.EXIT_INTERRUPTED)
        if ended.picture_command:  # on the console, when the agent has one
            session.say(f"picture: {ended.picture_command}")
        conversation = session.conversation_now
        return RunResult(
            status=outcome.status,
            answer=outcome.text,
            rounds=outcome.rounds,
            plan=tuple(item.as_dict() for item in session.board.items),
            usage=dict(session.totals.usage),
            cost_usd=None if ended.cost is None else round(ended.cost, 6),
            trace=session.trace_path,
            reason=outcome.reason,
            exit_code=ended.exit_code,
            run_id=run_id,
            messages=tuple(conversation.messages) if conversation is not None else (),
            unfinished=outcome.unfinished,
        )


def _nowhere(_text: str) -> None:
    pass


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    if isinstance(item, FunctionTool):
        return item
    if all(hasattr(item, name) for name in ("name", "schema", "run")):
        return item  # type: ignore[return-value]
    if callable(item):
        return tool(item)
    raise TypeError(f"tools: expected a @tool function, a Tool or a module name, got {item!r}")


#: What a resumed run keeps from its trace's settings unless this resume says otherwise.
KEPT_ON_RESUME = ("model", "max_tokens", "reminder_threshold", "thinking", "effort", "compaction")
