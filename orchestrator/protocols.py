"""The seams of the harness: what a model, a tool, a plan and an event log look like to the loop.

This module imports nothing from the package, so the loop can depend on it and on nothing
concrete; the CLI is the one place that wires real classes into these shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import Any, Protocol

import attrs

#: A JSON object as the Messages API sends and receives it (content blocks, messages, bodies).
JSONObject = dict[str, Any]


@attrs.frozen
class ModelTurn:
    """One assistant turn as the API returned it.

    ``content`` holds the content blocks as plain dicts (``{"type": "text", ...}``,
    ``{"type": "tool_use", ...}``), ready to be appended to the conversation unchanged.
    """

    content: tuple[JSONObject, ...]
    stop_reason: str
    usage: Mapping[str, int] = attrs.field(factory=dict)
    model: str = ""

    @property
    def tool_uses(self) -> tuple[JSONObject, ...]:
        return tuple(block for block in self.content if block.get("type") == "tool_use")

    @property
    def text(self) -> str:
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")

    @property
    def input_tokens(self) -> int:
        """The size of the request this turn answered: input plus cache reads and writes."""
        keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
        return sum(int(self.usage.get(key, 0)) for key in keys)


class ModelError(Exception):
    """The model could not answer (an API error that survived retries, a broken script).

    ``str(error)`` is one line meant for a person; the loop ends the run in ``failed`` with it.
    """


class UnknownModel(ModelError):
    """The endpoint does not serve a model of that name (the Models API answered 404)."""


class ContextTooLong(ModelError):
    """The endpoint refused the request as longer than the model's context window.

    The loop answers it by compacting the conversation and asking once more.
    """


@attrs.frozen
class ModelLimits:
    """What the Models API says about one model: its window, output cap and capabilities.

    ``source`` says where the numbers came from (``models.retrieve``, a flag, a fallback), so
    a person reading the trace knows whether the window was learned or assumed.
    """

    max_input_tokens: int
    max_tokens: int | None = None
    capabilities: JSONObject = attrs.field(factory=dict)
    source: str = "models.retrieve"
    reason: str = ""

    def supports(self, *path: str) -> bool:
        """Whether ``capabilities[path...].supported`` is true (false when unknown)."""
        node: Any = self.capabilities
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        return isinstance(node, dict) and node.get("supported") is True


class Model(Protocol):
    """Anything that answers a Messages API request body with one assistant turn."""

    @property
    def name(self) -> str: ...

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        """Answer ``request`` (a Messages API body), passing streamed text to ``on_text``."""
        ...


@attrs.frozen
class ToolResult:
    """What a tool hands back to the model: the text of a ``tool_result`` block.

    The other fields are for the person and the trace, never sent to the model: the command's
    ``exit_code`` (bash), the seconds the tool itself ran (``duration_s``, set by the registry,
    so time spent at an approval prompt is not counted), and a unified ``diff`` of what a file
    tool changed. Two results are equal when the model would see the same thing.
    """

    text: str
    is_error: bool = False
    exit_code: int | None = attrs.field(default=None, eq=False)
    duration_s: float | None = attrs.field(default=None, eq=False)
    diff: str = attrs.field(default="", eq=False)


@attrs.frozen
class CheckResult:
    """A check command's outcome (a done-check, an item's acceptance check)."""

    command: str
    exit_code: int
    output: str
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


class ToolError(Exception):
    """A tool call the model can fix: the message says what was wrong and how to call again."""


class Tool(Protocol):
    """A named handler with a JSON schema; ``run`` raises :class:`ToolError` for bad calls."""

    @property
    def name(self) -> str: ...

    @property
    def schema(self) -> JSONObject:
        """The tool definition sent to the API: ``name``, ``description``, ``input_schema``."""
        ...

    def run(self, arguments: Mapping[str, Any]) -> ToolResult: ...


#: The ``tool_use`` id of the call the loop is dispatching, so a wrapper of the registry (the
#: hooks, which hand it on as ``tool_use_id``) can name the call without widening ``dispatch``.
CURRENT_CALL: ContextVar[str] = ContextVar("orchestrator_current_call", default="")


class Tools(Protocol):
    """The registry the loop dispatches through; it never raises for anything the model sends."""

    @property
    def schemas(self) -> Sequence[JSONObject]: ...

    def dispatch(self, name: str, arguments: object) -> ToolResult: ...


class ToolSource(Protocol):
    """Tools that start with a run and stop with it (MCP servers): opened once, closed at exit."""

    def open(self, notify: Callable[[str], None]) -> None:
        """Start; ``notify(line)`` for the user's one-liners."""
        ...

    @property
    def tools(self) -> Sequence[Tool]:
        """The current tools (re-read: lists can change mid-run)."""
        ...

    def close(self) -> None:
        """Idempotent; also on Ctrl-C/SIGTERM/SIGHUP."""
        ...


class PlanRecord(Protocol):
    """A structured record a plan emits to its observers (a transition, an update, a rejection)."""

    @property
    def event(self) -> str: ...

    def fields(self) -> JSONObject: ...


class Plan(Protocol):
    """The plan board as the loop's audit sees it."""

    @property
    def revision(self) -> int:
        """A counter that moves on every accepted update, so staleness needs no text diff."""
        ...

    @property
    def is_empty(self) -> bool: ...

    @property
    def config(self) -> JSONObject:
        """The settings a fresh plan needs to behave the same (recorded for replay)."""
        ...

    @property
    def statuses(self) -> Mapping[str, str]:
        """Each item's id and its status on the wire (``pending``, ``in_progress``, ...)."""
        ...

    def render(self) -> str: ...

    def subscribe(self, observer: Callable[[PlanRecord], None]) -> None: ...


class EventLog(Protocol):
    """The part of a structlog bound logger the loop uses: one named event with fields."""

    def info(self, event: str, *args: Any, **fields: Any) -> Any: ...


@attrs.frozen
class Refusal:
    """An approver's no, with the text the model gets (it starts ``Error:``)."""

    message: str


class Approver(Protocol):
    """Decides whether a side-effecting tool call may run (a terminal prompt, ``--yes``, deny).

    True runs the call; a :class:`Refusal` says why not in words the model can act on; False
    is a refusal with the registry's generic text.
    """

    def __call__(self, tool: str, arguments: Mapping[str, Any]) -> bool | Refusal: ...


class ContextKeeper(Protocol):
    """Keeps a conversation inside the model's context window (clearing, then compaction).

    It works on the message list the loop hands it and returns rewritten lists; records it
    returns (``context.cleared``, ``context.compacted``) are logged by the loop.
    """

    @property
    def window(self) -> int:
        """The model's input window in tokens."""
        ...

    @property
    def description(self) -> JSONObject:
        """The ``context.window`` event's fields: the window, where it came from, the mode."""
        ...

    def learn_window(self, tokens: int, reason: str) -> bool:
        """Believe a smaller window (a refusal named the real limit); whether it changed."""
        ...

    def window_from_refusal(self, message: str) -> int | None:
        """The window a "prompt is too long" refusal names, or None when it names none."""
        ...

    @property
    def managing(self) -> bool:
        """False when told to send the history whole (``--compaction off``)."""
        ...

    def fixed_tokens(self, request: Mapping[str, Any]) -> int:
        """The estimated size of a request's parts other than its messages."""
        ...

    def observe(self, messages: Sequence[JSONObject], fixed: int, usage: Mapping[str, int]) -> None:
        """A response's ``usage`` measured a request of ``fixed`` tokens plus ``messages``."""
        ...

    def estimate(self, messages: Sequence[JSONObject]) -> int:
        """A conservative token count of a request carrying ``messages``."""
        ...

    def tag_round(self, messages: Sequence[JSONObject], plan: Plan) -> None:
        """Remember which plan item the newest round worked on (cleared first once done)."""
        ...

    def over_budget(self, messages: Sequence[JSONObject]) -> bool: ...

    def shrink(
        self,
        messages: Sequence[JSONObject],
        plan: Plan,
        summarize: Callable[[JSONObject], str],
        *,
        force: bool = False,
    ) -> tuple[list[JSONObject], list[PlanRecord]]:
        """Clear, then compact if still needed (always with ``force``); the new list and records.

        ``summarize`` answers a tool-less request body with the summary text.
        """
        ...


class BoardStore(Protocol):
    """A board several agents share, in a store (SQLite, PostgreSQL; ``orchestrator.board``).

    Every change is an item-machine transition applied in one transaction and appended to the
    store's log; claims are atomic, each agent holds at most one item in progress, and a dead
    agent's lease expires by the next operation. Items and log lines are the store's own
    values (``board.store.BoardItem``, ``LogEntry``): this floor names no concrete class.
    """

    @property
    def url(self) -> str:
        """Where the board lives, without a password."""
        ...

    def items(self) -> Sequence[Any]:
        """Every item in board order (expired claims returned first)."""
        ...

    def snapshot(self) -> tuple[Sequence[Any], Sequence[Any]]:
        """The items and the whole log, read in one transaction."""
        ...

    def log(self, after: int = 0) -> Iterator[Any]: ...

    def change(self) -> AbstractContextManager[Any]:
        """Several operations as one transaction: all of them, or none."""
        ...

    def add(
        self,
        text: str,
        *,
        agent: str | None = None,
        blocked_by: Sequence[str] = (),
        item_id: str | None = None,
        check: str | None = None,
    ) -> Any: ...

    def checks(self) -> Mapping[str, str]:
        """Each item's acceptance check, by item id."""
        ...

    def check_setters(self) -> Mapping[str, str | None]:
        """Who set each item's check (``person:…`` or an agent; None: the store did not say)."""
        ...

    def claim(self, agent: str, *, lease: float = ..., item_id: str | None = None) -> Any:
        """Start the named or the next ready item for ``agent`` (the ``start`` edge)."""
        ...

    def complete(self, item_id: str, *, agent: str) -> Any: ...

    def record_check(
        self, item_id: str, *, agent: str, command: str, exit_code: int, duration_s: float
    ) -> Any:
        """Log one run of an item's check (its completion's guard reads the passing run)."""
        ...

    def release(self, item_id: str, *, agent: str) -> Any: ...

    def cancel(self, item_id: str, *, agent: str) -> Any: ...

    def renew(self, agent: str, *, lease: float = ...) -> int:
        """Push out the lease of every item ``agent`` holds; how many it holds."""
        ...

    def close(self) -> None: ...
