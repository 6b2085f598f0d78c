"""The plan board: todo items as guarded ``transitions`` state machines, and the ``todo`` tool.

Each item is a model of one shared :class:`ItemMachine` whose edges are declared as data in
:data:`ITEM_TRANSITIONS`. The single-in-progress rule is the ``start`` edge's guard, which looks
at the whole board; ``dependencies_completed``, its second guard, holds when every item named in
the item's ``blocked_by`` is completed. A ``todo`` call is applied as one batch: its shape is
checked first (peers' spellings such as ``todos``/``content``/``activeForm`` are read as ours,
any other key is refused), then every edge fires in a safe order, and if any edge is refused the
fired ones are rolled back, so a rejected batch leaves the board exactly as it was and observers
hear nothing but the rejection.

A cancelled blocker does not unblock: the work it stood for was not done, so the dependent stays
blocked until the model removes the dependency (``blocked_by`` without it) or cancels the
dependent too.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import attrs
from transitions import EventData

from orchestrator import item_machine as _machine
from orchestrator.protocols import CheckResult, JSONObject, PlanRecord, ToolError, ToolResult
from orchestrator.shorten import shorten_command

# The item machine lives in its own module (a shared board's store needs it without the rest of
# this one); its names are this module's too, as every caller has always imported them.
Status = _machine.Status
ITEM_TRANSITIONS = _machine.ITEM_TRANSITIONS
STORE_TRIGGERS = _machine.STORE_TRIGGERS
ItemMachine = _machine.ItemMachine
item_machine_options = _machine.item_machine_options
table_edges = _machine.table_edges


class EdgePolicy(enum.StrEnum):
    """How a batch is judged: edge by edge (strict), or by the state it ends in (lenient)."""

    STRICT = "strict"
    LENIENT = "lenient"


class Priority(enum.StrEnum):
    """An item's optional priority, as Claude Code's todo tool spells it."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


_STATUS_OF = {str(status): status for status in Status}
_Choice = TypeVar("_Choice", Status, Priority)
FINAL_STATUSES = frozenset({Status.COMPLETED, Status.CANCELLED})
DEFAULT_ITEM_LIMIT = 20

#: How each status is drawn in a rendered board (the seeds' markers).
MARKERS = {
    Status.PENDING: "[ ]",
    Status.IN_PROGRESS: "[>]",
    Status.COMPLETED: "[x]",
    Status.CANCELLED: "[-]",
}


# --- records observers receive ------------------------------------------------------------


@attrs.frozen
class ItemTransition:
    """One edge an item took: the ``plan.transition`` record."""

    event: ClassVar[str] = "plan.transition"
    item_id: str
    trigger: str
    src: Status
    dst: Status

    def fields(self) -> JSONObject:
        return {"item": self.item_id, "trigger": self.trigger, "src": self.src, "dst": self.dst}


@attrs.frozen
class PlanItem:
    """A read-only view of one item, so callers read the board without parsing text."""

    id: str
    text: str
    status: Status
    active_form: str = ""
    priority: Priority | None = None
    #: The ids this item waits for, in the order the model gave them.
    blocked_by: tuple[str, ...] = ()
    #: An acceptance check: a command that must exit 0 before the item may complete.
    check: str | None = None
    #: Who set the check: ``person`` (a board file, the config) or ``model``.
    check_by: str | None = None

    def as_dict(self) -> JSONObject:
        # The new keys appear only when set, so a board without them records what it always did.
        data: JSONObject = {"id": self.id, "text": self.text, "status": str(self.status)}
        if self.active_form:
            data["active_form"] = self.active_form
        if self.priority is not None:
            data["priority"] = str(self.priority)
        if self.blocked_by:
            data["blocked_by"] = list(self.blocked_by)
        if self.check is not None:
            data["check"] = self.check
            data["check_by"] = self.check_by or "person"
        return data


@attrs.frozen
class ItemChecked:
    """An acceptance check that ran as an item was completed: the ``plan.check`` record."""

    event: ClassVar[str] = "plan.check"
    item_id: str
    result: CheckResult

    def fields(self) -> JSONObject:
        output = self.result.output
        return {
            "item": self.item_id,
            "command": self.result.command,
            "exit_code": self.result.exit_code,
            "passed": self.result.passed,
            "duration_s": round(self.result.duration_s, 3),
            "output": output if len(output) <= 4000 else "…" + output[-4000:],
        }


@attrs.frozen
class PlanUpdated:
    """An accepted batch: the ``plan.updated`` record."""

    event: ClassVar[str] = "plan.updated"
    revision: int
    items: tuple[PlanItem, ...]
    transitions: tuple[ItemTransition, ...]
    merge: bool
    #: True for the chat's ``/reset``, which empties the board outside any ``todo`` call.
    reset: bool = False
    #: The top-level ``explanation`` the model sent with the batch (Codex's spelling of "why").
    explanation: str | None = None

    @property
    def completed(self) -> int:
        return sum(item.status == Status.COMPLETED for item in self.items)

    def fields(self) -> JSONObject:
        fields: JSONObject = {
            "revision": self.revision,
            "merge": self.merge,
            "items": [item.as_dict() for item in self.items],
            "completed": self.completed,
            "total": len(self.items),
            "transitions": len(self.transitions),
        }
        if self.reset:
            fields["reset"] = True
        if self.explanation is not None:
            fields["explanation"] = self.explanation
        return fields


@attrs.frozen
class PlanRejected:
    """A refused batch: the ``plan.rejected`` record. The board did not change."""

    event: ClassVar[str] = "plan.rejected"
    error: str
    message: str
    item_id: str | None

    def fields(self) -> JSONObject:
        return {"error": self.error, "message": self.message, "item": self.item_id}


def render_items(items: Iterable[PlanItem]) -> str:
    """Render items in the seeds' format; ``No todos.`` when there are none.

    A board without priorities or dependencies renders byte for byte as the seeds' does. A
    priority adds ``(high priority)``, unfinished blockers add ``(blocked by #2, #3)``, and a
    board with dependencies ends with a ``Next ready:`` line naming the items that may start.
    """
    items = tuple(items)
    if not items:
        return "No todos."
    has_dependencies = any(item.blocked_by for item in items)
    # Only an item with blockers looks statuses up.
    status_of = {item.id: item.status for item in items} if has_dependencies else {}
    lines = [
        f"{MARKERS[item.status]} #{item.id}: {item.text}{_notes(item, status_of)}" for item in items
    ]
    done = sum(item.status == Status.COMPLETED for item in items)
    text = "\n".join(lines) + f"\n\n({done}/{len(lines)} completed)"
    if has_dependencies:
        ready = ready_items(items)
        text += "\nNext ready: " + (", ".join(f"#{item.id}" for item in ready) or "none")
    return text


def _notes(item: PlanItem, status_of: Mapping[str, Status]) -> str:
    active = (
        f" ({item.active_form})" if item.status == Status.IN_PROGRESS and item.active_form else ""
    )
    return active + item_annotations(item, status_of)


def item_annotations(item: PlanItem, status_of: Mapping[str, Status]) -> str:
    """`` (high priority) (blocked by #2)``: what an item's line shows beyond its text."""
    if item.priority is None and not item.blocked_by:
        return ""  # the seeds' line, and the common case
    notes = ""
    if item.priority is not None:
        notes += f" ({item.priority} priority)"
    waiting = unfinished_blockers(item, status_of)
    if waiting and item.status not in FINAL_STATUSES:
        notes += " (blocked by " + ", ".join(f"#{b}" for b in waiting) + ")"
    return notes


def unfinished_blockers(item: PlanItem, status_of: Mapping[str, Status]) -> tuple[str, ...]:
    """The ids in ``item.blocked_by`` that are not completed (a cancelled one still blocks)."""
    return tuple(b for b in item.blocked_by if status_of.get(b) != Status.COMPLETED)


def ready_items(items: Sequence[PlanItem]) -> tuple[PlanItem, ...]:
    """The pending items whose blockers are all completed: what may start next."""
    status_of = {item.id: item.status for item in items}
    return tuple(
        item
        for item in items
        if item.status == Status.PENDING and not unfinished_blockers(item, status_of)
    )


def items_from_dicts(raw: Iterable[Mapping[str, Any]]) -> tuple[PlanItem, ...]:
    """Rebuild item views from their ``as_dict`` form (as ``plan.updated`` events carry them)."""
    return tuple(
        PlanItem(
            str(d["id"]),
            str(d["text"]),
            Status(d["status"]),
            str(d.get("active_form", "")),
            None if d.get("priority") is None else Priority(d["priority"]),
            tuple(str(b) for b in d.get("blocked_by") or ()),
            None if d.get("check") is None else str(d["check"]),
            None if d.get("check") is None else str(d.get("check_by") or "person"),
        )
        for d in raw
    )


# --- errors ---------------------------------------------------------------------------------


class PlanError(ToolError):
    """A rejected ``todo`` batch. ``str()`` is one line naming the item and the fix."""

    def __init__(self, message: str, item_id: str | None = None) -> None:
        super().__init__(message)
        self.item_id = item_id


class PlanShapeError(PlanError):
    """The input is not ``{"items": [...]}`` with object items (or ``merge`` is not a boolean)."""


class PlanLimitError(PlanError):
    """More items than the board allows."""


class BlankTextError(PlanError):
    """An item without text."""


class UnknownStatusError(PlanError):
    """A status that is not one of :class:`Status`."""


class DuplicateIdError(PlanError):
    """Two items of one batch share an id."""


class InProgressConflictError(PlanError):
    """The ``start`` guard refused: another item is already in progress."""


class IllegalEdgeError(PlanError):
    """A status change that the item machine has no edge (or, strictly, no single edge) for."""


class PlanConfigError(ValueError):
    """A recorded plan config (``run.started``'s ``plan``) that no board can be built from."""


class UnknownKeyError(PlanShapeError):
    """A key the tool does not take, or one field spelled two ways in one object."""


class InvalidPriorityError(PlanError):
    """A priority that is not high, medium or low."""


class UnknownDependencyError(PlanError):
    """A ``blocked_by`` entry that names no item of the plan (or is not a list of ids)."""


class DependencyCycleError(PlanError):
    """``blocked_by`` entries that wait for each other in a ring."""


class CheckFailedError(PlanError):
    """The ``check_passes`` guard refused: the item's acceptance check did not exit 0."""


def check_failed(item_id: str, checked: CheckResult) -> CheckFailedError:
    """The refusal of a completion whose check failed: the exit code and the output's tail."""
    tail = checked.output if len(checked.output) <= 2000 else "…" + checked.output[-2000:]
    return CheckFailedError(
        f"Item #{item_id}: its check `{_shown_command(checked.command)}` failed with exit code "
        f"{checked.exit_code}, so #{item_id} cannot be completed; the whole update was "
        f"refused and nothing changed. Fix the cause, then mark #{item_id} completed "
        f"again.\nCheck output (tail):\n{tail}",
        item_id,
    )


class CheckProtectedError(PlanError):
    """The model tried to change or remove a check the person set."""


class CheckNotAllowedError(PlanError):
    """A check the model set on its own item may not run here (no bash, or not approved)."""


def check_not_allowed(
    item_id: str, command: str, why: str, *, shared: bool = False
) -> CheckNotAllowedError:
    """The refusal of a completion whose model-set check may not run where bash may not.

    On a shared board a check cannot be removed once added, so the way out is a person's.
    """
    way_out = (
        f"a person can complete #{item_id} by hand (board complete --skip-check); leave it "
        "in progress and say so"
        if shared
        else f'remove the check (check: "") to complete #{item_id} without it'
    )
    return CheckNotAllowedError(
        f"Item #{item_id}: the check `{_shown(command)}` was set by a model, and it may run "
        f"only where your bash may: {why.removeprefix('Error: ')} The whole update was refused "
        f"and nothing changed; {way_out}.",
        item_id,
    )


class BlockedItemError(PlanError):
    """The ``dependencies_completed`` guard refused: an item's blockers are unfinished."""


# --- the machine ----------------------------------------------------------------------------


@attrs.define(slots=False, eq=False)
class _ItemModel:
    """The mutable model ``transitions`` drives; the board hands out :class:`PlanItem` views."""

    board: PlanBoard
    id: str
    text: str
    active_form: str = ""
    priority: Priority | None = None
    blocked_by: tuple[str, ...] = ()
    check: str | None = None
    check_by: str | None = None
    state: str = Status.PENDING.value
    #: The outcome of this batch's run of the item's check (set before ``complete`` fires).
    checked: CheckResult | None = attrs.field(default=None, init=False)
    #: The last view handed out, reused while nothing it shows has changed: a board's views are
    #: asked for twice per update (the record and the rendering) and most items do not change.
    _view: PlanItem | None = attrs.field(default=None, init=False)

    # Guards and callbacks named in ITEM_TRANSITIONS / ItemMachine.
    def no_other_item_in_progress(self, event: EventData) -> bool:
        # A lenient walk through in_progress is judged by where the batch leaves the item.
        if self.board._passes_through(self):
            return True
        return all(
            other is self or other.state != Status.IN_PROGRESS for other in self.board._candidates()
        )

    def dependencies_completed(self, event: EventData) -> bool:
        return not self.board._unfinished(self)

    def held_by_actor(self, event: EventData) -> bool:
        # A board of one agent has no owners: whoever writes to it holds every item.
        return True

    def lease_expired(self, event: EventData) -> bool:
        return False  # no leases on a board of one agent

    def check_passes(self, event: EventData) -> bool:
        if self.checked is not None:
            return self.checked.passed
        return self.board.check_for(self) is None

    def record_transition(self, event: EventData) -> None:
        assert event.transition is not None  # after_state_change only runs on a transition
        self.board._fired.append(
            ItemTransition(
                item_id=self.id,
                trigger=event.event.name,
                src=Status(event.transition.source),
                dst=Status(str(event.transition.dest)),
            )
        )

    def view(self) -> PlanItem:
        status = _STATUS_OF[self.state]
        view = self._view
        if (
            view is None
            or view.status is not status
            or view.text != self.text
            or view.active_form != self.active_form
            or view.priority is not self.priority
            or view.blocked_by != self.blocked_by
            or view.check != self.check
        ):
            view = self._view = PlanItem(
                self.id,
                self.text,
                status,
                self.active_form,
                self.priority,
                self.blocked_by,
                self.check,
                self.check_by if self.check is not None else None,
            )
        return view


def _printable(value: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)


def _shown(value: str, limit: int = 60) -> str:
    """A model-supplied value made safe for a one-line message: no control characters."""
    text = _printable(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _shown_command(command: str) -> str:
    """A check command for a one-line message: whole, or cut only in the middle of long paths."""
    return shorten_command(_printable(command))


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(f"#{_shown(item_id)}" for item_id in ids)


# --- parsing --------------------------------------------------------------------------------

#: Every key the tool takes, and the field it means: ours, then the peers' spellings of it
#: (Claude Code and Gemini CLI send ``todos``, ``content``/``description``, ``activeForm``,
#: ``blockedBy``; Codex sends ``plan`` with ``step`` items and an ``explanation``).
TOP_LEVEL_KEYS: Mapping[str, str] = {
    "items": "items",
    "todos": "items",
    "plan": "items",
    "merge": "merge",
    "explanation": "explanation",
}
ITEM_KEYS: Mapping[str, str] = {
    "id": "id",
    "text": "text",
    "content": "text",
    "description": "text",
    "step": "text",
    "status": "status",
    "active_form": "active_form",
    "activeForm": "active_form",
    "priority": "priority",
    "blocked_by": "blocked_by",
    "blockedBy": "blocked_by",
    "check": "check",
}


_TOP_LEVEL_FIELDS = frozenset(TOP_LEVEL_KEYS.values())
_ITEM_FIELDS = frozenset(ITEM_KEYS.values())


def _accepted(keys: Mapping[str, str]) -> str:
    """``items (or todos), merge, explanation``: the fields, each with its other spellings."""
    parts = []
    for field in dict.fromkeys(keys.values()):
        aliases = [key for key, name in keys.items() if name == field and key != field]
        parts.append(field + (f" (or {', '.join(aliases)})" if aliases else ""))
    return ", ".join(parts)


def _canonical(
    raw: Mapping[Any, Any], keys: Mapping[str, str], ours: frozenset[str], where: str
) -> Mapping[str, Any]:
    """``raw`` with every key spelled our way; an unknown or doubly spelled key is refused."""
    if raw.keys() <= ours:  # the common case, checked in C: nothing to rename, nothing to copy
        return raw
    fields: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in raw.items():
        field = keys.get(key) if isinstance(key, str) else None
        if field is None:
            raise UnknownKeyError(
                f"{where}unknown key '{_shown(str(key), 40)}'; accepted keys: {_accepted(keys)}"
            )
        if field in spelled:
            raise UnknownKeyError(
                f"{where}'{spelled[field]}' and '{key}' are the same field; send only '{field}'"
            )
        spelled[field] = key
        fields[field] = value
    return fields


@attrs.frozen
class _Entry:
    """One validated item of a batch; ``None`` fields keep the item's current value."""

    id: str
    text: str | None
    status: Status | None
    active_form: str | None
    priority: Priority | None = None
    blocked_by: tuple[str, ...] | None = None
    #: A new acceptance check; ``""`` removes the item's check.
    check: str | None = None


@attrs.frozen
class _Batch:
    """One validated ``todo`` input."""

    entries: tuple[_Entry, ...]
    merge: bool
    explanation: str | None


_EXAMPLE = '{"items": [{"id": "1", "text": "Read hello.py", "status": "in_progress"}]}'
#: One validated entry of a ``todo`` batch (a shared board applies them its own way).
BatchEntry = _Entry


def parse_batch(payload: object) -> _Batch:
    """A ``todo`` input checked and spelled our way, or :class:`PlanError` saying what to fix."""
    return _parse_batch(payload)


def _parse_batch(payload: object) -> _Batch:
    if not isinstance(payload, Mapping):
        raise PlanShapeError(f"todo input must be an object like {_EXAMPLE}")
    fields = _canonical(payload, TOP_LEVEL_KEYS, _TOP_LEVEL_FIELDS, "todo input: ")
    merge = fields.get("merge", False)
    if not isinstance(merge, bool):
        raise PlanShapeError(f"'merge' must be true or false, got {type(merge).__name__}")
    explanation = fields.get("explanation")
    if explanation is not None and not isinstance(explanation, str):
        raise PlanShapeError(
            f"'explanation' must be text saying why the plan changed, "
            f"got {type(explanation).__name__}"
        )
    raw_items = fields.get("items")
    if not isinstance(raw_items, list):
        got = "nothing" if raw_items is None else type(raw_items).__name__
        key = "todos" if "todos" in payload else "items"  # the spelling the model used
        raise PlanShapeError(f"'{key}' must be a list of todo objects, got {got}; send {_EXAMPLE}")
    entries: list[_Entry] = []
    for index, raw in enumerate(raw_items):
        if not isinstance(raw, Mapping):
            raise PlanShapeError(
                f"Item {index + 1} is not an object (got {type(raw).__name__}); "
                'each item is {"id", "text", "status"}'
            )
        item = _canonical(raw, ITEM_KEYS, _ITEM_FIELDS, f"Item {index + 1}: ")
        entries.append(_parse_entry(item, index, merge=merge))
    return _Batch(tuple(entries), merge, explanation)


def _parse_entry(raw: Mapping[str, Any], index: int, *, merge: bool) -> _Entry:
    if "id" in raw and raw["id"] is not None:
        item_id = str(raw["id"]).strip()
        if not item_id or not item_id.isprintable():
            raise PlanShapeError(
                f"Item {index + 1}: id {_shown(item_id)!r} must be non-empty printable text, "
                'e.g. "3"'
            )
    elif merge:
        raise PlanShapeError(
            f"Item {index + 1}: 'id' is required with merge; name the item to change"
        )
    else:
        item_id = str(index + 1)
    # Whitespace runs (newlines included) fold to one space: one item, one rendered line.
    text = None if raw.get("text") is None else " ".join(str(raw["text"]).split())
    if text == "" or (text is None and not merge):
        raise BlankTextError(
            f"Item #{_shown(item_id)}: text required; say what the step is", item_id
        )
    status = _choice(raw, "status", Status, UnknownStatusError, item_id)
    active = raw.get("active_form")
    active_form = None if active is None else " ".join(str(active).split())
    priority = _choice(raw, "priority", Priority, InvalidPriorityError, item_id)
    blocked_by = _parse_blockers(raw.get("blocked_by"), item_id)
    check = raw.get("check")
    if check is not None and not isinstance(check, str):
        raise PlanShapeError(
            f'Item #{_shown(item_id)}: check must be a shell command as text ("" removes it), '
            f"got {type(check).__name__}"
        )
    return _Entry(
        item_id,
        text,
        status,
        active_form,
        priority,
        blocked_by,
        None if check is None else check.strip(),
    )


def _choice(
    raw: Mapping[str, Any], field: str, choices: type[_Choice], error: type[PlanError], item_id: str
) -> _Choice | None:
    """One of ``choices``, read case-insensitively; ``None`` when the field is absent."""
    if raw.get(field) is None:
        return None
    word = str(raw[field]).strip().lower()
    try:
        return choices(word)
    except ValueError:
        allowed = ", ".join(choices)
        raise error(
            f"Item #{_shown(item_id)}: invalid {field} '{_shown(word)}'; use one of {allowed}",
            item_id,
        ) from None


def _parse_blockers(value: object, item_id: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(b, str | int) and not isinstance(b, bool) for b in value
    ):
        raise UnknownDependencyError(
            f'Item #{_shown(item_id)}: blocked_by must be a list of item ids like ["2", "3"], '
            f"got {type(value).__name__}",
            item_id,
        )
    return tuple(dict.fromkeys(str(b).strip() for b in value))


# --- the dependency graph -------------------------------------------------------------------


def _dependency_order(blockers: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Check the graph (every id known, no cycle); give each item its depth.

    An item's depth is the length of its longest chain of blockers: 0 without any, so sorting a
    batch by depth keeps the order of a board without dependencies exactly as it was, and puts
    every blocker before the items waiting for it.
    """
    for item_id, waits in blockers.items():
        for blocker in waits:
            if blocker not in blockers:
                raise UnknownDependencyError(
                    f"Item #{_shown(item_id)}: blocked_by names #{_shown(blocker)}, which is not "
                    "in the plan; name an item the plan keeps, or drop it",
                    item_id,
                )
    depth: dict[str, int] = {}
    if not any(blockers.values()):
        return depth  # no edges: every item has depth 0, and there is nothing to search
    visiting: set[str] = set()
    for root in blockers:
        if root in depth:
            continue
        # Iterative depth-first search: a chain of a thousand items must not hit the recursion
        # limit. ``path`` is the chain being explored, so a back edge names the whole ring.
        path = [root]
        stack = [iter(blockers[root])]
        visiting.add(root)
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                done = path.pop()
                visiting.discard(done)
                depth[done] = 1 + max((depth[b] for b in blockers[done]), default=-1)
            elif child in visiting:
                ring = [*path[path.index(child) :], child]
                raise DependencyCycleError(
                    f"Dependency cycle {_ids(ring).replace(', ', ' → ')}: each item waits for the "
                    "next, so none can start; drop one of these blocked_by entries",
                    ring[0],
                )
            elif child not in depth:
                visiting.add(child)
                path.append(child)
                stack.append(iter(blockers[child]))
    return depth


# --- the board ------------------------------------------------------------------------------


@attrs.frozen
class _Move:
    """A planned walk of one item through the machine, fired in :meth:`PlanBoard._fire`."""

    model: _ItemModel
    triggers: tuple[str, ...]
    src: Status
    target: Status

    @property
    def phase(self) -> int:
        # Leaving in_progress goes first and entering it last, so "[x] #1, [>] #2" from
        # "[>] #1, [ ] #2" passes the start guard; a lenient walk through in_progress goes
        # after the leavers and before the item that stays in progress.
        if self.model.state == Status.IN_PROGRESS:
            return 0
        if "start" not in self.triggers:
            return 1
        return 3 if self.triggers[-1] == "start" else 2

    @property
    def passes_through(self) -> bool:
        """Enters in_progress only on the way somewhere else (a lenient walk)."""
        return "start" in self.triggers and self.triggers[-1] != "start"


class PlanBoard:
    """The todo board: ordered items, each a model of the shared :class:`ItemMachine`."""

    def __init__(
        self,
        *,
        limit: int = DEFAULT_ITEM_LIMIT,
        policy: EdgePolicy = EdgePolicy.STRICT,
        machine: ItemMachine | None = None,
        initial: Sequence[PlanItem] = (),
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self.policy = EdgePolicy(policy)
        self._machine = machine if machine is not None else ItemMachine()
        self._models: dict[str, _ItemModel] = {}
        self._staged: Mapping[str, _ItemModel] = {}
        self._passing: set[int] = set()
        self._fired: list[ItemTransition] = []
        self._observers: list[Callable[[PlanRecord], None]] = []
        self._revision = 0
        self._rendered: tuple[int, str] | None = None
        #: Runs an item's acceptance check where bash runs; wired in by the session.
        self.run_check: Callable[[str], CheckResult] | None = None
        #: The ``TaskCompleted`` hooks, asked after an item's own check passes (None: none).
        self.task_completed: Callable[[JSONObject], CheckResult | None] | None = None
        #: Every item's check when it has none of its own (``completion_check``, the person's).
        self.default_check: str | None = None
        #: Asked before a check the model set runs: None lets it run, else why not.
        self.vet_model_check: Callable[[str], str | None] | None = None
        self._checked: list[ItemChecked] = []
        self._initial = tuple(initial)
        if self._initial:
            self._restore(self._initial)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PlanBoard:
        """A fresh board as :attr:`config` describes it (as ``run.started`` records it).

        Raises :class:`PlanConfigError` (one line) when the recorded config cannot be a board.
        """
        try:
            board = cls(
                limit=int(config.get("limit", DEFAULT_ITEM_LIMIT)),
                policy=EdgePolicy(config.get("policy", EdgePolicy.STRICT)),
                initial=items_from_dicts(config.get("initial_items") or ()),
            )
            default = config.get("completion_check")
            board.default_check = None if default is None else str(default)
            return board
        except (KeyError, TypeError, ValueError, AttributeError, PlanError) as error:
            problem = f"missing {error}" if isinstance(error, KeyError) else str(error)
            raise PlanConfigError(f"the recorded plan config is not a board: {problem}") from None

    # -- reading ----------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def is_empty(self) -> bool:
        return not self._models

    @property
    def config(self) -> JSONObject:
        config: JSONObject = {"limit": self.limit, "policy": str(self.policy)}
        if self.default_check is not None:
            config["completion_check"] = self.default_check
        if self._initial:
            config["initial_items"] = [item.as_dict() for item in self._initial]
        return config

    @property
    def items(self) -> tuple[PlanItem, ...]:
        return tuple(model.view() for model in self._models.values())

    @property
    def progress(self) -> tuple[int, int]:
        done = sum(m.state == Status.COMPLETED for m in self._models.values())
        return done, len(self._models)

    @property
    def statuses(self) -> Mapping[str, str]:
        return {item_id: str(model.state) for item_id, model in self._models.items()}

    @property
    def in_progress(self) -> PlanItem | None:
        for model in self._models.values():
            if model.state == Status.IN_PROGRESS:
                return model.view()
        return None

    @property
    def ready(self) -> tuple[PlanItem, ...]:
        """The pending items whose blockers are all completed."""
        return ready_items(self.items)

    def render(self) -> str:
        """The seeds' format: one line per item, a blank line, then ``(k/n completed)``."""
        # Rendered once per revision: the todo result, every reminder and every compaction of
        # that revision show the same text.
        if self._rendered is None or self._rendered[0] != self._revision:
            text = render_items(model.view() for model in self._models.values())
            self._rendered = (self._revision, text)
        return self._rendered[1]

    def subscribe(self, observer: Callable[[PlanRecord], None]) -> None:
        self._observers.append(observer)

    # -- writing ----------------------------------------------------------------------------

    def apply(self, payload: object) -> PlanUpdated:
        """Apply one ``todo`` input atomically; on :class:`PlanError` nothing has changed."""
        try:
            update = self._apply(payload)
        except PlanError as error:
            self._publish_checks()
            self._publish(PlanRejected(type(error).__name__, str(error), error.item_id))
            raise
        self._publish_checks()
        for transition in update.transitions:
            self._publish(transition)
        self._publish(update)
        return update

    def reset(self) -> PlanUpdated:
        """Forget every item (the chat's ``/reset``); observers hear a ``reset`` update."""
        for model in self._models.values():
            self._machine.remove_model(model)
        self._models = {}
        self._revision += 1
        update = PlanUpdated(self._revision, (), (), merge=False, reset=True)
        self._publish(update)
        return update

    def _restore(self, items: Sequence[PlanItem]) -> None:
        """Take over items saved earlier, in their saved states, after checking the rules."""
        _check_unique(items)
        if len(items) > self.limit:
            raise PlanLimitError(f"Max {self.limit} todos allowed (got {len(items)})")
        _dependency_order({item.id: item.blocked_by for item in items})
        active = [item.id for item in items if item.status == Status.IN_PROGRESS]
        if len(active) > 1:
            raise InProgressConflictError(
                f"Only one task can be in_progress at a time: {_ids(active)} are", active[1]
            )
        status_of = {item.id: item.status for item in items}
        for item in items:
            waiting = unfinished_blockers(item, status_of)
            if waiting and item.status in (Status.IN_PROGRESS, Status.COMPLETED):
                raise BlockedItemError(
                    f"Item #{item.id} is {item.status} but blocked by {_ids(waiting)}", item.id
                )
        for item in items:
            model = _ItemModel(
                self,
                item.id,
                item.text,
                item.active_form,
                item.priority,
                item.blocked_by,
                item.check,
                item.check_by or ("person" if item.check is not None else None),
            )
            self._machine.add_model(model, initial=str(item.status))
            self._models[item.id] = model

    def _apply(self, payload: object) -> PlanUpdated:
        batch = _parse_batch(payload)
        entries, merge = batch.entries, batch.merge
        _check_unique(entries)
        order = self._final_order(entries, merge)
        if len(order) > self.limit:
            raise PlanLimitError(
                f"Max {self.limit} todos allowed (got {len(order)}); "
                f"merge or drop items so at most {self.limit} remain"
            )
        depth = (
            _dependency_order(self._final_blockers(entries, order))
            if self._has_dependencies(entries)
            else {}  # no edge anywhere: nothing to check, every depth is 0
        )
        new_models: dict[str, _ItemModel] = {}
        moves: list[_Move] = []
        for entry in entries:
            existing = self._models.get(entry.id)
            if existing is None:
                if not entry.text:
                    raise BlankTextError(
                        f"Item #{entry.id}: text required; a new item needs a text", entry.id
                    )
                model = _ItemModel(
                    self,
                    entry.id,
                    entry.text,
                    entry.active_form or "",
                    entry.priority,
                    entry.blocked_by or (),
                    entry.check or None,
                    "model" if entry.check else None,
                )
                new_models[entry.id] = model
                move = self._plan_move(model, entry.status or Status.PENDING)
            else:
                move = None if entry.status is None else self._plan_move(existing, entry.status)
            if move is not None:
                moves.append(move)
        kept = set(order)
        if not merge:
            dropped = [m for i, m in self._models.items() if i not in kept]
            moves.extend(
                _Move(m, ("cancel",), Status(m.state), Status.CANCELLED)
                for m in dropped
                if m.state not in FINAL_STATUSES
            )
        rewired = {
            self._models[e.id]: e.blocked_by
            for e in entries
            if e.blocked_by is not None and e.id in self._models
        }
        rechecked = self._rechecked(entries)
        self._fire(moves, new_models, rewired, depth, rechecked)
        # Everything below is plain bookkeeping that cannot fail.
        for entry in entries:
            model = self._models.get(entry.id) or new_models[entry.id]
            if entry.text:
                model.text = entry.text
            if entry.active_form is not None:
                model.active_form = entry.active_form
            if entry.priority is not None:
                model.priority = entry.priority
        merged = {**self._models, **new_models}
        for item_id in set(self._models) - kept:
            self._machine.remove_model(self._models[item_id])
        self._models = {item_id: merged[item_id] for item_id in order}
        self._revision += 1
        fired, self._fired = tuple(self._fired), []
        return PlanUpdated(self._revision, self.items, fired, merge, explanation=batch.explanation)

    def _rechecked(
        self, entries: Sequence[_Entry]
    ) -> dict[_ItemModel, tuple[str | None, str | None]]:
        """The checks this batch sets or removes on existing items; a person's stay as set."""
        changes: dict[_ItemModel, tuple[str | None, str | None]] = {}
        for entry in entries:
            model = self._models.get(entry.id)
            if model is None or entry.check is None or (entry.check or None) == model.check:
                continue
            if model.check is not None and model.check_by == "person":
                raise CheckProtectedError(
                    f"Item #{model.id}: its check `{_shown_command(model.check)}` was set by "
                    "the person running you; it cannot be changed or removed. Make it pass instead",
                    model.id,
                )
            changes[model] = (entry.check or None, "model" if entry.check else None)
        return changes

    def _final_order(self, entries: Sequence[_Entry], merge: bool) -> list[str]:
        if not merge:
            return [entry.id for entry in entries]
        added = [e.id for e in entries if e.id not in self._models]
        return [*self._models, *added]

    def _has_dependencies(self, entries: Sequence[_Entry]) -> bool:
        """Whether the batch or the board names any blocker (a ``[]`` batch entry does not)."""
        return any(e.blocked_by for e in entries) or any(
            m.blocked_by for m in self._models.values()
        )

    def _final_blockers(
        self, entries: Sequence[_Entry], order: Sequence[str]
    ) -> dict[str, tuple[str, ...]]:
        """Each item's ``blocked_by`` after the batch: a given list replaces, none keeps."""
        given = {e.id: e.blocked_by for e in entries if e.blocked_by is not None}
        blockers: dict[str, tuple[str, ...]] = {}
        for item_id in order:
            model = self._models.get(item_id)
            kept = model.blocked_by if model is not None else ()
            blockers[item_id] = given.get(item_id, kept)
        return blockers

    def _plan_move(self, model: _ItemModel, target: Status) -> _Move | None:
        """The walk to ``target``; None when the item is there already (nothing to fire)."""
        src = _STATUS_OF[model.state]
        if src is target:
            # Most items of a full rewrite keep their status: no move keeps the batch's work
            # (and the garbage it leaves) proportional to what changes.
            return None
        path = self._machine.path(src, target)
        if path is not None and (len(path) <= 1 or self.policy is EdgePolicy.LENIENT):
            return _Move(model, path, src, target)
        raise IllegalEdgeError(self._edge_advice(model.id, src, target, path), model.id)

    def _edge_advice(
        self, item_id: str, src: Status, dst: Status, path: tuple[str, ...] | None
    ) -> str:
        edge = f"Item #{item_id}: {src} → {dst}"
        if path is not None:
            via = self._machine.path(src, dst)
            assert via is not None
            step = Status(next(t["dest"] for t in ITEM_TRANSITIONS if t["trigger"] == via[0]))
            return f"{edge} skips {step}; mark #{item_id} {step} first"
        legal = self._machine.legal_triggers(src)
        if not legal:
            return f"{edge} is not allowed: {src} is final; add a new item instead"
        moves = ", ".join(f"{trigger} (→ {dst_})" for trigger, dst_ in legal)
        return f"{edge} is not an edge; from {src} the legal moves are {moves}"

    def _fire(
        self,
        moves: list[_Move],
        new_models: Mapping[str, _ItemModel],
        rewired: Mapping[_ItemModel, tuple[str, ...]],
        depth: Mapping[str, int],
        rechecked: Mapping[_ItemModel, tuple[str | None, str | None]] | None = None,
    ) -> None:
        """Fire every planned edge in phase order; on a refusal roll back and raise.

        Within a phase, blockers fire before the items waiting for them, so a lenient batch that
        completes #2 and then #4 (blocked by #2) passes #4's ``dependencies_completed`` guard.
        """
        for model in new_models.values():
            self._machine.add_model(model)
        before = {id(m.model): m.model.state for m in moves}
        wired_before = {model: model.blocked_by for model in rewired}
        for model, blockers in rewired.items():
            model.blocked_by = blockers
        rechecked = rechecked or {}
        checks_before = {model: (model.check, model.check_by) for model in rechecked}
        for model, (check, check_by) in rechecked.items():
            model.check, model.check_by = check, check_by
        self._fired = []
        self._staged = new_models
        self._passing = {id(m.model) for m in moves if m.passes_through}
        try:
            self._run_checks(moves)
            for move in sorted(moves, key=lambda m: (m.phase, depth.get(m.model.id, 0))):
                for trigger in move.triggers:
                    if not getattr(move.model, trigger)():
                        raise self._refused(move, trigger)
            self._check_waiting(rewired)
        except PlanError:
            for move in moves:
                self._machine.set_state(before[id(move.model)], model=move.model)
            for model, blockers in wired_before.items():
                model.blocked_by = blockers
            for model, (check, check_by) in checks_before.items():
                model.check, model.check_by = check, check_by
            for model in new_models.values():
                self._machine.remove_model(model)
            self._fired = []
            raise
        finally:
            self._staged = {}
            self._passing = set()

    def _check_waiting(self, rewired: Iterable[_ItemModel]) -> None:
        """An item given new blockers may wait for unfinished work only while it is pending."""
        for model in rewired:
            waiting = self._unfinished(model)
            if waiting and model.state in (Status.IN_PROGRESS, Status.COMPLETED):
                names = ", ".join(f"#{b} ({self._state_of(b)})" for b in waiting)
                fix = f"pause #{model.id} first, or " if model.state == Status.IN_PROGRESS else ""
                raise BlockedItemError(
                    f"Item #{model.id}: blocked_by {names} on an item that is {model.state}; "
                    f"only a pending item may wait for unfinished work: {fix}finish "
                    f"{_ids(waiting)} first",
                    model.id,
                )

    def _candidates(self) -> Iterable[_ItemModel]:
        """Every item the start guard must see: the board's and this batch's new ones."""
        yield from self._models.values()
        yield from self._staged.values()

    def _passes_through(self, model: _ItemModel) -> bool:
        return id(model) in self._passing

    def _state_of(self, item_id: str) -> str | None:
        model = self._models.get(item_id) or self._staged.get(item_id)
        return None if model is None else model.state

    def _unfinished(self, model: _ItemModel) -> list[str]:
        return [b for b in model.blocked_by if self._state_of(b) != Status.COMPLETED]

    def _refused(self, move: _Move, trigger: str) -> PlanError:
        if trigger != "complete" or move.model.checked is None:
            return self._start_refused(move)
        return check_failed(move.model.id, move.model.checked)

    def _start_refused(self, move: _Move) -> PlanError:
        model = move.model
        waiting = self._unfinished(model)
        if waiting:
            names = ", ".join(f"#{b} ({self._state_of(b)})" for b in waiting)
            cancelled = [b for b in waiting if self._state_of(b) == Status.CANCELLED]
            if cancelled:
                fix = (
                    f"a cancelled blocker never unblocks: drop {_ids(cancelled)} from "
                    f"#{model.id}'s blocked_by, or cancel #{model.id}"
                )
            else:
                fix = f"finish {_ids(waiting)} first"
            return BlockedItemError(
                f"Item #{model.id}: {move.src} → {move.target} is blocked by {names}; {fix}",
                model.id,
            )
        other = next(
            m for m in self._candidates() if m is not model and m.state == Status.IN_PROGRESS
        )
        return InProgressConflictError(
            f"Only one task can be in_progress at a time: #{other.id} is in progress; "
            f"complete or pause #{other.id} before starting #{model.id}",
            model.id,
        )

    def _publish(self, record: PlanRecord) -> None:
        for observer in self._observers:
            observer(record)

    def _publish_checks(self) -> None:
        checked, self._checked = self._checked, []
        for record in checked:
            self._publish(record)

    def check_for(self, model: _ItemModel) -> str | None:
        """The command that guards ``model``'s completion: its own check, else the default."""
        return model.check if model.check is not None else self.default_check

    def _run_checks(self, moves: Sequence[_Move]) -> None:
        """Run the check of every item this batch completes, before any edge fires."""
        for move in moves:
            model = move.model
            model.checked = None
            if "complete" not in move.triggers:
                continue
            command = self.check_for(model)
            if command is not None and model.check is not None and model.check_by == "model":
                why = None if self.vet_model_check is None else self.vet_model_check(command)
                if why is not None:
                    raise check_not_allowed(model.id, command, why)
            if command is not None:
                if self.run_check is None:
                    result = CheckResult(command, 127, "no way to run checks here")
                else:
                    result = self.run_check(command)
                model.checked = result
                self._checked.append(ItemChecked(model.id, result))
                if not result.passed:
                    continue
            hooked = (
                None if self.task_completed is None else self.task_completed(self._asked(model))
            )
            if hooked is not None:
                model.checked = hooked
                self._checked.append(ItemChecked(model.id, hooked))

    @staticmethod
    def _asked(model: _ItemModel) -> JSONObject:
        """The item as a ``TaskCompleted`` hook sees it: completed, as the update would leave it."""
        return {**model.view().as_dict(), "status": Status.COMPLETED.value}


def _check_unique(entries: Sequence[_Entry] | Sequence[PlanItem]) -> None:
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise DuplicateIdError(
                f"Item #{_shown(entry.id)}: duplicate id; give every item its own id", entry.id
            )
        seen.add(entry.id)


# --- the todo tool --------------------------------------------------------------------------

_TODO_DESCRIPTION = (
    "Update task list. Track progress on multi-step tasks. Send the whole list each time, or "
    '"merge": true with only the items that change (an existing item needs only id and status). '
    "Statuses: pending, in_progress, completed, cancelled. Exactly one item may be in_progress; "
    "mark an item in_progress before working on it and completed when done. Items left out of "
    "a full rewrite are cancelled and removed. blocked_by: ids that must be completed first "
    "(a cancelled one still blocks; [] clears). Unknown keys are refused."
)


class TodoBoard(Protocol):
    """What the ``todo`` tool writes to: a board of one agent, or one agent's shared board."""

    def apply(self, payload: object) -> PlanUpdated: ...

    def render(self) -> str: ...


class TodoTool:
    """The ``todo`` tool: the model's only way to write to the board."""

    name = "todo"

    def __init__(self, board: TodoBoard) -> None:
        self.board = board

    @property
    def schema(self) -> JSONObject:
        item = {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "text": {"type": "string"},
                "status": {"type": "string", "enum": [str(s) for s in Status]},
                "active_form": {
                    "type": "string",
                    "description": "Present-tense label shown while in progress",
                },
                "priority": {"type": "string", "enum": [str(p) for p in Priority]},
                "blocked_by": {"type": "array", "items": {"type": "string"}},
                "check": {
                    "type": "string",
                    "description": "A shell command that must exit 0 before the item may be "
                    'completed (e.g. "pytest -q tests/test_x.py"); "" removes your own check',
                },
            },
            "required": ["id", "status"],
            "additionalProperties": False,
        }
        return {
            "name": self.name,
            "description": _TODO_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": item},
                    "merge": {"type": "boolean"},
                    "explanation": {"type": "string", "description": "Why the plan changed"},
                },
                # Not "required": ["items"]: a peer's ``todos`` must reach the board, which
                # names the missing list itself.
                "additionalProperties": False,
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.board.apply(arguments)
        return ToolResult(self.board.render())
