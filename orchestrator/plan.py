"""The plan board: todo items as guarded ``transitions`` state machines, and the ``todo`` tool.

Each item is a model of one shared :class:`ItemMachine` whose edges are declared as data in
:data:`ITEM_TRANSITIONS`. The single-in-progress rule is the ``start`` edge's guard, which looks
at the whole board. A ``todo`` call is applied as one batch: its shape is checked first, then
every edge fires in a safe order, and if any edge is refused the fired ones are rolled back, so a
rejected batch leaves the board exactly as it was and observers hear nothing but the rejection.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
from transitions import EventData, Machine

from orchestrator.protocols import JSONObject, PlanRecord, ToolError, ToolResult


class Status(enum.StrEnum):
    """An item's state; the values are the statuses on the wire."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class EdgePolicy(enum.StrEnum):
    """How far one batch may move an item: one edge (strict) or a walk of edges (lenient)."""

    STRICT = "strict"
    LENIENT = "lenient"


#: The item machine's edges, as data. ``completed`` and ``cancelled`` have no way out.
ITEM_TRANSITIONS: tuple[Mapping[str, Any], ...] = (
    {
        "trigger": "start",
        "source": "pending",
        "dest": "in_progress",
        "conditions": "no_other_item_in_progress",
    },
    {"trigger": "complete", "source": "in_progress", "dest": "completed"},
    {"trigger": "pause", "source": "in_progress", "dest": "pending"},
    {"trigger": "cancel", "source": ["pending", "in_progress"], "dest": "cancelled"},
)

_STATUS_OF = {str(status): status for status in Status}
FINAL_STATUSES = frozenset({Status.COMPLETED, Status.CANCELLED})
DEFAULT_ITEM_LIMIT = 20

_MARKERS = {
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

    def as_dict(self) -> JSONObject:
        data: JSONObject = {"id": self.id, "text": self.text, "status": str(self.status)}
        if self.active_form:
            data["active_form"] = self.active_form
        return data


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
    """Render items in the seeds' format, byte for byte; ``No todos.`` when there are none."""
    lines = []
    done = 0
    for item in items:
        line = f"{_MARKERS[item.status]} #{item.id}: {item.text}"
        if item.status == Status.IN_PROGRESS and item.active_form:
            line += f" ({item.active_form})"
        lines.append(line)
        done += item.status == Status.COMPLETED
    if not lines:
        return "No todos."
    return "\n".join(lines) + f"\n\n({done}/{len(lines)} completed)"


def items_from_dicts(raw: Iterable[Mapping[str, Any]]) -> tuple[PlanItem, ...]:
    """Rebuild item views from their ``as_dict`` form (as ``plan.updated`` events carry them)."""
    return tuple(
        PlanItem(str(d["id"]), str(d["text"]), Status(d["status"]), str(d.get("active_form", "")))
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


# --- the machine ----------------------------------------------------------------------------


def item_machine_options() -> dict[str, Any]:
    """The item machine's definition as ``Machine`` keyword arguments, for every way to build it."""
    return {
        # Plain strings, not the enum: transitions names enum states by member name.
        "states": [str(s) for s in Status],
        "transitions": [dict(t) for t in ITEM_TRANSITIONS],
        "initial": str(Status.PENDING),
        "auto_transitions": False,
        "send_event": True,
        "after_state_change": "record_transition",
    }


class ItemMachine(Machine):
    """The one machine every item of every board is a model of (``add_model``)."""

    def __init__(self) -> None:
        super().__init__(model=None, **item_machine_options())
        self._paths = _shortest_paths(ITEM_TRANSITIONS)

    def path(self, src: Status, dst: Status) -> tuple[str, ...] | None:
        """The shortest trigger sequence from ``src`` to ``dst``, or None when there is none."""
        return self._paths.get((src, dst))

    def legal_triggers(self, src: Status) -> tuple[tuple[str, Status], ...]:
        """The (trigger, destination) pairs leaving ``src``, in table order."""
        return tuple(
            (trigger, Status(dst))
            for source, trigger, dst in table_edges(ITEM_TRANSITIONS)
            if source == src
        )


def table_edges(table: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """A ``transitions`` table as (source, trigger, dest) edges, one per source, in order."""
    edges: list[tuple[str, str, str]] = []
    for t in table:
        sources = t["source"] if isinstance(t["source"], list | tuple) else [t["source"]]
        edges.extend((str(src), str(t["trigger"]), str(t["dest"])) for src in sources)
    return tuple(edges)


def _shortest_paths(
    table: Iterable[Mapping[str, Any]],
) -> dict[tuple[Status, Status], tuple[str, ...]]:
    edges: dict[Status, list[tuple[str, Status]]] = {s: [] for s in Status}
    for src, trigger, dst in table_edges(table):
        edges[Status(src)].append((trigger, Status(dst)))
    paths: dict[tuple[Status, Status], tuple[str, ...]] = {}
    for origin in Status:
        frontier: list[tuple[Status, tuple[str, ...]]] = [(origin, ())]
        seen = {origin}
        while frontier:
            state, path = frontier.pop(0)
            paths[(origin, state)] = path
            for trigger, dst in edges[state]:
                if dst not in seen:
                    seen.add(dst)
                    frontier.append((dst, (*path, trigger)))
    return paths


@attrs.define(slots=False, eq=False)
class _ItemModel:
    """The mutable model ``transitions`` drives; the board hands out :class:`PlanItem` views."""

    board: PlanBoard
    id: str
    text: str
    active_form: str = ""
    state: str = Status.PENDING.value

    # Guards and callbacks named in ITEM_TRANSITIONS / ItemMachine.
    def no_other_item_in_progress(self, event: EventData) -> bool:
        return all(
            other is self or other.state != Status.IN_PROGRESS for other in self.board._candidates()
        )

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
        return PlanItem(self.id, self.text, _STATUS_OF[self.state], self.active_form)


def _shown(value: str, limit: int = 60) -> str:
    """A model-supplied value made safe for a one-line message: no control characters."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- parsing --------------------------------------------------------------------------------


@attrs.frozen
class _Entry:
    """One validated item of a batch; ``None`` fields keep the item's current value."""

    id: str
    text: str | None
    status: Status | None
    active_form: str | None


_EXAMPLE = '{"items": [{"id": "1", "text": "Read hello.py", "status": "in_progress"}]}'


def _parse_batch(payload: object) -> tuple[list[_Entry], bool]:
    if not isinstance(payload, Mapping):
        raise PlanShapeError(f"todo input must be an object like {_EXAMPLE}")
    merge = payload.get("merge", False)
    if not isinstance(merge, bool):
        raise PlanShapeError(f"'merge' must be true or false, got {type(merge).__name__}")
    raw_items = payload.get("items")
    if not isinstance(raw_items, list):
        got = "nothing" if raw_items is None else type(raw_items).__name__
        raise PlanShapeError(f"'items' must be a list of todo objects, got {got}; send {_EXAMPLE}")
    entries: list[_Entry] = []
    for index, raw in enumerate(raw_items):
        if not isinstance(raw, Mapping):
            raise PlanShapeError(
                f"Item {index + 1} is not an object (got {type(raw).__name__}); "
                'each item is {"id", "text", "status"}'
            )
        entries.append(_parse_entry(raw, index, merge=merge))
    return entries, merge


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
    status: Status | None = None
    if raw.get("status") is not None:
        word = str(raw["status"]).strip().lower()
        try:
            status = Status(word)
        except ValueError:
            allowed = ", ".join(Status)
            raise UnknownStatusError(
                f"Item #{_shown(item_id)}: invalid status '{_shown(word)}'; use one of {allowed}",
                item_id,
            ) from None
    active = raw.get("active_form")
    active_form = None if active is None else " ".join(str(active).split())
    return _Entry(item_id, text, status, active_form)


# --- the board ------------------------------------------------------------------------------


@attrs.frozen
class _Move:
    """A planned walk of one item through the machine, fired in :meth:`PlanBoard._fire`."""

    model: _ItemModel
    triggers: tuple[str, ...]

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


class PlanBoard:
    """The todo board: ordered items, each a model of the shared :class:`ItemMachine`."""

    def __init__(
        self,
        *,
        limit: int = DEFAULT_ITEM_LIMIT,
        policy: EdgePolicy = EdgePolicy.STRICT,
        machine: ItemMachine | None = None,
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self.limit = limit
        self.policy = EdgePolicy(policy)
        self._machine = machine if machine is not None else ItemMachine()
        self._models: dict[str, _ItemModel] = {}
        self._staged: Mapping[str, _ItemModel] = {}
        self._fired: list[ItemTransition] = []
        self._observers: list[Callable[[PlanRecord], None]] = []
        self._revision = 0

    # -- reading ----------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def is_empty(self) -> bool:
        return not self._models

    @property
    def config(self) -> JSONObject:
        return {"limit": self.limit, "policy": str(self.policy)}

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

    def render(self) -> str:
        """The seeds' format: one line per item, a blank line, then ``(k/n completed)``."""
        return render_items(model.view() for model in self._models.values())

    def subscribe(self, observer: Callable[[PlanRecord], None]) -> None:
        self._observers.append(observer)

    # -- writing ----------------------------------------------------------------------------

    def apply(self, payload: object) -> PlanUpdated:
        """Apply one ``todo`` input atomically; on :class:`PlanError` nothing has changed."""
        try:
            update = self._apply(payload)
        except PlanError as error:
            self._publish(PlanRejected(type(error).__name__, str(error), error.item_id))
            raise
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

    def _apply(self, payload: object) -> PlanUpdated:
        entries, merge = _parse_batch(payload)
        _check_unique(entries)
        order = self._final_order(entries, merge)
        if len(order) > self.limit:
            raise PlanLimitError(
                f"Max {self.limit} todos allowed (got {len(order)}); "
                f"merge or drop items so at most {self.limit} remain"
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
                model = _ItemModel(self, entry.id, entry.text, entry.active_form or "")
                new_models[entry.id] = model
                moves.append(self._plan_move(model, entry.status or Status.PENDING))
            elif entry.status is not None:
                moves.append(self._plan_move(existing, entry.status))
        if not merge:
            dropped = [m for i, m in self._models.items() if i not in order]
            moves.extend(_Move(m, ("cancel",)) for m in dropped if m.state not in FINAL_STATUSES)
        self._fire(moves, new_models)
        # Everything below is plain bookkeeping that cannot fail.
        for entry in entries:
            model = self._models.get(entry.id) or new_models[entry.id]
            if entry.text:
                model.text = entry.text
            if entry.active_form is not None:
                model.active_form = entry.active_form
        merged = {**self._models, **new_models}
        for item_id in set(self._models) - set(order):
            self._machine.remove_model(self._models[item_id])
        self._models = {item_id: merged[item_id] for item_id in order}
        self._revision += 1
        fired, self._fired = tuple(self._fired), []
        return PlanUpdated(self._revision, self.items, fired, merge)

    def _final_order(self, entries: Sequence[_Entry], merge: bool) -> list[str]:
        if not merge:
            return [entry.id for entry in entries]
        added = [e.id for e in entries if e.id not in self._models]
        return [*self._models, *added]

    def _plan_move(self, model: _ItemModel, target: Status) -> _Move:
        src = Status(model.state)
        path = self._machine.path(src, target)
        if path is not None and (len(path) <= 1 or self.policy is EdgePolicy.LENIENT):
            return _Move(model, path)
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

    def _fire(self, moves: list[_Move], new_models: Mapping[str, _ItemModel]) -> None:
        """Fire every planned edge in phase order; on a refusal roll back and raise."""
        for model in new_models.values():
            self._machine.add_model(model)
        before = {id(m.model): m.model.state for m in moves}
        self._fired = []
        self._staged = new_models
        try:
            for move in sorted(moves, key=lambda m: m.phase):
                for trigger in move.triggers:
                    if not getattr(move.model, trigger)():
                        raise self._start_refused(move.model)
        except PlanError:
            for move in moves:
                self._machine.set_state(before[id(move.model)], model=move.model)
            for model in new_models.values():
                self._machine.remove_model(model)
            self._fired = []
            raise
        finally:
            self._staged = {}

    def _candidates(self) -> Iterable[_ItemModel]:
        """Every item the start guard must see: the board's and this batch's new ones."""
        yield from self._models.values()
        yield from self._staged.values()

    def _start_refused(self, model: _ItemModel) -> InProgressConflictError:
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


def _check_unique(entries: Sequence[_Entry]) -> None:
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
    "a full rewrite are cancelled and removed."
)


class TodoTool:
    """The ``todo`` tool: the model's only way to write to the board."""

    name = "todo"

    def __init__(self, board: PlanBoard) -> None:
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
            },
            "required": ["id", "status"],
        }
        return {
            "name": self.name,
            "description": _TODO_DESCRIPTION,
            "input_schema": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": item},
                    "merge": {"type": "boolean"},
                },
                "required": ["items"],
            },
        }

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        self.board.apply(arguments)
        return ToolResult(self.board.render())
