"""Tests for orchestrator.plan: the guarded item machine, atomic batches, errors, rendering."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from orchestrator.plan import (
    DEFAULT_ITEM_LIMIT,
    ITEM_TRANSITIONS,
    BlankTextError,
    BlockedItemError,
    DependencyCycleError,
    DuplicateIdError,
    EdgePolicy,
    IllegalEdgeError,
    InProgressConflictError,
    InvalidPriorityError,
    ItemMachine,
    ItemTransition,
    PlanBoard,
    PlanError,
    PlanItem,
    PlanLimitError,
    PlanRejected,
    PlanShapeError,
    Priority,
    Status,
    TodoTool,
    UnknownDependencyError,
    UnknownKeyError,
    UnknownStatusError,
    items_from_dicts,
    render_items,
)
from orchestrator.protocols import JSONObject, Plan, PlanRecord, Tool, ToolError, ToolResult
from orchestrator.tools import ToolRegistry
from tests.budget import examples

PENDING, IN_PROGRESS = Status.PENDING, Status.IN_PROGRESS
COMPLETED, CANCELLED = Status.COMPLETED, Status.CANCELLED

#: The issue's edge table, written out independently of ITEM_TRANSITIONS.
EDGES: dict[tuple[Status, Status], str] = {
    (PENDING, IN_PROGRESS): "start",
    (IN_PROGRESS, COMPLETED): "complete",
    (IN_PROGRESS, PENDING): "pause",
    (PENDING, CANCELLED): "cancel",
    (IN_PROGRESS, CANCELLED): "cancel",
}
MARKERS = {PENDING: "[ ]", IN_PROGRESS: "[>]", COMPLETED: "[x]", CANCELLED: "[-]"}


# --- helpers ----------------------------------------------------------------------------------


def todo(
    item_id: str, status: str | None = None, text: str | None = None, **extra: str | list[str]
) -> Any:
    entry: dict[str, str | list[str]] = {"id": item_id, **extra}
    if text is not None:
        entry["text"] = text
    if status is not None:
        entry["status"] = status
    return entry


def rewrite(*entries: Mapping[str, Any]) -> dict[str, Any]:
    """A full rewrite; entries without text get a default one, as the seeds' shape requires."""
    items = [{"text": f"Step {e['id']}", **e} for e in entries]
    return {"items": items}


def merge(*entries: Mapping[str, Any]) -> dict[str, Any]:
    return {"items": [dict(e) for e in entries], "merge": True}


def statuses(board: PlanBoard) -> dict[str, Status]:
    return {item.id: item.status for item in board.items}


@attrs.define
class Recorder:
    records: list[PlanRecord] = attrs.field(factory=list)

    def __call__(self, record: PlanRecord) -> None:
        self.records.append(record)

    @property
    def transitions(self) -> list[ItemTransition]:
        return [r for r in self.records if isinstance(r, ItemTransition)]

    @property
    def edges(self) -> list[tuple[str, str, Status, Status]]:
        return [(t.item_id, t.trigger, t.src, t.dst) for t in self.transitions]


@attrs.frozen
class Snapshot:
    items: tuple[PlanItem, ...]
    render: str
    revision: int
    models: tuple[int, ...]
    states: tuple[str, ...]

    @classmethod
    def of(cls, board: PlanBoard, machine: ItemMachine) -> Snapshot:
        return cls(
            board.items,
            board.render(),
            board.revision,
            tuple(id(m) for m in machine.models),
            tuple(str(m.state) for m in machine.models),
        )


@attrs.define
class Rig:
    board: PlanBoard
    machine: ItemMachine
    recorder: Recorder

    def snapshot(self) -> Snapshot:
        return Snapshot.of(self.board, self.machine)


def make_rig(policy: EdgePolicy = EdgePolicy.STRICT, limit: int = DEFAULT_ITEM_LIMIT) -> Rig:
    machine = ItemMachine()
    board = PlanBoard(policy=policy, limit=limit, machine=machine)
    recorder = Recorder()
    board.subscribe(recorder)
    return Rig(board, machine, recorder)


@pytest.fixture
def rig() -> Rig:
    return make_rig()


@pytest.fixture
def lenient() -> Rig:
    return make_rig(EdgePolicy.LENIENT)


def place(board: PlanBoard, status: Status, item_id: str = "1") -> None:
    """Put one item into ``status`` through legal single edges."""
    first = IN_PROGRESS if status in (IN_PROGRESS, COMPLETED) else status
    board.apply(merge(todo(item_id, first, f"Step {item_id}")))
    if status is COMPLETED:
        board.apply(merge(todo(item_id, "completed")))


def assert_refused(
    rig: Rig, payload: object, error: type[PlanError], item_id: str | None = None
) -> PlanError:
    """Apply a batch that must be refused and check that nothing changed and nothing leaked."""
    before = rig.snapshot()
    rig.recorder.records.clear()
    with pytest.raises(error) as info:
        rig.board.apply(payload)
    assert isinstance(info.value, PlanError)
    assert isinstance(info.value, ToolError)
    message = str(info.value)
    assert message
    assert "\n" not in message
    assert info.value.item_id == item_id
    if item_id is not None:
        assert f"#{item_id}" in message
    assert rig.snapshot() == before
    assert rig.recorder.records == [PlanRejected(error.__name__, message, item_id)]
    return info.value


# --- the edge table as data -------------------------------------------------------------------


def test_transition_table_is_exactly_the_issue_edges() -> None:
    declared = set()
    for row in ITEM_TRANSITIONS:
        sources = row["source"] if isinstance(row["source"], list | tuple) else [row["source"]]
        for src in sources:
            guards = row.get("conditions")
            declared.add(
                (row["trigger"], src, row["dest"], tuple(guards) if guards is not None else None)
            )
    assert declared == {
        (
            "start",
            "pending",
            "in_progress",
            ("no_other_item_in_progress", "dependencies_completed"),
        ),
        ("complete", "in_progress", "completed", ("held_by_actor", "check_passes")),
        ("pause", "in_progress", "pending", ("held_by_actor",)),
        ("cancel", "pending", "cancelled", ("held_by_actor",)),
        ("cancel", "in_progress", "cancelled", ("held_by_actor",)),
        # A shared board's claim whose lease ran out (issue 23).
        ("expire", "in_progress", "pending", ("lease_expired",)),
    }


def test_item_machine_has_the_contract_states_and_triggers() -> None:
    machine = ItemMachine()
    assert set(machine.states) == {"pending", "in_progress", "completed", "cancelled"}
    assert set(machine.events) == {"start", "complete", "pause", "cancel", "expire"}
    assert machine.initial == "pending"
    (start,) = machine.get_transitions("start")
    assert [(c.func, c.target) for c in start.conditions] == [
        ("no_other_item_in_progress", True),
        ("dependencies_completed", True),
    ]
    for trigger, guards in (
        ("complete", ["held_by_actor", "check_passes"]),
        ("pause", ["held_by_actor"]),
        ("cancel", ["held_by_actor"]),
    ):
        assert all(
            [c.func for c in t.conditions] == guards for t in machine.get_transitions(trigger)
        )
    # A board of one agent never takes the store's edge, and never advises it.
    assert "expire" not in {t for t, _ in machine.legal_triggers(Status.IN_PROGRESS)}


def test_item_machine_paths_and_legal_triggers() -> None:
    machine = ItemMachine()
    assert machine.legal_triggers(PENDING) == (("start", IN_PROGRESS), ("cancel", CANCELLED))
    assert machine.legal_triggers(IN_PROGRESS) == (
        ("complete", COMPLETED),
        ("pause", PENDING),
        ("cancel", CANCELLED),
    )
    assert machine.legal_triggers(COMPLETED) == ()
    assert machine.legal_triggers(CANCELLED) == ()
    assert machine.path(PENDING, COMPLETED) == ("start", "complete")
    assert machine.path(IN_PROGRESS, IN_PROGRESS) == ()
    assert machine.path(COMPLETED, PENDING) is None
    assert machine.path(CANCELLED, IN_PROGRESS) is None


# --- every edge through PlanBoard.apply -------------------------------------------------------


@pytest.mark.parametrize("dst", list(Status), ids=str)
@pytest.mark.parametrize("src", list(Status), ids=str)
def test_apply_allows_the_four_edges_and_only_them(rig: Rig, src: Status, dst: Status) -> None:
    place(rig.board, src)
    assert statuses(rig.board) == {"1": src}
    revision = rig.board.revision
    rig.recorder.records.clear()
    if src == dst or (src, dst) in EDGES:
        update = rig.board.apply(merge(todo("1", str(dst))))
        assert statuses(rig.board) == {"1": dst}
        expected = [] if src == dst else [("1", EDGES[(src, dst)], src, dst)]
        assert rig.recorder.edges == expected
        assert [(t.item_id, t.trigger, t.src, t.dst) for t in update.transitions] == expected
        assert rig.board.revision == revision + 1
    else:
        error = assert_refused(rig, merge(todo("1", str(dst))), IllegalEdgeError, "1")
        assert str(error).startswith(f"Item #1: {src} → {dst}")


def test_strict_pending_to_completed_is_refused_with_the_fix(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    error = assert_refused(
        rig, rewrite(todo("1", "in_progress"), todo("2", "completed")), IllegalEdgeError, "2"
    )
    assert str(error) == "Item #2: pending → completed skips in_progress; mark #2 in_progress first"


def test_strict_new_item_starts_pending_so_it_cannot_be_created_completed(rig: Rig) -> None:
    error = assert_refused(rig, rewrite(todo("1", "completed")), IllegalEdgeError, "1")
    assert "skips in_progress" in str(error)


@pytest.mark.parametrize("final", [COMPLETED, CANCELLED], ids=str)
@pytest.mark.parametrize("policy", list(EdgePolicy), ids=str)
def test_final_states_have_no_way_out(policy: EdgePolicy, final: Status) -> None:
    rig = make_rig(policy)
    place(rig.board, final)
    for dst in Status:
        if dst is final:
            continue
        error = assert_refused(rig, merge(todo("1", str(dst))), IllegalEdgeError, "1")
        assert f"{final} is final" in str(error)


@pytest.mark.parametrize("word", ["IN_PROGRESS", "In_Progress", " in_progress ", "in_PROGRESS"])
def test_status_is_read_case_insensitively(rig: Rig, word: str) -> None:
    rig.board.apply(rewrite(todo("1", word), todo("2", "PENDING")))
    assert statuses(rig.board) == {"1": IN_PROGRESS, "2": PENDING}
    rig.board.apply(merge(todo("1", "Completed"), todo("2", "CANCELLED")))
    assert statuses(rig.board) == {"1": COMPLETED, "2": CANCELLED}


# --- the single-in-progress guard and batch ordering ------------------------------------------


def test_two_items_entering_in_progress_are_refused_naming_the_one_in_progress(rig: Rig) -> None:
    error = assert_refused(
        rig,
        rewrite(todo("1", "in_progress"), todo("2", "in_progress")),
        InProgressConflictError,
        "2",
    )
    assert str(error).startswith("Only one task can be in_progress at a time")
    assert "#1 is in progress" in str(error)


def test_starting_a_second_item_while_one_stays_in_progress_is_refused(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    error = assert_refused(rig, merge(todo("2", "in_progress")), InProgressConflictError, "2")
    assert "#1 is in progress" in str(error)
    assert statuses(rig.board) == {"1": IN_PROGRESS, "2": PENDING}


@pytest.mark.parametrize("listed_first", ["1", "2"])
def test_completing_one_and_starting_the_next_in_one_batch(rig: Rig, listed_first: str) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    rig.recorder.records.clear()
    batch = {"1": todo("1", "completed"), "2": todo("2", "in_progress")}
    other = "2" if listed_first == "1" else "1"
    rig.board.apply(rewrite(batch[listed_first], batch[other]))
    assert statuses(rig.board) == {"1": COMPLETED, "2": IN_PROGRESS}
    # Leaving in_progress fires before entering it, whatever order the batch lists them in.
    assert rig.recorder.edges == [
        ("1", "complete", IN_PROGRESS, COMPLETED),
        ("2", "start", PENDING, IN_PROGRESS),
    ]
    lines = {"1": "[x] #1: Step 1", "2": "[>] #2: Step 2"}
    expected = f"{lines[listed_first]}\n{lines[other]}\n\n(1/2 completed)"
    assert rig.board.render() == expected


@pytest.mark.parametrize("listed_first", ["1", "2"])
def test_pausing_one_and_starting_another_in_one_batch(rig: Rig, listed_first: str) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    rig.recorder.records.clear()
    batch = {"1": todo("1", "pending"), "2": todo("2", "in_progress")}
    other = "2" if listed_first == "1" else "1"
    rig.board.apply(merge(batch[listed_first], batch[other]))
    assert statuses(rig.board) == {"1": PENDING, "2": IN_PROGRESS}
    assert rig.recorder.edges == [
        ("1", "pause", IN_PROGRESS, PENDING),
        ("2", "start", PENDING, IN_PROGRESS),
    ]


def test_cancelling_the_in_progress_item_frees_the_slot_in_the_same_batch(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress")))
    rig.board.apply(merge(todo("1", "cancelled"), todo("2", "in_progress", "New")))
    assert statuses(rig.board) == {"1": CANCELLED, "2": IN_PROGRESS}


# --- lenient policy ---------------------------------------------------------------------------


def test_lenient_walks_pending_to_completed_recording_both_edges(lenient: Rig) -> None:
    lenient.board.apply(rewrite(todo("1", "pending"), todo("2", "pending")))
    lenient.recorder.records.clear()
    update = lenient.board.apply(merge(todo("2", "completed")))
    assert statuses(lenient.board) == {"1": PENDING, "2": COMPLETED}
    expected = [("2", "start", PENDING, IN_PROGRESS), ("2", "complete", IN_PROGRESS, COMPLETED)]
    assert lenient.recorder.edges == expected
    assert [(t.item_id, t.trigger, t.src, t.dst) for t in update.transitions] == expected


def test_lenient_new_item_may_be_created_completed(lenient: Rig) -> None:
    lenient.board.apply(rewrite(todo("1", "completed"), todo("2", "in_progress")))
    assert statuses(lenient.board) == {"1": COMPLETED, "2": IN_PROGRESS}
    assert ("1", "start", PENDING, IN_PROGRESS) in lenient.recorder.edges
    assert ("1", "complete", IN_PROGRESS, COMPLETED) in lenient.recorder.edges


def test_lenient_judges_the_end_state_so_a_walk_past_the_item_in_progress_passes(
    lenient: Rig,
) -> None:
    # The issue's case: from "[>] #2, [ ] #1" the update "[x] #1, [>] #2" never asks to start
    # #1 while #2 works; the end state keeps every invariant, so lenient mode accepts it.
    lenient.board.apply(rewrite(todo("2", "in_progress"), todo("1", "pending")))
    lenient.recorder.records.clear()
    lenient.board.apply(rewrite(todo("1", "completed"), todo("2", "in_progress")))
    assert statuses(lenient.board) == {"1": COMPLETED, "2": IN_PROGRESS}
    assert lenient.recorder.edges == [
        ("1", "start", PENDING, IN_PROGRESS),
        ("1", "complete", IN_PROGRESS, COMPLETED),
    ]


def test_strict_still_refuses_that_batch_naming_the_move_asked_for(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("2", "in_progress"), todo("1", "pending")))
    error = assert_refused(
        rig, rewrite(todo("1", "completed"), todo("2", "in_progress")), IllegalEdgeError, "1"
    )
    assert str(error) == "Item #1: pending → completed skips in_progress; mark #1 in_progress first"


def test_lenient_refuses_an_end_state_with_two_items_in_progress(lenient: Rig) -> None:
    lenient.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    error = assert_refused(lenient, merge(todo("2", "in_progress")), InProgressConflictError, "2")
    assert "before starting #2" in str(error)


def test_lenient_walk_is_allowed_when_the_in_progress_item_leaves(lenient: Rig) -> None:
    lenient.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    lenient.recorder.records.clear()
    lenient.board.apply(merge(todo("2", "completed"), todo("1", "completed")))
    assert statuses(lenient.board) == {"1": COMPLETED, "2": COMPLETED}
    assert lenient.recorder.edges == [
        ("1", "complete", IN_PROGRESS, COMPLETED),
        ("2", "start", PENDING, IN_PROGRESS),
        ("2", "complete", IN_PROGRESS, COMPLETED),
    ]


# --- active_form ------------------------------------------------------------------------------


def test_active_form_is_shown_only_while_in_progress(rig: Rig) -> None:
    rig.board.apply(
        rewrite(
            todo("1", "pending", "Read hello.py", active_form="Reading hello.py"),
            todo("2", "in_progress", "Add type hints", active_form="Adding type hints"),
        )
    )
    assert rig.board.render() == (
        "[ ] #1: Read hello.py\n[>] #2: Add type hints (Adding type hints)\n\n(0/2 completed)"
    )
    assert rig.board.items[1].active_form == "Adding type hints"
    rig.board.apply(merge(todo("2", "completed"), todo("1", "in_progress")))
    assert rig.board.render() == (
        "[>] #1: Read hello.py (Reading hello.py)\n[x] #2: Add type hints\n\n(1/2 completed)"
    )


def test_in_progress_item_without_active_form_has_no_parentheses(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress", "Add type hints")))
    assert rig.board.render() == "[>] #1: Add type hints\n\n(0/1 completed)"


# --- omitted items in a full rewrite ----------------------------------------------------------


def test_omitted_items_leave_the_list_cancelling_open_ones_first(rig: Rig) -> None:
    rig.board.apply(
        rewrite(
            todo("1", "in_progress"),
            todo("2", "pending"),
            todo("3", "pending"),
            todo("4", "cancelled"),
        )
    )
    rig.board.apply(merge(todo("1", "completed"), todo("2", "in_progress")))
    assert statuses(rig.board) == {"1": COMPLETED, "2": IN_PROGRESS, "3": PENDING, "4": CANCELLED}
    rig.recorder.records.clear()
    update = rig.board.apply(rewrite(todo("5", "pending", "Fresh start")))
    assert rig.board.render() == "[ ] #5: Fresh start\n\n(0/1 completed)"
    assert [item.id for item in rig.board.items] == ["5"]
    cancels = {("2", "cancel", IN_PROGRESS, CANCELLED), ("3", "cancel", PENDING, CANCELLED)}
    assert set(rig.recorder.edges) == cancels
    assert len(rig.recorder.edges) == 2
    assert {(t.item_id, t.trigger, t.src, t.dst) for t in update.transitions} == cancels
    assert [m.id for m in rig.machine.models] == ["5"]


def test_empty_rewrite_clears_the_board(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    rig.recorder.records.clear()
    rig.board.apply({"items": []})
    assert rig.board.render() == "No todos."
    assert rig.board.is_empty
    assert sorted(rig.recorder.edges) == [
        ("1", "cancel", IN_PROGRESS, CANCELLED),
        ("2", "cancel", PENDING, CANCELLED),
    ]
    assert rig.machine.models == []


# --- merge ------------------------------------------------------------------------------------


def test_merge_touches_only_listed_items_and_appends_new_ones(rig: Rig) -> None:
    rig.board.apply(
        rewrite(
            todo("1", "in_progress", "Read hello.py"),
            todo("2", "pending", "Add type hints"),
            todo("3", "pending", "Add docstrings"),
        )
    )
    rig.recorder.records.clear()
    update = rig.board.apply(
        merge({"id": "1", "status": "completed"}, todo("4", None, "Run tests"))
    )
    assert update.merge
    assert rig.board.items == (
        PlanItem("1", "Read hello.py", COMPLETED),
        PlanItem("2", "Add type hints", PENDING),
        PlanItem("3", "Add docstrings", PENDING),
        PlanItem("4", "Run tests", PENDING),
    )
    assert rig.recorder.edges == [("1", "complete", IN_PROGRESS, COMPLETED)]


def test_merge_can_rename_an_item_and_set_its_active_form(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending", "Old text")))
    rig.board.apply(merge(todo("1", "in_progress", "New text", active_form="Doing it")))
    assert rig.board.render() == "[>] #1: New text (Doing it)\n\n(0/1 completed)"


def test_merge_cancelled_item_renders_with_a_dash(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress", "Read"), todo("2", "pending", "Write")))
    rig.board.apply(merge(todo("2", "cancelled")))
    assert rig.board.render() == "[>] #1: Read\n[-] #2: Write\n\n(0/2 completed)"


def test_merge_new_item_needs_text(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending")))
    error = assert_refused(rig, merge({"id": "2", "status": "pending"}), BlankTextError, "2")
    assert "text required" in str(error)


def test_merge_item_needs_an_id(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending")))
    assert_refused(rig, merge({"text": "No id", "status": "pending"}), PlanShapeError)


# --- atomicity --------------------------------------------------------------------------------


def test_refused_batch_rolls_back_edges_that_already_fired(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending"), todo("3", "pending")))
    # 1 completes and 2 starts before the guard refuses 3.
    error = assert_refused(
        rig,
        rewrite(todo("1", "completed"), todo("2", "in_progress"), todo("3", "in_progress")),
        InProgressConflictError,
        "3",
    )
    assert "#2 is in progress" in str(error)
    assert statuses(rig.board) == {"1": IN_PROGRESS, "2": PENDING, "3": PENDING}
    # The board is usable afterwards and its guard was not left confused.
    rig.board.apply(merge(todo("1", "completed"), todo("3", "in_progress")))
    assert statuses(rig.board) == {"1": COMPLETED, "2": PENDING, "3": IN_PROGRESS}


def test_refused_batch_with_new_items_leaves_no_models_behind(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress")))
    assert_refused(
        rig,
        merge(todo("2", "pending", "New a"), todo("3", "in_progress", "New b")),
        InProgressConflictError,
        "3",
    )
    assert [m.id for m in rig.machine.models] == ["1"]
    # A staged new item that reached in_progress must not haunt the guard afterwards.
    assert_refused(
        rig,
        rewrite(todo("1", "completed"), todo("2", "in_progress"), todo("3", "in_progress")),
        InProgressConflictError,
        "3",
    )
    rig.board.apply(merge(todo("1", "completed"), todo("3", "in_progress", "New b")))
    assert statuses(rig.board) == {"1": COMPLETED, "3": IN_PROGRESS}


def test_refused_batch_with_illegal_edge_keeps_new_items_out(rig: Rig) -> None:
    place(rig.board, COMPLETED)
    assert_refused(
        rig, rewrite(todo("2", "in_progress", "New"), todo("1", "pending")), IllegalEdgeError, "1"
    )
    assert statuses(rig.board) == {"1": COMPLETED}


def test_refused_rewrite_does_not_cancel_omitted_items(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    assert_refused(rig, rewrite(todo("3", "done")), UnknownStatusError, "3")
    assert_refused(
        rig,
        rewrite(todo("3", "in_progress"), todo("4", "in_progress")),
        InProgressConflictError,
        "4",
    )
    assert statuses(rig.board) == {"1": IN_PROGRESS, "2": PENDING}


# --- the error cases --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"items": "1. read 2. write"},
        {"items": {"id": "1", "text": "x", "status": "pending"}},
        {"items": None},
        {},
        ["not", "an", "object"],
        "items",
        None,
    ],
    ids=repr,
)
def test_items_not_a_list_is_a_shape_error(rig: Rig, payload: object) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress")))
    assert_refused(rig, payload, PlanShapeError)


@pytest.mark.parametrize("bad", [1, "write tests", ["1", "x", "pending"], None], ids=repr)
def test_item_not_an_object_is_a_shape_error(rig: Rig, bad: object) -> None:
    error = assert_refused(rig, {"items": [todo("1", "pending", "ok"), bad]}, PlanShapeError)
    assert "Item 2" in str(error)


def test_merge_flag_must_be_a_boolean(rig: Rig) -> None:
    error = assert_refused(rig, {"items": [], "merge": "yes"}, PlanShapeError)
    assert "merge" in str(error)


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_blank_text_is_refused(rig: Rig, text: str) -> None:
    error = assert_refused(
        rig, rewrite(todo("1", "pending", "Fine"), todo("2", "pending", text)), BlankTextError, "2"
    )
    assert str(error).startswith("Item #2: text required")


@pytest.mark.parametrize("word", ["done", "DONE", "blocked", "in progress", ""])
def test_unknown_status_is_refused(rig: Rig, word: str) -> None:
    error = assert_refused(
        rig, rewrite(todo("1", "pending"), todo("2", word)), UnknownStatusError, "2"
    )
    assert str(error).startswith(f"Item #2: invalid status '{word.lower()}'")
    for status in Status:
        assert str(status) in str(error)


def test_duplicate_ids_are_refused(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending")))
    error = assert_refused(
        rig, merge(todo("7", "pending", "a"), todo("7", "pending", "b")), DuplicateIdError, "7"
    )
    assert "duplicate" in str(error)


def test_default_limit_is_twenty(rig: Rig) -> None:
    twenty = rewrite(*(todo(str(n), "pending") for n in range(1, 21)))
    rig.board.apply(twenty)
    assert rig.board.progress == (0, 20)
    error = assert_refused(rig, merge(todo("21", "pending", "One too many")), PlanLimitError)
    assert str(error).startswith("Max 20 todos allowed")
    error = assert_refused(
        rig, rewrite(*(todo(str(n), "pending") for n in range(1, 22))), PlanLimitError
    )
    assert str(error).startswith("Max 20 todos allowed")


def test_limit_is_configurable() -> None:
    rig = make_rig(limit=3)
    assert rig.board.limit == 3
    error = assert_refused(rig, rewrite(*(todo(str(n)) for n in range(1, 5))), PlanLimitError)
    assert str(error).startswith("Max 3 todos allowed")
    rig.board.apply(rewrite(*(todo(str(n)) for n in range(1, 4))))
    assert_refused(rig, merge(todo("4", "pending", "Fourth")), PlanLimitError)
    # A rewrite that drops one to make room is fine.
    rig.board.apply(rewrite(todo("1"), todo("2"), todo("4", "pending", "Fourth")))
    assert [item.id for item in rig.board.items] == ["1", "2", "4"]


def test_limit_below_one_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="limit"):
        PlanBoard(limit=0)


def test_error_classes_are_plan_and_tool_errors() -> None:
    for error in (
        PlanShapeError,
        PlanLimitError,
        BlankTextError,
        UnknownStatusError,
        DuplicateIdError,
        InProgressConflictError,
        IllegalEdgeError,
    ):
        assert issubclass(error, PlanError)
        assert issubclass(error, ToolError)


def test_unknown_status_with_a_newline_still_gives_a_one_line_message(rig: Rig) -> None:
    with pytest.raises(UnknownStatusError) as info:
        rig.board.apply(rewrite(todo("1", "done\nreally")))
    assert "\n" not in str(info.value)


def test_an_id_with_a_newline_is_refused_in_one_line(rig: Rig) -> None:
    # Ids are printed on every rendered line, so a control character in one is refused outright.
    with pytest.raises(PlanShapeError) as info:
        rig.board.apply(rewrite(todo("a\nb", "pending"), todo("a\nb", "pending")))
    assert "\n" not in str(info.value)
    assert rig.board.items == ()


def test_duplicate_ids_name_the_item(rig: Rig) -> None:
    with pytest.raises(DuplicateIdError) as info:
        rig.board.apply(rewrite(todo("7", "pending"), todo("7", "pending", "Again")))
    assert str(info.value).startswith("Item #7: duplicate id")


def test_full_rewrite_requires_text_even_for_existing_items(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending")))
    assert_refused(rig, {"items": [{"id": "1", "status": "in_progress"}]}, BlankTextError, "1")


# --- rendering --------------------------------------------------------------------------------


def test_render_is_the_seeds_format_byte_for_byte(rig: Rig) -> None:
    assert rig.board.render() == "No todos."
    rig.board.apply(
        rewrite(
            todo("1", "in_progress", "Read hello.py"),
            todo("2", "pending", "Add type hints", active_form="Adding type hints"),
            todo("3", "pending", "Add docstrings"),
            todo("4", "pending", "Port to Python 2"),
        )
    )
    rig.board.apply(merge(todo("1", "completed"), todo("2", "in_progress")))
    rig.board.apply(merge(todo("4", "cancelled")))
    assert rig.board.render() == (
        "[x] #1: Read hello.py\n"
        "[>] #2: Add type hints (Adding type hints)\n"
        "[ ] #3: Add docstrings\n"
        "[-] #4: Port to Python 2\n"
        "\n"
        "(1/4 completed)"
    )


def test_render_items_renders_views_without_a_board() -> None:
    assert render_items([]) == "No todos."
    items = [
        PlanItem("1", "Read", COMPLETED, "Reading"),
        PlanItem("2", "Write", IN_PROGRESS, "Writing"),
        PlanItem("3", "Test", PENDING, "Testing"),
        PlanItem("4", "Ship", CANCELLED),
    ]
    assert render_items(items) == (
        "[x] #1: Read\n[>] #2: Write (Writing)\n[ ] #3: Test\n[-] #4: Ship\n\n(1/4 completed)"
    )


def test_items_from_dicts_round_trips_the_updated_record(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress", "Read", active_form="Reading"), todo("2")))
    update = rig.board.apply(merge(todo("2", "cancelled")))
    rebuilt = items_from_dicts(update.fields()["items"])
    assert rebuilt == rig.board.items
    assert render_items(rebuilt) == rig.board.render()


def test_reset_empties_the_board(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress")))
    revision = rig.board.revision
    rig.board.reset()
    assert rig.board.render() == "No todos."
    assert rig.board.revision > revision
    assert rig.machine.models == []
    rig.board.apply(rewrite(todo("1", "in_progress")))
    assert statuses(rig.board) == {"1": IN_PROGRESS}


# --- observability ----------------------------------------------------------------------------


def test_observers_get_transitions_then_the_update(rig: Rig) -> None:
    first = rig.board.apply(
        rewrite(
            todo("1", "in_progress", "Read", active_form="Reading"), todo("2", "pending", "Write")
        )
    )
    assert first.revision == 1 == rig.board.revision
    rig.recorder.records.clear()
    update = rig.board.apply(merge(todo("1", "completed"), todo("2", "in_progress")))
    complete = ItemTransition(item_id="1", trigger="complete", src=IN_PROGRESS, dst=COMPLETED)
    start = ItemTransition(item_id="2", trigger="start", src=PENDING, dst=IN_PROGRESS)
    assert rig.recorder.records == [complete, start, update]
    assert complete.event == "plan.transition"
    assert complete.fields() == {
        "item": "1",
        "trigger": "complete",
        "src": IN_PROGRESS,
        "dst": COMPLETED,
    }
    assert update.event == "plan.updated"
    assert update.revision == 2 == rig.board.revision
    assert update.transitions == (complete, start)
    assert update.completed == 1
    assert update.fields() == {
        "revision": 2,
        "merge": True,
        "items": [
            {"id": "1", "text": "Read", "status": "completed", "active_form": "Reading"},
            {"id": "2", "text": "Write", "status": "in_progress"},
        ],
        "completed": 1,
        "total": 2,
        "transitions": 2,
    }


def test_rejection_is_published_without_transitions(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    rig.recorder.records.clear()
    with pytest.raises(InProgressConflictError):
        rig.board.apply(
            rewrite(todo("1", "completed"), todo("2", "in_progress"), todo("3", "in_progress"))
        )
    (record,) = rig.recorder.records
    assert isinstance(record, PlanRejected)
    assert record.event == "plan.rejected"
    assert record.fields()["error"] == "InProgressConflictError"
    assert record.fields()["item"] == "3"
    assert str(record.fields()["message"]).startswith("Only one task can be in_progress")
    assert rig.board.revision == 1


def test_items_are_read_only_views_with_status_values(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress", "Read", active_form="Reading")))
    (item,) = rig.board.items
    assert item == PlanItem("1", "Read", Status.IN_PROGRESS, "Reading")
    assert isinstance(item.status, Status)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        item.status = Status.COMPLETED  # type: ignore[misc]
    assert rig.board.in_progress == item
    assert rig.board.progress == (0, 1)
    assert not rig.board.is_empty


def test_board_satisfies_the_plan_protocol(rig: Rig) -> None:
    plan: Plan = rig.board
    seen: list[PlanRecord] = []
    plan.subscribe(seen.append)
    assert plan.is_empty
    rig.board.apply(rewrite(todo("1")))
    assert plan.revision == 1
    assert [r.event for r in seen] == ["plan.updated"]


# --- the todo tool ----------------------------------------------------------------------------


def test_todo_tool_schema() -> None:
    tool: Tool = TodoTool(PlanBoard())
    schema = tool.schema
    assert tool.name == "todo" == schema["name"]
    assert schema["description"]
    input_schema = schema["input_schema"]
    assert input_schema["type"] == "object"
    # No "required": a peer's "todos" must reach the board, which names a missing list itself.
    assert "required" not in input_schema
    assert input_schema["additionalProperties"] is False
    assert set(input_schema["properties"]) == {"items", "merge", "explanation"}
    assert input_schema["properties"]["items"]["type"] == "array"
    item = input_schema["properties"]["items"]["items"]
    assert item["additionalProperties"] is False
    assert set(item["properties"]) == {
        "id",
        "text",
        "status",
        "active_form",
        "priority",
        "blocked_by",
        "check",
    }
    assert item["properties"]["priority"]["enum"] == ["high", "medium", "low"]
    assert set(item["properties"]["status"]["enum"]) == {str(s) for s in Status}
    assert input_schema["properties"]["merge"]["type"] == "boolean"


def test_todo_tool_run_returns_the_rendered_board() -> None:
    board = PlanBoard()
    tool = TodoTool(board)
    result = tool.run(rewrite(todo("1", "in_progress", "Read hello.py")))
    assert result == ToolResult("[>] #1: Read hello.py\n\n(0/1 completed)")
    assert not result.is_error
    with pytest.raises(PlanError):
        tool.run({"items": "nope"})
    with pytest.raises(ToolError):
        tool.run(merge(todo("1", "pending"), todo("2", "in_progress", "x"), todo("3", "bogus")))
    assert board.render() == "[>] #1: Read hello.py\n\n(0/1 completed)"


# --- boards sharing one machine ---------------------------------------------------------------


def test_boards_sharing_a_machine_do_not_see_each_other() -> None:
    machine = ItemMachine()
    left = PlanBoard(machine=machine)
    right = PlanBoard(machine=machine, policy=EdgePolicy.LENIENT)
    left.apply(rewrite(todo("1", "in_progress"), todo("2", "pending")))
    right.apply(rewrite(todo("1", "in_progress")))
    assert left.in_progress is not None
    assert right.in_progress is not None
    right.apply(merge(todo("1", "completed"), todo("2", "completed", "Walk")))
    assert statuses(left) == {"1": IN_PROGRESS, "2": PENDING}
    assert statuses(right) == {"1": COMPLETED, "2": COMPLETED}
    with pytest.raises(InProgressConflictError):
        left.apply(merge(todo("2", "in_progress")))
    assert len(machine.models) == 4


# --- dependencies -----------------------------------------------------------------------------


def deps_board(policy: EdgePolicy = EdgePolicy.STRICT) -> Rig:
    """#1 in progress; #2 and #3 pending; #4 waits for #2 and #3."""
    rig = make_rig(policy)
    rig.board.apply(
        rewrite(
            todo("1", "in_progress"),
            todo("2", "pending"),
            todo("3", "pending"),
            todo("4", "pending", blocked_by=["2", "3"]),
        )
    )
    rig.recorder.records.clear()
    return rig


def test_render_shows_unfinished_blockers_and_the_next_ready_items() -> None:
    rig = deps_board()
    assert rig.board.render() == (
        "[>] #1: Step 1\n[ ] #2: Step 2\n[ ] #3: Step 3\n[ ] #4: Step 4 (blocked by #2, #3)"
        "\n\n(0/4 completed)\nNext ready: #2, #3"
    )
    rig.board.apply(merge(todo("1", "completed"), todo("2", "in_progress")))
    rig.board.apply(merge(todo("2", "completed"), todo("3", "in_progress")))
    assert rig.board.render().splitlines()[3] == "[ ] #4: Step 4 (blocked by #3)"
    assert rig.board.render().endswith("\nNext ready: none")
    rig.board.apply(merge(todo("3", "completed")))
    assert rig.board.render().splitlines()[3] == "[ ] #4: Step 4"
    assert rig.board.render().endswith("(3/4 completed)\nNext ready: #4")
    assert [item.id for item in rig.board.ready] == ["4"]


def test_the_tool_reply_names_the_next_ready_item() -> None:
    board = PlanBoard()
    result = TodoTool(board).run(
        rewrite(todo("1", "in_progress"), todo("2", "pending", blocked_by=["1"]), todo("3"))
    )
    assert result.text.endswith("(0/3 completed)\nNext ready: #3")


@pytest.mark.parametrize("policy", list(EdgePolicy), ids=str)
def test_a_blocked_item_can_be_neither_started_nor_completed(policy: EdgePolicy) -> None:
    rig = deps_board(policy)
    rig.board.apply(merge(todo("1", "completed")))
    error = assert_refused(rig, merge(todo("4", "in_progress")), BlockedItemError, "4")
    assert str(error) == (
        "Item #4: pending → in_progress is blocked by #2 (pending), #3 (pending); "
        "finish #2, #3 first"
    )
    expected = IllegalEdgeError if policy is EdgePolicy.STRICT else BlockedItemError
    error = assert_refused(rig, merge(todo("4", "completed")), expected, "4")
    if policy is EdgePolicy.LENIENT:
        # The refusal names the move asked for: completing #4, not starting it.
        assert str(error).startswith("Item #4: pending → completed is blocked by #2 (pending)")


def test_completing_the_blocker_and_starting_the_dependent_in_one_batch(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending", blocked_by=["1"])))
    rig.board.apply(rewrite(todo("2", "in_progress", blocked_by=["1"]), todo("1", "completed")))
    assert statuses(rig.board) == {"1": COMPLETED, "2": IN_PROGRESS}


def test_lenient_walks_a_chain_of_dependents_in_dependency_order(lenient: Rig) -> None:
    lenient.board.apply(
        rewrite(
            todo("3", "pending", blocked_by=["2"]),
            todo("2", "pending", blocked_by=["1"]),
            todo("1", "pending"),
        )
    )
    lenient.recorder.records.clear()
    lenient.board.apply(
        merge(todo("3", "completed"), todo("2", "completed"), todo("1", "completed"))
    )
    assert [e[0] for e in lenient.recorder.edges] == ["1", "1", "2", "2", "3", "3"]


@pytest.mark.parametrize("policy", list(EdgePolicy), ids=str)
def test_without_dependencies_edges_fire_in_batch_order_as_before(policy: EdgePolicy) -> None:
    rig = make_rig(policy)
    rig.board.apply(rewrite(todo("1"), todo("2"), todo("3")))
    rig.recorder.records.clear()
    rig.board.apply(merge(todo("3", "cancelled"), todo("1", "cancelled")))
    assert [edge[0] for edge in rig.recorder.edges] == ["3", "1"]


def test_a_cancelled_blocker_still_blocks_until_the_dependency_is_dropped(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "pending"), todo("2", "pending", blocked_by=["1"])))
    rig.board.apply(merge(todo("1", "cancelled")))
    assert rig.board.render().splitlines()[1] == "[ ] #2: Step 2 (blocked by #1)"
    error = assert_refused(rig, merge(todo("2", "in_progress")), BlockedItemError, "2")
    assert str(error) == (
        "Item #2: pending → in_progress is blocked by #1 (cancelled); a cancelled blocker "
        "never unblocks: drop #1 from #2's blocked_by, or cancel #2"
    )
    rig.board.apply(merge({"id": "2", "status": "in_progress", "blocked_by": []}))
    assert statuses(rig.board)["2"] is IN_PROGRESS


def test_merge_blocked_by_replaces_the_list_and_empty_clears_it() -> None:
    rig = deps_board()
    rig.board.apply(merge({"id": "4", "blocked_by": ["3"]}))
    assert rig.board.items[3].blocked_by == ("3",)
    rig.board.apply(merge({"id": "4", "status": "pending"}))  # no blocked_by: kept
    assert rig.board.items[3].blocked_by == ("3",)
    rig.board.apply(merge({"id": "4", "blockedBy": []}))
    assert not rig.board.items[3].blocked_by
    assert "Next ready" not in rig.board.render()


def test_a_full_rewrite_that_drops_a_blocker_must_drop_the_dependency(rig: Rig) -> None:
    rig.board.apply(rewrite(todo("1", "in_progress"), todo("2", "pending", blocked_by=["1"])))
    error = assert_refused(rig, rewrite(todo("2", "pending")), UnknownDependencyError, "2")
    assert "#1, which is not in the plan" in str(error)
    rig.board.apply(rewrite(todo("2", "pending", blocked_by=[])))
    assert statuses(rig.board) == {"2": PENDING}


def test_an_item_in_progress_cannot_be_given_an_unfinished_blocker() -> None:
    rig = deps_board()
    error = assert_refused(rig, merge({"id": "1", "blocked_by": ["2"]}), BlockedItemError, "1")
    assert str(error).startswith("Item #1: blocked_by #2 (pending) on an item that is in_progress")


def test_dependency_fields_are_recorded_and_read_back() -> None:
    rig = deps_board()
    update = rig.board.apply(merge({"id": "2", "priority": "HIGH"}))
    fields = update.fields()
    assert fields["items"][1] == {
        "id": "2",
        "text": "Step 2",
        "status": "pending",
        "priority": "high",
    }
    assert fields["items"][3]["blocked_by"] == ["2", "3"]
    assert items_from_dicts(fields["items"]) == rig.board.items
    assert rig.board.items[1].priority is Priority.HIGH


def test_a_board_without_the_new_fields_records_and_renders_as_before(rig: Rig) -> None:
    update = rig.board.apply(rewrite(todo("1", "in_progress", active_form="Doing")))
    assert update.fields()["items"] == [
        {"id": "1", "text": "Step 1", "status": "in_progress", "active_form": "Doing"}
    ]
    assert "explanation" not in update.fields()
    assert rig.board.render() == "[>] #1: Step 1 (Doing)\n\n(0/1 completed)"


def test_a_long_chain_is_checked_without_recursion() -> None:
    board = PlanBoard(limit=3000)
    items = [
        {"id": str(n), "text": "x", "blocked_by": [str(n - 1)] if n else []} for n in range(3000)
    ]
    board.apply({"items": items})
    items[0]["blocked_by"] = ["2999"]
    with pytest.raises(DependencyCycleError):
        board.apply({"items": items})


# --- what an update costs ----------------------------------------------------------------------


def _moving_rewrite(size: int, active: int) -> JSONObject:
    """A full rewrite of ``size`` items: those before ``active`` completed, ``active`` started."""

    def status(n: int) -> str:
        return "completed" if n < active else "in_progress" if n == active else "pending"

    return {"items": [todo(str(n), status(n), f"Step {n}") for n in range(1, size + 1)]}


def test_a_full_rewrite_reuses_the_views_of_the_items_it_does_not_change() -> None:
    board = PlanBoard(limit=50)
    before = board.apply(_moving_rewrite(50, 1))
    after = board.apply(_moving_rewrite(50, 2))
    assert [item.status for item in after.items[:3]] == [COMPLETED, IN_PROGRESS, PENDING]
    pairs = zip(before.items, after.items, strict=True)
    changed = [n for n, (old, new) in enumerate(pairs) if old is not new]
    assert changed == [0, 1]
    assert board.items == after.items  # the record and the board hand out the same views
    renamed = board.apply({"items": [{"id": "3", "text": "Step three"}], "merge": True})
    assert renamed.items[2] == PlanItem("3", "Step three", PENDING)


def test_a_large_update_makes_garbage_in_proportion_to_the_board_not_more() -> None:
    """A young collection walks every container made since the last one, so an update that
    keeps many temporaries alive pays for them again and again: that was the superlinear cost
    past 500 items. With the interpreter's default threshold (700 new objects), moving one item
    of a 1,000-item board used to trigger about four young collections; now at most one or so.
    """
    size, updates = 1000, 10
    board = PlanBoard(limit=size)
    board.apply(_moving_rewrite(size, 1))
    payloads = [_moving_rewrite(size, active) for active in range(2, updates + 2)]
    collections: list[int] = []

    def count(phase: str, info: Mapping[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(count)
    try:
        for payload in payloads:
            board.apply(payload)
    finally:
        gc.callbacks.remove(count)
        gc.set_threshold(*threshold)
    assert board.progress == (updates, size)
    assert len(collections) <= 1.5 * updates, collections


# --- input in the peers' spellings -------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param(
            {"todos": [{"id": "1", "text": "Read", "status": "pending"}]},
            PlanItem("1", "Read", PENDING),
            id="todos",
        ),
        pytest.param(
            {"items": [{"id": "1", "content": "Read", "status": "pending"}]},
            PlanItem("1", "Read", PENDING),
            id="content",
        ),
        pytest.param(
            {"items": [{"description": "Read", "status": "pending"}]},
            PlanItem("1", "Read", PENDING),
            id="description",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "Read", "status": "in_progress", "activeForm": "R"}]},
            PlanItem("1", "Read", IN_PROGRESS, "R"),
            id="activeForm",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "Read", "status": "pending", "blockedBy": []}]},
            PlanItem("1", "Read", PENDING),
            id="blockedBy",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "Read", "status": "pending", "priority": "Low"}]},
            PlanItem("1", "Read", PENDING, priority=Priority.LOW),
            id="priority",
        ),
        pytest.param(
            {"plan": [{"step": "Read", "status": "pending"}], "explanation": "First"},
            PlanItem("1", "Read", PENDING),
            id="codex-update-plan",
        ),
        pytest.param(
            {"todos": [{"content": "Read", "status": "pending", "activeForm": "Reading"}]},
            PlanItem("1", "Read", PENDING, "Reading"),
            id="claude-code-todowrite",
        ),
    ],
)
def test_peer_spellings_are_read_as_ours(
    rig: Rig, payload: dict[str, Any], expected: PlanItem
) -> None:
    rig.board.apply(payload)
    assert rig.board.items == (expected,)


def test_a_refusal_reaches_the_model_as_an_error_result_starting_with_error() -> None:
    registry = ToolRegistry([TodoTool(PlanBoard())])
    result = registry.dispatch("todo", {"todos": [{"content": "a", "owner": "me"}]})
    assert result.is_error
    assert result.text.startswith("Error: Item 1: unknown key 'owner'; accepted keys: id, ")
    result = registry.dispatch("todo", {"todos": [{"content": "Read", "status": "pending"}]})
    assert result == ToolResult("[ ] #1: Read\n\n(0/1 completed)")


def test_explanation_is_recorded_on_the_update(rig: Rig) -> None:
    update = rig.board.apply({"items": [todo("1", "pending", "Read")], "explanation": "Why"})
    assert update.fields()["explanation"] == "Why"


# --- one row per refusal text ------------------------------------------------------------------

EXAMPLE = '{"items": [{"id": "1", "text": "Read hello.py", "status": "in_progress"}]}'
ACCEPTED_ITEM_KEYS = (
    "id, text (or content, description, step), status, active_form (or activeForm), priority, "
    "blocked_by (or blockedBy), check"
)


@pytest.mark.parametrize(
    ("payload", "error", "item_id", "message"),
    [
        pytest.param(
            {"items": [], "notes": "x"},
            UnknownKeyError,
            None,
            "todo input: unknown key 'notes'; accepted keys: items (or todos, plan), merge, "
            "explanation",
            id="unknown-top-key",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "status": "pending", "owner": "me"}]},
            UnknownKeyError,
            None,
            f"Item 1: unknown key 'owner'; accepted keys: {ACCEPTED_ITEM_KEYS}",
            id="unknown-item-key",
        ),
        pytest.param(
            {"items": [], "todos": []},
            UnknownKeyError,
            None,
            "todo input: 'items' and 'todos' are the same field; send only 'items'",
            id="both-spellings",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "content": "b"}]},
            UnknownKeyError,
            None,
            "Item 1: 'text' and 'content' are the same field; send only 'text'",
            id="both-item-spellings",
        ),
        pytest.param(
            {"todos": "all"},
            PlanShapeError,
            None,
            "'todos' must be a list of todo objects, got str; send " + EXAMPLE,
            id="todos-not-a-list",
        ),
        pytest.param(
            {"items": [], "explanation": 3},
            PlanShapeError,
            None,
            "'explanation' must be text saying why the plan changed, got int",
            id="explanation-type",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "priority": "urgent"}]},
            InvalidPriorityError,
            "1",
            "Item #1: invalid priority 'urgent'; use one of high, medium, low",
            id="priority",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "blocked_by": "2"}]},
            UnknownDependencyError,
            "1",
            'Item #1: blocked_by must be a list of item ids like ["2", "3"], got str',
            id="blocked-by-type",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "blocked_by": ["9"]}]},
            UnknownDependencyError,
            "1",
            "Item #1: blocked_by names #9, which is not in the plan; name an item the plan "
            "keeps, or drop it",
            id="unknown-id",
        ),
        pytest.param(
            {
                "items": [
                    {"id": "2", "text": "a", "blocked_by": ["4"]},
                    {"id": "4", "text": "b", "blocked_by": ["2"]},
                ]
            },
            DependencyCycleError,
            "2",
            "Dependency cycle #2 → #4 → #2: each item waits for the next, so none can start; "
            "drop one of these blocked_by entries",
            id="cycle",
        ),
        pytest.param(
            {"items": [{"id": "5", "text": "a", "blocked_by": ["5"]}]},
            DependencyCycleError,
            "5",
            "Dependency cycle #5 → #5: each item waits for the next, so none can start; "
            "drop one of these blocked_by entries",
            id="self-cycle",
        ),
        pytest.param(
            {
                "items": [
                    {"id": "1", "text": "a"},
                    {"id": "2", "text": "b", "status": "in_progress", "blocked_by": ["1"]},
                ]
            },
            BlockedItemError,
            "2",
            "Item #2: pending → in_progress is blocked by #1 (pending); finish #1 first",
            id="blocked-start",
        ),
        pytest.param(
            {"items": [{"id": "1", "text": "a", "status": "completed"}]},
            IllegalEdgeError,
            "1",
            "Item #1: pending → completed skips in_progress; mark #1 in_progress first",
            id="strict-skip",
        ),
        pytest.param(
            {
                "items": [
                    {"id": "1", "text": "a", "status": "in_progress"},
                    {"id": "2", "text": "b", "status": "in_progress"},
                ]
            },
            InProgressConflictError,
            "2",
            "Only one task can be in_progress at a time: #1 is in progress; complete or pause "
            "#1 before starting #2",
            id="two-in-progress",
        ),
    ],
)
def test_each_refusal_text(
    rig: Rig,
    payload: dict[str, Any],
    error: type[PlanError],
    item_id: str | None,
    message: str,
) -> None:
    refused = assert_refused(rig, payload, error, item_id)
    assert str(refused) == message


# --- stateful property test -------------------------------------------------------------------

STATUS_WORDS = [
    *sorted({word for s in Status for word in (s.value, s.value.upper(), s.value.title())}),
    "done",
    "blocked",
    "in progress",
]
IDS = ["1", "2", "3", "4", "5", "6"]
TEXTS = ["Read hello.py", "Add type hints", "Add docstrings", "Run tests", "Ship it", "  "]
LIMIT = 5
MALFORMED: list[object] = [
    None,
    "items",
    {},
    {"items": "all of them"},
    {"items": None},
    {"items": [1]},
    {"items": [{"id": "1", "text": "ok", "status": "pending"}, "two"]},
    {"items": [], "merge": "true"},
    {"items": [{"text": "no id", "status": "pending"}], "merge": True},
]


#: Blocker ids: the board's own, and one no batch ever creates, so unknown ids come up too.
BLOCKER_IDS = [*IDS, "9"]
#: Peers' spellings of our keys, applied at random so every rule also runs in them.
PEER_SPELLING = {"text": "content", "active_form": "activeForm", "blocked_by": "blockedBy"}


def _entries(*, full: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    optional: dict[str, st.SearchStrategy[Any]] = {
        "status": st.sampled_from(STATUS_WORDS),
        "active_form": st.sampled_from(["", "Doing it"]),
        "priority": st.sampled_from(["high", "Low", "urgent"]),
        # Random dependency graphs: any id may wait for any other, itself or an unknown one.
        "blocked_by": st.lists(st.sampled_from(BLOCKER_IDS), max_size=3),
    }
    required = {"id": st.sampled_from(IDS)}
    text = st.sampled_from(TEXTS)
    if full:
        entry = st.fixed_dictionaries({**required, "text": text}, optional=optional)
    else:
        entry = st.fixed_dictionaries(required, optional={**optional, "text": text})
    # Half the batches have distinct ids, so duplicates do not drown the other cases.
    return st.one_of(
        st.lists(entry, max_size=LIMIT, unique_by=lambda e: e["id"]),
        st.lists(entry, max_size=LIMIT),
    )


def peer_spelled(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{PEER_SPELLING.get(key, key): value for key, value in e.items()} for e in entries]


@attrs.frozen
class Expected:
    """What an independent reading of the issue predicts for one batch."""

    errors: frozenset[type[PlanError]]
    items: tuple[PlanItem, ...] = ()


def _has_cycle(graph: Mapping[str, Sequence[str]]) -> bool:
    """Kahn's algorithm, independent of the board's depth-first search."""
    waiting = {node: len(set(edges)) for node, edges in graph.items()}
    dependents: dict[str, list[str]] = {node: [] for node in graph}
    for node, edges in graph.items():
        for blocker in set(edges):
            dependents[blocker].append(node)
    free = [node for node, count in waiting.items() if count == 0]
    seen = 0
    while free:
        node = free.pop()
        seen += 1
        for dependent in dependents[node]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                free.append(dependent)
    return seen != len(graph)


def expect(
    before: Sequence[PlanItem],
    entries: Sequence[Mapping[str, Any]],
    merge: bool,
    policy: EdgePolicy,
) -> Expected:
    current = {item.id: item for item in before}
    errors: set[type[PlanError]] = set()
    parsed: list[
        tuple[str, str | None, Status | None, str | None, str | None, tuple[str, ...] | None]
    ] = []
    for entry in entries:
        text = entry.get("text")
        if text is not None and not text.strip():
            errors.add(BlankTextError)
        status = None
        if "status" in entry:
            word = entry["status"].strip().lower()
            if word in {s.value for s in Status}:
                status = Status(word)
            else:
                errors.add(UnknownStatusError)
        priority = entry.get("priority")
        if priority is not None:
            priority = priority.lower()
            if priority not in {"high", "medium", "low"}:
                errors.add(InvalidPriorityError)
        blockers = entry.get("blocked_by")
        parsed.append(
            (
                entry["id"],
                text,
                status,
                entry.get("active_form"),
                priority,
                None if blockers is None else tuple(dict.fromkeys(blockers)),
            )
        )
    ids = [p[0] for p in parsed]
    if len(set(ids)) != len(ids):
        errors.add(DuplicateIdError)
    order = [*current, *(i for i in dict.fromkeys(ids) if i not in current)] if merge else ids
    if len(order) > LIMIT:
        errors.add(PlanLimitError)
    final = dict(current) if merge else {}
    for item_id, text, status, active, priority, blockers in parsed:
        old = current.get(item_id)
        if old is None and text is None:
            errors.add(BlankTextError)
        src = old.status if old else PENDING
        dst = status or src
        walk = (src, dst) == (PENDING, COMPLETED) and policy is EdgePolicy.LENIENT
        if src != dst and (src, dst) not in EDGES and not walk:
            errors.add(IllegalEdgeError)
        final[item_id] = PlanItem(
            item_id,
            text.strip() if text else (old.text if old else ""),
            dst,
            active.strip() if active is not None else (old.active_form if old else ""),
            Priority(priority)
            if priority in {"high", "medium", "low"}
            else (old.priority if old else None),
            blockers if blockers is not None else (old.blocked_by if old else ()),
        )
    if len(set(ids)) == len(ids):
        graph = {i: final[i].blocked_by for i in order}
        if any(b not in graph for edges in graph.values() for b in edges):
            errors.add(UnknownDependencyError)
        elif _has_cycle(graph):
            errors.add(DependencyCycleError)
    if errors:
        return Expected(frozenset(errors))
    # Lenient or strict, the batch is accepted when its end state keeps the invariants.
    refusals: set[type[PlanError]] = set()
    if sum(item.status is IN_PROGRESS for item in final.values()) > 1:
        refusals.add(InProgressConflictError)
    for item in final.values():
        if item.status in (IN_PROGRESS, COMPLETED) and any(
            final[b].status is not COMPLETED for b in item.blocked_by
        ):
            refusals.add(BlockedItemError)
    if refusals:
        return Expected(frozenset(refusals))
    return Expected(frozenset(), tuple(final[i] for i in order))


def expected_render(items: Sequence[PlanItem]) -> str:
    if not items:
        return "No todos."
    lines = []
    status = {item.id: item.status for item in items}
    for item in items:
        line = f"{MARKERS[item.status]} #{item.id}: {item.text}"
        if item.status is IN_PROGRESS and item.active_form:
            line += f" ({item.active_form})"
        if item.priority is not None:
            line += f" ({item.priority} priority)"
        waiting = [b for b in item.blocked_by if status[b] is not COMPLETED]
        if waiting and item.status in (PENDING, IN_PROGRESS):
            line += " (blocked by " + ", ".join(f"#{b}" for b in waiting) + ")"
        lines.append(line)
    done = sum(item.status is COMPLETED for item in items)
    text = "\n".join(lines) + f"\n\n({done}/{len(items)} completed)"
    if any(item.blocked_by for item in items):
        ready = [
            f"#{item.id}"
            for item in items
            if item.status is PENDING and all(status[b] is COMPLETED for b in item.blocked_by)
        ]
        text += "\nNext ready: " + (", ".join(ready) or "none")
    return text


class PlanBoardMachine(RuleBasedStateMachine):
    """Random batches against a strict and a lenient board that share one ItemMachine."""

    def __init__(self) -> None:
        super().__init__()
        self.machine = ItemMachine()
        self.boards = {
            policy: PlanBoard(policy=policy, limit=LIMIT, machine=self.machine)
            for policy in EdgePolicy
        }
        self.records = {policy: Recorder() for policy in EdgePolicy}
        for policy, board in self.boards.items():
            board.subscribe(self.records[policy])
        # Per board: the edges each item on the board took, and the finished histories of
        # items that left it (ids are reused, so a history ends when its item leaves).
        self.live: dict[EdgePolicy, dict[str, list[ItemTransition]]] = {p: {} for p in EdgePolicy}
        self.finished: list[list[ItemTransition]] = []

    def _apply(self, policy: EdgePolicy, payload: object, expected: Expected) -> None:
        board, recorder = self.boards[policy], self.records[policy]
        before = (board.items, board.revision, board.render())
        recorder.records.clear()
        try:
            update = board.apply(payload)
        except PlanError as error:
            event(f"{policy}: {type(error).__name__}")
            assert expected.errors, f"refused a batch the rules allow: {error}"
            assert type(error) in expected.errors, (type(error), expected.errors)
            assert isinstance(error, ToolError)
            assert "\n" not in str(error)
            assert (board.items, board.revision, board.render()) == before
            assert recorder.records == [
                PlanRejected(type(error).__name__, str(error), error.item_id)
            ]
            return
        assert not expected.errors, f"accepted a batch that breaks {set(expected.errors)}"
        event(f"{policy}: accepted")
        if any(item.blocked_by for item in board.items):
            event(f"{policy}: accepted with dependencies")
        assert board.items == expected.items
        assert board.revision == before[1] + 1
        transitions = recorder.transitions
        assert recorder.records == [*transitions, update]
        assert update.transitions == tuple(transitions)
        assert update.items == board.items
        assert items_from_dicts(update.fields()["items"]) == board.items
        final = {item.id: item for item in board.items}
        for transition in transitions:
            if transition.trigger == "start":  # no accepted update starts a blocked item
                blockers = final[transition.item_id].blocked_by
                assert all(final[b].status is COMPLETED for b in blockers), transition
        per_item = Counter(t.item_id for t in transitions)
        assert max(per_item.values(), default=0) <= (1 if policy is EdgePolicy.STRICT else 2)
        live = self.live[policy]
        for transition in transitions:
            live.setdefault(transition.item_id, []).append(transition)
        kept = {item.id for item in board.items}
        for item_id in list(live):
            if item_id not in kept:
                self.finished.append(live.pop(item_id))

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        entries=_entries(full=True),
        peer=st.booleans(),
    )
    def rewrite_batch(self, policy: EdgePolicy, entries: list[dict[str, Any]], peer: bool) -> None:
        expected = expect(self.boards[policy].items, entries, False, policy)
        payload = {"todos": peer_spelled(entries)} if peer else {"items": entries}
        self._apply(policy, payload, expected)

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        entries=_entries(full=False),
        peer=st.booleans(),
    )
    def merge_batch(self, policy: EdgePolicy, entries: list[dict[str, Any]], peer: bool) -> None:
        expected = expect(self.boards[policy].items, entries, True, policy)
        items = peer_spelled(entries) if peer else entries
        self._apply(policy, {"items": items, "merge": True}, expected)

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        size=st.integers(min_value=2, max_value=LIMIT),
        edges=st.lists(st.tuples(st.integers(0, LIMIT - 1), st.integers(0, LIMIT - 1))),
        statuses=st.lists(st.sampled_from(["pending", "in_progress", "completed"]), max_size=LIMIT),
    )
    def dependency_graph(
        self,
        policy: EdgePolicy,
        size: int,
        edges: list[tuple[int, int]],
        statuses: list[str],
    ) -> None:
        # A fresh acyclic graph (an item waits only for earlier ones) with random statuses, so
        # boards with dependencies are accepted often enough to be walked by the other rules.
        ids = [str(n) for n in range(1, size + 1)]
        blockers: dict[str, list[str]] = {item_id: [] for item_id in ids}
        for a, b in edges:
            if max(a, b) < size and a != b:
                blockers[ids[max(a, b)]].append(ids[min(a, b)])
        entries = [
            {
                "id": item_id,
                "text": f"Step {item_id}",
                "status": statuses[n] if n < len(statuses) else "pending",
                "blocked_by": blockers[item_id],
            }
            for n, item_id in enumerate(ids)
        ]
        expected = expect(self.boards[policy].items, entries, False, policy)
        self._apply(policy, {"items": entries}, expected)

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        ring=st.lists(st.sampled_from(IDS), min_size=1, max_size=4, unique=True),
    )
    def close_a_cycle(self, policy: EdgePolicy, ring: list[str]) -> None:
        # Each listed item waits for the next and the last for the first: always refused.
        board = self.boards[policy]
        on_board = {item.id for item in board.items}
        ring = [item_id for item_id in ring if item_id in on_board]
        if not ring:
            return
        entries = [
            {"id": item_id, "blocked_by": [ring[(n + 1) % len(ring)]]}
            for n, item_id in enumerate(ring)
        ]
        self._apply(
            policy,
            {"items": entries, "merge": True},
            Expected(frozenset({DependencyCycleError})),
        )

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        item_id=st.sampled_from(IDS),
        status=st.sampled_from(list(Status)),
    )
    def move_one(self, policy: EdgePolicy, item_id: str, status: Status) -> None:
        entries = [{"id": item_id, "status": str(status), "text": f"Step {item_id}"}]
        expected = expect(self.boards[policy].items, entries, True, policy)
        self._apply(policy, {"items": entries, "merge": True}, expected)

    @rule(
        policy=st.sampled_from(list(EdgePolicy)),
        ids=st.lists(st.sampled_from(IDS), min_size=2, max_size=3, unique=True),
        finish_current=st.booleans(),
    )
    def race_to_start(self, policy: EdgePolicy, ids: list[str], finish_current: bool) -> None:
        # Several items entering in_progress at once: the first start fires, then the guard
        # refuses the next one, so the rollback of fired edges is exercised.
        board = self.boards[policy]
        entries = [{"id": item_id, "status": "in_progress", "text": "Race"} for item_id in ids]
        current = board.in_progress
        if finish_current and current is not None and current.id not in ids:
            entries.insert(0, {"id": current.id, "status": "completed"})
        expected = expect(board.items, entries, True, policy)
        self._apply(policy, {"items": entries, "merge": True}, expected)

    @rule(policy=st.sampled_from(list(EdgePolicy)), payload=st.sampled_from(MALFORMED))
    def malformed_batch(self, policy: EdgePolicy, payload: object) -> None:
        self._apply(policy, payload, Expected(frozenset({PlanShapeError})))

    @invariant()
    def at_most_one_item_in_progress(self) -> None:
        for board in self.boards.values():
            assert sum(item.status is IN_PROGRESS for item in board.items) <= 1

    @invariant()
    def no_item_in_progress_or_completed_waits_for_unfinished_work(self) -> None:
        for board in self.boards.values():
            status = {item.id: item.status for item in board.items}
            for item in board.items:
                if item.status in (IN_PROGRESS, COMPLETED):
                    assert all(status[b] is COMPLETED for b in item.blocked_by), item

    @invariant()
    def render_agrees_with_items(self) -> None:
        for board in self.boards.values():
            assert board.render() == expected_render(board.items)

    @invariant()
    def machine_holds_exactly_the_boards_items(self) -> None:
        on_boards = Counter(
            (item.id, str(item.status)) for board in self.boards.values() for item in board.items
        )
        assert Counter((m.id, str(m.state)) for m in self.machine.models) == on_boards

    @invariant()
    def histories_use_table_edges_and_chain(self) -> None:
        def chains() -> Iterator[tuple[list[ItemTransition], Status | None]]:
            for policy, board in self.boards.items():
                now = {item.id: item.status for item in board.items}
                for item_id, history in self.live[policy].items():
                    yield history, now[item_id]
            for history in self.finished:
                yield history, None

        for history, status in chains():
            previous = PENDING  # every item is born pending
            for transition in history:
                assert (transition.src, transition.dst) in EDGES
                assert EDGES[(transition.src, transition.dst)] == transition.trigger
                assert transition.src == previous
                previous = transition.dst
            if status is not None:
                assert previous == status


PlanBoardMachine.TestCase.settings = settings(
    max_examples=examples(150), stateful_step_count=30, deadline=None
)
TestPlanBoardMachine = PlanBoardMachine.TestCase


def test_reset_empties_the_board_and_tells_observers(rig: Rig) -> None:
    place(rig.board, IN_PROGRESS)
    revision = rig.board.revision
    update = rig.board.reset()
    assert rig.board.items == () and rig.board.render() == "No todos."
    assert rig.board.revision == revision + 1
    assert rig.machine.models == []
    assert update.fields()["reset"] is True and update.fields()["items"] == []
    assert rig.recorder.records[-1] == update
    # A reset board accepts a fresh plan reusing the old ids.
    rig.board.apply(rewrite(todo("1", "in_progress", "Again")))
    assert rig.board.in_progress is not None


# --- issue 24: acceptance checks on the complete edge ---------------------------------------


def _checked_board(exit_codes: list[int]) -> tuple[PlanBoard, list[str], list[Any]]:
    from orchestrator.protocols import CheckResult

    ran: list[str] = []
    records: list[Any] = []

    def run_check(command: str) -> CheckResult:
        ran.append(command)
        return CheckResult(command, exit_codes.pop(0), "1 failed, 3 passed")

    board = PlanBoard()
    board.run_check = run_check
    board.subscribe(records.append)
    return board, ran, records


def test_a_failing_check_refuses_the_whole_update_and_changes_nothing() -> None:
    from orchestrator.plan import CheckFailedError

    board, ran, records = _checked_board([1, 0])
    board.apply(
        {
            "items": [
                {"id": "1", "text": "Parse", "status": "in_progress", "check": "pytest -q"},
                {"id": "2", "text": "Docs", "status": "pending"},
            ]
        }
    )
    before = board.items
    batch = {
        "items": [{"id": "1", "status": "completed"}, {"id": "2", "status": "in_progress"}],
        "merge": True,
    }
    with pytest.raises(CheckFailedError) as refused:
        board.apply(batch)
    assert board.items == before
    assert "check `pytest -q` failed with exit code 1" in str(refused.value)
    assert "1 failed, 3 passed" in str(refused.value)
    checks = [r for r in records if r.event == "plan.check"]
    assert [(r.fields()["item"], r.fields()["exit_code"]) for r in checks] == [("1", 1)]
    board.apply(batch)  # fixed: the check passes now
    assert [item.status for item in board.items] == [Status.COMPLETED, Status.IN_PROGRESS]
    assert ran == ["pytest -q", "pytest -q"]


def test_a_persons_check_cannot_be_weakened_by_the_model() -> None:
    from orchestrator.plan import CheckProtectedError

    person = PlanItem("1", "Parse", Status.IN_PROGRESS, check="make test", check_by="person")
    board = PlanBoard(initial=[person])
    for attempt in ({"check": ""}, {"check": "true"}):
        with pytest.raises(CheckProtectedError, match="set by the person"):
            board.apply({"items": [{"id": "1", **attempt}], "merge": True})
        assert board.items == (person,)
    # The model may set, change and remove its own.
    board.apply({"items": [{"id": "2", "text": "More", "check": "pytest -q"}], "merge": True})
    board.apply({"items": [{"id": "2", "check": "pytest -q -x"}], "merge": True})
    assert board.items[1].check == "pytest -q -x" and board.items[1].check_by == "model"
    board.apply({"items": [{"id": "2", "check": ""}], "merge": True})
    assert board.items[1].check is None


def test_the_default_check_guards_every_item_without_its_own() -> None:
    board, ran, _records = _checked_board([0, 0])
    board.default_check = "make test"
    board.apply(
        {
            "items": [
                {"id": "1", "text": "a", "status": "in_progress"},
                {"id": "2", "text": "b", "check": "pytest -q b"},
            ]
        }
    )
    board.apply({"items": [{"id": "1", "status": "completed"}], "merge": True})
    board.apply({"items": [{"id": "2", "status": "in_progress"}], "merge": True})
    board.apply({"items": [{"id": "2", "status": "completed"}], "merge": True})
    assert ran == ["make test", "pytest -q b"]
    assert board.config["completion_check"] == "make test"


def test_without_a_way_to_run_checks_a_checked_item_never_completes() -> None:
    from orchestrator.plan import CheckFailedError

    board = PlanBoard()
    board.apply({"items": [{"id": "1", "text": "a", "status": "in_progress", "check": "true"}]})
    with pytest.raises(CheckFailedError, match="exit code 127"):
        board.apply({"items": [{"id": "1", "status": "completed"}], "merge": True})
