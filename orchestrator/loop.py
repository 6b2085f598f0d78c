"""The loop machine: ``call_model → dispatch → audit`` round after round, a ``transitions`` model.

The edges are data (:data:`LOOP_TRANSITIONS`); which edge leaves ``audit`` is decided by named
guards (round limit, context over budget, stale plan), and the reminder is the ``remind``
callback of the stale edges. ``compact`` is where a :class:`~orchestrator.protocols.ContextKeeper`
clears and summarises; a request refused as too long goes there once (``overflow``) and is sent
again. The loop depends only on :mod:`orchestrator.protocols`; the CLI wires concrete parts in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from transitions import EventData, Machine

from orchestrator.context.window import window_from_refusal
from orchestrator.conversation import Conversation
from orchestrator.guard import RepeatGuard
from orchestrator.protocols import (
    CURRENT_CALL,
    CheckResult,
    ContextKeeper,
    ContextTooLong,
    EventLog,
    JSONObject,
    Model,
    ModelError,
    ModelTurn,
    Plan,
    PlanRecord,
    ToolResult,
    Tools,
)

LOOP_STATES = (
    "idle",
    "call_model",
    "dispatch",
    "audit",
    "compact",
    "done",
    "failed",
    "interrupted",
)
FINAL_LOOP_STATES = frozenset({"done", "failed", "interrupted"})

#: The loop machine's edges, as data. ``advance`` has four ordered, guarded edges out of audit;
#: ``compacted`` reminds on the way out of compact as ``advance`` would have, except on a retry.
LOOP_TRANSITIONS: tuple[Mapping[str, Any], ...] = (
    {"trigger": "start", "source": "idle", "dest": "call_model"},
    {
        "trigger": "use_tools",
        "source": "call_model",
        "dest": "dispatch",
        "conditions": "has_tool_calls",
    },
    {"trigger": "resend", "source": "call_model", "dest": "call_model"},
    # The model ended its turn: done only with the plan settled and the done-check passing.
    {
        "trigger": "finish",
        "source": "call_model",
        "dest": "call_model",
        "conditions": "unfinished_reminder_left",
        "unless": "plan_settled",
        "before": "remind_unfinished",
    },
    {
        "trigger": "finish",
        "source": "call_model",
        "dest": "call_model",
        "conditions": "done_check_retry_left",
        "unless": "done_check_passes",
        "before": "report_done_check",
    },
    {"trigger": "finish", "source": "call_model", "dest": "failed", "unless": "done_check_passes"},
    {"trigger": "finish", "source": "call_model", "dest": "done", "conditions": "plan_settled"},
    # Unsettled after its one reminder: the run ends, reporting the unfinished items (exit 3).
    {
        "trigger": "finish",
        "source": "call_model",
        "dest": "done",
        "conditions": "unfinished_reminded",
    },
    {
        "trigger": "overflow",
        "source": "call_model",
        "dest": "compact",
        "conditions": "overflow_retry_left",
    },
    {"trigger": "dispatched", "source": "dispatch", "dest": "audit"},
    {
        "trigger": "advance",
        "source": "audit",
        "dest": "failed",
        "conditions": "round_limit_reached",
    },
    {
        "trigger": "advance",
        "source": "audit",
        "dest": "compact",
        "conditions": "context_over_budget",
    },
    {
        "trigger": "advance",
        "source": "audit",
        "dest": "call_model",
        "conditions": "plan_is_stale",
        "before": "remind",
    },
    {"trigger": "advance", "source": "audit", "dest": "call_model"},
    {
        "trigger": "compacted",
        "source": "compact",
        "dest": "call_model",
        "conditions": "plan_is_stale",
        "unless": "retrying_overflow",
        "before": "remind",
    },
    {"trigger": "compacted", "source": "compact", "dest": "call_model"},
    {"trigger": "fail", "source": ["call_model", "dispatch", "audit", "compact"], "dest": "failed"},
    {
        "trigger": "interrupt",
        "source": ["idle", "call_model", "dispatch", "audit", "compact"],
        "dest": "interrupted",
    },
)

#: Which trigger each API stop reason fires from ``call_model``.
STOP_REASON_TRIGGERS: Mapping[str, str] = {
    "tool_use": "use_tools",
    "end_turn": "finish",
    "stop_sequence": "finish",
    "pause_turn": "resend",
    "max_tokens": "fail",
    "refusal": "fail",
    "model_context_window_exceeded": "overflow",
}

REMINDER_TAG = "<reminder>Update your todos.</reminder>"
#: How much of a failing done-check's output goes back to the model.
CHECK_OUTPUT_TAIL = 4000
#: With ``--compaction server`` the service compacts at this share of the window.
SERVER_COMPACT_SHARE = 0.6

DEFAULT_SYSTEM = (
    "You are a coding agent at {workdir}.\n"
    "Use the todo tool to plan multi-step tasks. Mark in_progress before starting, "
    "completed when done.\n"
    "Prefer tools over prose."
)


def reminder_text(rounds: int, plan: str) -> str:
    """The reminder: the seeds' tag, then how stale the plan is and the plan itself."""
    return f"{REMINDER_TAG}\nYour plan has not changed for {rounds} rounds:\n{plan}"


def unfinished_text(unfinished: list[str], done: int, total: int, plan: str) -> str:
    """The one reminder a turn that ends with the plan unsettled gets."""
    names = ", ".join(f"#{item_id}" for item_id in unfinished)
    return (
        f"<reminder>You ended your turn with the plan unfinished ({done}/{total} completed; "
        f"open: {names}). Finish those items, cancel them with a reason, or say why you stop."
        f"</reminder>\n{plan}"
    )


def output_tail(text: str, limit: int = CHECK_OUTPUT_TAIL) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


class LoopMachine(Machine):
    """The loop's one machine; each run of a :class:`Loop` is a model of it."""

    def __init__(self) -> None:
        super().__init__(
            model=None,
            states=list(LOOP_STATES),
            transitions=[dict(t) for t in LOOP_TRANSITIONS],
            initial="idle",
            auto_transitions=False,
            send_event=True,
            after_state_change="record_transition",
        )

    def fire(self, run: RunState, trigger: str) -> bool:
        return bool(self.events[trigger].trigger(run))


@attrs.frozen
class LoopSettings:
    """What a run is allowed and told; frozen, and changed with ``attrs.evolve``."""

    model: str
    system: str
    max_tokens: int = 8192
    max_rounds: int = 50
    reminder_threshold: int = 3
    trace_requests: bool = False
    workdir: str = ""
    # False for a run without a board (``orchestrator eval``'s no-board arm): never remind.
    reminders: bool = True
    context_window: int = 200_000
    compaction: str = "auto"
    thinking: str = "off"
    effort: str | None = None
    # Whether ``done`` needs the plan settled: a session's runs (CLI, API) set it; chat does not,
    # as a turn that leaves items open is normal there (the person speaks next).
    settle_plan: bool = False
    #: A command the run must pass before it may end ``done`` (``--done-check``).
    done_check: str | None = None
    done_check_retries: int = 3

    def __attrs_post_init__(self) -> None:
        for field in ("max_tokens", "max_rounds", "reminder_threshold", "context_window"):
            value = getattr(self, field)
            if value < 1:
                raise ValueError(f"{field} must be at least 1, got {value}")

    def request_options(self) -> JSONObject:
        """The request fields for thinking and effort (``--thinking``, ``--effort``)."""
        options: JSONObject = {}
        if self.thinking == "adaptive":
            options["thinking"] = {"type": "adaptive"}
        elif self.thinking != "off":
            options["thinking"] = {"type": "enabled", "budget_tokens": int(self.thinking)}
        if self.effort is not None:
            options["output_config"] = {"effort": self.effort}
        if self.compaction == "server":
            # The server compacts first; the client-side tiers stay behind it as the fallback.
            trigger = {
                "type": "input_tokens",
                "value": int(SERVER_COMPACT_SHARE * self.context_window),
            }
            options["context_management"] = {
                "edits": [{"type": "compact_20260112", "trigger": trigger}]
            }
        return options


@attrs.frozen
class RunOutcome:
    """How a run ended: ``status`` is the loop's final state."""

    status: str
    rounds: int
    reason: str = ""
    text: str = ""
    #: The items a ``done`` run left neither completed nor cancelled (exit code 3).
    unfinished: tuple[str, ...] = ()


@attrs.define(slots=False, eq=False)
class RunState:
    """The model the loop machine drives for one run: counters the guards read.

    It needs only the settings, the plan, an event log and a place to put the reminder, so
    replay can re-drive it against a fresh plan without a conversation or a model.
    """

    settings: LoopSettings
    plan: Plan
    log: EventLog
    add_reminder: Callable[[str], None]
    context_over: Callable[[], bool] = lambda: False
    state: str = "idle"
    round: int = 0
    rounds_since_update: int = 0
    seen_revision: int = 0
    turn: ModelTurn | None = None
    reason: str = ""
    # True from a refusal as too long until a response comes back: one compaction, one retry.
    overflowed: bool = False
    #: Starts a new user message (the unfinished reminder, a failed done-check's report).
    add_message: Callable[[str], None] = lambda _text: None
    reminded_unfinished: bool = False
    done_check_failures: int = 0
    #: The done-check run for this turn's end: None when none ran (none set, or not yet due).
    check: CheckResult | None = None

    # Guards named in LOOP_TRANSITIONS; side-effect free.
    def has_tool_calls(self, event: EventData) -> bool:
        return self.turn is not None and bool(self.turn.tool_uses)

    def round_limit_reached(self, event: EventData) -> bool:
        return self.round >= self.settings.max_rounds

    def plan_is_stale(self, event: EventData) -> bool:
        threshold = self.settings.reminder_threshold
        if not self.settings.reminders or self.plan.is_empty:
            return False
        return self.rounds_since_update >= threshold

    def context_over_budget(self, event: EventData) -> bool:
        return self.context_over()

    def overflow_retry_left(self, event: EventData) -> bool:
        return not self.overflowed

    def retrying_overflow(self, event: EventData) -> bool:
        return self.overflowed

    def plan_settled(self, event: EventData) -> bool:
        return not self.settings.settle_plan or not self.unfinished()

    def unfinished_reminder_left(self, event: EventData) -> bool:
        return not self.reminded_unfinished

    def unfinished_reminded(self, event: EventData) -> bool:
        return self.reminded_unfinished

    def done_check_passes(self, event: EventData) -> bool:
        return self.check is None or self.check.passed

    def done_check_retry_left(self, event: EventData) -> bool:
        return self.done_check_failures < self.settings.done_check_retries

    def unfinished(self) -> list[str]:
        """The ids of the items neither completed nor cancelled."""
        return [
            item_id
            for item_id, status in self.plan.statuses.items()
            if status not in ("completed", "cancelled")
        ]

    # Callbacks: the side effects.
    def on_enter_call_model(self, event: EventData) -> None:
        self.check = None
        if event.event.name == "resend" or (event.event.name == "compacted" and self.overflowed):
            return  # the same round, asked again
        self.round += 1

    def on_enter_compact(self, event: EventData) -> None:
        if event.event.name == "overflow":
            self.overflowed = True

    def on_enter_audit(self, event: EventData) -> None:
        revision = self.plan.revision
        changed, self.seen_revision = revision != self.seen_revision, revision
        self.rounds_since_update = 0 if changed else self.rounds_since_update + 1

    def on_enter_failed(self, event: EventData) -> None:
        if event.event.name == "advance":
            self.reason = f"stopped after {self.round} rounds (--max-rounds); raise it to go on"
        elif event.event.name == "finish" and self.check is not None:
            self.reason = (
                f"the done-check `{self.check.command}` still failed (exit "
                f"{self.check.exit_code}) after {self.done_check_failures + 1} attempt(s) "
                "(--done-check-retries)"
            )

    def remind_unfinished(self, event: EventData) -> None:
        self.reminded_unfinished = True
        unfinished = self.unfinished()
        statuses = self.plan.statuses
        done = sum(status == "completed" for status in statuses.values())
        plan = self.plan.render()
        self.add_message(unfinished_text(unfinished, done, len(statuses), plan))
        self.log.info(
            "audit.reminder",
            round=self.round,
            rounds_since_update=self.rounds_since_update,
            reason="unfinished",
            unfinished=unfinished,
            plan=plan,
        )

    def report_done_check(self, event: EventData) -> None:
        assert self.check is not None
        self.done_check_failures += 1
        self.add_message(
            f"The done-check `{self.check.command}` failed with exit code "
            f"{self.check.exit_code}, so the run cannot end yet (attempt "
            f"{self.done_check_failures} of {self.settings.done_check_retries}). Fix the cause "
            f"and end your turn again.\nOutput (tail):\n{output_tail(self.check.output)}"
        )

    def remind(self, event: EventData) -> None:
        plan = self.plan.render()
        self.add_reminder(reminder_text(self.rounds_since_update, plan))
        self.log.info(
            "audit.reminder",
            round=self.round,
            rounds_since_update=self.rounds_since_update,
            threshold=self.settings.reminder_threshold,
            plan=plan,
        )

    def record_transition(self, event: EventData) -> None:
        assert event.transition is not None
        self.log.info(
            "loop.transition",
            src=event.transition.source,
            dst=event.transition.dest,
            trigger=event.event.name,
            round=self.round,
        )


class Loop:
    """Runs tasks through the machine; the conversation and plan persist across runs (chat)."""

    def __init__(
        self,
        *,
        model: Model,
        tools: Tools,
        plan: Plan,
        log: EventLog,
        settings: LoopSettings,
        guard: RepeatGuard | None = None,
        on_text: Callable[[str], None] = lambda _text: None,
        conversation: Conversation | None = None,
        context: ContextKeeper | None = None,
        run_check: Callable[[str], CheckResult] | None = None,
        budget: Callable[[], str | None] | None = None,
        stop_check: Callable[[int], CheckResult | None] | None = None,
        before_compact: Callable[[], object] | None = None,
        setup: JSONObject | None = None,
    ) -> None:
        self.model, self.tools, self.plan, self.log = model, tools, plan, log
        #: What the session adds to ``run.started`` about how it runs (sandbox, approval).
        self.setup = dict(setup or {})
        #: Says why the run must end now (a cost or time budget spent); asked between rounds.
        self.budget = budget
        #: The ``Stop`` hooks, a done-check after the command one (given the failures so far).
        self.stop_check = stop_check
        #: The ``PreCompact`` hooks, told before the conversation is compacted.
        self.before_compact = before_compact
        #: Runs a check command where bash runs (the done-check).
        self.run_check = run_check
        self.settings = settings
        self.context = context
        self.guard = guard if guard is not None else RepeatGuard()
        self.on_text = on_text
        self.conversation = conversation if conversation is not None else Conversation()
        self._machine = LoopMachine()
        plan.subscribe(self._log_plan_record)

    def run(
        self, task: str | None, *, first_round: int = 0, rounds_since_update: int = 0
    ) -> RunOutcome:
        """Run one task to ``done``, ``failed`` or ``interrupted``.

        With ``task`` None the run resumes the conversation as it stands, numbering rounds on
        from ``first_round`` and counting the plan stale from ``rounds_since_update``.
        """
        run = RunState(
            self.settings,
            self.plan,
            self.log,
            self.conversation.append_text_to_last_user,
            self._context_over,
            round=first_round,
            rounds_since_update=rounds_since_update,
            seen_revision=self.plan.revision,
            add_message=self.conversation.add_user_text,
        )
        self._machine.add_model(run)
        self.log.info(
            "run.started",
            task=task,
            model=self.model.name,
            settings=attrs.asdict(self.settings),
            plan=self.plan.config,
            first_round=first_round,
            rounds_since_update=rounds_since_update,
            **self.setup,
        )
        if self.context is not None:
            self.log.info("context.window", model=self.settings.model, **self.context.description)
        if task is not None:
            self.conversation.add_user_text(task)
        else:
            self.conversation.prepare_to_resume()
        try:
            self._machine.fire(run, "start")
            while run.state not in FINAL_LOOP_STATES:
                self._step(run)
        except KeyboardInterrupt as stop:
            # A stop signal arrives as a KeyboardInterrupt that names itself (SIGTERM, SIGHUP).
            run.reason = str(stop) or "interrupted by the user"
            self._machine.fire(run, "interrupt")
        finally:
            self._machine.remove_model(run)
        text = run.turn.text if run.turn is not None else ""
        unfinished = tuple(run.unfinished()) if run.state == "done" else ()
        outcome = RunOutcome(
            run.state, run.round, run.reason, text, unfinished if run.settings.settle_plan else ()
        )
        self.log.info("run.finished", status=outcome.status, rounds=run.round, reason=run.reason)
        return outcome

    def _step(self, run: RunState) -> None:
        if run.state == "call_model":
            self._call_model(run)
        elif run.state == "dispatch":
            self._dispatch(run)
        elif run.state == "compact":
            self._compact(run)
        else:
            spent = self.budget() if self.budget is not None else None
            if spent is None:
                self._machine.fire(run, "advance")
                return
            # Outside the machine's own state, like a model error: replay follows the record.
            run.reason = f"the run was stopped: {spent}"
            self._machine.fire(run, "fail")

    def _call_model(self, run: RunState) -> None:
        request = self.conversation.request(
            model=self.settings.model,
            system=self.settings.system,
            tools=self.tools.schemas,
            max_tokens=self.settings.max_tokens,
            options=self.settings.request_options(),
        )
        sizes = self.conversation.summary(request)
        summary: JSONObject = {
            "round": run.round,
            "messages": sizes.messages,
            "cache_breakpoints": sizes.cache_breakpoints,
            "bytes": sizes.bytes,
        }
        fixed = 0
        if self.context is not None:
            summary["fixed_tokens"] = fixed = self.context.fixed_tokens(request)
        if self.settings.trace_requests:
            summary["body"] = request
        self.log.info("model.request", **summary)
        try:
            run.turn = self.model.respond(request, self.on_text)
        except ContextTooLong as error:
            self._overflow(run, str(error), window_from_refusal(str(error)))
            return
        except ModelError as error:
            run.reason = str(error)
            self._machine.fire(run, "fail")
            return
        turn = run.turn
        share: JSONObject = {}
        if self.context is not None:
            share = {"context_tokens": turn.input_tokens, "context_window": self.context.window}
        self.log.info(
            "model.response",
            round=run.round,
            stop_reason=turn.stop_reason,
            content=list(turn.content),
            usage=dict(turn.usage),
            model=turn.model,
            **share,
        )
        if self.context is not None:
            self.context.observe(self.conversation.messages, fixed, turn.usage)
        trigger = STOP_REASON_TRIGGERS.get(turn.stop_reason, "fail")
        if trigger == "overflow":
            # The answer was cut off by the window: it is dropped, and the round asked again.
            # What it read and wrote before the window stopped it is the window's size.
            reached = turn.input_tokens + int(turn.usage.get("output_tokens", 0)) or None
            self._overflow(run, f"the model stopped with {turn.stop_reason}", reached)
            return
        run.overflowed = False
        self.conversation.add_assistant(turn.content)
        if trigger == "fail":
            run.reason = _stop_reason_message(turn.stop_reason, self.settings.max_tokens)
        if trigger == "finish" or not self._machine.fire(run, trigger):
            self._done_check(run)
            self._machine.fire(run, "finish")

    def _done_check(self, run: RunState) -> None:
        """Run the done-checks when the turn could otherwise end (the plan settled, or reminded).

        The command (``--done-check``) first, then the ``Stop`` hooks; the first that fails
        decides, and replay reads the last one recorded.
        """
        command = self.settings.done_check
        if command is None and self.stop_check is None:
            return
        if run.settings.settle_plan and run.unfinished() and not run.reminded_unfinished:
            return  # the unfinished reminder comes first
        if command is not None and self.run_check is not None:
            self._record_done_check(run, self.run_check(command))
            if run.check is not None and not run.check.passed:
                return
        hooked = self.stop_check(run.done_check_failures) if self.stop_check else None
        if hooked is not None:
            self._record_done_check(run, hooked)

    def _record_done_check(self, run: RunState, check: CheckResult) -> None:
        run.check = check
        self.log.info(
            "loop.done_check",
            round=run.round,
            command=check.command,
            exit_code=check.exit_code,
            passed=check.passed,
            attempt=run.done_check_failures + 1,
            duration_s=round(check.duration_s, 3),
            output=output_tail(check.output),
        )

    def _context_over(self) -> bool:
        return self.context is not None and self.context.over_budget(self.conversation.messages)

    def _overflow(self, run: RunState, why: str, window: int | None = None) -> None:
        context = self.context
        if window is not None and context is not None and context.learn_window(window, why):
            # The advertised window was wrong: from now on the run keeps under the real one, so
            # ordinary clearing does the work and this is the run's last refusal.
            self.log.info(
                "context.window",
                round=run.round,
                model=self.settings.model,
                **context.description,
            )
        managed = context is not None and context.managing
        if managed and self._machine.fire(run, "overflow"):
            return
        run.reason = (
            f"the request is still too long for the model's context window after compacting "
            f"({why}); lower --context-window or start a fresh run with the plan"
            if run.overflowed
            else f"the request is too long for the model's context window ({why})"
        )
        self._machine.fire(run, "fail")

    def _compact(self, run: RunState) -> None:
        assert self.context is not None
        context, model = self.context, self.model
        if self.before_compact is not None:
            self.before_compact()

        def summarize(request: JSONObject) -> str:
            return model.respond(request, lambda _text: None).text

        try:
            messages, records = context.shrink(
                self.conversation.messages, self.plan, summarize, force=run.overflowed
            )
        except ModelError as error:
            run.reason = f"compacting the conversation failed: {error}"
            self._machine.fire(run, "fail")
            return
        self.conversation.replace(messages)
        for record in records:
            self.log.info(record.event, round=run.round, **record.fields())
        self._machine.fire(run, "compacted")

    def _dispatch(self, run: RunState) -> None:
        assert run.turn is not None
        results: list[JSONObject] = []
        answered: set[str] = set()
        for block in run.turn.tool_uses:
            if block["id"] in answered:
                continue  # one tool_result per id: a duplicated id cannot be answered twice
            answered.add(block["id"])
            results.append(self._run_tool(run, block))
        self.conversation.add_tool_results(results)
        if self.context is not None:
            self.context.tag_round(self.conversation.messages, self.plan)
        self._machine.fire(run, "dispatched")

    def _run_tool(self, run: RunState, block: JSONObject) -> JSONObject:
        name, arguments, tool_id = str(block.get("name")), block.get("input"), block["id"]
        self.log.info("tool.call", round=run.round, id=tool_id, name=name, input=arguments)
        started = time.perf_counter()
        verdict = self.guard.check(name, arguments)
        if verdict is not None:
            self.log.info(
                "guard.blocked", round=run.round, id=tool_id, name=name, rule=verdict.rule
            )
            result = ToolResult(verdict.message, is_error=True)
            text = result.text
        else:
            called = CURRENT_CALL.set(str(tool_id))
            try:
                result = self.tools.dispatch(name, arguments)
            finally:
                CURRENT_CALL.reset(called)
            text = result.text + self.guard.record(name, arguments, result.is_error)
        is_error = result.is_error
        seconds = result.duration_s
        extra: dict[str, Any] = {} if result.exit_code is None else {"exit_code": result.exit_code}
        if result.diff:
            extra["diff"] = result.diff
        self.log.info(
            "tool.result",
            round=run.round,
            id=tool_id,
            name=name,
            is_error=is_error,
            output=text,
            duration_ms=round(
                (time.perf_counter() - started if seconds is None else seconds) * 1000, 3
            ),
            **extra,
        )
        return {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": text,
            "is_error": is_error,
        }

    def _log_plan_record(self, record: PlanRecord) -> None:
        self.log.info(record.event, **record.fields())


def _stop_reason_message(stop_reason: str, max_tokens: int) -> str:
    if stop_reason == "max_tokens":
        return f"the model hit max_tokens ({max_tokens}) mid-answer; raise --max-tokens and resume"
    if stop_reason == "refusal":
        return "the model refused to continue (stop_reason=refusal)"
    return f"the model stopped with an unknown stop_reason {stop_reason!r}"
