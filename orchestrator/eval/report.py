"""The eval report: success rates with intervals, differences and costs, as table, JSON or PNG.

:func:`summarise` turns result rows into one JSON document (what ``eval report --json`` prints);
:func:`print_report` draws it as rich tables, and :func:`write_plot` as a PNG with matplotlib
(imported only there, with the Agg backend, so nothing needs a display). When the rows come from
scripted models, every form says so loudly: such numbers show the pipeline, not a model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from orchestrator.eval.stats import newcombe_difference, wilson_interval
from orchestrator.eval.store import arms_in
from orchestrator.inert import inert
from orchestrator.protocols import JSONObject

SCRIPTED_WARNING = (
    "SCRIPTED MODELS: these results come from scripted stand-ins that follow fixed rules, not "
    "from a language model. They show that the eval pipeline works end to end; they prove "
    "nothing about whether the board helps a real model."
)
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
COUNT_FIELDS = ("repeated_calls", "rejected_updates", "reminders")


def summarise(rows: Sequence[JSONObject], arms: Iterable[str] = ()) -> JSONObject:
    """The report as one JSON document; ``arms`` orders the arms.

    Differences are taken against ``no-board`` when it is there (so they read "how much the
    board adds"), else against the first arm.
    """
    order = arms_in(rows, arms)
    scripted = any(row.get("scripted") for row in rows)
    models = sorted({str(row.get("model", "")) for row in rows})
    by_arm = {arm: [row for row in rows if row["arm"] == arm] for arm in order}
    summary: JSONObject = {
        "scripted": scripted,
        "warning": SCRIPTED_WARNING if scripted else None,
        "models": models,
        "runs": len(rows),
        "arms": {arm: _arm_summary(arm_rows) for arm, arm_rows in by_arm.items()},
        "differences": [],
        "tasks": {},
    }
    if order:
        first = "no-board" if "no-board" in order else order[0]
        baseline = summary["arms"][first]
        for arm in [arm for arm in order if arm != first]:
            other = summary["arms"][arm]
            difference, low, high = newcombe_difference(
                other["successes"], other["runs"], baseline["successes"], baseline["runs"]
            )
            summary["differences"].append(
                {
                    "arm": arm,
                    "baseline": first,
                    "difference": difference,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    for task in dict.fromkeys(str(row["task"]) for row in rows):
        summary["tasks"][task] = {
            arm: _rate([row for row in arm_rows if row["task"] == task])
            for arm, arm_rows in by_arm.items()
        }
    return summary


def _rate(rows: Sequence[JSONObject]) -> JSONObject:
    runs = len(rows)
    successes = sum(bool(row.get("success")) for row in rows)
    low, high = wilson_interval(successes, runs)
    return {
        "runs": runs,
        "successes": successes,
        "success_rate": successes / runs if runs else 0.0,
        "ci_low": low,
        "ci_high": high,
    }


def _arm_summary(rows: Sequence[JSONObject]) -> JSONObject:
    runs = len(rows) or 1
    tokens = {field: sum(int(row.get(field, 0)) for row in rows) for field in TOKEN_FIELDS}
    cost = sum(float(row.get("cost_usd", 0.0)) for row in rows)
    counts = {field: sum(int(row.get(field, 0)) for row in rows) for field in COUNT_FIELDS}
    return {
        **_rate(rows),
        "tokens": tokens,
        "mean_tokens": {field: value / runs for field, value in tokens.items()},
        "mean_rounds": sum(int(row.get("rounds", 0)) for row in rows) / runs,
        "cost_usd": cost,
        "mean_cost_usd": cost / runs,
        **counts,
        **{f"mean_{field}": value / runs for field, value in counts.items()},
        "statuses": _count(str(row.get("status")) for row in rows),
    }


def _count(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def print_report(summary: JSONObject, console: Console, *, title: str = "") -> None:
    """The report as tables: arms, differences from the baseline, and each task."""
    if summary["scripted"]:
        console.print(Panel(summary["warning"], title="SCRIPTED", style="bold red", expand=False))
    if not summary["arms"]:
        console.print("no results yet")
        return
    models = ", ".join(summary["models"])
    # Names come from files a person (or a hand edit) wrote: shown as text, never as markup.
    console.print(Text(inert(f"{title}model: {models} · {summary['runs']} runs")))
    arms = Table(box=box.SIMPLE_HEAVY, title="success rate per arm (95% Wilson interval)")
    for column in ("arm", "runs", "success", "rate", "95% CI", "rounds"):
        arms.add_column(column, justify="left" if column == "arm" else "right")
    for column in ("in tok", "out tok", "cache rd", "cache wr", "cost $"):
        arms.add_column(column, justify="right")
    for column in ("repeats", "rejected", "reminders"):
        arms.add_column(column, justify="right")
    for arm, row in summary["arms"].items():
        mean = row["mean_tokens"]
        arms.add_row(
            Text(inert(arm)),
            str(row["runs"]),
            str(row["successes"]),
            f"{row['success_rate']:.0%}",
            f"{row['ci_low']:.0%}–{row['ci_high']:.0%}",
            f"{row['mean_rounds']:.1f}",
            *(f"{mean[field]:,.0f}" for field in TOKEN_FIELDS),
            f"{row['mean_cost_usd']:.4f}",
            *(f"{row['mean_' + field]:.2f}" for field in COUNT_FIELDS),
        )
    arms.caption = "rounds, tokens, cost, repeats, rejected and reminders are means per run"
    console.print(arms)
    if summary["differences"]:
        differences = Table(box=box.SIMPLE_HEAVY, title="difference in success rate (Newcombe 95%)")
        for column in ("arm − baseline", "difference", "95% CI"):
            differences.add_column(column, justify="left" if column.startswith("arm") else "right")
        for row in summary["differences"]:
            differences.add_row(
                Text(inert(f"{row['arm']} − {row['baseline']}")),
                f"{row['difference']:+.0%}",
                f"{row['ci_low']:+.0%} to {row['ci_high']:+.0%}",
            )
        console.print(differences)
    tasks = Table(box=box.SIMPLE_HEAVY, title="successes per task")
    tasks.add_column("task")
    for arm in summary["arms"]:
        tasks.add_column(Text(inert(arm)), justify="right")
    for task, per_arm in summary["tasks"].items():
        cells = (f"{cell['successes']}/{cell['runs']}" for cell in per_arm.values())
        tasks.add_row(Text(inert(task)), *cells)
    console.print(tasks)
    if summary["scripted"]:
        console.print(f"[bold red]{SCRIPTED_WARNING}[/]")


def write_plot(summary: JSONObject, path: Path) -> Path:
    """Success rate with 95% error bars per arm and task, and mean tokens per run per arm."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    # Arm, task and model names are text: a '$' in one must not start TeX-like math.
    with matplotlib.rc_context({"text.parse_math": False}):
        return _draw(summary, path, pyplot)


def _draw(summary: JSONObject, path: Path, pyplot: Any) -> Path:
    arms = list(summary["arms"])
    groups = ["all tasks", *summary["tasks"]]
    figure, (rates, tokens) = pyplot.subplots(
        1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 1]}
    )
    width = 0.8 / max(1, len(arms))
    for index, arm in enumerate(arms):
        cells = [summary["arms"][arm], *(summary["tasks"][task][arm] for task in groups[1:])]
        positions = [g + (index - (len(arms) - 1) / 2) * width for g in range(len(groups))]
        values = [cell["success_rate"] for cell in cells]
        errors = [
            [cell["success_rate"] - cell["ci_low"] for cell in cells],
            [cell["ci_high"] - cell["success_rate"] for cell in cells],
        ]
        rates.bar(positions, values, width, yerr=errors, capsize=3, label=arm)
    rates.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    rates.axvline(0.5, color="grey", linestyle=":", linewidth=1)  # pooled | per task
    rates.set_ylim(0, 1.2)
    rates.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
    rates.set_ylabel("success rate (95% Wilson interval)")
    rates.legend(title="arm", loc="upper right", ncols=len(arms), fontsize="small")
    rates.set_title("success rate per arm and task")
    bottom = [0.0] * len(arms)
    for field in TOKEN_FIELDS:
        values = [summary["arms"][arm]["mean_tokens"][field] for arm in arms]
        tokens.bar(
            arms, values, bottom=bottom, label=field.replace("_tokens", "").replace("_", " ")
        )
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    tokens.set_ylabel("tokens per run (mean)")
    tokens.set_title("tokens per arm")
    tokens.legend(fontsize="small")
    title = f"orchestrator eval · {', '.join(summary['models'])} · {summary['runs']} runs"
    if summary["scripted"]:
        title = "SCRIPTED MODELS — proves nothing about real models\n" + title
    figure.suptitle(title, color="darkred" if summary["scripted"] else "black")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path
