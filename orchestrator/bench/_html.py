"""The page's figure: seconds to render a run's HTML page per 1,000 rounds, parsing beside it.

A trace of the replay benchmark's size (10,000 rounds by default: runs of 50 rounds written
by the real loop into one file) is rendered as ``show --html`` renders it (checked, read into
the page's data, drawn, written), alternated with the floor: reading the same file and
``json.loads`` of every line. The statecharts are drawn by Graphviz's ``dot`` in a child
process, which the measuring thread's CPU clock leaves out; its wall time is shown as context.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.bench._timing import Found, alternate, median_ratio
from orchestrator.bench._workload import clock, write_trace_of_runs

if TYPE_CHECKING:
    from orchestrator.bench._figures import Sizes


def render_seconds(trace: Path, page: Path) -> float:
    """CPU seconds of this thread to write ``trace``'s page to ``page``, as ``show --html``."""
    from orchestrator.picture.pages import write_run_pages
    from orchestrator.trace_file import read_trace

    started = clock()
    write_run_pages(read_trace(trace), str(page))
    return clock() - started


def parse_seconds(trace: Path) -> float:
    started = clock()
    with trace.open("rb") as lines:
        for raw in lines:
            if raw.strip():
                json.loads(raw)
    return clock() - started


def measure_html(sizes: Sizes, workdir: Path) -> Found:
    rounds = sizes.replay_rounds
    per_run = min(sizes.replay_rounds_per_run, rounds)
    trace, page = workdir / "html.jsonl", workdir / "html.html"
    write_trace_of_runs(trace, runs=rounds // per_run, rounds=per_run)
    rounds = (rounds // per_run) * per_run
    walls: list[float] = []

    def render() -> float:
        wall = time.perf_counter()
        seconds = render_seconds(trace, page)
        walls.append(time.perf_counter() - wall)
        return seconds

    render_times, parse_times = alternate(
        render, lambda: parse_seconds(trace), sizes.replay_repeats, warm_up=False
    )
    thousands = rounds / 1000
    render_median = statistics.median(render_times)
    parse_median = statistics.median(parse_times)
    size = page.stat().st_size / 2**20
    trace_size = trace.stat().st_size / 2**20
    trace.unlink()
    page.unlink()
    figures = {"html_render_seconds_per_1k_rounds": round(render_median / thousands, 4)}
    floors = {
        "html_render_seconds_per_1k_rounds": (
            f"json.loads of every line: {parse_median / thousands:.3f} s per 1k rounds "
            f"({median_ratio(render_times, parse_times):.1f}x)"
        )
    }
    context = {
        "html page": (
            f"{rounds} rounds ({trace_size:.1f} MiB trace) to a {size:.1f} MiB page in "
            f"{render_median:.2f} s CPU, {statistics.median(walls):.2f} s wall with dot; "
            f"json.loads of every line {parse_median:.2f} s"
        )
    }
    return figures, floors, context
