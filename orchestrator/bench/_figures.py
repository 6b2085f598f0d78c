"""The measurements: each figure is a ratio taken side by side in one run, or a count.

Two sides of a ratio are run alternately (which goes first alternates too), each repeat after a
garbage collection, and the figure is the median over the repeats. Absolute times are kept only
as context. A workload that does not play out as scripted raises: that is a broken benchmark,
not a slow one.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
from transitions import Machine

from orchestrator.bench._plan_dependencies import measure_plan_dependencies
from orchestrator.bench._workload import (
    BENCH_TASK,
    InstantModel,
    NullLog,
    baseline_parts,
    clock,
    our_loop,
    plan_items,
    run_baseline,
    run_ours,
    session_script,
    write_trace_of_runs,
)
from orchestrator.conversation import CacheUsage, cache_usage
from orchestrator.plan import ItemMachine, PlanBoard, TodoTool, item_machine_options
from orchestrator.protocols import JSONObject
from orchestrator.replay import Replay, read_trace
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
    plan_sizes: tuple[int, ...] = (10, 20, 50, 100, 200, 500, 1000)
    plan_samples: int = 7
    plan_updates: int = 20
    machine_items: int = 20
    machine_repeats: int = 15
    replay_rounds: int = 10_000
    replay_rounds_per_run: int = 50
    replay_repeats: int = 3
    cache_rounds: int = 30
    quick: bool = False


QUICK = Sizes(
    session_rounds=40,
    session_repeats=3,
    plan_sizes=(10, 20, 50, 200),
    plan_samples=3,
    plan_updates=5,
    machine_repeats=3,
    replay_rounds=400,
    replay_repeats=1,
    quick=True,
)


@attrs.frozen
class Measured:
    """The figures (the JSON keys) and context that explains them (shown, not asserted)."""

    figures: dict[str, float]
    context: dict[str, str]


def measure_all(sizes: Sizes, workdir: Path) -> Measured:
    """Run every benchmark; ``workdir`` is a scratch directory for traces."""
    figures: dict[str, float] = {}
    context: dict[str, str] = {}
    for measure in (
        _overhead,
        _plan_scaling,
        measure_plan_dependencies,
        _machine_sharing,
        _replay,
        _prompt_cache,
        _update_output,
    ):
        found, notes = measure(sizes, workdir)
        figures.update(found)
        context.update(notes)
    return Measured(figures, context)


Figures = tuple[dict[str, float], dict[str, str]]


# --- helpers ----------------------------------------------------------------------------------


def _alternate(
    first: Callable[[], float],
    second: Callable[[], float],
    repeats: int,
    *,
    warm_up: bool = True,
) -> tuple[list[float], list[float]]:
    """Time two sides alternately, swapping which goes first, after an untimed run of each."""
    if warm_up:
        first()
        second()
    a: list[float] = []
    b: list[float] = []
    for repeat in range(repeats):
        order = ((first, a), (second, b)) if repeat % 2 == 0 else ((second, b), (first, a))
        for side, times in order:
            gc.collect()
            times.append(side())
    return a, b


def _median_ratio(top: Sequence[float], bottom: Sequence[float]) -> float:
    return statistics.median(t / max(b, 1e-9) for t, b in zip(top, bottom, strict=True))


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The least-squares slope of ``ys`` against ``xs``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return num / den


def _us(seconds: float) -> float:
    return round(seconds * 1e6, 2)


# --- overhead_ratio ---------------------------------------------------------------------------


def _overhead(sizes: Sizes, workdir: Path) -> Figures:
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

    our_times, baseline_times = _alternate(ours, baseline, sizes.session_repeats)
    figures = {
        "overhead_ratio": round(_median_ratio(our_times, baseline_times), 2),
        "us_per_round_ours": _us(statistics.median(our_times) / rounds),
        "us_per_round_baseline": _us(statistics.median(baseline_times) / rounds),
    }
    context = {
        "overhead session": (
            f"{rounds} rounds ({rounds - 1} with a tool call, then the answer), "
            f"{sizes.session_repeats} alternating repeats per side"
        )
    }
    return figures, context


# --- plan_update_us_* and plan_scaling_exponent -----------------------------------------------


def _plan_update_seconds(size: int, updates: int) -> float:
    """Seconds per todo update that rewrites ``size`` items and moves one, through the registry."""
    board = PlanBoard(limit=size)
    registry = ToolRegistry([TodoTool(board)])
    first = registry.dispatch("todo", {"items": plan_items(size, 1)})
    moves = min(updates, size)
    payloads = [{"items": plan_items(size, active)} for active in range(2, moves + 2)]
    started = clock()
    results = [registry.dispatch("todo", payload) for payload in payloads]
    elapsed = clock() - started
    refused = [r.text for r in (first, *results) if r.is_error]
    if refused or board.progress != (moves, size):
        raise RuntimeError(f"plan update benchmark did not apply at {size} items: {refused[:1]}")
    return elapsed / moves


def _plan_scaling(sizes: Sizes, workdir: Path) -> Figures:
    wanted = sorted({*sizes.plan_sizes, 20, 200})
    samples: dict[int, list[float]] = {size: [] for size in wanted}
    _plan_update_seconds(10, 2)  # warm-up
    for _ in range(sizes.plan_samples):
        for size in wanted:  # interleaved, so a noisy moment spreads over every size
            gc.collect()
            samples[size].append(_plan_update_seconds(size, sizes.plan_updates))
    medians = {size: statistics.median(times) for size, times in samples.items()}
    fitted = [size for size in wanted if size >= 10]
    exponent = _slope(
        [math.log(size) for size in fitted], [math.log(medians[size]) for size in fitted]
    )
    figures = {
        "plan_update_us_20": _us(medians[20]),
        "plan_update_us_200": _us(medians[200]),
        "plan_scaling_exponent": round(exponent, 3),
    }
    context = {
        "plan update": (
            "a full rewrite of n items that completes the in-progress item and starts the next, "
            "through the tool registry (checks, atomic apply, render); fitted over n in "
            + ", ".join(str(size) for size in fitted)
        ),
        "plan update per size (us)": ", ".join(
            f"{size}: {_us(medians[size]):g}" for size in fitted
        ),
    }
    return figures, context


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


def _machine_sharing(sizes: Sizes, workdir: Path) -> Figures:
    items = sizes.machine_items
    per_item, shared = _alternate(
        lambda: _drive_board(_MachinePerItem(), items),
        lambda: _drive_board(ItemMachine(), items),
        sizes.machine_repeats,
    )
    built_per_item, built_shared = _alternate(
        lambda: _drive_board(_MachinePerItem(), items, build_only=True),
        lambda: _drive_board(ItemMachine(), items, build_only=True),
        sizes.machine_repeats,
    )
    figures = {"machine_per_item_vs_shared_ratio": round(_median_ratio(per_item, shared), 2)}
    context = {
        "machine sharing": (
            f"two {items}-item plans, each created in one update and finished item by item "
            f"({2 * (items + 1)} updates): {_us(statistics.median(shared)):g} us shared vs "
            f"{_us(statistics.median(per_item)):g} us with a Machine per item; the creating "
            f"update alone: {_median_ratio(built_per_item, built_shared):.2f}x "
            f"({_us(statistics.median(built_shared)):g} vs "
            f"{_us(statistics.median(built_per_item)):g} us)"
        )
    }
    return figures, context


# --- replay_events_per_s, replay_vs_parse_ratio, peak_rss_mb_10k_rounds -------------------------


def _replay_seconds(path: Path) -> float:
    started = clock()
    divergence = Replay(read_trace(path)).check()
    elapsed = clock() - started
    if divergence is not None:
        raise RuntimeError(f"the generated trace does not replay: {divergence}")
    return elapsed


def _parse_seconds(path: Path) -> float:
    started = clock()
    for raw in path.read_bytes().split(b"\n"):
        if raw:
            json.loads(raw)
    return clock() - started


def _replay(sizes: Sizes, workdir: Path) -> Figures:
    per_run = min(sizes.replay_rounds_per_run, sizes.replay_rounds)
    runs = sizes.replay_rounds // per_run
    path = workdir / "replay.jsonl"
    started = clock()
    write_trace_of_runs(path, runs=runs, rounds=per_run)
    generated = clock() - started
    events = sum(1 for line in path.read_bytes().split(b"\n") if line)
    # No warm-up: the generator has just run the same code, and a replay takes seconds.
    replay_times, parse_times = _alternate(
        lambda: _replay_seconds(path),
        lambda: _parse_seconds(path),
        sizes.replay_repeats,
        warm_up=False,
    )
    memory = _replay_memory(path)
    replay_median = statistics.median(replay_times)
    figures = {
        "replay_events_per_s": round(events / replay_median),
        "replay_vs_parse_ratio": round(_median_ratio(replay_times, parse_times), 2),
        "peak_rss_mb_10k_rounds": round(memory["peak_rss_mb"], 1),
    }
    context = {
        "replay trace": (
            f"{runs * per_run} rounds: {runs} runs of {per_run} rounds by the real loop into one "
            f"trace (one run_id); {events} events, {path.stat().st_size / 2**20:.1f} MiB, "
            f"generated in {generated:.1f} s"
        ),
        "replay": (
            f"read_trace + Replay.check {replay_median:.2f} s, json.loads of every line "
            f"{statistics.median(parse_times):.2f} s"
        ),
        "replay memory": (
            f"child process peak RSS {memory['peak_rss_mb']:.1f} MiB, of which "
            f"{memory['imports_rss_mb']:.1f} MiB before reading the trace"
        ),
    }
    return figures, context


def _replay_memory(path: Path) -> dict[str, float]:
    """Peak RSS of a fresh interpreter that replays ``path`` (so ours does not count)."""
    child = subprocess.run(
        [sys.executable, "-m", "orchestrator.bench._replay_memory", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if child.returncode != 0:
        raise RuntimeError(f"the replay memory child failed: {child.stderr.strip()[-500:]}")
    report: dict[str, float] = json.loads(child.stdout)
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


def _prompt_cache(sizes: Sizes, workdir: Path) -> Figures:
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
    return figures, context


# --- update_output_chars_full / _merge --------------------------------------------------------


def _update_output(sizes: Sizes, workdir: Path) -> Figures:
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
    return figures, context


def _compact(payload: JSONObject) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
