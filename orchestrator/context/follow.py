"""Following a trace's context: the conversation a run had, rebuilt line by line, and its tiers.

:class:`ConversationFollower` turns trace events back into the conversation and plan of a run,
the way the loop built them, and runs the same :class:`ContextManager` on it at the same points:
so ``resume`` continues from the compacted conversation, and ``replay --check`` re-derives every
``context.cleared`` and ``context.compacted`` (only a summary's text is taken from the trace; it
came from the model). It is fed one line at a time, so a streaming reader can drive it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.context.manager import ContextManager
from orchestrator.conversation import INTERRUPTED_RESULT, Conversation
from orchestrator.loop import reminder_text
from orchestrator.protocols import JSONObject, PlanRecord

#: The stop reason that drops an answer and retries after compacting, as the loop does.
OVERFLOW_STOP = "model_context_window_exceeded"


#: A tool.result whose tool.call is not in the trace (no input to apply).
_NO_CALL = object()


class SummaryMissing(Exception):
    """The follower would compact where the trace recorded no summary."""


def manager_for(
    settings: Mapping[str, Any],
    window: Mapping[str, Any],
    owners: Mapping[str, str | None] | None = None,
) -> ContextManager:
    """The context manager a run used: its ``run.started`` settings, its ``context.window``."""
    max_tokens = int(settings.get("max_tokens", 8192))
    return ContextManager(
        int(window.get("window", settings.get("context_window", 200_000))),
        model=str(settings.get("model", "model")),
        mode=str(window.get("compaction", settings.get("compaction", "auto"))),
        summary_max_tokens=min(4096, max_tokens),
        owners=dict(owners or {}),
    )


class ConversationFollower:
    """Rebuilds a run's conversation from its events; ``board`` is any plan with ``apply``."""

    def __init__(self, board_factory: Callable[[Mapping[str, Any]], Any]) -> None:
        self.conversation = Conversation()
        self.board: Any = None
        self.manager: ContextManager | None = None
        self._board_factory = board_factory
        self._results: dict[str, JSONObject] = {}
        # The inputs of the calls seen so far: ids repeat across the runs of one trace (a resumed
        # run's model may number its calls afresh), so a result belongs to the latest call.
        self._inputs: dict[str, Any] = {}
        self._reminders: list[str] = []
        self._summaries: list[str] = []
        self._fixed = 0
        self._forced = False
        self._settings: Mapping[str, Any] = {}
        self._owners: Mapping[str, str | None] = {}
        self.on_record: Callable[[PlanRecord], None] = lambda _record: None

    def over_budget(self) -> bool:
        return self.manager is not None and self.manager.over_budget(self.conversation.messages)

    def feed(self, event: Mapping[str, Any]) -> None:
        name = event.get("event")
        handler = self._handlers.get(str(name))
        if handler is not None:
            handler(self, event)

    def finish(self) -> None:
        """Close what the trace left open: pending reminders, a round without its results."""
        self._flush()
        if self._results or self._dangling():
            self._close_round()

    # -- events -----------------------------------------------------------------------------

    def _run_started(self, event: Mapping[str, Any]) -> None:
        if self.board is None:
            self.board = self._board_factory(event.get("plan") or {})
        task = event.get("task")
        self._settings = event.get("settings") or {}
        if task is None:
            # A resumed run starts a fresh manager (at its context.window), which still knows
            # which item each earlier round worked on, as resume hands it over.
            self._owners = self.manager.owners if self.manager is not None else {}
            self.manager = None
        self._flush()
        if task is not None:
            self.conversation.add_user_text(str(task))

    def _context_window(self, event: Mapping[str, Any]) -> None:
        # Only a run with a context keeper logs this; a run without one is followed unmanaged.
        if self.manager is None:
            self.manager = manager_for(self._settings, event, self._owners)
        elif event.get("source") == "refusal":
            # Mid-run: a refusal named the real window, and the run kept under it from then on.
            self.manager.learn_window(int(event.get("window", 0)), str(event.get("reason", "")))

    def _model_request(self, event: Mapping[str, Any]) -> None:
        self._flush()
        self._fixed = int(event.get("fixed_tokens", 0))

    def _model_response(self, event: Mapping[str, Any]) -> None:
        if self.manager is not None:
            usage = event.get("usage") or {}
            self.manager.observe(self.conversation.messages, self._fixed, usage)
        if event.get("stop_reason") == OVERFLOW_STOP:
            return  # dropped by the loop, and asked again after compacting
        self._forced = False
        self.conversation.add_assistant(list(event.get("content", ())))

    def _tool_call(self, event: Mapping[str, Any]) -> None:
        self._inputs[str(event.get("id"))] = event.get("input")

    def _tool_result(self, event: Mapping[str, Any]) -> None:
        tool_id = str(event["id"])
        called = self._inputs.pop(tool_id, _NO_CALL)
        self._results[tool_id] = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": str(event.get("output", "")),
            "is_error": bool(event.get("is_error")),
        }
        accepted = event.get("name") == "todo" and not event.get("is_error")
        if accepted and self.board is not None and called is not _NO_CALL:
            self.board.apply(called)

    def _loop_transition(self, event: Mapping[str, Any]) -> None:
        trigger = event.get("trigger")
        if trigger == "dispatched":
            self._close_round()
            if self.manager is not None and self.board is not None:
                self.manager.tag_round(self.conversation.messages, self.board)
        elif trigger == "overflow":
            self._forced = True
        elif trigger == "compacted":
            self._shrink()

    def _plan_updated(self, event: Mapping[str, Any]) -> None:
        # A reset is the chat's /clear, which forgets the conversation along with the plan.
        if not event.get("reset"):
            return
        if self.board is not None:
            self.board.reset()
        self.conversation = Conversation()

    def _reminder(self, event: Mapping[str, Any]) -> None:
        text = reminder_text(int(event["rounds_since_update"]), str(event["plan"]))
        if self.manager is None:
            # Nothing reads the conversation between here and the next request: append now.
            self.conversation.append_text_to_last_user(text)
            return
        self._reminders.append(text)

    def _compacted(self, event: Mapping[str, Any]) -> None:
        self._summaries.append(str(event.get("summary", "")))

    _handlers: Mapping[str, Callable[[ConversationFollower, Mapping[str, Any]], None]] = {
        "run.started": _run_started,
        "context.window": _context_window,
        "model.request": _model_request,
        "model.response": _model_response,
        "tool.call": _tool_call,
        "tool.result": _tool_result,
        "loop.transition": _loop_transition,
        "plan.updated": _plan_updated,
        "audit.reminder": _reminder,
        "context.compacted": _compacted,
    }

    # -- helpers ----------------------------------------------------------------------------

    def _shrink(self) -> None:
        if self.manager is None or self.board is None:
            return
        summaries = self._summaries

        def recorded_summary(_request: JSONObject) -> str:
            if not summaries:
                raise SummaryMissing("replay compacted here, but the trace has no summary")
            return summaries.pop(0)

        messages, records = self.manager.shrink(
            self.conversation.messages, self.board, recorded_summary, force=self._forced
        )
        self.conversation.replace(messages)
        for record in records:
            self.on_record(record)
        self._flush()

    def _flush(self) -> None:
        # A reminder is appended after the guards that chose its edge were checked, and after
        # a compaction on the way: so it joins the conversation only when something reads on.
        for text in self._reminders:
            self.conversation.append_text_to_last_user(text)
        self._reminders.clear()

    def _dangling(self) -> bool:
        messages = self.conversation.messages
        return bool(messages) and messages[-1]["role"] == "assistant"

    def _close_round(self) -> None:
        """Add the round's results in tool_use order.

        A call with no recorded result is answered as interrupted: never run a second time.
        """
        results = self._results
        if not self._dangling():
            results.clear()
            return
        uses = [b for b in self.conversation.messages[-1]["content"] if b.get("type") == "tool_use"]
        if not uses:
            results.clear()
            return
        blocks = [
            results.pop(
                str(use["id"]),
                {
                    "type": "tool_result",
                    "tool_use_id": str(use["id"]),
                    "content": INTERRUPTED_RESULT,
                    "is_error": True,
                },
            )
            for use in uses
        ]
        results.clear()
        self.conversation.add_tool_results(blocks)
