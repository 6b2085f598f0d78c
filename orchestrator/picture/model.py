"""The page's data, read from a trace in one streaming pass: what happened, when, and its cost.

A *round* here is a column of the page: one round number of one run in the trace (a trace
holds several runs after ``resume`` or in ``chat``, and a run's rounds may start again at 1).
Events without a round number (plan changes, context clearing) belong to the column of the
last event that had one, as ``show`` assigns them. Each plan item is a *lane*: its state at
the end of every round, kept as segments (a state and the columns it held), so a lane costs
its changes, not the trace's length. *Markers* are what a person looks for on the lanes:
rejected updates, reminders, checks, blocked calls, context clearings and compactions, and a
window a refusal taught. The events are read with :mod:`orchestrator.trace_file`, which
``show`` and ``replay`` use, and the machines' edges are counted with
:class:`orchestrator.diagram.EdgeCounts`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from orchestrator.approval import is_refusal
from orchestrator.diagram import EdgeCounts
from orchestrator.pricing import USAGE_KEYS, Prices, UsageTotals, cost_of, prices_for
from orchestrator.report import exit_code
from orchestrator.trace_file import TraceFile, TraceLine
from orchestrator.transcript import tool_verdict

#: The lane states: an item's status, and ``blocked`` for a pending item waiting on another.
LANE_STATES = ("pending", "blocked", "in_progress", "completed", "cancelled")
_FINISHED = frozenset({"completed", "cancelled"})


@attrs.frozen
class ToolCall:
    """One tool call of a round: what was asked, how it ended, and its whole output."""

    id: str
    name: str
    input: Any
    #: ``ok``, ``error``, ``exit N``, ``blocked`` (the repeat guard), ``refused`` (approval),
    #: or ``no result`` (the trace stops before one).
    status: str
    ok: bool
    duration_ms: float | None = None
    output: str = ""
    diff: str | None = None
    #: The hook that rewrote the call's input (``input`` is then what ran), or None.
    hook: str | None = None
    #: What the model asked, when a hook rewrote it.
    asked: Any = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "input": self.input,
            "status": self.status,
            "ok": self.ok,
            "duration_ms": self.duration_ms,
            "output": self.output,
            "diff": self.diff,
            "hook": self.hook,
            "asked": self.asked,
        }


@attrs.frozen
class Round:
    """One column: a round of one run, its tokens, cost, context and tool calls."""

    index: int
    run: int
    number: int
    line: int
    ts: str = ""
    usage: Mapping[str, int] = attrs.field(factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    cost: float | None = None
    context_tokens: int | None = None
    context_window: int | None = None
    stop_reason: str = ""
    text: str = ""
    calls: tuple[ToolCall, ...] = ()


@attrs.frozen
class Segment:
    """A lane's state over the columns ``start`` up to (not including) ``end``."""

    state: str
    start: int
    end: int


@attrs.frozen
class Lane:
    """One plan item over the run: its id, its latest text, its states."""

    key: str
    item: str
    text: str
    segments: tuple[Segment, ...]

    @property
    def final(self) -> str:
        return self.segments[-1].state if self.segments else "pending"


@attrs.frozen
class Marker:
    """Something a person looks for at a round: a reminder, a rejected update, a check.

    ``lane`` is the key of the item's lane when the event names an item; ``ok`` says how a
    check ended.
    """

    kind: str
    round: int
    text: str
    line: int
    lane: str | None = None
    ok: bool | None = None


@attrs.frozen
class Header:
    """The facts at the top of the page."""

    run_id: str
    trace: str
    task: str
    #: The model the run asked for (``settings.model``; each, for runs that asked for others).
    model: str
    status: str
    exit_code: int | None
    rounds: int
    runs: int
    usage: Mapping[str, int]
    cost: float | None
    started: str
    finished: str
    #: The runs' own durations summed (``run.started`` to ``run.finished``, or to the run's last
    #: event), so the time between a run and its resumption is not counted.
    wall_seconds: float | None
    #: Recorded in ``run.started`` since the page was added; older traces say "not recorded".
    sandbox: str | None
    approval: str | None
    window: int | None
    reason: str = ""
    shared_board: str | None = None
    agent: str | None = None
    #: The models that served the answers (``model.response``) where they differ from ``model``.
    served: tuple[str, ...] = ()
    #: Which client ran it (``run.started``'s ``model``: ``anthropic``, ``scripted:NAME``).
    client: str = ""
    #: From the first event to the last: the wall time plus any idle time between runs.
    span_seconds: float | None = None


@attrs.frozen
class Stop:
    """Where the trace ends, and whether that is where its run ended."""

    line: int
    seq: int | None
    complete: bool
    note: str


@attrs.frozen
class RunPicture:
    """Everything the page shows about one trace."""

    header: Header
    rounds: tuple[Round, ...]
    lanes: tuple[Lane, ...]
    markers: tuple[Marker, ...]
    #: Per machine, each edge fired: ``(src, trigger, dst, alternative, times)`` (see
    #: :meth:`~orchestrator.diagram.EdgeCounts.fired`).
    machines: Mapping[str, Sequence[tuple[str, str, str, str, int]]]
    counts: EdgeCounts
    stop: Stop
    #: Lines whose fields had a shape the page could not draw (a hand-edited trace).
    skipped: tuple[int, ...] = ()


def read_picture(trace: TraceFile, prices: Prices | None = None) -> RunPicture:
    """The page's data from a checked trace (``read_trace``), read in one pass.

    ``prices`` overrides the price table, as ``sessions`` takes it from the configuration.
    """
    builder = _Builder(trace, prices)
    for line in trace.events():
        handler = _HANDLERS.get(line.name)
        try:
            # Every event: the counts read reminders, done-checks and the plan to tell edges apart.
            builder.counts.feed(line.event)
            if handler is not None:
                handler(builder, line)
        except (TypeError, ValueError, AttributeError, KeyError):
            builder.skipped.append(line.number)
    return builder.finish()


class _Builder:
    """The state of the one pass: the open column, the lanes' open segments, the totals."""

    def __init__(self, trace: TraceFile, prices: Prices | None) -> None:
        self.trace = trace
        self.prices = prices
        self.totals = UsageTotals()
        self.counts = EdgeCounts()
        self.rounds: list[dict[str, Any]] = []
        self.markers: list[Marker] = []
        self.skipped: list[int] = []
        self.runs = 0
        self.run_id = ""
        self.task = ""
        self.client = ""
        self.models: dict[str, None] = {}  # asked for, in order
        self.served: dict[str, None] = {}  # served, in order
        self.status = ""
        self.reason = ""
        self.settings: Mapping[str, Any] = {}
        self.sandbox: str | None = None
        self.approval: str | None = None
        self.window: int | None = None
        self.shared: str | None = None
        self.agent: str | None = None
        self.first_ts = ""
        self.last_ts = ""
        self.previous_ts = ""  # the last timestamp before the event being read
        self.run_started_ts: str | None = None  # the open run's start
        self.run_seconds: float | None = 0.0  # the closed runs' durations (None: unknown)
        self.refused = 0
        self._round_key: tuple[int, int] | None = None
        self._calls: dict[str, dict[str, Any]] = {}
        self._blocked: set[str] = set()
        # Lanes: key -> [item id, text, closed segments, open state, open start].
        self._lanes: dict[str, list[Any]] = {}
        self._live: dict[str, str] = {}  # item id -> the key of its lane now
        self._generation = 0

    # -- columns ------------------------------------------------------------------------------

    @property
    def column(self) -> int:
        """The column events without a round belong to (0 before the first round)."""
        return max(len(self.rounds) - 1, 0)

    def _enter_round(self, line: TraceLine) -> None:
        number = line.event.get("round")
        if not isinstance(number, int) or isinstance(number, bool):
            return
        key = (self.runs, number)
        if key == self._round_key:
            return
        self._round_key = key
        self.rounds.append(
            {
                "run": max(self.runs - 1, 0),
                "number": number,
                "line": line.number,
                "ts": str(line.event.get("ts", "")),
                "usage": dict.fromkeys(USAGE_KEYS, 0),
                "cost": 0.0,
                "context_tokens": None,
                "context_window": None,
                "stop_reason": "",
                "text": [],
                "calls": [],
            }
        )

    def _mark(self, kind: str, line: TraceLine, text: str, **fields: Any) -> None:
        self.markers.append(Marker(kind, self.column, text, line.number, **fields))

    # -- lanes --------------------------------------------------------------------------------

    def _set_state(self, item: str, state: str, text: str | None) -> None:
        key = self._live.get(item)
        if key is None:
            key = item if self._generation == 0 else f"{item}@{self._generation}"
            self._live[item] = key
            self._lanes[key] = [item, text or "", [], state, self.column]
            return
        lane = self._lanes[key]
        if text:
            lane[1] = text
        if lane[3] == state:
            return
        if lane[4] < self.column:
            lane[2].append(Segment(lane[3], lane[4], self.column))
            lane[4] = self.column
        elif lane[2] and lane[2][-1].state == state:
            # Back in the state it held before this column: one segment, as if never left.
            last = lane[2].pop()
            lane[4] = last.start
        lane[3] = state

    def _end_lane(self, item: str) -> None:
        key = self._live.pop(item, None)
        if key is None:
            return
        lane = self._lanes[key]
        lane[2].append(Segment(lane[3], lane[4], max(self.column, lane[4] + 1)))
        lane[3] = None

    def lanes(self, end: int) -> tuple[Lane, ...]:
        built = []
        for key, (item, text, closed, state, start) in self._lanes.items():
            segments = list(closed)
            if state is not None:
                segments.append(Segment(state, start, max(end, start + 1)))
            built.append(Lane(key, item, text, tuple(segments)))
        return tuple(built)

    def finish(self) -> RunPicture:
        rounds = tuple(_round(index, data) for index, data in enumerate(self.rounds))
        lanes = self.lanes(len(rounds))
        header = self._header(rounds, lanes)
        return RunPicture(
            header=header,
            rounds=rounds,
            lanes=lanes,
            markers=tuple(self.markers),
            machines=self.counts.fired(),
            counts=self.counts,
            stop=self._stop(rounds),
            skipped=tuple(self.skipped),
        )

    def _header(self, rounds: Sequence[Round], lanes: Sequence[Lane]) -> Header:
        status = self.status or "unfinished"
        code: int | None = None
        if self.status:
            unfinished = 0
            if self.status == "done" and self.settings.get("settle_plan", True):
                unfinished = sum(lane.final not in _FINISHED for lane in lanes if lane.segments)
            code = exit_code(self.status, self.refused, unfinished=unfinished)
        return Header(
            run_id=self.run_id,
            trace=str(self.trace.path),
            task=self.task,
            model=", ".join(self.models) or self.client,
            status=status,
            exit_code=code,
            rounds=len(rounds),
            runs=self.runs,
            usage=dict(self.totals.usage),
            cost=self.totals.cost(self.prices, str(self.settings.get("model", ""))),
            started=self.first_ts,
            finished=self.last_ts,
            wall_seconds=self._wall_seconds(),
            sandbox=self.sandbox,
            approval=self.approval,
            window=self.window,
            reason=self.reason,
            shared_board=self.shared,
            agent=self.agent,
            served=tuple(model for model in self.served if model not in self.models),
            client=self.client,
            span_seconds=_seconds_between(self.first_ts, self.last_ts),
        )

    def end_run(self, ts: str) -> None:
        """Add the open run's duration, up to ``ts``, to the runs' wall time."""
        if self.run_started_ts is None:
            return
        seconds = _seconds_between(self.run_started_ts, ts)
        self.run_started_ts = None
        if seconds is None or self.run_seconds is None:
            self.run_seconds = None
        else:
            self.run_seconds += seconds

    def _wall_seconds(self) -> float | None:
        self.end_run(self.last_ts)
        return self.run_seconds if self.runs else _seconds_between(self.first_ts, self.last_ts)

    def _stop(self, rounds: Sequence[Round]) -> Stop:
        last = self.trace.last
        seq = last.event.get("seq")
        seq = seq if isinstance(seq, int) else None
        where = f"line {last.number}" + (f" (seq {seq})" if seq is not None else "")
        if rounds:
            where += f", in round {rounds[-1].number}"
        if self.trace.truncated_tail:
            return Stop(
                last.number,
                seq,
                False,
                f"The trace is cut short: its last line is incomplete (a killed run?). This page "
                f"shows it up to its last complete line, {where}.",
            )
        if not self.status:
            from orchestrator.sessions import running_pid

            why = (
                "its run is still going"
                if running_pid(self.trace.path) is not None
                else "it was killed before it could end"
            )
            return Stop(
                last.number,
                seq,
                False,
                f"The trace stops at {where} without run.finished: {why}.",
            )
        return Stop(last.number, seq, True, f"The trace ends at {where} with run.finished.")


def _round(index: int, data: Mapping[str, Any]) -> Round:
    return Round(
        index=index,
        run=data["run"],
        number=data["number"],
        line=data["line"],
        ts=data["ts"],
        usage=data["usage"],
        cost=data["cost"],
        context_tokens=data["context_tokens"],
        context_window=data["context_window"],
        stop_reason=data["stop_reason"],
        text="\n\n".join(data["text"]),
        calls=tuple(_call(call) for call in data["calls"]),
    )


def _call(data: Mapping[str, Any]) -> ToolCall:
    return ToolCall(
        id=data["id"],
        name=data["name"],
        input=data["input"],
        status=data.get("status", "no result"),
        ok=data.get("ok", False),
        duration_ms=data.get("duration_ms"),
        output=data.get("output", ""),
        diff=data.get("diff"),
        hook=data.get("hook"),
        asked=data.get("asked"),
    )


def _seconds_between(first: str, last: str) -> float | None:
    try:
        start = dt.datetime.fromisoformat(first)
        end = dt.datetime.fromisoformat(last)
    except ValueError:
        return None
    return max((end - start).total_seconds(), 0.0)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# --- one handler per event ------------------------------------------------------------------


def _on_any(builder: _Builder, line: TraceLine) -> None:
    ts = line.event.get("ts")
    if isinstance(ts, str):
        builder.first_ts = builder.first_ts or ts
        builder.previous_ts, builder.last_ts = builder.last_ts, ts
    builder.run_id = builder.run_id or str(line.event.get("run_id") or "")


def _on_run_started(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    builder.end_run(builder.previous_ts)  # a run killed before run.finished ends at its last event
    builder.run_started_ts = builder.last_ts
    builder.runs += 1
    builder._round_key = None
    builder.status, builder.reason = "", ""
    settings = event.get("settings")
    builder.settings = settings if isinstance(settings, Mapping) else {}
    if not builder.task and isinstance(event.get("task"), str):
        builder.task = event["task"]
    builder.client = str(event.get("model") or builder.client)
    if builder.settings.get("model"):
        builder.models[str(builder.settings["model"])] = None
    for field in ("sandbox", "approval"):
        if isinstance(event.get(field), str):
            setattr(builder, field, event[field])
    plan = event.get("plan")
    if isinstance(plan, Mapping) and isinstance(plan.get("shared"), str):
        builder.shared = plan["shared"]
        builder.agent = str(plan.get("agent") or "") or None
    window = _int(builder.settings.get("context_window"))
    builder.window = window or builder.window


def _on_run_finished(builder: _Builder, line: TraceLine) -> None:
    builder.end_run(builder.last_ts)
    builder.status = str(line.event.get("status") or "unknown")
    builder.reason = str(line.event.get("reason") or "")


def _on_loop_transition(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)


def _on_model_request(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)


def _on_model_response(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)
    event = line.event
    builder.totals(event)
    if not builder.rounds:
        return
    row = builder.rounds[-1]
    reported = event.get("usage")
    usage = {
        key: (_int(reported.get(key)) or 0) if isinstance(reported, Mapping) else 0
        for key in USAGE_KEYS
    }
    for key, value in usage.items():
        row["usage"][key] += value
    model = str(event.get("model") or builder.settings.get("model") or "")
    if event.get("model"):
        builder.served[str(event["model"])] = None
    spent = cost_of(usage, prices_for(model, builder.prices))
    row["cost"] = None if spent is None or row["cost"] is None else row["cost"] + spent
    row["context_tokens"] = _int(event.get("context_tokens"))
    row["context_window"] = _int(event.get("context_window"))
    row["stop_reason"] = str(event.get("stop_reason") or "")
    for block in event.get("content") or ():
        if isinstance(block, Mapping) and block.get("type") == "text":
            text = str(block.get("text", ""))
            if text.strip():
                row["text"].append(text)


def _on_tool_call(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)
    event = line.event
    tool_id = str(event.get("id", ""))
    call: dict[str, Any] = {
        "id": tool_id,
        "name": str(event.get("name", "")),
        "input": event.get("input"),
    }
    builder._calls[tool_id] = call
    if builder.rounds:
        builder.rounds[-1]["calls"].append(call)


def _on_updated_input(builder: _Builder, line: TraceLine) -> None:
    """A PreToolUse hook rewrote the call: the input shown is what ran, the model's beside it."""
    event = line.event
    call = builder._calls.get(str(event.get("id", "")))
    if call is None:
        return
    call.update(asked=call.get("input"), input=event.get("input"), hook=str(event.get("hook", "?")))


def _on_tool_result(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    tool_id = str(event.get("id", ""))
    call = builder._calls.pop(tool_id, None)
    if call is None:  # a result without its call (an edited trace): shown on its own
        builder._enter_round(line)
        call = {"id": tool_id, "name": str(event.get("name", "")), "input": None}
        if builder.rounds:
            builder.rounds[-1]["calls"].append(call)
    output = str(event.get("output", ""))
    ok, word = tool_verdict(event)
    if tool_id in builder._blocked:
        builder._blocked.discard(tool_id)
        word = "blocked"
    elif event.get("is_error") and is_refusal(output):
        builder.refused += 1
        word = "refused"
    duration = event.get("duration_ms")
    call.update(
        status=word,
        ok=ok,
        output=output,
        duration_ms=float(duration) if isinstance(duration, int | float) else None,
        diff=str(event["diff"]) if event.get("diff") else None,
    )


def _on_plan_updated(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    if event.get("reset"):
        for item in list(builder._live):
            builder._end_lane(item)
        builder._generation += 1
    items = event.get("items")
    if not isinstance(items, list):
        return
    statuses = {
        str(item.get("id")): str(item.get("status", "pending"))
        for item in items
        if isinstance(item, Mapping)
    }
    for item in items:
        if not isinstance(item, Mapping):
            continue
        item_id, status = str(item.get("id")), str(item.get("status", "pending"))
        waiting = [b for b in item.get("blocked_by") or () if statuses.get(str(b)) != "completed"]
        state = "blocked" if status == "pending" and waiting else status
        text = item.get("text", item.get("content"))
        builder._set_state(item_id, state, str(text) if text is not None else None)
    for item in [item for item in builder._live if item not in statuses]:
        builder._end_lane(item)


def _on_plan_transition(builder: _Builder, line: TraceLine) -> None:
    # plan.updated follows with every item's state; an item it never lists still gets a lane.
    item = line.event.get("item")
    if isinstance(item, str) and item not in builder._live:
        builder._set_state(item, str(line.event.get("dst")), None)


def _on_plan_rejected(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    reason = str(event.get("message") or event.get("error") or "rejected")
    item = event.get("item")
    lane = builder._live.get(str(item)) if item is not None else None
    builder._mark("rejected", line, f"update rejected: {reason}", lane=lane)


def _on_reminder(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)
    event = line.event
    if event.get("reason") == "unfinished":
        names = ", ".join(f"#{item}" for item in event.get("unfinished") or ())
        text = f"reminder: the plan is unfinished: {names}"
    else:
        text = f"reminder: the plan had not changed for {event.get('rounds_since_update')} rounds"
    builder._mark("reminder", line, text)


def _on_check(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)
    event = line.event
    code = event.get("exit_code")
    ok = code == 0
    command = " ".join(str(event.get("command", "")).split())
    if line.name == "plan.check":
        item = str(event.get("item"))
        what, lane = f"check #{item}", builder._live.get(item)
    else:
        what, lane = "done-check", None
    outcome = "passed" if ok else f"failed (exit {code})"
    builder._mark("check", line, f"{what} {outcome}: {command}", lane=lane, ok=ok)


def _on_blocked(builder: _Builder, line: TraceLine) -> None:
    builder._enter_round(line)
    event = line.event
    builder._blocked.add(str(event.get("id", "")))
    rule = str(event.get("rule", "")).replace("_", " ")
    builder._mark("blocked", line, f"blocked {event.get('name')}: {rule}")


def _on_cleared(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    text = (
        f"cleared {event.get('blocks')} old tool results ({event.get('tokens_freed')} tokens freed)"
    )
    builder._mark("cleared", line, text)


def _on_compacted(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    text = (
        f"compacted the history: {event.get('tokens_before')} → {event.get('tokens_after')} "
        f"tokens, {event.get('messages_kept')} messages kept"
    )
    builder._mark("compacted", line, text)


def _on_window(builder: _Builder, line: TraceLine) -> None:
    event = line.event
    window = _int(event.get("window"))
    builder.window = window or builder.window
    if event.get("source") == "refusal":
        builder._enter_round(line)
        builder._mark("window", line, f"a refusal taught the window: {window} tokens")


_Handler = Callable[[_Builder, TraceLine], None]


def _both(handler: _Handler) -> _Handler:
    def handle(builder: _Builder, line: TraceLine) -> None:
        _on_any(builder, line)
        handler(builder, line)

    return handle


_HANDLERS: Mapping[str, _Handler] = {
    name: _both(handler)
    for name, handler in {
        "run.started": _on_run_started,
        "run.finished": _on_run_finished,
        "loop.transition": _on_loop_transition,
        "model.request": _on_model_request,
        "model.response": _on_model_response,
        "tool.call": _on_tool_call,
        "hook.updated_input": _on_updated_input,
        "tool.result": _on_tool_result,
        "plan.updated": _on_plan_updated,
        "plan.transition": _on_plan_transition,
        "plan.rejected": _on_plan_rejected,
        "audit.reminder": _on_reminder,
        "plan.check": _on_check,
        "loop.done_check": _on_check,
        "guard.blocked": _on_blocked,
        "context.cleared": _on_cleared,
        "context.compacted": _on_compacted,
        "context.window": _on_window,
        "mcp.server": lambda _builder, _line: None,
        "mcp.error": lambda _builder, _line: None,
    }.items()
}


def state_at(lane: Lane, column: int) -> str | None:
    """A lane's state at the end of ``column``; None where the item did not exist."""
    for segment in lane.segments:
        if segment.start <= column < segment.end:
            return segment.state
    return None


def trace_path_of(picture: RunPicture) -> Path:
    return Path(picture.header.trace)
