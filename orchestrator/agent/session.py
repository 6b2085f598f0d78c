"""The one place that wires model, tools, board, context, sandbox, hooks and MCP into a loop.

The CLI's ``run``, ``resume``, ``chat`` and ``demo``, ``team``, ``eval`` and the public
:class:`~orchestrator.agent.Agent` all build a :class:`Session`, so the wiring exists once.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from orchestrator import report
from orchestrator.agent._parts import (
    broken_command,
    check_thinking,
    command_problem,
    configured_tools,
    model_limits,
    model_settings,
    new_board,
    new_trace,
    quiet_when_gone,
    secret_values,
    session_sandbox,
    to_stderr,
    to_stdout,
)
from orchestrator.agent.options import RunOptions
from orchestrator.agent.result import exit_3_reason
from orchestrator.approval import (
    Answer,
    ApprovalPolicy,
    RefusedAction,
    ask_at_terminal,
    no_terminal_notice,
    unknown_server_rules,
)
from orchestrator.board.shared import SharedBoard
from orchestrator.config import (
    Config,
    SettingsError,
    given,
    relabel,
)
from orchestrator.console import View, choose_view
from orchestrator.context import ContextManager, LimitsSource, window_label
from orchestrator.conversation import Conversation
from orchestrator.hooks import (
    HookedTools,
    HookRefusal,
    HookRunner,
    skipped_line,
    stop_check,
    task_completed_check,
)
from orchestrator.inert import inert, inert_line
from orchestrator.instructions import load_instructions
from orchestrator.loop import DEFAULT_SYSTEM, Loop, LoopSettings, RunOutcome
from orchestrator.plan import PlanBoard, TodoTool
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
from orchestrator.sessions import SessionError, SessionLock
from orchestrator.tools import ToolRegistry, Workdir, standard_tools
from orchestrator.tools.mcp_config import mcp_secret_values, tool_name_part
from orchestrator.trace import EventSink, Trace, new_run_id, open_trace

if TYPE_CHECKING:
    from orchestrator.replay import RebuiltRun
    from orchestrator.tools.mcp import McpServers
    from orchestrator.tools.products.guard import ProductGuard
    from orchestrator.tools.protected import ProtectedChange
    from orchestrator.tools.sandbox import SandboxChoice


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
    notice: Callable[[str], None] = to_stderr
    #: Where the start's status and header lines go (model, workdir, sandbox, window).
    header: Callable[[str], None] = to_stderr
    #: Where the end of a turn (the plan, the answer in --quiet) goes; stderr in JSON modes.
    say: Callable[[str], None] = attrs.field(
        default=attrs.Factory(
            lambda self: to_stderr if self.options.machine_output else to_stdout, takes_self=True
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
    #: What the model's files may do later: git landing, protected files (issue 31).
    _guard: ProductGuard | None = None
    #: The protected changes the person was warned about (each counts towards exit code 3).
    protected_changes: tuple[ProtectedChange, ...] = ()
    _dropped_told: int = 0
    _trace: Trace | None = None
    _lock: SessionLock | None = None
    _run_id: str | None = None
    _loop: Loop | None = None
    _hooks: HookRunner | None = None
    _hook_refusals: tuple[HookRefusal, ...] = ()
    _hook_context: str = ""
    _first_round: int = 0
    _stale: int = 0
    #: Check commands already said to be broken (exit 126 or 127): said once each.
    _broken_checks: set[str] = attrs.Factory(set)

    def _approval_policy(self) -> ApprovalPolicy:
        mode = self.options.config.approval
        asker = None
        # Any mode may be asked: a PreToolUse hook's "ask" prompts even under --yes.
        if self.interactive:
            view, workdir = self.view, self.options.workdir

            def asker(tool: str, arguments: Mapping[str, Any]) -> Answer:
                with view.paused():
                    return ask_at_terminal(tool, arguments, workdir)

        return ApprovalPolicy(
            mode, asker, auto_approve=self.options.config.auto_approve, label=self.options.label
        )

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
                path = new_trace(options, run_id)
        except SessionError as error:
            raise SettingsError(str(error)) from None
        assert path is not None
        self.sandbox = session_sandbox(options, [path])
        label = options.label
        check_thinking(config, label)
        self._check_commands()
        if config.max_cost is not None and prices_for(config.model, config.price_per_mtok) is None:
            raise SettingsError(
                f"{given(label, 'max_cost', config.max_cost)}: the price of {config.model} is "
                "unknown, so the spend cannot be counted; set "
                f"{given(label, 'price_per_mtok', 'in,out,cache_read,cache_write')}"
            )
        if isinstance(self.model, LimitsSource):
            # The lookup is bounded (about 10 s), but a silent endpoint should not look hung.
            self.header(f"orchestrator: checking model {inert(config.model)}…")
        limits = model_limits(self.model, config, label)
        learned = resumed.learned_window if resumed is not None else None
        if learned is not None and learned < limits.max_input_tokens:
            # A refusal in this session proved the window smaller: the resumed run keeps to it.
            why = "a refusal earlier in this session named the real limit"
            limits = attrs.evolve(limits, max_input_tokens=learned, source="refusal", reason=why)
        settings = self._loop_settings(limits)
        try:
            secrets = [*secret_values(config), *mcp_secret_values(options.mcp_servers)]
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
        from orchestrator.tools.products.guard import ProductGuard

        self._guard = ProductGuard.create(self.sandbox.sandbox, log=self._trace.log.info)
        if self._guard.notice is not None:
            self.notice(f"orchestrator: {self._guard.notice}")
        self._loop = self._new_loop(settings, limits, self._hook_runner(run_id, path, secrets))
        return self._loop

    def _new_loop(self, settings: LoopSettings, limits: ModelLimits, hooks: HookRunner) -> Loop:
        """The loop, its tools, checks and context keeper wired, the hooks where they meet it."""
        config, resumed = self.options.config, self.resume_from
        assert self._trace is not None and self.sandbox is not None
        secrets = hooks.secrets
        registry = self._registry(secrets)
        tools: Tools = registry
        if hooks.has("PreToolUse") or hooks.has("PostToolUse"):
            tools = HookedTools(registry, hooks, approval=self.approval, log=self._trace.log)
        run_check = self._check_runner(secrets)
        # Checks run where the model's bash runs, on either kind of board.
        self.board.run_check = run_check
        # A check the model set on its own item runs only where its bash may (issue 31).
        self.board.vet_model_check = self._vet_model_check
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
                (lambda: hooks.run("PreCompact", {"trigger": "auto"}, "auto"))
                if hooks.has("PreCompact")
                else None
            ),
            budget=self._budget,
            setup={"sandbox": self.sandbox.sandbox.mode, "approval": config.approval},
            plan=self.board,
            log=self._trace.log,
            settings=settings,
            on_text=quiet_when_gone(self.view.on_text),
            conversation=self.conversation,
            label=self.options.label,
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
        """The session's hooks, started with ``SessionStart``; said when some may not run."""
        options = self.options
        assert self.sandbox is not None  # chosen in _open()
        for origin in options.hooks_untrusted:
            self.notice(
                f"orchestrator: the hooks in {inert(origin)} do not run: this folder is not "
                f"trusted (pass {given(options.label, 'trust', True)} to trust it"
                + (", or run `orchestrator trust`)" if options.label("trust") == "--trust" else ")")
            )
        for origin in dict.fromkeys(hook.origin for hook in options.hooks):
            line = skipped_line(options.hooks, origin)
            if line is not None:
                self.notice(f"orchestrator: {inert(line)}")
        self._hooks = runner = HookRunner(
            options.hooks,
            options.workdir,
            session_id=run_id,
            # Absolute: a hook runs in the work directory, not where --trace was typed.
            transcript_path=str(trace.absolute()),
            secrets=tuple(secrets),
            notice=self.notice,
            sandbox=self.sandbox.sandbox,
            approval=options.config.approval,
            trusted_files=options.hook_files,
        )
        runner.check_scripts()
        if runner.has("SessionStart"):
            source = "resume" if self.resume_from else "startup"
            started = runner.run("SessionStart", {"source": source}, source)
            self._hook_context = started.context
        return runner

    def _loop_settings(self, limits: ModelLimits) -> LoopSettings:
        """A new run's settings; a resumed run's as its trace had them, amended by the flags."""
        options, config = self.options, self.options.config
        if self.settings is not None:
            return attrs.evolve(
                self.settings, **model_settings(config, limits), settle_plan=self._settles(config)
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
            **model_settings(config, limits),
        )

    def _budget(self) -> str | None:
        """Why the session must stop now (--max-cost, --max-duration spent), or None."""
        if self.stop_when is not None and (why := self.stop_when()) is not None:
            return why
        config, label = self.options.config, self.options.label
        if config.max_cost is not None:
            spent = self.totals.cost(config.price_per_mtok, config.model)
            if spent is not None and spent >= config.max_cost:
                reached = given(label, "max_cost", config.max_cost)
                return f"it has spent {format_cost(spent)}, reaching {reached}"
        elapsed = self.totals.elapsed
        if config.max_duration is not None and elapsed >= config.max_duration:
            reached = given(label, "max_duration", config.max_duration)
            return f"it has run {elapsed:.0f} s, reaching {reached} s"
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
        return inert_line("orchestrator: " + " · ".join(parts))

    def _say_how_it_runs(self) -> None:
        """The one-line notices of a start: a sandbox fallback, the network, approvals."""
        options, config, label = self.options, self.options.config, self.options.label
        assert self.sandbox is not None
        if self.sandbox.warning is not None:
            self.notice(f"orchestrator: {relabel(self.sandbox.warning, label)}")
        if config.allow_network and not config.deny_bash:
            shown = self.sandbox.sandbox.describe()
            on = given(label, "allow_network", True)
            self.notice(f"orchestrator: network is on for bash ({on}); {shown}")
        notice = no_terminal_notice(
            config.approval,
            has_terminal=self.interactive,
            mcp=bool(options.mcp_servers),
            label=label,
        )
        if notice:
            self.notice(notice)
        self._say_unknown_servers()

    def _say_unknown_servers(self) -> None:
        """An ``auto_approve`` rule naming no configured MCP server: a typo, said once."""
        options, label = self.options, self.options.label
        servers = [tool_name_part(server.name) for server in options.mcp_servers]
        unknown = unknown_server_rules(options.config.auto_approve, servers)
        if not unknown:
            return
        rules = ", ".join(given(label, "auto_approve", rule) for rule in unknown)
        known = ", ".join(dict.fromkeys(servers)) if servers else "none"
        self.notice(
            inert(
                f"orchestrator: {rules}: no MCP server of that name is configured, so "
                f"{'it approves' if len(unknown) == 1 else 'they approve'} nothing; "
                f"the configured servers: {known}"
            )
        )

    def _check_commands(self) -> None:
        """A done-check or completion check whose program does not exist is a settings error."""
        options = self.options
        for name in ("done_check", "completion_check"):
            command = options.config.values.get(name)
            problem = command_problem(command, options.workdir) if command else None
            if problem is not None:
                raise SettingsError(
                    f"{options.label(name)} `{command}`: {problem}; fix the command"
                )

    def _say_if_broken(self, result: CheckResult) -> None:
        """A check bash could not run (126, 127) is the person's to fix: one line, once."""
        why = broken_command(result.exit_code, result.command)
        if why is None or result.command in self._broken_checks:
            return
        self._broken_checks.add(result.command)
        last = result.output.strip().splitlines()[-1:] or [""]
        said = f"; it said: {last[0]}" if last[0] else ""
        with self.view.paused():
            self.notice(
                inert(
                    f"orchestrator: ! the check `{result.command}` is a broken command, exit "
                    f"{result.exit_code}: {why}{said}"
                )
            )

    def _check_runner(self, secrets: Sequence[str]) -> Callable[[str], CheckResult]:
        """Checks run where the model's bash runs (the model may have written them)."""
        from orchestrator.tools.bash import BashTool
        from orchestrator.tools.secrets import redact, redactable

        assert self.sandbox is not None
        workdir = Workdir(self.options.workdir, confined=self.sandbox.sandbox.confined)
        bash = BashTool(workdir, sandbox=self.sandbox.sandbox, guard=self._guard)
        hidden = redactable(tuple(secrets))
        timeout = self.options.config.check_timeout

        def run(command: str) -> CheckResult:
            result = bash.run_check(command, timeout)
            result = attrs.evolve(result, output=redact(ToolResult(result.output), hidden).text)
            self._say_if_broken(result)
            return result

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

        trust = given(options.label, "trust", True)
        self.mcp = McpServers(
            options.mcp_servers,
            timeout=options.config.mcp_timeout,
            trusted=options.mcp_trusted,
            log=self._trace.log,
            label=options.label,
            workdir=options.workdir,
            trusted_files=options.hook_files,
            untrusted_hint=f"pass {trust}"
            + (
                ", answer yes when asked on a terminal, or run `orchestrator trust`"
                if trust == "--trust"
                else ""
            ),
        )
        self.mcp.open(notify)
        self.approval.server_of = self.mcp.server_of

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
        """Warn once about each protected change and each dropped git write (exit code 3)."""
        guard = self._guard
        if guard is None or self._trace is None:
            return
        guard.fresh_changes()
        root = self.options.workdir
        fresh = [change for change in guard.seen if change not in self.protected_changes]
        for change in fresh:
            # Every added line first: what the model put in is what runs later.
            summary = change.summary()
            shown = f": {inert(summary)}" if summary else ""
            self.notice(
                f"! {change.describe(root)}{shown}; review it before you run git or "
                "orchestrator here (exit code 3)"
            )
        self.protected_changes = (*self.protected_changes, *fresh)
        dropped = guard.dropped[self._dropped_told :]
        self._dropped_told = len(guard.dropped)
        if dropped:
            paths = list(dict.fromkeys(item.path for item in dropped))
            names = ", ".join(paths[:6])
            more = f" and {len(paths) - 6} more" if len(paths) > 6 else ""
            self.notice(
                f"orchestrator: bash's writes to {inert(names)}{more} were kept from the "
                "repository (dropped, or a git dir moved out of the work directory; only "
                "objects, refs, logs, the index and HEAD land); git.landed in the trace says why"
            )

    def _vet_model_check(self, command: str) -> str | None:
        """Why a check the model set on its own item may not run here, or None when it may.

        It is the model's command, so it runs only where the model's bash may: never with
        --deny-bash or --approval deny, and under ask only once a person says yes.
        """
        config = self.options.config
        if config.deny_bash:
            return (
                "this session has no bash (--deny-bash), so a check you set on your own item "
                'cannot run; remove it (check: "") or leave the item for the person'
            )
        verdict = self.approval("bash", {"command": command})
        if verdict is True:
            return None
        return str(getattr(verdict, "message", "")) or "refused"

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
        if self._guard is not None:
            self._guard.close()
        if self._hooks is not None and self._hooks.has("SessionEnd"):
            self._hooks.run("SessionEnd", {"reason": "other"}, "other")
        if self._hooks is not None:
            self._hook_refusals = tuple(self._hooks.refused)
        self._hooks = None
        if self.mcp is not None:  # before the trace: stopping may still log
            self.mcp.close()
        if isinstance(self.board, SharedBoard):
            self.board.close()
        elif self.options.config.board is not None:
            from orchestrator.board.json_file import release_board

            release_board(Path(self.options.config.board))
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def report_for(self, outcome: RunOutcome | None, interrupted_code: int) -> report.RunReport:
        status = outcome.status if outcome is not None else "chat"
        refused = (*self.approval.refused, *self._refused_hooks())
        unfinished = outcome.unfinished if outcome is not None else ()
        if status == "done" and isinstance(self.board, SharedBoard):
            # Others' items are theirs to settle; one this run still holds is not done (its
            # check failed, say), and its lease keeps it from everyone until it runs out.
            unfinished = (*unfinished, *(i for i in self.board.held if i not in unfinished))
        code = report.exit_code(
            status, len(refused) + len(self.protected_changes), interrupted_code, len(unfinished)
        )
        ended = report.RunReport(
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
        if code != report.EXIT_REFUSED:
            return ended
        # Exit 3 says why in the reason too (the JSON object's and the API's), in one line.
        root = self.options.workdir
        protected = [change.describe(root) for change in self.protected_changes]
        plan = ended.unfinished_line().removeprefix("! ") if ended.unfinished else ""
        plan = plan.removesuffix(f" (exit code {report.EXIT_REFUSED})")
        why = exit_3_reason(ended.refused, protected, plan)
        return attrs.evolve(ended, reason="; ".join(part for part in (ended.reason, why) if part))

    def _refused_hooks(self) -> list[RefusedAction]:
        """The hooks and MCP servers that did not run because of what they run.

        Each counts as a refusal (exit code 3).
        """
        refusals = self._hooks.refused if self._hooks is not None else self._hook_refusals
        servers = self.mcp.refused if self.mcp is not None else []
        return [
            *(
                RefusedAction(f"{refusal.event} hook", refusal.command, refusal.reason)
                for refusal in refusals
            ),
            *(RefusedAction("MCP server", name, reason) for name, reason in servers),
        ]

    def _registry(self, secrets: Sequence[str]) -> ToolRegistry:
        config = self.options.config
        assert self.sandbox is not None  # chosen in _open()
        sandbox = self.sandbox.sandbox
        bounds = sandbox.policy
        workdir = Workdir(
            self.options.workdir,
            confined=sandbox.confined,
            has_bash=not config.deny_bash,
            protected=bounds.protected,
            protect=bounds.protect,
            hidden=(*bounds.stores, *bounds.hidden),
        )
        tools: list[Tool] = list(
            standard_tools(workdir, bash=not config.deny_bash, sandbox=sandbox, guard=self._guard)
        )
        if self.board_tool:
            tools.append(TodoTool(self.board))
        if config.deny_bash:
            from orchestrator.list_files import ListFilesTool

            tools.append(ListFilesTool(workdir))  # without bash, the one way to look around
        tools.extend(self.extra_tools)
        tools.extend(configured_tools(config))
        policy = None if config.approval == "auto" else self.approval
        self._start_mcp()
        sources: list[ToolSource] = [] if self.mcp is None else [self.mcp]
        try:
            return ToolRegistry(tools, approver=policy, secrets=tuple(secrets), sources=sources)
        except ValueError as error:  # a tool of the caller's named like a built-in one
            raise SettingsError(f"tools: {error}") from None
