"""The targets, and the two ways the figures are shown: a rich table and JSON, floors beside."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from rich.console import Console
from rich.table import Table
from rich.text import Text

from orchestrator.bench._figures import Measured


@attrs.frozen
class Target:
    """A goal for one figure; ``limit_of`` computes the limit from the other figures."""

    figure: str
    goal: str
    limit_of: Callable[[Mapping[str, float]], float]
    compare: Callable[[float, float], bool] = operator.le

    def limit(self, figures: Mapping[str, float]) -> float:
        return self.limit_of(figures)

    def met(self, figures: Mapping[str, float]) -> bool:
        return bool(self.compare(figures[self.figure], self.limit(figures)))

    def distance(self, figures: Mapping[str, float]) -> str:
        """How far a figure is from its goal, as a factor a reader can act on."""
        value, limit = figures[self.figure], self.limit(figures)
        if self.met(figures):
            return "met"
        if self.compare is operator.le:
            return f"missed: {value / limit:.1f}x the limit"
        return f"missed: {value / limit:.0%} of the goal"


TARGETS: tuple[Target, ...] = (
    Target("harness_vs_sdk_call", "<= 0.10", lambda _f: 0.10),
    Target("round_cost_growth", "<= 1.15", lambda _f: 1.15),
    Target("live_view_vs_harness", "<= 0.5", lambda _f: 0.5),
    Target("trace_vs_floor", "<= 3", lambda _f: 3.0),
    Target("replay_peak_rss_mb_10k", "<= 64", lambda _f: 64.0),
    Target("replay_peak_rss_mb_40k", "<= 64", lambda _f: 64.0),
    Target("replay_vs_parse_ratio", "<= 10", lambda _f: 10.0),
    Target("html_render_seconds_per_1k_rounds", "<= 0.5", lambda _f: 0.5),
    Target("plan_scaling_exponent", "<= 1.2", lambda _f: 1.2),
    Target("plan_scaling_exponent_1000", "<= 1.2", lambda _f: 1.2),
    Target("plan_deps_scaling_exponent", "<= 1.2", lambda _f: 1.2),
    Target("cached_input_share", ">= 0.9", lambda _f: 0.9, operator.ge),
    Target("input_cost_ratio", "<= 0.25", lambda _f: 0.25),
    Target("long_run_peak_over_window", "< 1", lambda _f: 0.999),
    Target("board_claim_vs_floor", "<= 3", lambda _f: 3.0),
    Target("board_lost_updates", "== 0", lambda _f: 0.0),
    Target("cli_start_vs_python", "<= 6", lambda _f: 6.0),
    Target(
        "update_output_chars_merge",
        "<= update_output_chars_full / 5",
        lambda f: f["update_output_chars_full"] / 5,
    ),
)

#: Every figure in table order, with what it means.
FIGURES: tuple[tuple[str, str], ...] = (
    ("harness_vs_sdk_call", "our CPU per round / the SDK's for one streaming call"),
    ("round_cost_growth", "our CPU per round at 400 rounds / at 50"),
    ("live_view_vs_harness", "what the live view adds per round / the harness's round"),
    ("trace_vs_floor", "the trace's CPU per event / orjson + os.write of the line"),
    ("todo_round_us", "our CPU per todo round, 10 items, trace on (us)"),
    ("todo_round_trace_us", "the trace's part of that todo round (us)"),
    ("replay_peak_rss_mb_10k", "MiB peak RSS of replay --check, 10k-round trace"),
    ("replay_peak_rss_mb_40k", "the same, 40k-round trace"),
    ("replay_vs_parse_ratio", "replay --check time / json.loads of every line"),
    ("replay_events_per_s", "replay --check speed on the 10k-round trace"),
    ("html_render_seconds_per_1k_rounds", "show --html CPU seconds per 1,000 rounds (10k trace)"),
    ("plan_scaling_exponent", "fitted k in cost ~ n^k, n = 10..200 items"),
    ("plan_scaling_exponent_1000", "the same past the 20-item cap, n = 200..1000"),
    ("plan_update_us_20", "a todo update rewriting 20 items, moving one (us)"),
    ("plan_update_us_200", "the same with 200 items (us)"),
    ("plan_update_us_20_deps", "a full rewrite of 20 items with 30 blocked_by edges (us)"),
    ("plan_deps_scaling_exponent", "fitted k for rewrites with ~1.5n edges, n = 20..1000"),
    ("machine_per_item_vs_shared_ratio", "a Machine per item / one ItemMachine with add_model"),
    ("cached_input_share", "input tokens a prompt cache serves, 30 rounds, ours"),
    ("baseline_cached_input_share", "the same for the seeds (no breakpoints)"),
    ("input_cost_ratio", "our input cost / seeds' (read 0.1x, write 1.25x)"),
    ("update_output_chars_full", "todo input characters to move one of 10 items: full"),
    ("update_output_chars_merge", "the same with merge: true"),
    ("long_run_peak_over_window", "largest request / window, 500 rounds of 20 KB, managed"),
    ("long_run_cache_read_share", "input tokens read from cache in that run"),
    ("long_run_unmanaged_refused_at_round", "the same run unmanaged: refused at this round"),
    ("overhead_ratio", "informational: our CPU per round / the seeds' loop's"),
    ("us_per_round_ours", "our harness, microseconds per round, 200 rounds"),
    ("us_per_round_baseline", "the seeds' loop, microseconds per round"),
    ("us_per_sdk_call", "one SDK streaming call, microseconds of client CPU"),
    ("bash_ms_per_command_plain", "plain bash -c true, wall-clock ms"),
    ("sandbox_ms_per_command_workdir", "the bash tool, --sandbox workdir, ms"),
    ("sandbox_ms_per_command_bwrap", "the bash tool, --sandbox bwrap, ms (0: cannot run)"),
    ("board_claims_per_s_1", "shared board (SQLite): claim + complete cycles per s, 1 process"),
    ("board_claims_per_s_4", "the same, 4 claimer processes"),
    ("board_claims_per_s_16", "the same, 16 claimer processes"),
    ("board_claim_vs_floor", "a claim cycle / two bare SQLite write transactions, 16 processes"),
    ("board_lost_updates", "items not completed exactly once, or a failed board check"),
    ("team_items_per_second_1", "a scripted team through the real loop: items/s, 1 worker"),
    ("team_items_per_second_2", "the same, 2 worker processes"),
    ("team_items_per_second_4", "the same, 4 worker processes"),
    ("team_items_per_second_4_one_killed", "4 workers, one SIGKILLed after its first claim"),
    ("team_speedup_2", "items/s with 2 workers / with 1 (2 cores: a modest rise)"),
    ("team_speedup_4", "the same with 4 workers / with 1"),
    ("team_speedup_4_one_killed", "4 workers, one killed / 1 worker"),
    ("cli_start_vs_python", "orchestrator --version / python -c pass, wall-clock"),
    ("cli_start_ms", "orchestrator --version, wall-clock ms"),
)


def as_json(measured: Measured) -> dict[str, Any]:
    """The figures as one JSON object, plus ``targets``: the goal and whether it was met."""
    figures = measured.figures
    document: dict[str, Any] = {name: figures[name] for name, _ in FIGURES}
    document["floors"] = {
        name: measured.floors[name] for name, _ in FIGURES if name in measured.floors
    }
    document["targets"] = {
        target.figure: {
            "goal": target.goal,
            "limit": round(target.limit(figures), 4),
            "met": target.met(figures),
        }
        for target in TARGETS
    }
    return document


def print_table(measured: Measured, console: Console, *, quick: bool) -> None:
    figures = measured.figures
    targets = {target.figure: target for target in TARGETS}
    title = "orchestrator benchmarks" + (" (--quick: shrunk sizes)" if quick else "")
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("floor (measured in this run)")
    table.add_column("goal")
    table.add_column("status")
    table.add_column("what it is")
    for name, meaning in FIGURES:
        target = targets.get(name)
        goal = target.goal if target is not None else ""
        status = target.distance(figures) if target is not None else ""
        style = "" if target is None else "green" if target.met(figures) else "red"
        floor = measured.floors.get(name, "")
        table.add_row(name, f"{figures[name]:g}", floor, goal, Text(status, style=style), meaning)
    console.print(table)
    for key, note in measured.context.items():
        console.print(f"[bold]{key}[/]: {note}", highlight=False, soft_wrap=True)
    console.print(
        "Times are CPU seconds of the measuring thread; ratios are medians over alternating "
        "repeats.",
        highlight=False,
    )
