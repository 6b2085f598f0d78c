"""Tests for the loop machine: rounds, stop reasons, the audit's reminder, and tool results.

The loop runs against real tools in tmp_path and a scripted model; events are captured as
structlog event dicts, and every request it sends is checked against the API's rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from orchestrator.conversation import Conversation
from orchestrator.guard import RepeatGuard
from orchestrator.loop import (
    FINAL_LOOP_STATES,
    LOOP_STATES,
    LOOP_TRANSITIONS,
    REMINDER_TAG,
    Loop,
    LoopMachine,
    LoopSettings,
    RunOutcome,
    RunState,
)
from orchestrator.plan import PlanBoard, TodoTool
from orchestrator.protocols import Approver, JSONObject, Model, ModelError, ModelTurn
from orchestrator.script import ScriptedModel, parse_script
from orchestrator.testing import EventCapture, RecordingModel, check_request
from orchestrator.tools import ToolRegistry, Workdir, standard_tools

PLAN_ONE: JSONObject = {
    "items": [
        {"id": "1", "text": "Write the notes", "status": "in_progress"},
        {"id": "2", "text": "Check the notes", "status": "pending"},
    ]
}
PLAN_TWO: JSONObject = {
    "items": [
        {"id": "1", "text": "Write the notes", "status": "completed"},
        {"id": "2", "text": "Check the notes", "status": "in_progress"},
    ]
}
TWO_IN_PROGRESS: JSONObject = {
    "items": [
        {"id": "1", "text": "Write the notes", "status": "in_progress"},
        {"id": "2", "text": "Check the notes", "status": "in_progress"},
    ]
}


class Playlist:
    """A model that plays ready-made turns, or raises the exceptions placed among them."""

    def __init__(self, *entries: ModelTurn | BaseException) -> None:
        self.entries = list(entries)

    @property
    def name(self) -> str:
        return "playlist"

    def respond(self, request: Mapping[str, Any], on_text: Callable[[str], None]) -> ModelTurn:
        entry = self.entries.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        on_text(entry.text)
        return entry


@attrs.define
class Run:
    """What a finished run left behind, for assertions."""

    outcome: RunOutcome
    requests: list[JSONObject]
    events: Sequence[Mapping[str, Any]]
    board: PlanBoard
    loop: Loop
    text: list[str]

    def named(self, name: str) -> list[Mapping[str, Any]]:
        return [event for event in self.events if event["event"] == name]

    def transitions(self) -> list[tuple[str, str, str]]:
        return [(e["src"], e["trigger"], e["dst"]) for e in self.named("loop.transition")]


def _script(*turns: Mapping[str, Any]) -> ScriptedModel:
    return ScriptedModel(parse_script({"name": "loop", "turns": list(turns)}, source="test"))


def _loop(
    workdir: Path,
    model: Model,
    *,
    capture: EventCapture,
    approver: Approver | None = None,
    guard: RepeatGuard | None = None,
    texts: list[str] | None = None,
    **settings: Any,
) -> tuple[Loop, RecordingModel]:
    board = PlanBoard()
    registry = ToolRegistry([*standard_tools(Workdir(workdir)), TodoTool(board)], approver=approver)
    recorder = RecordingModel(model)
    sink = texts if texts is not None else []
    loop = Loop(
        model=recorder,
        tools=registry,
        plan=board,
        log=capture.log,
        settings=LoopSettings(model="claude-test", system="You are a test agent.", **settings),
        guard=guard,
        on_text=sink.append,
    )
    return loop, recorder


def _run(
    workdir: Path,
    model: Model,
    task: str = "Write notes.txt",
    **options: Any,
) -> Run:
    capture = EventCapture()
    texts: list[str] = []
    loop, recorder = _loop(workdir, model, capture=capture, texts=texts, **options)
    outcome = loop.run(task)
    for number, request in enumerate(recorder.requests, start=1):
        assert check_request(request) == [], f"request {number} breaks the API's rules"
    assert isinstance(loop.plan, PlanBoard)
    return Run(outcome, recorder.requests, capture.events, loop.plan, loop, texts)


def _call(name: str, arguments: Mapping[str, Any], **extra: Any) -> JSONObject:
    return {"tool_calls": [{"name": name, "input": dict(arguments)}], **extra}


def _bash(command: str, **extra: Any) -> JSONObject:
    return _call("bash", {"command": command}, **extra)


def _last_user_content(request: Mapping[str, Any]) -> list[JSONObject]:
    message = request["messages"][-1]
    assert message["role"] == "user"
    return list(message["content"])


def _reminders(request: Mapping[str, Any]) -> list[str]:
    return [
        block["text"]
        for block in _last_user_content(request)
        if block["type"] == "text" and REMINDER_TAG in block["text"]
    ]


# --- the machine --------------------------------------------------------------------------


def _edges(machine: LoopMachine) -> set[tuple[str, str, str | None]]:
    return {
        (name, source, transition.dest)
        for name, event in machine.events.items()
        for source, transitions in event.transitions.items()
        for transition in transitions
    }


def test_machine_has_the_contract_states() -> None:
    assert LOOP_STATES == (
        "idle",
        "call_model",
        "dispatch",
        "audit",
        "compact",
        "done",
        "failed",
        "interrupted",
    )
    assert set(LoopMachine().states) == set(LOOP_STATES)
    assert frozenset({"done", "failed", "interrupted"}) == FINAL_LOOP_STATES


def test_machine_edges_are_the_table() -> None:
    working = ("call_model", "dispatch", "audit", "compact")
    expected = {
        ("start", "idle", "call_model"),
        ("use_tools", "call_model", "dispatch"),
        ("resend", "call_model", "call_model"),
        ("finish", "call_model", "done"),
        # issue 24: an unsettled plan's one reminder, and a failing done-check's retry or end
        ("finish", "call_model", "call_model"),
        ("finish", "call_model", "failed"),
        ("overflow", "call_model", "compact"),
        ("dispatched", "dispatch", "audit"),
        ("advance", "audit", "failed"),
        ("advance", "audit", "compact"),
        ("advance", "audit", "call_model"),
        ("compacted", "compact", "call_model"),
        *(("fail", source, "failed") for source in working),
        *(("interrupt", source, "interrupted") for source in ("idle", *working)),
    }
    machine = LoopMachine()
    assert _edges(machine) == expected
    # No edge leaves a final state, and there are no auto transitions (to_done, ...).
    assert not any(source in FINAL_LOOP_STATES for _, source, _ in _edges(machine))
    assert not any(name.startswith("to_") for name in machine.events)


def test_audit_checks_the_round_limit_before_the_stale_plan() -> None:
    advance = [t for t in LOOP_TRANSITIONS if t["trigger"] == "advance"]
    assert [(t["dest"], t.get("conditions"), t.get("before")) for t in advance] == [
        ("failed", "round_limit_reached", None),
        ("compact", "context_over_budget", None),
        ("call_model", "plan_is_stale", "remind"),
        ("call_model", None, None),
    ]


@attrs.define
class _FakePlan:
    revision: int = 0
    is_empty: bool = False
    config: JSONObject = attrs.field(factory=dict)
    statuses: Mapping[str, str] = attrs.field(factory=lambda: {"1": "in_progress"})

    def render(self) -> str:
        return "[>] #1: step"

    def subscribe(self, observer: Callable[[Any], None]) -> None:
        """Nothing to report."""


def _run_state(
    max_rounds: int = 50, threshold: int = 3
) -> tuple[RunState, list[str], EventCapture]:
    capture = EventCapture()
    reminders: list[str] = []
    settings = LoopSettings(
        model="m", system="s", max_rounds=max_rounds, reminder_threshold=threshold
    )
    state = RunState(settings, _FakePlan(), capture.log, reminders.append)
    return state, reminders, capture


def test_machine_drives_a_bare_run_state_through_rounds() -> None:
    machine = LoopMachine()
    run, reminders, capture = _run_state(threshold=2)
    machine.add_model(run)
    run.turn = ModelTurn(({"type": "tool_use", "id": "t", "name": "x", "input": {}},), "tool_use")
    machine.fire(run, "start")
    assert (run.state, run.round) == ("call_model", 1)
    for round_number in (1, 2, 3):
        assert machine.fire(run, "use_tools")
        machine.fire(run, "dispatched")
        assert run.rounds_since_update == round_number
        machine.fire(run, "advance")
        assert run.state == "call_model"
    assert run.round == 4
    # Stale after two rounds: reminded after rounds 2 and 3, with the rendered plan.
    assert len(reminders) == 2
    assert all("[>] #1: step" in text for text in reminders)
    assert [e["round"] for e in capture.named("audit.reminder")] == [2, 3]
    machine.fire(run, "resend")
    assert run.round == 4
    machine.fire(run, "finish")
    assert run.state == "done"


def test_a_wrong_trigger_is_refused_by_the_machine() -> None:
    from transitions import MachineError

    machine = LoopMachine()
    run, _, _ = _run_state()
    machine.add_model(run)
    with pytest.raises(MachineError):
        machine.fire(run, "dispatched")
    assert run.state == "idle"


def test_use_tools_needs_tool_calls() -> None:
    machine = LoopMachine()
    run, _, _ = _run_state()
    machine.add_model(run)
    machine.fire(run, "start")
    run.turn = ModelTurn(({"type": "text", "text": "hi"},), "tool_use")
    assert machine.fire(run, "use_tools") is False
    assert run.state == "call_model"


def test_settings_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        LoopSettings(model="m", system="s", max_tokens=0)
    with pytest.raises(ValueError, match="max_rounds"):
        LoopSettings(model="m", system="s", max_rounds=0)
    with pytest.raises(ValueError, match="reminder_threshold"):
        LoopSettings(model="m", system="s", reminder_threshold=0)


# --- a whole run --------------------------------------------------------------------------


def test_multi_step_run_edits_files_and_logs_every_step(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("draft\n", encoding="utf-8")
    run = _run(
        tmp_path,
        _script(
            {"text": "Planning.", "tool_calls": [{"name": "todo", "input": PLAN_ONE}]},
            _call(
                "edit_file",
                {"path": "notes.txt", "old_text": "draft", "new_text": "final"},
                expect=[{"is_error": False, "contains": "(0/2 completed)"}],
            ),
            _call(
                "todo",
                PLAN_TWO,
                expect=[{"is_error": False, "contains": "Edited notes.txt"}],
            ),
            _bash("cat notes.txt", expect=[{"is_error": False, "contains": "(1/2 completed)"}]),
            {"text": "All done.", "expect": [{"is_error": False, "equals": "final\n"}]},
        ),
    )
    assert run.outcome == RunOutcome("done", 5, "", "All done.")
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "final\n"
    assert [item.status for item in run.board.items] == ["completed", "in_progress"]
    assert run.transitions() == [
        ("idle", "start", "call_model"),
        *[
            ("call_model", "use_tools", "dispatch"),
            ("dispatch", "dispatched", "audit"),
            ("audit", "advance", "call_model"),
        ]
        * 4,
        ("call_model", "finish", "done"),
    ]
    assert [e["round"] for e in run.named("model.request")] == [1, 2, 3, 4, 5]
    assert [e["name"] for e in run.named("tool.call")] == ["todo", "edit_file", "todo", "bash"]
    results = run.named("tool.result")
    assert [e["is_error"] for e in results] == [False] * 4
    assert results[-1]["output"] == "final\n"
    assert [e["revision"] for e in run.named("plan.updated")] == [1, 2]
    started, finished = run.named("run.started"), run.named("run.finished")
    assert started[0]["task"] == "Write notes.txt"
    assert started[0]["settings"]["reminder_threshold"] == 3
    assert finished == [
        {"event": "run.finished", "status": "done", "rounds": 5, "reason": "", "log_level": "info"}
    ]
    assert "".join(run.text).startswith("Planning.")
    assert all(e["cache_breakpoints"] <= 4 for e in run.named("model.request"))
    assert "body" not in run.named("model.request")[0]


def test_trace_requests_puts_the_body_in_the_event(tmp_path: Path) -> None:
    run = _run(tmp_path, _script({"text": "Nothing to do."}), trace_requests=True)
    (event,) = run.named("model.request")
    assert event["body"]["messages"][0]["content"][0]["text"] == "Write notes.txt"


# --- the audit's reminder -----------------------------------------------------------------


def test_reminder_timeline_follows_the_seeds(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            _call("todo", PLAN_ONE),
            _bash("echo one", expect_reminder=False),
            _call("read_file", {"path": "missing.txt"}, expect_reminder=False),
            _bash("echo three", expect_reminder=False),
            # Round 4's results went out with the reminder, after its tool_result.
            _bash("echo four", expect_reminder=True),
            # Still stale: the reminder goes with every round until the plan moves.
            _call("todo", PLAN_TWO, expect_reminder=True),
            {"text": "Done.", "expect_reminder": False},
        ),
    )
    assert run.outcome.status == "done"
    reminders = run.named("audit.reminder")
    assert [(e["round"], e["rounds_since_update"]) for e in reminders] == [(4, 3), (5, 4)]
    assert reminders[0]["threshold"] == 3
    assert "[>] #1: Write the notes" in reminders[0]["plan"]
    fifth = run.requests[4]
    kinds = [block["type"] for block in _last_user_content(fifth)]
    assert kinds == ["tool_result", "text"]
    (reminder,) = _reminders(fifth)
    assert reminder.startswith("<reminder>Update your todos.</reminder>")
    assert "[>] #1: Write the notes\n[ ] #2: Check the notes\n\n(0/2 completed)" in reminder
    assert [len(_reminders(request)) for request in run.requests[1:4]] == [0, 0, 0]


def test_reminder_names_the_next_ready_item_of_a_plan_with_dependencies(tmp_path: Path) -> None:
    plan = {
        "items": [
            {"id": "1", "text": "Write the notes", "status": "in_progress"},
            {"id": "2", "text": "Check the notes", "status": "pending", "blocked_by": ["1"]},
            {"id": "3", "text": "Tidy up", "status": "pending"},
        ]
    }
    run = _run(
        tmp_path,
        _script(
            _call("todo", plan),
            _bash("echo one"),
            _bash("echo two"),
            _bash("echo three"),
            {"text": "Done.", "expect_reminder": True},
        ),
    )
    (reminder,) = _reminders(run.requests[-1])
    assert reminder.endswith(
        "[ ] #2: Check the notes (blocked by #1)\n[ ] #3: Tidy up\n\n(0/3 completed)"
        "\nNext ready: #3"
    )
    assert run.named("audit.reminder")[0]["plan"].endswith("Next ready: #3")


def test_reminder_goes_after_every_tool_result_of_the_round(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            _call("todo", PLAN_ONE),
            _bash("echo a"),
            _bash("echo b"),
            {
                "tool_calls": [
                    {"name": "bash", "input": {"command": "echo c"}},
                    {"name": "read_file", "input": {"path": "nowhere"}},
                    {"name": "bash", "input": {"command": "echo d"}},
                ]
            },
            {"text": "ok", "expect_reminder": True},
        ),
    )
    assert run.outcome.status == "done"
    kinds = [block["type"] for block in _last_user_content(run.requests[-1])]
    assert kinds == ["tool_result", "tool_result", "tool_result", "text"]


@pytest.mark.parametrize(("threshold", "reminded_after"), [(1, [2, 3, 4]), (2, [3, 4]), (4, [])])
def test_reminder_threshold_is_configurable(
    tmp_path: Path, threshold: int, reminded_after: list[int]
) -> None:
    run = _run(
        tmp_path,
        _script(
            _call("todo", PLAN_ONE),
            _bash("echo 2"),
            _bash("echo 3"),
            _bash("echo 4"),
            {"text": "ok"},
        ),
        reminder_threshold=threshold,
    )
    assert run.outcome.status == "done"
    assert [e["round"] for e in run.named("audit.reminder")] == reminded_after
    with_reminder = [n for n, r in enumerate(run.requests, start=1) if n > 1 and _reminders(r)]
    assert with_reminder == [r + 1 for r in reminded_after]


def test_no_reminder_while_the_plan_is_empty(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(*[_bash(f"echo {n}", expect_reminder=False) for n in range(6)], {"text": "ok"}),
    )
    assert run.outcome == RunOutcome("done", 7, "", "ok")
    assert run.named("audit.reminder") == []


def test_a_rejected_todo_round_does_not_count_as_an_update(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            _call("todo", PLAN_ONE),
            _call("todo", TWO_IN_PROGRESS, expect_reminder=False),
            _bash("echo 3", expect=[{"is_error": True, "contains": "in_progress"}]),
            _bash("echo 4", expect_reminder=False),
            {"text": "ok", "expect_reminder": True},
        ),
    )
    assert run.outcome.status == "done"
    assert [e["round"] for e in run.named("audit.reminder")] == [4]
    assert len(run.named("plan.rejected")) == 1
    assert run.board.revision == 1


def test_an_accepted_todo_round_resets_the_count(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            _call("todo", PLAN_ONE),
            _call("todo", PLAN_TWO),
            _bash("echo 3"),
            _bash("echo 4"),
            {"text": "ok", "expect_reminder": False},
        ),
    )
    assert run.outcome.status == "done"
    assert run.named("audit.reminder") == []


# --- stop reasons -------------------------------------------------------------------------


@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence"])
def test_a_final_answer_ends_the_run_done(tmp_path: Path, stop_reason: str) -> None:
    run = _run(tmp_path, _script({"text": "Finished.", "stop_reason": stop_reason}))
    assert run.outcome == RunOutcome("done", 1, "", "Finished.")
    assert run.transitions() == [
        ("idle", "start", "call_model"),
        ("call_model", "finish", "done"),
    ]


@pytest.mark.parametrize(
    ("stop_reason", "words"),
    [
        ("max_tokens", ["max_tokens", "8192"]),
        ("refusal", ["refused"]),
        ("model_context_window_exceeded", ["context window", "model_context_window_exceeded"]),
    ],
)
def test_a_broken_answer_ends_the_run_failed_with_a_clear_reason(
    tmp_path: Path, stop_reason: str, words: list[str]
) -> None:
    run = _run(tmp_path, _script({"text": "I was saying", "stop_reason": stop_reason}))
    assert run.outcome.status == "failed"
    assert run.outcome.rounds == 1
    assert all(word in run.outcome.reason for word in words)
    assert "\n" not in run.outcome.reason
    assert run.transitions()[-1] == ("call_model", "fail", "failed")
    assert run.named("run.finished")[0]["reason"] == run.outcome.reason


def test_max_tokens_in_the_middle_of_a_tool_call_runs_nothing(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            {
                "tool_calls": [{"name": "write_file", "input": {"path": "half.txt"}}],
                "stop_reason": "max_tokens",
            }
        ),
    )
    assert run.outcome.status == "failed"
    assert run.named("tool.call") == []
    assert not (tmp_path / "half.txt").exists()


def test_pause_turn_sends_the_conversation_again_in_the_same_round(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(
            {"text": "Searching first.", "stop_reason": "pause_turn"},
            _bash("echo found"),
            {"text": "Found it."},
        ),
    )
    assert run.outcome == RunOutcome("done", 2, "", "Found it.")
    assert [e["round"] for e in run.named("model.request")] == [1, 1, 2]
    assert ("call_model", "resend", "call_model") in run.transitions()
    paused = run.requests[1]
    assert paused["messages"][:1] == run.requests[0]["messages"][:1]
    assert paused["messages"][-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Searching first."}],
    }
    # The continuation joins the paused message: one assistant turn, then its results.
    roles = [m["role"] for m in run.requests[2]["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_a_model_error_fails_the_run_with_its_one_line(tmp_path: Path) -> None:
    line = "API error 529 (overloaded_error): Overloaded (after 4 retries)"
    run = _run(tmp_path, Playlist(ModelError(line)))
    assert run.outcome == RunOutcome("failed", 1, line, "")
    assert run.transitions() == [
        ("idle", "start", "call_model"),
        ("call_model", "fail", "failed"),
    ]
    assert run.named("model.response") == []


def test_a_model_error_mid_run_keeps_the_rounds(tmp_path: Path) -> None:
    run = _run(tmp_path, _script(_bash("echo 1"), {"fault": "status", "status": 529}))
    assert run.outcome.status == "failed"
    assert run.outcome.rounds == 2
    assert "529" in run.outcome.reason


def test_max_rounds_ends_the_run_failed(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(*[_bash(f"echo {n}") for n in range(5)]),
        max_rounds=3,
    )
    assert run.outcome.status == "failed"
    assert run.outcome.rounds == 3
    assert "3 rounds" in run.outcome.reason and "--max-rounds" in run.outcome.reason
    assert len(run.requests) == 3
    assert run.transitions()[-1] == ("audit", "advance", "failed")
    assert len(run.named("tool.result")) == 3


def test_the_round_limit_wins_over_a_stale_plan(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(_call("todo", PLAN_ONE), _bash("1"), _bash("2"), _bash("3"), {"text": "x"}),
        max_rounds=4,
    )
    assert run.outcome.status == "failed"
    assert run.named("audit.reminder") == []


def test_keyboard_interrupt_in_the_model_ends_the_run_interrupted(tmp_path: Path) -> None:
    turn = ModelTurn(
        ({"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "echo 1"}},),
        "tool_use",
    )
    run = _run(tmp_path, Playlist(turn, KeyboardInterrupt()))
    assert run.outcome.status == "interrupted"
    assert run.outcome.rounds == 2
    assert run.transitions()[-1] == ("call_model", "interrupt", "interrupted")
    assert run.named("run.finished")[0]["status"] == "interrupted"


# --- tool results -------------------------------------------------------------------------


def test_every_tool_use_gets_exactly_one_result_whatever_happens(tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    calls = [
        {"name": "bash", "input": {"command": "echo hi"}},
        {"name": "bash", "input": {"command": "echo hi"}},
        {"name": "no_such_tool", "input": {}},
        {"name": "write_file", "input": {"path": "a.txt", "content": "x"}},
        {"name": "read_file", "input": {}},
        {"name": "read_file", "input": {"path": f"../{outside.name}"}},
        {"name": "todo", "input": TWO_IN_PROGRESS},
    ]

    def deny_writes(tool: str, arguments: Mapping[str, Any]) -> bool:
        return tool != "write_file"

    run = _run(
        tmp_path,
        _script(
            {"tool_calls": calls},
            {
                "text": "ok",
                "expect": [
                    {"is_error": False, "equals": "hi\n"},
                    {"is_error": True, "contains": "identical to the previous"},
                    {"is_error": True, "contains": "unknown tool"},
                    {"is_error": True, "contains": "not approved"},
                    {"is_error": True, "contains": "'path'"},
                    {"is_error": True, "contains": "escapes the work directory"},
                    {"is_error": True, "contains": "Only one task"},
                ],
            },
        ),
        approver=deny_writes,
    )
    assert run.outcome.status == "done"
    results = _last_user_content(run.requests[1])
    assert [b["tool_use_id"] for b in results] == [f"toolu_01_{i}" for i in range(len(calls))]
    assert all(b["content"].startswith("Error:") for b in results if b["is_error"])
    assert not (tmp_path / "a.txt").exists()
    (blocked,) = run.named("guard.blocked")
    assert (blocked["id"], blocked["rule"]) == ("toolu_01_1", "repeat")


def test_duplicate_tool_use_ids_in_one_turn_still_make_a_valid_request(tmp_path: Path) -> None:
    def append(line: str) -> JSONObject:
        command = f"echo {line} >> log.txt"
        return {
            "type": "tool_use",
            "id": "toolu_dup",
            "name": "bash",
            "input": {"command": command},
        }

    turn = ModelTurn((append("one"), append("two")), "tool_use")
    run = _run(tmp_path, Playlist(turn, ModelTurn(({"type": "text", "text": "ok"},), "end_turn")))
    assert run.outcome.status == "done"
    results = _last_user_content(run.requests[1])
    assert [b["tool_use_id"] for b in results] == ["toolu_dup"]
    assert (tmp_path / "log.txt").read_text(encoding="utf-8") == "one\n"


def test_a_todo_refused_three_times_is_blocked_the_fourth(tmp_path: Path) -> None:
    refused = [_call("todo", TWO_IN_PROGRESS) for _ in range(4)]
    run = _run(
        tmp_path,
        _script(
            *refused,
            {
                "text": "giving up",
                "expect": [{"is_error": True, "contains": "refused 3 times"}],
            },
        ),
    )
    assert run.outcome.status == "done"
    third = _last_user_content(run.requests[3])[0]
    assert "3 times in a row" in third["content"]
    assert [e["rule"] for e in run.named("guard.blocked")] == ["refused_repeat"]
    assert len(run.named("plan.rejected")) == 3


def test_a_tool_that_blows_up_becomes_an_error_result(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\x00\x01\x02")
    run = _run(
        tmp_path,
        _script(
            _call("read_file", {"path": "bin.dat"}),
            {"text": "ok", "expect": [{"is_error": True, "contains": "binary"}]},
        ),
    )
    assert run.outcome.status == "done"


# --- conversations that go on -------------------------------------------------------------


def test_a_second_task_continues_the_same_conversation(tmp_path: Path) -> None:
    capture = EventCapture()
    model = _script(
        _call("todo", PLAN_ONE),
        {"text": "first done"},
        {"text": "second done"},
    )
    loop, recorder = _loop(tmp_path, model, capture=capture)
    assert loop.run("first task").status == "done"
    assert loop.run("second task", first_round=2).status == "done"
    last = recorder.requests[-1]
    assert check_request(last) == []
    texts = [b.get("text") for m in last["messages"] for b in m["content"]]
    assert "first task" in texts and "second task" in texts
    assert [e["round"] for e in capture.named("model.request")] == [1, 2, 3]


def test_resuming_an_interrupted_round_answers_its_calls_and_counts_on(tmp_path: Path) -> None:
    conversation = Conversation()
    conversation.add_user_text("the task")
    conversation.add_assistant(
        [{"type": "tool_use", "id": "old", "name": "bash", "input": {"command": "sleep 100"}}]
    )
    capture = EventCapture()
    loop, recorder = _loop(tmp_path, _script({"text": "resumed"}), capture=capture)
    loop.conversation = conversation
    outcome = loop.run(None, first_round=7)
    assert outcome == RunOutcome("done", 8, "", "resumed")
    (request,) = recorder.requests
    assert check_request(request) == []
    (result,) = _last_user_content(request)
    assert result["tool_use_id"] == "old" and result["is_error"] is True


def _tool_use_ids(requests: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        block["id"]
        for message in requests[-1]["messages"]
        for block in message["content"]
        if block["type"] == "tool_use"
    ]


def test_tool_use_ids_of_a_long_run_are_all_answered(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        _script(*[_bash(f"echo {n}") for n in range(8)], {"text": "ok"}),
    )
    assert run.outcome.status == "done"
    assert len(_tool_use_ids(run.requests)) == 8


# --- issue 24: the done edge's guards ------------------------------------------------------

_TWO_ITEMS = {
    "items": [
        {"id": "1", "text": "Read", "status": "in_progress"},
        {"id": "2", "text": "Write", "status": "pending"},
    ]
}


def test_an_unsettled_plan_gets_one_reminder_then_the_run_ends_reporting_it(
    tmp_path: Path,
) -> None:
    run = _run(
        tmp_path,
        _script(_call("todo", _TWO_ITEMS), {"text": "All done!"}, {"text": "All done, really."}),
        settle_plan=True,
    )
    assert (run.outcome.status, run.outcome.unfinished) == ("done", ("1", "2"))
    reminders = [e for e in run.named("audit.reminder") if e.get("reason") == "unfinished"]
    assert len(reminders) == 1 and reminders[0]["unfinished"] == ["1", "2"]
    asked = run.requests[2]["messages"][-1]
    assert asked["role"] == "user"
    assert "open: #1, #2" in asked["content"][0]["text"]
    assert run.transitions()[-2:] == [
        ("call_model", "finish", "call_model"),
        ("call_model", "finish", "done"),
    ]
    assert len(run.requests) == 3


def test_a_plan_settled_after_the_reminder_ends_clean(tmp_path: Path) -> None:
    done = {"items": [{"id": "1", "status": "completed"}, {"id": "2", "status": "cancelled"}]}
    run = _run(
        tmp_path,
        _script(
            _call("todo", _TWO_ITEMS),
            {"text": "All done!"},
            _call("todo", {**done, "merge": True}),
            {"text": "Now it is."},
        ),
        settle_plan=True,
    )
    assert (run.outcome.status, run.outcome.unfinished) == ("done", ())


def test_without_settle_plan_a_turn_may_leave_items_open(tmp_path: Path) -> None:
    run = _run(tmp_path, _script(_call("todo", _TWO_ITEMS), {"text": "Over to you."}))
    assert (run.outcome.status, run.outcome.unfinished, len(run.requests)) == ("done", (), 2)
    assert not [e for e in run.named("audit.reminder") if e.get("reason") == "unfinished"]


def _checked_loop(
    workdir: Path, model: Model, capture: EventCapture, **settings: Any
) -> tuple[Loop, RecordingModel]:
    from orchestrator.tools.bash import BashTool

    loop, recorder = _loop(workdir, model, capture=capture, **settings)
    bash = BashTool(Workdir(workdir))
    loop.run_check = lambda command: bash.run_check(command, 60)
    return loop, recorder


def test_the_done_check_keeps_the_run_going_until_it_passes(tmp_path: Path) -> None:
    capture = EventCapture()
    model = _script({"text": "Done."}, _bash("echo ok > done.txt"), {"text": "Done now."})
    loop, recorder = _checked_loop(
        tmp_path, model, capture, done_check="test -f done.txt", settle_plan=True
    )
    outcome = loop.run("Make done.txt")
    assert outcome.status == "done"
    checks = [e for e in capture.events if e["event"] == "loop.done_check"]
    assert [(c["exit_code"], c["passed"], c["attempt"]) for c in checks] == [
        (1, False, 1),
        (0, True, 2),
    ]
    told = recorder.requests[1]["messages"][-1]["content"][0]["text"]
    assert "done-check `test -f done.txt` failed with exit code 1" in told


def test_the_done_check_ends_the_run_failed_after_its_retries(tmp_path: Path) -> None:
    capture = EventCapture()
    model = _script({"text": "Done."}, {"text": "Done!"}, {"text": "Done!!"})
    loop, recorder = _checked_loop(
        tmp_path, model, capture, done_check="exit 7", done_check_retries=2
    )
    outcome = loop.run("Try")
    assert outcome.status == "failed"
    assert "still failed (exit 7) after 3 attempt(s)" in outcome.reason
    assert len(recorder.requests) == 3
