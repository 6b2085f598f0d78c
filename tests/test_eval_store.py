"""The results directory: complete lines only, first of each key, and a manifest that guards it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.eval.store import ResultsStore, StoreError, arms_in


def _row(task: str, arm: str, repeat: int, **extra: object) -> dict[str, object]:
    return {"task": task, "arm": arm, "repeat": repeat, **extra}


def test_rows_drop_a_cut_off_line_and_keep_the_first_of_a_key(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.open_for_runs({"model": "m", "suite_digest": "d", "arms": ["board"]})
    store.append(_row("a", "board", 0, n=1))
    store.append(_row("a", "board", 0, n=2))
    store.append(_row("b", "board", 0))
    with store.results.open("a", encoding="utf-8") as stream:
        stream.write('{"task": "c", "arm": "bo')
    assert [(row["task"], row.get("n")) for row in store.rows()] == [("a", 1), ("b", None)]
    assert store.done() == {("a", "board", 0), ("b", "board", 0)}
    store.open_for_runs({"model": "m", "suite_digest": "d", "arms": ["no-board"]})
    assert store.results.read_text(encoding="utf-8").endswith("}\n")
    assert store.manifest() == {"model": "m", "suite_digest": "d", "arms": ["board", "no-board"]}


def test_another_model_or_a_changed_suite_is_refused(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.open_for_runs({"model": "m", "suite_digest": "d"})
    with pytest.raises(StoreError, match="another model: 'm', not 'n'"):
        store.open_for_runs({"model": "n", "suite_digest": "d"})
    with pytest.raises(StoreError, match="another suite"):
        store.open_for_runs({"model": "m", "suite_digest": "e"})


def test_a_line_that_is_not_a_row_is_named(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.results.write_text(json.dumps(_row("a", "b", 0)) + "\n[1, 2]\n")
    with pytest.raises(StoreError, match="line 2 is not a result row"):
        store.rows()


def test_trace_paths_are_safe_for_any_arm_name(tmp_path: Path) -> None:
    path = ResultsStore(tmp_path).trace_path(("t", "lenient+reminder=3", 2))
    assert path == tmp_path / "traces" / "t" / "lenient_reminder_3" / "2.jsonl"


def test_arms_in_puts_the_preferred_order_first() -> None:
    rows = [_row("t", "x", 0), _row("t", "no-board", 0), _row("t", "board", 0)]
    assert arms_in(rows, ["board", "no-board", "absent"]) == ["board", "no-board", "x"]
