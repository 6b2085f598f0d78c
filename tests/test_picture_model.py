"""The page's data, read from traces: the demo's golden one, cut ones and hand-written ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import diagram
from orchestrator.picture.model import RunPicture, read_picture, state_at
from orchestrator.pricing import USAGE_KEYS
from orchestrator.trace_file import read_trace
from tests.picture_traces import GOLDEN, golden_copy, response, started, write_events


def _picture(path: Path) -> RunPicture:
    return read_picture(read_trace(path))


def _golden_events() -> list[dict[str, object]]:
    return [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]


def test_the_demo_page_has_its_items_rounds_and_totals() -> None:
    picture = _picture(GOLDEN)
    events = _golden_events()
    responses = [e for e in events if e["event"] == "model.response"]
    header = picture.header
    assert header.task == "Refactor hello.py: add type hints, docstrings, and a main guard"
    assert (header.status, header.exit_code, header.runs) == ("done", 0, 1)
    assert header.rounds == len({e["round"] for e in responses}) == 14
    for key in USAGE_KEYS:
        assert header.usage[key] == sum(e["usage"][key] for e in responses), key  # type: ignore[index]
    assert (header.sandbox, header.approval, header.window) == ("{SANDBOX}", "auto", 200_000)
    assert [round_.number for round_ in picture.rounds] == list(range(1, 15))
    assert [round_.usage["output_tokens"] for round_ in picture.rounds] == [
        e["usage"]["output_tokens"]  # type: ignore[index]
        for e in responses
    ]
    assert [(lane.item, lane.text) for lane in picture.lanes] == [
        ("1", "Read hello.py"),
        ("2", "Add type hints"),
        ("3", "Add docstrings"),
        ("4", "Add a main guard"),
        ("5", "Run the tests"),
    ]
    assert all(lane.final == "completed" for lane in picture.lanes)
    assert picture.stop.complete and picture.stop.line == len(events)
    assert picture.skipped == ()


def test_the_demo_lanes_hold_each_state_where_the_run_had_it() -> None:
    picture = _picture(GOLDEN)
    first, second, third = picture.lanes[:3]
    # Round 1 (column 0) starts #1; the stale plan is only updated in round 6 (column 5).
    assert [state_at(first, column) for column in range(6)] == ["in_progress"] * 5 + ["completed"]
    assert state_at(second, 4) == "pending" and state_at(second, 5) == "in_progress"
    # The update that tried to start #3 beside #2 was rejected: #3 stayed pending.
    assert state_at(third, 4) == "pending"
    for column in range(len(picture.rounds)):
        busy = [lane.item for lane in picture.lanes if state_at(lane, column) == "in_progress"]
        assert len(busy) <= 1, (column, busy)


def test_the_demo_markers_are_where_the_run_had_them() -> None:
    picture = _picture(GOLDEN)
    found = [(m.kind, picture.rounds[m.round].number, m.lane) for m in picture.markers]
    assert found == [
        ("reminder", 4, None),
        ("rejected", 5, "3"),
        ("reminder", 5, None),
        ("blocked", 12, None),
    ]
    rejected = picture.markers[1]
    assert "Only one task can be in_progress" in rejected.text
    assert rejected.line == 39


def test_the_demo_tool_calls_have_status_duration_input_and_whole_output() -> None:
    picture = _picture(GOLDEN)
    calls = [call for round_ in picture.rounds for call in round_.calls]
    events = _golden_events()
    results = [e for e in events if e["event"] == "tool.result"]
    assert len(calls) == len(results) == 13
    assert [call.output for call in calls] == [e["output"] for e in results]
    statuses = {
        picture.rounds[i].number: [c.status for c in r.calls] for i, r in enumerate(picture.rounds)
    }
    assert statuses[5] == ["error"]  # the rejected todo update
    assert statuses[12] == ["blocked"]  # the repeated bash call
    assert statuses[2] == ["ok"]
    assert calls[1].input == {"path": "hello.py"} and calls[1].duration_ms == 0.0
    assert calls[2].diff is not None and "+def greet(name: str) -> str:" in calls[2].diff


def test_the_machines_count_every_edge_the_demo_took() -> None:
    picture = _picture(GOLDEN)
    assert sorted(picture.machines["item"]) == [
        ("in_progress", "complete", "completed", "", 5),
        ("pending", "start", "in_progress", "", 5),
    ]
    loop = {
        (src, trigger, dst, which): times
        for src, trigger, dst, which, times in picture.machines["loop"]
    }
    # The page feeds the counts every event, so the reminders tell the stale advances apart.
    assert loop[("audit", "advance", "call_model", "plan_is_stale / remind")] == 2
    assert loop[("audit", "advance", "call_model", "(no guard)")] == 11
    assert loop[("call_model", "finish", "done", "plan_settled")] == 1
    assert picture.counts.visits() == diagram._read_trace(GOLDEN)


def test_a_trace_cut_short_is_drawn_to_its_last_complete_line_and_says_so(tmp_path: Path) -> None:
    lines = golden_copy(tmp_path).read_bytes().split(b"\n")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"\n".join(lines[:59]) + b"\n" + lines[59][:40])  # line 60 half written
    picture = _picture(cut)
    assert not picture.stop.complete
    assert picture.stop.line == 59
    assert "cut short" in picture.stop.note and "line 59" in picture.stop.note
    assert (picture.header.status, picture.header.exit_code) == ("unfinished", None)
    last_round = max(json.loads(line)["round"] for line in lines[:59] if b'"round"' in line)
    assert picture.rounds[-1].number == last_round


def test_a_trace_without_run_finished_says_its_run_was_killed(tmp_path: Path) -> None:
    lines = golden_copy(tmp_path).read_text(encoding="utf-8").splitlines()
    killed = tmp_path / "killed.jsonl"
    killed.write_text("\n".join(lines[:80]) + "\n", encoding="utf-8")
    picture = _picture(killed)
    assert not picture.stop.complete
    assert "without run.finished" in picture.stop.note and "killed" in picture.stop.note
    assert picture.header.status == "unfinished"


def test_two_runs_in_one_trace_are_two_runs_of_columns(tmp_path: Path) -> None:
    text = golden_copy(tmp_path).read_text(encoding="utf-8")
    twice = tmp_path / "twice.jsonl"
    twice.write_text(text + text, encoding="utf-8")
    picture = _picture(twice)
    assert picture.header.runs == 2
    assert len(picture.rounds) == 28
    assert [r.run for r in picture.rounds] == [0] * 14 + [1] * 14
    assert picture.rounds[14].number == 1
    assert (
        picture.header.usage["output_tokens"] == 2 * _picture(GOLDEN).header.usage["output_tokens"]
    )


def test_a_pending_item_waiting_on_another_is_blocked_until_that_one_completes(
    tmp_path: Path,
) -> None:
    def plan(first: str, second: str) -> dict[str, object]:
        items = [
            {"id": "a", "text": "first", "status": first},
            {"id": "b", "text": "second", "status": second, "blocked_by": ["a"]},
        ]
        return {"event": "plan.updated", "items": items}

    trace = write_events(
        tmp_path / "t.jsonl",
        [
            started(),
            response(1),
            plan("in_progress", "pending"),
            response(2),
            plan("completed", "pending"),
            response(3),
            plan("completed", "in_progress"),
        ],
    )
    second = _picture(trace).lanes[1]
    assert [state_at(second, column) for column in range(3)] == [
        "blocked",
        "pending",
        "in_progress",
    ]


def test_context_clearing_compaction_and_a_learned_window_are_markers(tmp_path: Path) -> None:
    trace = write_events(
        tmp_path / "t.jsonl",
        [
            started(),
            response(1),
            {"event": "context.cleared", "blocks": 3, "tokens_freed": 400},
            response(2),
            {
                "event": "context.compacted",
                "tokens_before": 900,
                "tokens_after": 200,
                "messages_kept": 4,
            },
            {"event": "context.window", "round": 3, "window": 800, "source": "refusal"},
            response(3),
            {"event": "run.finished", "status": "done", "rounds": 3},
        ],
    )
    picture = _picture(trace)
    assert [(m.kind, m.round) for m in picture.markers] == [
        ("cleared", 0),
        ("compacted", 1),
        ("window", 2),
    ]
    assert "400 tokens" in picture.markers[0].text
    assert "800" in picture.markers[2].text and picture.header.window == 800
    assert [r.context_tokens for r in picture.rounds] == [100, 200, 300]


def test_each_round_is_priced_at_its_model_and_the_header_sums_them(tmp_path: Path) -> None:
    trace = write_events(
        tmp_path / "t.jsonl",
        [started(), response(1, input_tokens=1_000_000), response(2, output_tokens=1_000_000)],
    )
    picture = _picture(trace)
    # Sonnet's list prices: $3 per million in, $15 per million out.
    assert [r.cost for r in picture.rounds] == [pytest.approx(3.000075), pytest.approx(15.00003)]
    assert picture.header.cost == pytest.approx(18.000105)


def test_a_line_of_an_odd_shape_is_left_out_and_named(tmp_path: Path) -> None:
    odd = {"event": "plan.updated", "items": [{"id": "a", "status": "pending", "blocked_by": 7}]}
    trace = write_events(tmp_path / "t.jsonl", [started(), response(1), odd, response(2)])
    picture = _picture(trace)
    assert picture.skipped == (3,)
    assert len(picture.rounds) == 2


def test_checks_are_markers_on_their_item_s_lane_passed_or_failed(tmp_path: Path) -> None:
    items = [{"id": "a", "text": "build", "status": "in_progress"}]
    trace = write_events(
        tmp_path / "t.jsonl",
        [
            started(),
            response(1),
            {"event": "plan.updated", "items": items},
            response(2),
            {"event": "plan.check", "item": "a", "command": "make  test", "exit_code": 2},
            {"event": "plan.check", "item": "a", "command": "make test", "exit_code": 0},
            {"event": "loop.done_check", "round": 2, "command": "pytest", "exit_code": 1},
        ],
    )
    picture = _picture(trace)
    assert [(m.kind, m.round, m.lane, m.ok) for m in picture.markers] == [
        ("check", 1, "a", False),
        ("check", 1, "a", True),
        ("check", 1, None, False),
    ]
    assert [m.text for m in picture.markers] == [
        "check #a failed (exit 2): make test",
        "check #a passed: make test",
        "done-check failed (exit 1): pytest",
    ]


def test_the_model_is_the_one_asked_for_and_the_one_that_served_it(tmp_path: Path) -> None:
    """run.started's model is the client kind ("anthropic"); settings.model is the model."""
    served = {**response(1), "model": "claude-sonnet-4-5-20250929"}
    trace = write_events(tmp_path / "t.jsonl", [started(model="anthropic"), served])
    header = _picture(trace).header
    assert header.model == "claude-sonnet-4-5"
    assert header.served == ("claude-sonnet-4-5-20250929",)
    assert header.client == "anthropic"
    same = write_events(tmp_path / "same.jsonl", [started(model="anthropic"), response(1)])
    assert _picture(same).header.served == ()  # said once, where it is the one asked for


def test_wall_time_is_the_runs_own_not_the_idle_time_between_them(tmp_path: Path) -> None:
    def run(start: str, end: str) -> list[str]:
        events = [
            {**started(), "ts": start},
            {**response(1), "ts": start},
            {"event": "run.finished", "status": "done", "rounds": 1, "ts": end},
        ]
        return [json.dumps({"run_id": "r", "seq": n, **event}) for n, event in enumerate(events)]

    trace = tmp_path / "resumed.jsonl"
    lines = run("2026-01-01T10:00:00Z", "2026-01-01T10:00:01.5Z")
    lines += run("2026-01-01T10:11:24Z", "2026-01-01T10:11:25Z")
    # A third run killed after two seconds: it counts up to its last event.
    lines += [
        json.dumps({"run_id": "r", **started(), "ts": "2026-01-01T11:00:00Z"}),
        json.dumps({"run_id": "r", **response(1), "ts": "2026-01-01T11:00:02Z"}),
    ]
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    header = _picture(trace).header
    assert header.runs == 3
    assert header.wall_seconds == pytest.approx(1.5 + 1.0 + 2.0)
    assert header.span_seconds == pytest.approx(3602.0)


def test_a_call_a_hook_rewrote_shows_the_input_that_ran_and_what_the_model_asked(
    tmp_path: Path,
) -> None:
    asked = {"command": "rm -rf build"}
    ran = {"command": "echo refused"}
    trace = write_events(
        tmp_path / "t.jsonl",
        [
            started(),
            response(1),
            {"event": "tool.call", "id": "t1", "name": "bash", "input": asked},
            {
                "event": "hook.updated_input",
                "id": "t1",
                "name": "bash",
                "input": ran,
                "hook": "guard.py",
            },
            {
                "event": "tool.result",
                "id": "t1",
                "name": "bash",
                "output": "refused",
                "is_error": False,
                "duration_ms": 3,
            },
        ],
    )
    (call,) = _picture(trace).rounds[0].calls
    assert (call.input, call.asked, call.hook) == (ran, asked, "guard.py")
    assert call.as_json()["asked"] == asked
