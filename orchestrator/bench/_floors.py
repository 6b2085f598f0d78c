"""The figures measured against floors taken in the same run.

Each says what the harness costs beside something it cannot avoid:

- ``harness_vs_sdk_call``: our CPU per round (scripted model, stub tools, a real trace) over the
  client CPU of one streaming Messages-API call made by the real ``anthropic`` SDK to the
  package's loopback server, with a request of about 14 KiB.
- ``round_cost_growth``: our CPU per round in a long session over the same in a short one.
- ``live_view_vs_harness``: what the rich live view adds per round, over the harness's own cost.
- ``trace_vs_floor``: the trace's CPU per event over one compact ``orjson`` line of the same event
  written with ``os.write`` to the same kind of file (both unbuffered: every line reaches the
  file as it is written).
"""

from __future__ import annotations

import io
import json
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anthropic
import orjson
from rich.console import Console

from orchestrator.bench._timing import Found, alternate, median_ratio, us
from orchestrator.bench._workload import (
    BENCH_TASK,
    FAKE_SECRET,
    InstantModel,
    NullLog,
    clock,
    our_loop,
    run_ours,
    run_ours_untraced,
    session_script,
)
from orchestrator.console import LiveView
from orchestrator.protocols import JSONObject
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer, RecordingModel
from orchestrator.trace import EventSink, open_trace

#: The size of the request the SDK floor sends: a mid-session request of ours.
SDK_REQUEST_BYTES = 14 * 1024
#: Not a credential: the loopback server accepts any key.
_LOOPBACK_KEY = "bench-loopback-key"


# --- harness_vs_sdk_call ------------------------------------------------------------------------


def request_of_size(target: int) -> JSONObject:
    """The first request our loop builds in the bench session that is at least ``target`` bytes."""
    rounds = 60
    recording = RecordingModel(InstantModel(session_script(rounds)))
    our_loop(recording, NullLog(), max_rounds=rounds + 1).run(BENCH_TASK)
    for request in recording.requests:
        if len(json.dumps(request, ensure_ascii=False)) >= target:
            return dict(request)
    raise RuntimeError(f"no request of the bench session reaches {target} bytes")


#: The answer the loopback server streams: a sentence and one tool call, as a typical round.
_ANSWER: JSONObject = {
    "text": "Reading the file first, then I will make the change.",
    "tool_calls": [{"name": "read_file", "input": {"path": "hello.py"}}],
}


def sdk_call_seconds(request: Mapping[str, Any], calls: int) -> list[float]:
    """Client CPU seconds of each of ``calls`` streaming calls, after one untimed warm-up call."""
    script = parse_script({"name": "bench-sdk", "turns": [_ANSWER] * (calls + 1)}, source="bench")
    times: list[float] = []
    with MessagesServer(script) as server:
        client = anthropic.Anthropic(
            api_key=_LOOPBACK_KEY,
            base_url=server.base_url,
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(trust_env=False),  # no proxy for loopback
        )
        for call in range(calls + 1):
            started = clock()
            with client.messages.stream(**request) as stream:
                for _text in stream.text_stream:
                    pass
                final = stream.get_final_message()
            elapsed = clock() - started
            if final.stop_reason != "tool_use":
                raise RuntimeError(f"the loopback call did not play out: {final.stop_reason}")
            if call:
                times.append(elapsed)
        client.close()
        if server.violations:
            raise RuntimeError(f"the loopback server saw a bad request: {server.violations[0]}")
    return times


def harness_vs_sdk_call(harness_seconds_per_round: float, calls: int) -> tuple[float, float, int]:
    """(the ratio, the SDK call's median CPU seconds, the request's size in bytes)."""
    request = request_of_size(SDK_REQUEST_BYTES)
    size = len(json.dumps(request, ensure_ascii=False))
    call = statistics.median(sdk_call_seconds(request, calls))
    return harness_seconds_per_round / call, call, size


# --- round_cost_growth --------------------------------------------------------------------------


def round_cost_growth(short: int, long: int, repeats: int, workdir: Path) -> Found:
    """Our CPU per round in a ``long``-round session over the same in a ``short``-round one."""
    trace = workdir / "growth.jsonl"

    def per_round(rounds: int) -> Callable[[], float]:
        script = session_script(rounds)

        def go() -> float:
            seconds, _ = run_ours(script, trace, rounds=rounds)
            return seconds / rounds

        return go

    short_times, long_times = alternate(per_round(short), per_round(long), repeats)
    growth = median_ratio(long_times, short_times)
    return (
        {"round_cost_growth": round(growth, 3)},
        {
            "round_cost_growth": (
                f"{us(statistics.median(short_times)):g} us/round over {short} rounds "
                f"(the floor: no growth = 1.0)"
            )
        },
        {
            "round cost growth": (
                f"{us(statistics.median(long_times)):g} us/round over {long} rounds, "
                f"{us(statistics.median(short_times)):g} us/round over {short}; one conversation"
            )
        },
    )


# --- live_view_vs_harness -----------------------------------------------------------------------


def _live_view() -> LiveView:
    """The live view on a terminal-like console that writes to memory."""
    console = Console(file=io.StringIO(), force_terminal=True, width=100, color_system="truecolor")
    return LiveView(console)


def live_view_vs_harness(rounds: int, repeats: int, workdir: Path) -> Found:
    """What the live view adds to a round, over what the harness costs without it."""
    script = session_script(rounds)
    trace = workdir / "live.jsonl"

    def bare() -> float:
        seconds, _ = run_ours(script, trace, rounds=rounds)
        return seconds

    def viewed() -> float:
        with _live_view() as view:
            seconds, _ = run_ours(script, trace, rounds=rounds, sinks=(view,))
        return seconds

    with_view, without = alternate(viewed, bare, repeats)
    ratios = [(v - b) / max(b, 1e-9) for v, b in zip(with_view, without, strict=True)]
    view_cost = statistics.median(with_view) - statistics.median(without)
    return (
        {"live_view_vs_harness": round(max(0.0, statistics.median(ratios)), 3)},
        {
            "live_view_vs_harness": (
                f"harness {us(statistics.median(without) / rounds):g} us/round without a view"
            )
        },
        {
            "live view": (
                f"{rounds} rounds with the live view on a 100-column terminal in memory: "
                f"{us(view_cost / rounds):g} us/round more than without"
            )
        },
    )


# --- trace_vs_floor -----------------------------------------------------------------------------


class _RecordingLog:
    """An event log that keeps every call, to play them again into a trace."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, *args: Any, **fields: Any) -> None:
        self.calls.append((event, fields))


def session_events(rounds: int) -> list[tuple[str, dict[str, Any]]]:
    """The (event, fields) calls a ``rounds``-round session makes to its event log."""
    log = _RecordingLog()
    loop = our_loop(InstantModel(session_script(rounds)), log, max_rounds=rounds + 1)
    loop.run(BENCH_TASK)
    return log.calls


def _trace_seconds(
    calls: Sequence[tuple[str, dict[str, Any]]], path: Path, sinks: Sequence[EventSink] = ()
) -> float:
    with open_trace(path, secrets=(FAKE_SECRET,), sinks=sinks) as trace:
        info = trace.log.info
        started = clock()
        for event, fields in calls:
            info(event, **fields)
        return clock() - started


def _floor_seconds(lines: Sequence[Mapping[str, Any]], path: Path) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        dumps, write, newline = orjson.dumps, os.write, orjson.OPT_APPEND_NEWLINE
        started = clock()
        for event in lines:
            write(fd, dumps(event, option=newline))
        return clock() - started
    finally:
        os.close(fd)


def trace_vs_floor(rounds: int, repeats: int, workdir: Path) -> Found:
    """The trace's CPU per event over the floor's, on the events of a real session."""
    calls = session_events(rounds)
    traced = workdir / "events.jsonl"
    _trace_seconds(calls, traced)
    # The floor writes the very lines the trace wrote, as dicts built beforehand.
    lines = [orjson.loads(raw) for raw in traced.read_bytes().splitlines()]
    floor_path = workdir / "floor.jsonl"
    trace_times, floor_times = alternate(
        lambda: _trace_seconds(calls, traced),
        lambda: _floor_seconds(lines, floor_path),
        repeats,
    )
    events = len(calls)
    return (
        {"trace_vs_floor": round(median_ratio(trace_times, floor_times), 2)},
        {
            "trace_vs_floor": (
                f"orjson + os.write {us(statistics.median(floor_times) / events):g} us/event"
            )
        },
        {
            "trace": (
                f"{events} events of a {rounds}-round session: the trace "
                f"{us(statistics.median(trace_times) / events):g} us/event, the floor "
                f"{us(statistics.median(floor_times) / events):g} us/event"
            )
        },
    )


# --- todo_round_us ------------------------------------------------------------------------------


def todo_round_cost(rounds: int, repeats: int, workdir: Path) -> Found:
    """Our CPU per todo round (a 10-item plan update that moves one item), and the trace's part.

    A todo round writes the plan three ways (the call's input, ``plan.updated``, the result's
    text), so it is where the items' serialisation shows; informational, no goal.
    """
    script = session_script(rounds, todo_only=True)
    path = workdir / "todo.jsonl"

    def traced() -> float:
        seconds, _ = run_ours(script, path, rounds=rounds)
        return seconds / rounds

    def untraced() -> float:
        return run_ours_untraced(script, rounds=rounds) / rounds

    with_trace, without = alternate(traced, untraced, repeats)
    per_round = statistics.median(with_trace)
    trace_part = statistics.median(w - b for w, b in zip(with_trace, without, strict=True))
    return (
        {"todo_round_us": us(per_round), "todo_round_trace_us": us(max(0.0, trace_part))},
        {},
        {
            "todo round": (
                f"{rounds} rounds, each a full rewrite of a 10-item plan moving one item: "
                f"{us(per_round):g} us/round, of which the trace {us(trace_part):g} us"
            )
        },
    )
