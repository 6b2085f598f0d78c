"""The measurements: each figure is a ratio against a floor taken in the same run, or a count.

Two sides of a ratio are run alternately (which goes first alternates too), each repeat after a
garbage collection, and the figure is the median over the repeats. Each figure carries its floor,
shown beside it; absolute times are kept only as context. A workload that does not play out as
scripted raises: that is a broken benchmark, not a slow one.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anthropic
import attrs
from transitions import Machine

from orchestrator.bench import _floors
from orchestrator.bench._board import measure_board
from orchestrator.bench._html import measure_html
from orchestrator.bench._plan_dependencies import measure_plan_dependencies
from orchestrator.bench._sandbox import sandbox_cost
from orchestrator.bench._team import measure_team
from orchestrator.bench._timing import Found, alternate, median_ratio, slope, us
from orchestrator.bench._workload import (
    BENCH_TASK,
    InstantModel,
    NullLog,
    baseline_parts,
    clock,
    our_loop,
    plan_items,
    plan_update_seconds,
    run_baseline,
    run_ours,
    session_script,
    write_trace_of_runs,
)
from orchestrator.conversation import CacheUsage, cache_usage
from orchestrator.plan import ItemMachine, PlanBoard, TodoTool, item_machine_options
from orchestrator.protocols import JSONObject
from orchestrator.replay import check_trace
from orchestrator.testing import RecordingModel
from orchestrator.tools import ToolRegistry

#: Estimated input prices relative to an uncached input token.
CACHE_READ_PRICE = 0.1
CACHE_WRITE_PRICE = 1.25


@attrs.frozen
class Sizes:
    """How big each benchmark is; :data:`QUICK` shrinks them for the test suite."""

    session_rounds: int = 200
    session_repeats: int = 9
    sdk_calls: int = 15
    growth_rounds: tuple[int, int] = (50, 400)
    growth_repeats: int = 5
    live_rounds: int = 100
    live_repeats: int = 5
    trace_rounds: int = 100
    trace_repeats: int = 9
    plan_sizes: tuple[int, ...] = (10, 20, 50, 100, 200, 500, 1000)
    plan_samples: int = 7
    plan_updates: int = 20
    machine_items: int = 20
    machine_repeats: int = 15
    replay_rounds: int = 10_000
    replay_long_rounds: int = 40_000
    replay_rounds_per_run: int = 50
    replay_repeats: int = 3
    cache_rounds: int = 30
    long_rounds: int = 500
    #: Items each bench team does (at 1, 2 and 4 workers, and 4 with one killed).
    team_items: int = 24
    quick: bool = False


QUICK = Sizes(
    session_rounds=40,
    session_repeats=3,
    sdk_calls=3,
    growth_rounds=(10, 40),
    growth_repeats=3,
    live_rounds=20,
    live_repeats=3,
    trace_rounds=20,
    trace_repeats=3,
    plan_sizes=(10, 20, 50, 200, 400),
    plan_samples=3,
    plan_updates=5,
    machine_repeats=3,
    replay_rounds=400,
    replay_long_rounds=1600,
    replay_repeats=1,
    long_rounds=60,
    team_items=6,
    quick=True,
)


@attrs.frozen
class Measured:
    """The figures (the JSON keys), the floor beside each, and context (shown, not asserted)."""

    figures: dict[str, float]
    floors: dict[str, str]
    context: dict[str, str]


def measure_all(sizes: Sizes, workdir: Path) -> Measured:
    """Run every benchmark; ``workdir`` is a scratch directory for traces."""
    figures: dict[str, float] = {}
    floors: dict[str, str] = {}
    context: dict[str, str] = {}
    for measure in MEASURES:
        found, beside, notes = measure(sizes, workdir)
        figures.update(found)
        floors.update(beside)
        context.update(notes)
    return Measured(figures, floors, context)


# --- overhead_ratio ---------------------------------------------------------------------------


def _overhead(sizes: Sizes, workdir: Path) -> Found:
    rounds = sizes.session_rounds
    script = session_script(rounds)
    trace = workdir / "overhead.jsonl"

    def ours() -> float:
        seconds, _ = run_ours(script, trace, rounds=rounds)
        trace.unlink()
        return seconds

    def baseline() -> float:
        seconds, _ = run_baseline(script, rounds=rounds)
        return seconds

    our_times, baseline_times = alternate(ours, baseline, sizes.session_repeats)
    per_round = statistics.median(our_times) / rounds
    versus_sdk, sdk_call, request_bytes = _floors.harness_vs_sdk_call(per_round, sizes.sdk_calls)
    figures = {
        "harness_vs_sdk_call": round(versus_sdk, 3),
        "overhead_ratio": round(median_ratio(our_times, baseline_times), 2),
        "us_per_round_ours": us(per_round),
        "us_per_round_baseline": us(statistics.median(baseline_times) / rounds),
        "us_per_sdk_call": us(sdk_call),
    }
    floors = {
        "harness_vs_sdk_call": f"one SDK streaming call: {us(sdk_call):g} us CPU",
        "overhead_ratio": (
            f"the seeds' loop, no trace: {figures['us_per_round_baseline']:g} us/round"
        ),
    }
    context = {
        "overhead session": (
            f"{rounds} rounds ({rounds - 1} with a tool call, then the answer), "
            f"{sizes.session_repeats} alternating repeats per side; "
            f"harness {us(per_round):g} us/round"
        ),
        "sdk call": (
            f"anthropic {anthropic.__version__} messages.stream to the loopback MessagesServer, "
            f"a {request_bytes / 1024:.1f} KiB request from our session, a streamed answer "
            f"(text and one tool call); median client-thread CPU of {sizes.sdk_calls} calls"
        ),
    }
    return figures, floors, context


def _round_cost_growth(sizes: Sizes, workdir: Path) -> Found:
    short, long = sizes.growth_rounds
    return _floors.round_cost_growth(short, long, sizes.growth_repeats, workdir)


def _live_view(sizes: Sizes, workdir: Path) -> Found:
    return _floors.live_view_vs_harness(sizes.live_rounds, sizes.live_repeats, workdir)


def _trace(sizes: Sizes, workdir: Path) -> Found:
    return _floors.trace_vs_floor(sizes.trace_rounds, sizes.trace_repeats, workdir)


def _todo_round(sizes: Sizes, workdir: Path) -> Found:
    return _floors.todo_round_cost(sizes.trace_rounds, sizes.trace_repeats, workdir)


# --- plan_update_us_* and plan_scaling_exponent -----------------------------------------------


def _plan_scaling(sizes: Sizes, workdir: Path) -> Found:
    wanted = sorted({*sizes.plan_sizes, 20, 200})
    samples: dict[int, list[float]] = {size: [] for size in wanted}
    plan_update_seconds(10, 2)  # warm-up
    for _ in range(sizes.plan_samples):
        for size in wanted:  # interleaved, so a noisy moment spreads over every size
            gc.collect()
            samples[size].append(plan_update_seconds(size, sizes.plan_updates))
    medians = {size: statistics.median(times) for size, times in samples.items()}

    def exponent(sizes_fitted: list[int]) -> float:
        return slope(
            [math.log(size) for size in sizes_fitted],
            [math.log(medians[size]) for size in sizes_fitted],
        )

    # Up to 200 items, and past the 20-item cap up to the largest size (1,000 by default), where
    # anything quadratic in the plan shows.
    within = [size for size in wanted if 10 <= size <= 200]
    past = [size for size in wanted if size >= 200]
    figures = {
        "plan_update_us_20": us(medians[20]),
        "plan_update_us_200": us(medians[200]),
        "plan_scaling_exponent": round(exponent(within), 3),
        "plan_scaling_exponent_1000": round(exponent(past), 3),
    }
    floors = {
        "plan_scaling_exponent": "linear = 1.0",
        "plan_scaling_exponent_1000": "linear = 1.0",
    }
    context = {
        "plan update": (
            "a full rewrite of n items that completes the in-progress item and starts the next, "
            "through the tool registry (checks, atomic apply, render), the item limit raised to "
            f"n; fitted over n in {', '.join(map(str, within))} and in {', '.join(map(str, past))}"
        ),
        "plan update per size (us)": ", ".join(f"{size}: {us(medians[size]):g}" for size in wanted),
    }
    return figures, floors, context


# --- machine_per_item_vs_shared_ratio ---------------------------------------------------------


class _MachinePerItem(ItemMachine):
    """The design the team did not choose: every item gets its own ``transitions`` Machine.

    It plugs into the real :class:`PlanBoard`, so the two sides differ only in how an item is
    attached to a machine; the inherited shared machine is used for nothing but path lookups.
    """

    def __init__(self) -> None:
        super().__init__()
        self._own: dict[int, Any] = {}

    def add_model(self, model: Any, initial: Any = None) -> None:
        self._own[id(model)] = Machine(model=model, **item_machine_options())

    def remove_model(self, model: Any) -> None:
        self._own.pop(id(model)).remove_model(model)

    def set_state(self, state: Any, model: Any = None) -> None:
        self._own[id(model)].set_state(state, model=model)


def _drive_board(machine: ItemMachine, items: int, *, build_only: bool = False) -> float:
    """Two plans of ``items`` items, each built in one update and then finished item by item.

    With ``build_only``, one update that creates a plan of ``items`` items and nothing else.
    """
    board = PlanBoard(limit=items, machine=machine)
    registry = ToolRegistry([TodoTool(board)])
    payloads: list[JSONObject] = []
    for plan in ("a",) if build_only else ("a", "b"):
        for active in range(1, 2 if build_only else items + 2):
            entries = plan_items(items, active)
            for entry in entries:
                entry["id"] = f"{plan}{entry['id']}"
            payloads.append({"items": entries})
    started = clock()
    results = [registry.dispatch("todo", payload) for payload in payloads]
    elapsed = clock() - started
    if any(r.is_error for r in results) or board.progress != (0 if build_only else items, items):
        raise RuntimeError("the machine-sharing benchmark did not play out")
    return elapsed


def _machine_sharing(sizes: Sizes, workdir: Path) -> Found:
    items = sizes.machine_items
    per_item, shared = alternate(
        lambda: _drive_board(_MachinePerItem(), items),
        lambda: _drive_board(ItemMachine(), items),
        sizes.machine_repeats,
    )
    built_per_item, built_shared = alternate(
        lambda: _drive_board(_MachinePerItem(), items, build_only=True),
        lambda: _drive_board(ItemMachine(), items, build_only=True),
        sizes.machine_repeats,
    )
    figures = {"machine_per_item_vs_shared_ratio": round(median_ratio(per_item, shared), 2)}
    floors = {"machine_per_item_vs_shared_ratio": "one shared ItemMachine, add_model per item"}
    context = {
        "machine sharing": (
            f"two {items}-item plans, each created in one update and finished item by item "
            f"({2 * (items + 1)} updates): {us(statistics.median(shared)):g} us shared vs "
            f"{us(statistics.median(per_item)):g} us with a Machine per item; the creating "
            f"update alone: {median_ratio(built_per_item, built_shared):.2f}x "
            f"({us(statistics.median(built_shared)):g} vs "
            f"{us(statistics.median(built_per_item)):g} us)"
        )
    }
    return figures, floors, context


# --- replay_events_per_s, replay_vs_parse_ratio, replay_peak_rss_mb_* ---------------------------


def _replay_seconds(path: Path) -> float:
    started = clock()
    divergence = check_trace(path)
    elapsed = clock() - started
    if divergence is not None:
        raise RuntimeError(f"the generated trace does not replay: {divergence}")
    return elapsed


def _parse_seconds(path: Path) -> float:
    started = clock()
    with path.open("rb") as lines:
        for raw in lines:
            if raw.strip():
                json.loads(raw)
    return clock() - started


def _generate(path: Path, rounds: int, per_run: int) -> tuple[int, float]:
    """Write a trace of ``rounds`` rounds; returns (runs, CPU seconds it took)."""
    per_run = min(per_run, rounds)
    runs = rounds // per_run
    started = clock()
    write_trace_of_runs(path, runs=runs, rounds=per_run)
    return runs, clock() - started


def _replay(sizes: Sizes, workdir: Path) -> Found:
    per_run = sizes.replay_rounds_per_run
    path, long_path = workdir / "replay.jsonl", workdir / "replay-long.jsonl"
    runs, generated = _generate(path, sizes.replay_rounds, per_run)
    events = sum(1 for line in path.read_bytes().split(b"\n") if line)
    # No warm-up: the generator has just run the same code, and a replay takes seconds.
    replay_times, parse_times = alternate(
        lambda: _replay_seconds(path),
        lambda: _parse_seconds(path),
        sizes.replay_repeats,
        warm_up=False,
    )
    memory = replay_memory(path)
    long_runs, long_generated = _generate(long_path, sizes.replay_long_rounds, per_run)
    long_memory = replay_memory(long_path)
    long_size = long_path.stat().st_size / 2**20
    long_path.unlink()
    replay_median = statistics.median(replay_times)
    short_k, long_k = _thousands(sizes.replay_rounds), _thousands(sizes.replay_long_rounds)
    figures = {
        "replay_events_per_s": round(events / replay_median),
        "replay_vs_parse_ratio": round(median_ratio(replay_times, parse_times), 2),
        "replay_peak_rss_mb_10k": round(memory["peak_rss_mb"], 1),
        "replay_peak_rss_mb_40k": round(long_memory["peak_rss_mb"], 1),
    }
    floors = {
        "replay_vs_parse_ratio": (
            f"json.loads of every line: {statistics.median(parse_times):.2f} s"
        ),
        "replay_peak_rss_mb_10k": (
            f"the interpreter and imports: {memory['imports_rss_mb']:.1f} MiB "
            f"({short_k} rounds, {path.stat().st_size / 2**20:.1f} MiB trace)"
        ),
        "replay_peak_rss_mb_40k": (
            f"the interpreter and imports: {long_memory['imports_rss_mb']:.1f} MiB "
            f"({long_k} rounds, {long_size:.1f} MiB trace)"
        ),
    }
    context = {
        "replay trace": (
            f"{runs * per_run} rounds: {runs} runs of {per_run} rounds by the real loop into one "
            f"trace (one run_id); {events} events, {path.stat().st_size / 2**20:.1f} MiB, "
            f"generated in {generated:.1f} s; the long one {long_runs} runs, "
            f"{long_size:.1f} MiB, generated in {long_generated:.1f} s"
        ),
        "replay": (
            f"replay --check {replay_median:.2f} s, json.loads of every line "
            f"{statistics.median(parse_times):.2f} s"
        ),
        "replay memory": (
            f"a child process replaying with --check: peak RSS {memory['peak_rss_mb']:.1f} MiB "
            f"({short_k} rounds), {long_memory['peak_rss_mb']:.1f} MiB ({long_k} rounds)"
        ),
    }
    return figures, floors, context


def _thousands(rounds: int) -> str:
    return f"{rounds // 1000}k" if rounds >= 1000 else str(rounds)


def replay_memory(path: Path, replayer: str = "") -> dict[str, float]:
    """Peak RSS of a fresh interpreter that replays ``path`` (so ours does not count).

    ``replayer`` (``module:function``) replaces :func:`orchestrator.replay.check_trace`.
    """
    child = subprocess.run(
        [sys.executable, "-m", "orchestrator.bench._replay_memory", str(path)]
        + (["--replayer", replayer] if replayer else []),
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the replay memory child failed: {child.stderr.strip()[-500:]}")
    report: dict[str, float] = json.loads(child.stdout)
    if report["diverged"]:
        raise RuntimeError(f"the replay memory child found a divergence in {path}")
    return report


# --- cached_input_share, baseline_cached_input_share, input_cost_ratio ----------------------------


def _usages(requests: Sequence[JSONObject]) -> list[CacheUsage]:
    previous: JSONObject | None = None
    usages = []
    for request in requests:
        usages.append(cache_usage(previous, request))
        previous = request
    return usages


def _token_totals(usages: Sequence[CacheUsage]) -> tuple[int, int, int]:
    """(cache read, cache write, uncached) input tokens at four characters a token."""
    read = write = uncached = 0
    for usage in usages:
        tokens = usage.tokens()
        read += tokens["cache_read_input_tokens"]
        write += tokens["cache_creation_input_tokens"]
        uncached += tokens["input_tokens"]
    return read, write, uncached


def _cost(read: int, write: int, uncached: int) -> float:
    return read * CACHE_READ_PRICE + write * CACHE_WRITE_PRICE + uncached


def _prompt_cache(sizes: Sizes, workdir: Path) -> Found:
    rounds = sizes.cache_rounds
    script = session_script(rounds)
    ours = RecordingModel(InstantModel(script))
    outcome = our_loop(ours, NullLog(), max_rounds=rounds + 1).run(BENCH_TASK)
    seeds = RecordingModel(InstantModel(script))
    go, _ = baseline_parts(seeds)
    go()
    if outcome.rounds != rounds or len(seeds.requests) != rounds:
        raise RuntimeError("the prompt-cache session did not play out on both sides")
    our_tokens = _token_totals(_usages(ours.requests))
    seed_tokens = _token_totals(_usages(seeds.requests))
    our_share = our_tokens[0] / max(1, sum(our_tokens))
    seed_share = seed_tokens[0] / max(1, sum(seed_tokens))
    figures = {
        "cached_input_share": round(our_share, 4),
        "baseline_cached_input_share": round(seed_share, 4),
        "input_cost_ratio": round(_cost(*our_tokens) / max(1e-9, _cost(*seed_tokens)), 4),
    }
    context = {
        "prompt cache": (
            f"{rounds} requests each; ours {sum(our_tokens)} input tokens "
            f"({our_tokens[0]} read, {our_tokens[1]} written, {our_tokens[2]} uncached), "
            f"the seeds' {sum(seed_tokens)} (all uncached)"
        )
    }
    return figures, {"input_cost_ratio": "the seeds' requests, priced alike"}, context


# --- update_output_chars_full / _merge --------------------------------------------------------


def _update_output(sizes: Sizes, workdir: Path) -> Found:
    size, active = 10, 3
    full: JSONObject = {"items": plan_items(size, active + 1)}
    merge: JSONObject = {
        "merge": True,
        "items": [
            {"id": str(active), "status": "completed"},
            {"id": str(active + 1), "status": "in_progress"},
        ],
    }
    boards = []
    for payload in (full, merge):
        board = PlanBoard()
        for step in range(1, active + 1):  # strictly, an item walks one edge per update
            board.apply({"items": plan_items(size, step)})
        board.apply(payload)
        boards.append(board.items)
    if boards[0] != boards[1]:
        raise RuntimeError("the full and the merge update do not leave the same plan")
    figures = {
        "update_output_chars_full": float(len(_compact(full))),
        "update_output_chars_merge": float(len(_compact(merge))),
    }
    context = {"update output": f"merge input: {_compact(merge)}"}
    return figures, {"update_output_chars_merge": "the full rewrite"}, context


def _compact(payload: JSONObject) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def _sandbox(sizes: Sizes, workdir: Path) -> Found:
    found, notes = sandbox_cost(5 if sizes.quick else 30, workdir)
    return found, {}, notes


def _cli_start(sizes: Sizes, workdir: Path) -> Found:
    from orchestrator.bench._cli_start import cli_start

    return cli_start(5 if sizes.quick else 30)


# --- long_run_* -------------------------------------------------------------------------------


def _long_run(sizes: Sizes, workdir: Path) -> Found:
    from orchestrator.bench._long_run import LONG_WINDOW, run_long

    rounds = sizes.long_rounds
    status, done_rounds, managed = run_long(rounds, managed=True)
    if status != "done":
        raise RuntimeError(f"the managed long run ended {status} after {done_rounds} rounds")
    off_status, off_rounds, _ = run_long(rounds, managed=False)
    figures = {
        "long_run_peak_over_window": round(managed.peak / LONG_WINDOW, 3),
        "long_run_cache_read_share": round(managed.read / max(managed.total, 1), 3),
        "long_run_unmanaged_refused_at_round": float(off_rounds if off_status == "failed" else 0),
    }
    floors = {
        "long_run_peak_over_window": f"the window: 1 ({LONG_WINDOW:,} tokens)",
        "long_run_unmanaged_refused_at_round": "the same run with --compaction off",
    }
    context = {
        "long run": (
            f"{rounds} rounds of ~20 KB tool output under a {LONG_WINDOW:,}-token window: "
            f"managed {status}; unmanaged (--compaction off) {off_status} at round {off_rounds}"
        )
    }
    return figures, floors, context


MEASURES = (
    _cli_start,
    _overhead,
    _round_cost_growth,
    _live_view,
    _trace,
    _todo_round,
    _plan_scaling,
    measure_plan_dependencies,
    _machine_sharing,
    _replay,
    measure_html,
    _prompt_cache,
    _update_output,
    _long_run,
    _sandbox,
    measure_board,
    measure_team,
)
