"""The report: numbers from known rows, the scripted warning, the table and the PNG."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.eval.report import SCRIPTED_WARNING, print_report, summarise, write_plot
from orchestrator.protocols import JSONObject


def _rows(arm: str, successes: int, runs: int, *, scripted: bool = False) -> list[JSONObject]:
    return [
        {
            "task": f"t{i % 2}",
            "arm": arm,
            "repeat": i,
            "model": "m",
            "scripted": scripted,
            "success": i < successes,
            "status": "done",
            "rounds": 4,
            "input_tokens": 100,
            "output_tokens": 10,
            "cache_read_tokens": 1000,
            "cache_write_tokens": 50,
            "cost_usd": 0.01,
            "repeated_calls": 1,
            "rejected_updates": 2 if arm == "board" else 0,
            "reminders": 3 if arm == "board" else 0,
        }
        for i in range(runs)
    ]


def test_the_summary_of_known_rows() -> None:
    summary = summarise(_rows("board", 9, 10) + _rows("no-board", 3, 10), ["board", "no-board"])
    board = summary["arms"]["board"]
    assert (board["runs"], board["successes"], board["success_rate"]) == (10, 9, 0.9)
    assert (board["ci_low"], board["ci_high"]) == pytest.approx((0.5958, 0.9821), abs=5e-5)
    assert board["tokens"]["cache_read_tokens"] == 10_000
    assert board["mean_tokens"]["output_tokens"] == 10
    assert (board["mean_rounds"], board["cost_usd"]) == (4, pytest.approx(0.1))
    assert (board["rejected_updates"], board["mean_reminders"]) == (20, 3)
    (difference,) = summary["differences"]
    assert (difference["arm"], difference["baseline"]) == ("board", "no-board")
    assert (difference["difference"], difference["ci_low"], difference["ci_high"]) == (
        pytest.approx((0.6, 0.1705, 0.8090), abs=5e-5)
    )
    assert summary["tasks"]["t0"]["board"]["runs"] == 5
    assert summary["scripted"] is False and summary["warning"] is None


def test_without_no_board_the_first_arm_is_the_baseline() -> None:
    summary = summarise(_rows("strict", 2, 4) + _rows("lenient", 4, 4), ["strict", "lenient"])
    (difference,) = summary["differences"]
    assert (difference["arm"], difference["baseline"], difference["difference"]) == (
        "lenient",
        "strict",
        0.5,
    )


def test_scripted_rows_are_labelled_everywhere(tmp_path: Path) -> None:
    rows = _rows("board", 3, 4, scripted=True) + _rows("no-board", 1, 4, scripted=True)
    summary = summarise(rows)
    assert summary["warning"] == SCRIPTED_WARNING
    text = io.StringIO()
    print_report(summary, Console(file=text, width=160, color_system=None))
    shown = text.getvalue()
    assert shown.count("SCRIPTED MODELS") == 2
    assert "board − no-board" in shown and "75%" in shown and "1/2" in shown
    plot = write_plot(summary, tmp_path / "deep" / "report.png")
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert plot.stat().st_size > 10_000


def test_names_from_files_are_shown_as_written_not_as_markup_or_math(tmp_path: Path) -> None:
    hostile = "[/oops] $x^$"
    rows = _rows(hostile, 1, 2) + _rows("no-board", 0, 2)
    for row in rows:
        row["model"] = "my[/model]$a$"
    summary = summarise(rows)
    text = io.StringIO()
    print_report(summary, Console(file=text, width=160, color_system=None), title="suite: [/s] · ")
    shown = text.getvalue()
    assert "suite: [/s] · model: my[/model]$a$ · 4 runs" in shown
    assert f"{hostile} − no-board" in shown
    assert write_plot(summary, tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"


def test_an_empty_results_file_reports_nothing_yet() -> None:
    text = io.StringIO()
    print_report(summarise([]), Console(file=text, color_system=None))
    assert "no results yet" in text.getvalue()


def test_the_docs_show_the_scripted_demo_report_and_its_plot() -> None:
    docs = Path(__file__).resolve().parent.parent / "docs"
    text = (docs / "eval.md").read_text(encoding="utf-8")
    assert "(eval-demo.png)" in text
    assert (docs / "eval-demo.png").read_bytes()[:4] == b"\x89PNG"
    shown = text.split("```text", 1)[1].split("```", 1)[0]
    assert shown.count("SCRIPTED MODELS") == 2 and "scripted:forgetful" in shown
