"""Tests for the benchmarks: the JSON they print, and the seeds' loop they measure us against."""

from __future__ import annotations

import io
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from click.testing import CliRunner

from orchestrator.bench import __main__ as bench_command
from orchestrator.bench import _cli_start, _figures
from orchestrator.bench._figures import QUICK, Sizes
from orchestrator.bench._html import measure_html
from orchestrator.bench._plan_dependencies import measure_plan_dependencies
from orchestrator.bench._timing import Found
from orchestrator.bench._workload import (
    BENCH_TASK,
    InstantModel,
    NullLog,
    baseline_parts,
    our_loop,
    session_script,
)
from orchestrator.bench.baseline import (
    SEEDS_BLOCKED_OUTPUT,
    SEEDS_REMINDER,
    SeedsTodoManager,
    seeds_agent_loop,
    seeds_tool_handlers,
)
from orchestrator.console import LiveView
from orchestrator.conversation import Conversation
from orchestrator.loop import Loop
from orchestrator.picture import model as picture_model
from orchestrator.plan import PlanBoard
from orchestrator.protocols import JSONObject
from orchestrator.replay import Replay
from orchestrator.script import Script, parse_script
from orchestrator.testing import RecordingModel
from orchestrator.trace import TraceRenderer
from tests.bench_variants import burn

TARGETED = {
    "harness_vs_sdk_call",
    "round_cost_growth",
    "live_view_vs_harness",
    "trace_vs_floor",
    "replay_peak_rss_mb_10k",
    "replay_peak_rss_mb_40k",
    "replay_vs_parse_ratio",
    "html_render_seconds_per_1k_rounds",
    "plan_scaling_exponent",
    "plan_scaling_exponent_1000",
    "plan_deps_scaling_exponent",
    "cached_input_share",
    "input_cost_ratio",
    "update_output_chars_merge",
    "long_run_peak_over_window",
    "board_claim_vs_floor",
    "board_lost_updates",
    "cli_start_vs_python",
}
FIGURES = TARGETED | {
    "cli_start_ms",
    "board_claims_per_s_1",
    "board_claims_per_s_4",
    "board_claims_per_s_16",
    "replay_events_per_s",
    "plan_update_us_20",
    "plan_update_us_200",
    "machine_per_item_vs_shared_ratio",
    "baseline_cached_input_share",
    "update_output_chars_full",
    "overhead_ratio",
    "us_per_round_ours",
    "us_per_round_baseline",
    "plan_update_us_20_deps",
    "us_per_sdk_call",
    "long_run_cache_read_share",
    "long_run_unmanaged_refused_at_round",
    "bash_ms_per_command_plain",
    "sandbox_ms_per_command_workdir",
    "sandbox_ms_per_command_bwrap",
    "todo_round_us",
    "todo_round_trace_us",
    "team_items_per_second_1",
    "team_items_per_second_2",
    "team_items_per_second_4",
    "team_items_per_second_4_one_killed",
    "team_speedup_2",
    "team_speedup_4",
    "team_speedup_4_one_killed",
}
#: The figures measured against a floor: each says what it was measured against.
FLOORED = TARGETED - {"cached_input_share"} | {"overhead_ratio"}
ROOT = Path(__file__).resolve().parent.parent

#: Smaller than --quick: each benchmark runs twice below.
TINY = attrs.evolve(
    QUICK,
    session_rounds=12,
    session_repeats=1,
    sdk_calls=2,
    growth_rounds=(6, 30),
    growth_repeats=1,
    live_rounds=12,
    live_repeats=1,
    trace_rounds=10,
    plan_samples=1,
    plan_updates=3,
    replay_rounds=200,
    replay_long_rounds=800,
)

#: The least that still computes every figure, for the test of the JSON alone.
SMOKE = attrs.evolve(
    TINY,
    session_rounds=6,
    sdk_calls=1,
    growth_rounds=(4, 8),
    live_rounds=4,
    trace_rounds=4,
    trace_repeats=1,
    plan_sizes=(10, 20, 200, 210),
    plan_updates=1,
    machine_items=5,
    machine_repeats=1,
    replay_rounds=100,
    replay_long_rounds=100,
    cache_rounds=10,
    long_rounds=40,
    team_items=2,
)


# --- the command ----------------------------------------------------------------------------


# Every figure, so every benchmark's processes (16 claimers, four teams): the bench's layer.
@pytest.mark.bench
def test_quick_json_run_prints_one_object_with_every_figure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command itself, in this process, with --quick's sizes shrunk to the least that still
    # computes every figure: this checks the JSON, not the numbers (`make bench` measures).
    monkeypatch.setattr(bench_command, "QUICK", SMOKE)
    done = CliRunner().invoke(bench_command.main, ["--quick", "--json"])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    document = json.loads(lines[0])
    assert set(document) == FIGURES | {"targets", "floors"}
    assert FLOORED <= set(document["floors"]) <= FIGURES
    assert all(isinstance(text, str) and text for text in document["floors"].values())
    for name in FIGURES:
        value = document[name]
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        assert math.isfinite(value), name
    assert document["baseline_cached_input_share"] == 0
    assert 0 < document["cached_input_share"] <= 1
    assert document["update_output_chars_merge"] < document["update_output_chars_full"]
    # The managed long run stays inside the window; the same run unmanaged is refused.
    assert 0 < document["long_run_peak_over_window"] < 1
    assert document["long_run_unmanaged_refused_at_round"] > 1
    assert set(document["targets"]) == TARGETED
    for name, target in document["targets"].items():
        assert isinstance(target["met"], bool), name
        assert isinstance(target["goal"], str) and target["goal"], name
        assert math.isfinite(target["limit"]), name
    merge = document["targets"]["update_output_chars_merge"]
    assert merge["limit"] == pytest.approx(document["update_output_chars_full"] / 5)
    assert merge["met"] == (document["update_output_chars_merge"] <= merge["limit"])


# --- the seeds' TodoManager -------------------------------------------------------------------


def test_render_is_the_seeds_format() -> None:
    todo = SeedsTodoManager()
    assert todo.render() == "No todos."
    rendered = todo.update(
        [
            {"id": "1", "text": "Read hello.py", "status": "completed"},
            {"id": "2", "text": "Add type hints", "status": "in_progress"},
            {"id": "3", "text": "Add docstrings", "status": "pending"},
        ]
    )
    assert rendered == (
        "[x] #1: Read hello.py\n[>] #2: Add type hints\n[ ] #3: Add docstrings\n\n(1/3 completed)"
    )


def test_update_fills_defaults_like_the_seeds() -> None:
    todo = SeedsTodoManager()
    todo.update([{"text": "  Read hello.py  "}, {"text": "Fix it", "status": "IN_PROGRESS"}])
    assert todo.items == [
        {"id": "1", "text": "Read hello.py", "status": "pending"},
        {"id": "2", "text": "Fix it", "status": "in_progress"},
    ]


def test_update_allows_twenty_and_refuses_twenty_one() -> None:
    todo = SeedsTodoManager()
    todo.update([{"id": str(i), "text": f"step {i}"} for i in range(20)])
    assert len(todo.items) == 20
    with pytest.raises(ValueError, match=r"^Max 20 todos allowed$"):
        todo.update([{"id": str(i), "text": f"step {i}"} for i in range(21)])
    assert len(todo.items) == 20


def test_update_allows_one_in_progress_only_and_keeps_the_old_list() -> None:
    todo = SeedsTodoManager()
    todo.update([{"id": "1", "text": "a", "status": "in_progress"}])
    with pytest.raises(ValueError, match=r"^Only one task can be in_progress at a time$"):
        todo.update(
            [
                {"id": "1", "text": "a", "status": "in_progress"},
                {"id": "2", "text": "b", "status": "in_progress"},
            ]
        )
    assert todo.items == [{"id": "1", "text": "a", "status": "in_progress"}]


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"id": "7", "text": "  "}, "Item 7: text required"),
        ({"id": "7", "text": "x", "status": "cancelled"}, "Item 7: invalid status 'cancelled'"),
    ],
)
def test_update_validation_messages(item: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        SeedsTodoManager().update([item])
    assert str(raised.value) == message


# --- the seeds' loop ---------------------------------------------------------------------------


def _script(*turns: dict[str, Any]) -> Script:
    return parse_script({"name": "t", "turns": list(turns)}, source="test")


def _call(name: str, tool_input: dict[str, Any], tool_id: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "input": tool_input, "id": tool_id}]}


def _run_seeds(script: Script) -> tuple[list[JSONObject], str, list[JSONObject]]:
    model = RecordingModel(InstantModel(script))
    todo = SeedsTodoManager()
    handlers = seeds_tool_handlers(
        todo,
        {
            "bash": lambda **kw: f"ran {kw['command']}",
            "read_file": lambda **kw: f"read {kw['path']}",
        },
    )
    messages: list[JSONObject] = [{"role": "user", "content": "task"}]
    out = io.StringIO()
    seeds_agent_loop(messages, model=model, handlers=handlers, tools=[], system="sys", out=out)
    return messages, out.getvalue(), model.requests


def _user_turns(messages: list[JSONObject]) -> list[list[JSONObject]]:
    return [m["content"] for m in messages[1:] if m["role"] == "user"]


def test_reminder_is_appended_after_three_rounds_without_a_todo_call() -> None:
    plan = {"items": [{"id": "1", "text": "a", "status": "in_progress"}]}
    script = _script(
        _call("todo", plan, "t1"),
        _call("bash", {"command": "1"}, "t2"),
        _call("bash", {"command": "2"}, "t3"),
        _call("bash", {"command": "3"}, "t4"),
        _call("bash", {"command": "4"}, "t5"),
        _call("todo", plan, "t6"),
        {"text": "done"},
    )
    messages, _, _ = _run_seeds(script)
    reminded = [
        any(b.get("text") == SEEDS_REMINDER for b in turn) for turn in _user_turns(messages)
    ]
    assert reminded == [False, False, False, True, True, False]
    fourth = _user_turns(messages)[3]
    assert [b["type"] for b in fourth] == ["tool_result", "text"]  # after the results


def test_loop_guard_blocks_a_repeat_except_todo_and_read_file() -> None:
    plan = {"items": [{"id": "1", "text": "a"}]}
    script = _script(
        _call("bash", {"command": "ls"}, "t1"),
        _call("bash", {"command": "ls"}, "t2"),
        _call("read_file", {"path": "a.py"}, "t3"),
        _call("read_file", {"path": "a.py"}, "t4"),
        _call("todo", plan, "t5"),
        _call("todo", plan, "t6"),
        {"text": "done"},
    )
    messages, printed, _ = _run_seeds(script)
    outputs = [turn[0]["content"] for turn in _user_turns(messages)]
    assert outputs[:4] == ["ran ls", SEEDS_BLOCKED_OUTPUT, "read a.py", "read a.py"]
    assert outputs[4] == outputs[5] == "[ ] #1: a\n\n(0/1 completed)"
    assert printed.startswith("> bash:\nran ls\n> bash:\n")


def test_errors_become_results_and_no_request_has_cache_control() -> None:
    bad = {"items": [{"id": "1", "text": ""}]}
    script = _script(_call("todo", bad, "t1"), _call("nope", {}, "t2"), {"text": "done"})
    messages, printed, requests = _run_seeds(script)
    outputs = [turn[0]["content"] for turn in _user_turns(messages)]
    assert outputs == ["Error: Item 1: text required", "Unknown tool: nope"]
    assert "> todo:\nError: Item 1: text required\n" in printed
    assert len(requests) == 3
    assert all("cache_control" not in json.dumps(r) for r in requests)
    assert isinstance(requests[0]["system"], str)


def test_benchmark_session_plays_the_same_on_both_loops() -> None:
    """Same script: the todo results match byte for byte and reminders fall in the same rounds."""
    script = session_script(23)
    ours = RecordingModel(InstantModel(script))
    outcome = our_loop(ours, NullLog(), max_rounds=30).run(BENCH_TASK)
    assert (outcome.status, outcome.rounds) == ("done", 23)
    seeds = RecordingModel(InstantModel(script))
    go, left = baseline_parts(seeds)
    go()
    assert "> todo:\n[>] #1.1:" in left.printed

    def rounds(requests: list[JSONObject]) -> list[tuple[str, bool]]:
        """Each round's tool result text and whether a reminder came with it."""
        last_users = [r["messages"][-1]["content"] for r in requests[1:]]
        return [
            (content[0]["content"], any(SEEDS_REMINDER in b.get("text", "") for b in content))
            for content in last_users
        ]

    assert rounds(ours.requests) == rounds(seeds.requests)
    assert sum(reminder for _, reminder in rounds(seeds.requests)) == 8


# --- each figure is computed: a slowed variant moves it -----------------------------------------


def _burning_first(function: Callable[..., Any], seconds: Callable[..., float]) -> Any:
    """``function`` after burning ``seconds(*args)`` of CPU."""

    def slowed(*args: Any) -> Any:
        burn(seconds(*args))
        return function(*args)

    return slowed


def _slow_loop_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Loop, "_step", _burning_first(Loop._step, lambda *_: 0.002))


def _summary_growing_with_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    cost = lambda _self, body: 5e-6 * len(body["messages"]) ** 2  # noqa: E731
    monkeypatch.setattr(Conversation, "summary", _burning_first(Conversation.summary, cost))


def _slow_live_view(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LiveView, "__call__", _burning_first(LiveView.__call__, lambda *_: 0.001))


def _slow_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    slowed = _burning_first(TraceRenderer.__call__, lambda *_: 200e-6)
    monkeypatch.setattr(TraceRenderer, "__call__", slowed)


def _slow_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Replay, "_feed", _burning_first(Replay._feed, lambda *_: 400e-6))


def _slow_page(monkeypatch: pytest.MonkeyPatch) -> None:
    slowed = _burning_first(picture_model._Builder._enter_round, lambda *_: 300e-6)
    monkeypatch.setattr(picture_model._Builder, "_enter_round", slowed)


def _quadratic_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    cost = lambda _self, payload: 1e-6 * len(payload["items"]) ** 2  # noqa: E731
    monkeypatch.setattr(PlanBoard, "apply", _burning_first(PlanBoard.apply, cost))


def _hoarding_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    measure = _figures.replay_memory
    monkeypatch.setattr(
        _figures,
        "replay_memory",
        lambda path: measure(path, replayer="tests.bench_variants:hoarding_replay"),
    )


def _eager_cli_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # The start as it was: the SDK and the loop imported before the command is even read.
    eager = "import anthropic, orchestrator.loop; from orchestrator.cli import main; main()"
    monkeypatch.setattr(_cli_start, "cli_command", lambda: [sys.executable, "-c", eager])


# Each slowed variant does at least ten times the work of what it slows (a fixed CPU burn, on
# the benchmarks' own CPU clock), and the figure need only move by a third of that: a busy
# machine inflates both sides of a ratio and leaves the effect far above its noise.
@pytest.mark.e2e
@pytest.mark.parametrize(
    ("measure", "figure", "slow_down", "factor"),
    [
        # A start is wall-clock time of fresh processes, which a busy machine moves as much as
        # the variant does: `make bench` checks it, on a machine left alone.
        pytest.param(
            _figures._cli_start,
            "cli_start_vs_python",
            _eager_cli_start,
            2,
            id="start",
            marks=pytest.mark.bench,
        ),
        pytest.param(_figures._overhead, "harness_vs_sdk_call", _slow_loop_step, 3, id="sdk"),
        pytest.param(
            _figures._round_cost_growth,
            "round_cost_growth",
            _summary_growing_with_the_conversation,
            3,
            id="growth",
        ),
        pytest.param(_figures._live_view, "live_view_vs_harness", _slow_live_view, 3, id="live"),
        pytest.param(_figures._trace, "trace_vs_floor", _slow_trace, 3, id="trace"),
        pytest.param(_figures._todo_round, "todo_round_trace_us", _slow_trace, 3, id="todo"),
        # The heavier ones (seconds of replays and plan sweeps each) run with the bench.
        pytest.param(
            _figures._replay,
            "replay_vs_parse_ratio",
            _slow_replay,
            3,
            id="replay",
            marks=pytest.mark.bench,
        ),
        # Memory, not time: the hoard is ten copies of the trace's events.
        pytest.param(
            _figures._replay,
            "replay_peak_rss_mb_40k",
            _hoarding_replay,
            2,
            id="replay-rss",
            marks=pytest.mark.bench,
        ),
        pytest.param(measure_html, "html_render_seconds_per_1k_rounds", _slow_page, 3, id="html"),
        # An exponent moves by adding: a quadratic cost added on top lifts it by about one.
        pytest.param(
            _figures._plan_scaling,
            "plan_scaling_exponent",
            _quadratic_plan,
            None,
            id="plan",
            marks=pytest.mark.bench,
        ),
        pytest.param(
            measure_plan_dependencies,
            "plan_deps_scaling_exponent",
            _quadratic_plan,
            None,
            id="plan-deps",
            marks=pytest.mark.bench,
        ),
    ],
)
def test_a_slowed_variant_moves_the_figure(
    measure: Callable[[Sizes, Path], Found],
    figure: str,
    slow_down: Callable[[pytest.MonkeyPatch], None],
    factor: float | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    normal = measure(TINY, tmp_path)[0][figure]
    slow_down(monkeypatch)
    slowed = measure(TINY, tmp_path)[0][figure]
    if factor is None:
        assert slowed > normal + 0.4, (normal, slowed)
    else:
        assert slowed > normal * factor, (normal, slowed)
