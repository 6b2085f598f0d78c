"""Reading traces back: check a run by re-driving fresh machines, and rebuild it to go on.

:func:`read_trace` checks a whole trace line by line and says clearly what is wrong with a bad
one; it keeps nothing but counts, and every reader after it streams the file again one line at a
time, so memory stays flat however long the trace is. :class:`Replay` feeds the recorded events
to a fresh plan board, repeat guard and loop machine (the real ones, with their real guards) and
compares what they emit with what was recorded, so an illegal edge, a missing reminder or a
reordered line is caught and named by its line number; it keeps only what the machines need (the
open tool calls, the events recorded since the last comparison). Each event name has its handler
in :attr:`Replay._handlers`, so a new event is one more entry there. :func:`rebuild` turns a
trace back into the conversation and plan of its run, for ``resume`` and replay models.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from orchestrator.context.follow import OVERFLOW_STOP, ConversationFollower, SummaryMissing
from orchestrator.conversation import Conversation
from orchestrator.guard import RepeatGuard
from orchestrator.hooks import PRE_TOOL_USE_BLOCKED, TASK_COMPLETED_HOOK
from orchestrator.loop import LOOP_TRANSITIONS, LoopMachine, LoopSettings, RunState
from orchestrator.plan import (
    ITEM_TRANSITIONS,
    PlanBoard,
    PlanConfigError,
    PlanItem,
    TodoTool,
    items_from_dicts,
    render_items,
    table_edges,
)
from orchestrator.protocols import CheckResult, JSONObject, ModelError, ModelTurn, PlanRecord
from orchestrator.tools import ToolRegistry
from orchestrator.trace_file import TraceError, TraceFile, TraceLine, read_trace

#: The events the machines emit, and the fields that must come out the same on replay.
_COMPARED: Mapping[str, tuple[str, ...]] = {
    "loop.transition": ("src", "dst", "trigger"),
    "plan.transition": ("item", "trigger", "src", "dst"),
    "plan.updated": ("revision", "items"),
    "plan.rejected": ("error",),
    "plan.check": ("item", "command", "exit_code"),
    "audit.reminder": ("round", "rounds_since_update"),
    "guard.blocked": ("name", "rule"),
    "context.cleared": ("blocks", "tokens_freed"),
    "context.compacted": ("tokens_before", "tokens_after", "messages_kept"),
}


_LEGAL_EDGES = {
    "loop.transition": frozenset(table_edges(LOOP_TRANSITIONS)),
    "plan.transition": frozenset(table_edges(ITEM_TRANSITIONS)),
}


@attrs.frozen
class Divergence:
    """Where replay and record part ways."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@attrs.define
class RoundSummary:
    """One row of the timeline table."""

    round: int
    tool_calls: int = 0
    completed: int = 0
    total: int = 0
    reminders: int = 0
    blocks: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0

    def as_dict(self) -> JSONObject:
        return attrs.asdict(self)


class _Collector:
    """An :class:`~orchestrator.protocols.EventLog` that keeps what the machines emit."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, JSONObject]] = []

    def info(self, event: str, *args: Any, **fields: Any) -> None:
        if event in _COMPARED:
            self.produced.append((event, fields))

    def plan_record(self, record: PlanRecord) -> None:
        self.info(record.event, **record.fields())


class Replay:
    """Re-drives fresh machines from a trace and compares, event by event.

    With ``timeline=False`` (``replay --check``) only the current round's row is kept.
    """

    def __init__(self, trace: TraceFile, *, timeline: bool = True) -> None:
        self.trace = trace
        self.timeline: list[RoundSummary] = []
        self._keep_timeline = timeline
        self._collector = _Collector()
        self._machine = LoopMachine()
        self._board: PlanBoard | FollowedBoard | None = None
        self._todo: ToolRegistry | None = None
        self._guard = RepeatGuard()
        self._run: RunState | None = None
        self._recorded: list[TraceLine] = []
        #: The checks the run recorded, not yet taken by the replayed board (never re-run).
        self._checks: list[TraceLine] = []
        self._calls: dict[str, tuple[str, Any, bool]] = {}
        #: The input a PreToolUse hook gave a call in place of the model's (``updatedInput``).
        self._updated: dict[str, Any] = {}
        # The conversation as the run had it, so the context tiers are re-derived, not read.
        self._follower: ConversationFollower | None = ConversationFollower(_board_from)
        self._follower.on_record = self._collector.plan_record

    def check(self) -> Divergence | None:
        """Replay every line; return the first divergence, or None when the trace holds."""
        previous: TraceLine | None = None
        for line in self.trace.events():
            divergence = _order_problem(previous, line) or self._fed(line)
            if divergence is not None:
                return divergence
            previous = line
        if self._calls:
            # Cut off mid-call (a killed run): what the open call emitted has no result to be
            # re-derived from, so it is left unchecked rather than called a divergence.
            return None
        return self._compare(self.trace.last.number)

    # -- one line ---------------------------------------------------------------------------

    def _fed(self, line: TraceLine) -> Divergence | None:
        try:
            return self._feed(line)
        except TraceError:
            raise
        except Exception as error:
            # A hand-edited field of the wrong type or shape: a bad file, named in one line.
            raise TraceError(_unreadable(self.trace.path, line.number, line.name, error)) from None

    def _feed(self, line: TraceLine) -> Divergence | None:
        name = line.name
        if name in _COMPARED:
            problem = _legality_problem(line)
            if problem is not None:
                return problem
            self._recorded.append(line)
            if name == "plan.check":
                self._checks.append(line)
        if self._follower is not None:
            try:
                self._follower.feed(line.event)
            except SummaryMissing as error:
                return Divergence(line.number, str(error))
            except Exception:
                # A conversation the trace cannot build (a line missing or out of order): the
                # machines' own checks name the problem; the context is no longer followed.
                self._follower = None
            if (
                self._follower is not None
                and self._follower.manager is None
                and name not in _MANAGER_STARTS
            ):
                # A run without a context keeper (no context.window after run.started) never
                # clears or compacts, so there is nothing to re-derive; following its whole
                # conversation would only make replay's memory grow with the trace.
                self._follower = None
        handler = self._handlers.get(name)
        return handler(self, line) if handler is not None else None

    def _context_over(self) -> bool:
        return self._follower is not None and self._follower.over_budget()

    def _on_run_started(self, line: TraceLine) -> Divergence | None:
        event = line.event
        if self._board is None:
            self._board = _board_at(event, self.trace, line.number)
            self._board.subscribe(self._collector.plan_record)
            # Through a registry, as in a run: a call it refuses never reaches the board.
            if isinstance(self._board, PlanBoard):
                self._todo = ToolRegistry([TodoTool(self._board)])
                self._board.run_check = self._recorded_check
                self._board.task_completed = self._recorded_hook_check
        if event.get("task") is None:
            self._guard = RepeatGuard()  # a resumed run starts with a fresh guard, as resume does
        settings = _settings_at(event, self.trace, line.number)
        self._run = RunState(
            settings,
            self._board,
            self._collector,
            lambda _text: None,
            self._context_over,
            round=int(event.get("first_round", 0)),
            rounds_since_update=int(event.get("rounds_since_update", 0)),
            seen_revision=self._board.revision,
        )
        self._machine.add_model(self._run)
        return None

    def _on_loop_transition(self, line: TraceLine) -> Divergence | None:
        run = self._require_run(line)
        trigger = str(line.event["trigger"])
        if trigger not in self._machine.events:
            return Divergence(line.number, f"loop trigger {trigger!r} does not exist")
        try:
            self._machine.fire(run, trigger)
        except Exception as error:  # MachineError: the trigger is not an edge from here
            return Divergence(line.number, f"loop trigger {trigger!r} is illegal: {error}")
        divergence = self._compare(line.number)
        if line.event["dst"] == "call_model" and trigger != "resend":
            done, total = self._board.progress if self._board is not None else (0, 0)
            if not self._keep_timeline:
                self.timeline.clear()
            self.timeline.append(RoundSummary(run.round, completed=done, total=total))
        return divergence

    def _on_model_response(self, line: TraceLine) -> Divergence | None:
        run = self._require_run(line)
        event = line.event
        run.turn = ModelTurn(tuple(event.get("content", ())), str(event.get("stop_reason")))
        if run.turn.stop_reason != OVERFLOW_STOP:
            run.overflowed = False
        if self.timeline:
            usage = event.get("usage") or {}
            row = self.timeline[-1]
            row.input_tokens += int(usage.get("input_tokens", 0))
            row.output_tokens += int(usage.get("output_tokens", 0))
            row.cache_read_tokens += int(usage.get("cache_read_input_tokens", 0))
        return None

    def _on_tool_call(self, line: TraceLine) -> Divergence | None:
        event = line.event
        name, arguments = str(event.get("name")), event.get("input")
        verdict = self._guard.check(name, arguments)
        if verdict is not None:
            self._collector.info("guard.blocked", name=name, rule=verdict.rule)
        self._calls[str(event.get("id"))] = (name, arguments, verdict is not None)
        if self.timeline:
            self.timeline[-1].tool_calls += 1
            self.timeline[-1].blocks += verdict is not None
        return None

    def _on_tool_result(self, line: TraceLine) -> Divergence | None:
        tool_id = str(line.event.get("id"))
        if tool_id not in self._calls:
            return Divergence(line.number, f"tool.result for {tool_id} has no tool.call before it")
        name, arguments, blocked = self._calls.pop(tool_id)
        ran_with = self._updated.pop(tool_id, arguments)  # the input the tool really got
        is_error = bool(line.event.get("is_error"))
        # A call a PreToolUse hook refused never reached its tool: there is nothing to re-apply.
        hooked = is_error and str(line.event.get("output", "")).startswith(PRE_TOOL_USE_BLOCKED)
        if not blocked:
            if name == "todo" and hooked:
                pass
            elif name == "todo" and isinstance(self._board, FollowedBoard):
                self._board.follow(self._recorded)
            elif name == "todo":
                assert self._todo is not None
                applied = not self._todo.dispatch(name, ran_with).is_error
                if applied == is_error:
                    state = "accepted" if applied else "rejected"
                    return Divergence(line.number, f"replay {state} the todo call {tool_id}")
            self._guard.record(name, arguments, is_error)
        if self.timeline and self._board is not None:
            self.timeline[-1].completed, self.timeline[-1].total = self._board.progress
        return self._compare(line.number)

    def _on_updated_input(self, line: TraceLine) -> Divergence | None:
        tool_id = str(line.event.get("id"))
        if tool_id not in self._calls:
            return Divergence(line.number, f"hook.updated_input for {tool_id} has no tool.call")
        self._updated[tool_id] = line.event.get("input")
        return None

    def _on_plan_updated(self, line: TraceLine) -> Divergence | None:
        if not line.event.get("reset"):
            return None  # compared when its todo call's tool.result arrives
        if self._board is None:
            return Divergence(line.number, "a plan reset before run.started")
        self._board.reset()
        return self._compare(line.number)

    def _recorded_check(self, command: str) -> CheckResult:
        """The recorded outcome of the next check: a check the run never recorded fails."""
        if not self._checks:
            return CheckResult(command, 1, "no plan.check was recorded for this completion")
        event = self._checks.pop(0).event
        return CheckResult(
            str(event.get("command", "")), int(event.get("exit_code", 1)), str(event.get("output"))
        )

    def _recorded_hook_check(self, item: JSONObject) -> CheckResult | None:
        """The recorded ``TaskCompleted`` hooks' outcome, when the run had such hooks."""
        upcoming = self._checks[0].event.get("command", "") if self._checks else ""
        if str(upcoming).startswith(TASK_COMPLETED_HOOK):
            return self._recorded_check(str(upcoming))
        return None

    def _on_done_check(self, line: TraceLine) -> Divergence | None:
        # The command is never run again: its recorded outcome decides the guard, as it did.
        run = self._require_run(line)
        event = line.event
        run.check = CheckResult(
            str(event.get("command", "")), int(event.get("exit_code", 1)), str(event.get("output"))
        )
        return None

    def _on_reminder(self, line: TraceLine) -> Divergence | None:
        if self.timeline:
            self.timeline[-1].reminders += 1
        return None

    def _on_run_finished(self, line: TraceLine) -> Divergence | None:
        divergence = self._compare(line.number)
        if self._run is not None:
            recorded = line.event.get("status")
            if divergence is None and recorded != self._run.state:
                divergence = Divergence(
                    line.number,
                    f"run.finished says {recorded!r} but the loop machine is in "
                    f"{self._run.state!r}",
                )
            self._machine.remove_model(self._run)
            self._run = None
        self._calls.clear()  # a call the run left open never gets its result now
        self._updated.clear()
        return divergence

    _handlers: Mapping[str, Callable[[Replay, TraceLine], Divergence | None]] = {
        "run.started": _on_run_started,
        "loop.transition": _on_loop_transition,
        "model.response": _on_model_response,
        "tool.call": _on_tool_call,
        "tool.result": _on_tool_result,
        "hook.updated_input": _on_updated_input,
        "audit.reminder": _on_reminder,
        "loop.done_check": _on_done_check,
        "plan.updated": _on_plan_updated,
        "run.finished": _on_run_finished,
    }

    def _require_run(self, line: TraceLine) -> RunState:
        if self._run is None:
            raise TraceError(f"{self.trace.path}:{line.number}: {line.name} before run.started")
        return self._run

    # -- comparison ---------------------------------------------------------------------------

    def _compare(self, at_line: int) -> Divergence | None:
        recorded, self._recorded = self._recorded, []
        produced, self._collector.produced = self._collector.produced, []
        for line, (name, fields) in zip(recorded, produced, strict=False):
            if line.name != name:
                return Divergence(
                    line.number,
                    f"replay expected {name} ({_summary(name, fields)}) here, "
                    f"the trace has {line.name} ({_summary(line.name, line.event)})",
                )
            for key in _COMPARED[name]:
                if fields.get(key) != line.event.get(key):
                    return Divergence(
                        line.number,
                        f"{name}: recorded {key}={line.event.get(key)!r}, "
                        f"replay gives {fields.get(key)!r}",
                    )
        if len(recorded) > len(produced):
            extra = recorded[len(produced)]
            return Divergence(
                extra.number,
                f"the trace has {extra.name} ({_summary(extra.name, extra.event)}) "
                "that replay did not produce",
            )
        if len(produced) > len(recorded):
            name, fields = produced[len(recorded)]
            return Divergence(
                at_line,
                f"replay produced {name} ({_summary(name, fields)}) that is missing from the trace",
            )
        return None


def check_trace(path: Path) -> Divergence | None:
    """What ``replay --check`` does: the first divergence of the trace at ``path``, or None."""
    return Replay(read_trace(path), timeline=False).check()


def _order_problem(previous: TraceLine | None, line: TraceLine) -> Divergence | None:
    if previous is None:
        return None
    same_run = previous.event.get("run_id") == line.event.get("run_id")
    before, seq = previous.event.get("seq"), line.event.get("seq")
    if (
        same_run
        and isinstance(before, int)
        and isinstance(seq, int)
        and seq != before + 1 + line.skipped_before
    ):
        return Divergence(
            line.number, f"seq {seq} follows seq {before}: lines are missing or out of order"
        )
    return None


def _legality_problem(line: TraceLine) -> Divergence | None:
    legal = _LEGAL_EDGES.get(line.name)
    if legal is None:
        return None
    edge = (str(line.event.get("src")), str(line.event.get("trigger")), str(line.event.get("dst")))
    if edge in legal:
        return None
    machine = "loop" if line.name == "loop.transition" else "item"
    src, trigger, dst = edge
    return Divergence(
        line.number, f"illegal edge {src} -{trigger}-> {dst}: not in the {machine} machine's table"
    )


def _summary(name: str, fields: Mapping[str, Any]) -> str:
    keys = _COMPARED.get(name, ())
    return ", ".join(f"{k}={fields.get(k)!r}" for k in keys if k != "items") or "…"


# --- rebuilding a run -------------------------------------------------------------------------


@attrs.frozen
class RebuiltRun:
    """What ``resume`` needs to go on: the conversation, the plan and the run's numbers."""

    conversation: Conversation
    board: PlanBoard | FollowedBoard
    settings: LoopSettings
    run_id: str
    last_seq: int
    last_round: int
    status: str | None
    task: str
    rounds_since_update: int = 0
    #: Which plan item each tool call's round worked on, for the resumed run's context keeper.
    owners: Mapping[str, str | None] = attrs.field(factory=dict)
    #: The window a refusal proved smaller than the Models API said (None: none did).
    learned_window: int | None = None


def rebuild(trace: TraceFile) -> RebuiltRun:
    """Turn a trace back into the conversation and the plan its run had at the end.

    The conversation is followed as the loop built it, cleared and compacted where the run was
    (:class:`~orchestrator.context.follow.ConversationFollower`), so resume goes on from there.
    """
    follower = ConversationFollower(_board_from)
    settings: LoopSettings | None = None
    last_round, status, task = 0, None, ""
    # The audit's staleness count, followed as RunState.on_enter_audit keeps it.
    stale, changed = 0, False
    number = 0
    learned: int | None = None
    try:
        for line in trace.events():
            event, name, number = line.event, line.name, line.number
            follower.feed(event)
            if name == "context.window" and event.get("source") == "refusal":
                window = event.get("window")
                learned = window if isinstance(window, int) else learned
            elif name == "run.started":
                settings = _settings_at(event, trace, number)
                stale, changed = int(event.get("rounds_since_update", 0)), False
                if "task" in event and event["task"] is not None:
                    task = str(event["task"])
                status = None
            elif name == "model.response":
                last_round = max(last_round, int(event.get("round", 0)))
            elif name == "loop.transition" and event.get("trigger") == "dispatched":
                stale, changed = (0 if changed else stale + 1), False
            elif name == "plan.updated":
                changed = True
            elif name == "run.finished":
                status = str(event.get("status"))
        follower.finish()
        if follower.board is None or settings is None:
            raise TraceError(f"{trace.path}: no run.started event; nothing to resume")
        last = trace.last
        number = last.number
        return RebuiltRun(
            conversation=follower.conversation,
            board=follower.board,
            settings=settings,
            run_id=str(last.event.get("run_id", "")),
            last_seq=int(last.event.get("seq", 0)),
            last_round=last_round,
            status=status,
            task=task,
            rounds_since_update=stale,
            owners=follower.manager.owners if follower.manager is not None else {},
            learned_window=learned,
        )
    except TraceError:
        raise
    except (SummaryMissing, PlanConfigError) as error:
        raise TraceError(f"{trace.path}:{number}: {error}") from None
    except Exception as error:
        # An edited or broken trace, which the machines refuse somewhere: say where, in one line.
        raise TraceError(_unreadable(trace.path, number, "", error)) from None


#: The lines between which a run's context keeper is set up (``context.window`` follows
#: ``run.started`` when the run has one).
_MANAGER_STARTS = frozenset({"run.started", "context.window"})


def _board_from(plan: Mapping[str, Any]) -> PlanBoard:
    """A fresh board as the run's ``run.started`` recorded it (limit, policy, loaded items)."""
    return PlanBoard.from_config(plan)


def _unreadable(path: Path, number: int, name: str, error: Exception) -> str:
    said = " ".join(str(error).split())
    what = f"this {name} line" if name else "here"
    return (
        f"{path}:{number}: the run cannot be followed from {what} "
        f"({type(error).__name__}{': ' + said if said else ''}); was the trace edited?"
    )


def _settings_at(event: Mapping[str, Any], trace: TraceFile, number: int) -> LoopSettings:
    settings = event.get("settings")
    try:
        if not isinstance(settings, Mapping):
            raise TypeError(f"expected an object, got {type(settings).__name__}")
        return LoopSettings(**settings)
    except (TypeError, ValueError) as error:
        raise TraceError(
            f"{trace.path}:{number}: run.started has no usable settings: {error}"
        ) from None


class FollowedBoard:
    """A shared board's run as its trace recorded it, followed rather than re-derived.

    Other agents' changes are not in the trace, so the board takes the recorded updates as
    they were, and replay checks what the trace alone decides: the loop, its audit, reminders.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = dict(config)
        self._items: tuple[PlanItem, ...] = ()
        self._revision = 0
        self._observers: list[Callable[[PlanRecord], None]] = []

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def is_empty(self) -> bool:
        return not self._items

    @property
    def config(self) -> JSONObject:
        return dict(self._config)

    @property
    def statuses(self) -> Mapping[str, str]:
        return {item.id: str(item.status) for item in self._items}

    @property
    def items(self) -> tuple[PlanItem, ...]:
        return self._items

    @property
    def progress(self) -> tuple[int, int]:
        return sum(item.status == "completed" for item in self._items), len(self._items)

    def render(self) -> str:
        return render_items(self._items)

    def subscribe(self, observer: Callable[[PlanRecord], None]) -> None:
        self._observers.append(observer)

    def reset(self) -> None:
        pass  # a shared board is never cleared

    def follow(self, recorded: Sequence[TraceLine]) -> None:
        """Take the plan records a todo call produced in the run as this board's own."""
        for line in recorded:
            if line.name == "plan.updated":
                self._items = items_from_dicts(line.event.get("items") or ())
                self._revision = int(line.event.get("revision", self._revision + 1))
            if line.name.startswith("plan."):
                record = _Echo(line.name, {k: v for k, v in line.event.items()})
                for observer in self._observers:
                    observer(record)


@attrs.frozen
class _Echo:
    """A recorded plan record, published again as it was."""

    event: str
    recorded: Mapping[str, Any]

    def fields(self) -> JSONObject:
        return {key: value for key, value in self.recorded.items() if key not in _ENVELOPE}


_ENVELOPE = frozenset({"event", "ts", "run_id", "seq", "level", "trace_format"})


def _board_at(event: Mapping[str, Any], trace: TraceFile, number: int) -> PlanBoard | FollowedBoard:
    plan = event.get("plan") or {}
    if isinstance(plan, Mapping) and plan.get("shared"):
        return FollowedBoard(plan)
    try:
        return _board_from(plan)
    except PlanConfigError as error:
        raise TraceError(f"{trace.path}:{number}: {error}") from None


class ReplayModel:
    """Plays a trace's recorded model responses, in order, as the model."""

    def __init__(self, trace: TraceFile) -> None:
        self._turns: Iterator[TraceLine] = (
            line for line in trace.events() if line.name == "model.response"
        )
        self._played = 0

    @property
    def name(self) -> str:
        return "replay"

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        line = next(self._turns, None)
        if line is None:
            raise ModelError(f"the trace has no more model responses (played {self._played})")
        self._played += 1
        event = line.event
        content, usage = event.get("content", ()), event.get("usage") or {}
        if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
            raise ModelError(f"line {line.number}: the recorded content is not a list of blocks")
        for block in content:
            problem = _block_problem(block)
            if problem:
                raise ModelError(f"line {line.number}: a recorded {problem}")
        if not isinstance(usage, dict):
            raise ModelError(f"line {line.number}: the recorded usage is not an object")
        turn = ModelTurn(
            content=tuple(content),
            stop_reason=str(event.get("stop_reason")),
            usage=dict(usage),
            model=str(event.get("model", "")),
        )
        if turn.text:
            on_text(turn.text)
        return turn


#: The string fields the Messages API always sends with each kind of content block.
_BLOCK_FIELDS: Mapping[str, tuple[str, ...]] = {
    "text": ("text",),
    "tool_use": ("id", "name"),
    "thinking": ("thinking", "signature"),
    "redacted_thinking": ("data",),
}


def _block_problem(block: Mapping[str, Any]) -> str | None:
    """What keeps a recorded block from being one the API could have sent, or None."""
    kind = block.get("type")
    if not isinstance(kind, str):
        return "content block has no type"
    for field in _BLOCK_FIELDS.get(kind, ()):
        if not isinstance(block.get(field), str):
            return f"{kind} block has no string {field!r}"
    if kind == "tool_use" and not isinstance(block.get("input"), dict):
        return "tool_use block's input is not an object"
    return None


class ResultComparer:
    """An event sink for ``run --replay-model``: says where a tool now answers differently."""

    def __init__(self, trace: TraceFile, report: Callable[[str], None]) -> None:
        # In recorded order: ids repeat across the parts of a resumed trace, the order does not.
        self._recorded: Iterator[str] = (
            str(line.event.get("output")) for line in trace.events() if line.name == "tool.result"
        )
        self._report = report
        self.differences = 0

    def __call__(self, event: Mapping[str, Any]) -> None:
        if event.get("event") != "tool.result":
            return
        recorded = next(self._recorded, None)
        now = str(event.get("output"))
        if recorded is not None and recorded != now:
            self.differences += 1
            self._report(
                f"tool result differs for {event.get('id')} ({event.get('name')}):\n"
                f"  recorded: {recorded!r}\n  now:      {now!r}"
            )
