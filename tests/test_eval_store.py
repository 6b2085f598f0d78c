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


def test_more_tasks_fit_but_a_changed_task_or_other_settings_do_not(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    settings = {"max_rounds": None, "plan_policy": "strict"}
    first = {"model": "m", "suite_digest": "d1", "tasks": {"a": "1"}, "settings": settings}
    store.open_for_runs(first)
    # A run of another task (--task, or a task added to the suite) joins the directory.
    store.open_for_runs({**first, "suite_digest": "d2", "tasks": {"b": "2"}})
    grown = {**first, "suite_digest": "d2", "tasks": {"a": "1", "b": "2"}, "arms": []}
    assert store.manifest() == grown
    with pytest.raises(StoreError, match="results for task 'b' as it was before it changed"):
        store.open_for_runs({**first, "tasks": {"a": "1", "b": "3"}})
    other = {"max_rounds": 5, "plan_policy": "strict"}
    with pytest.raises(StoreError, match=r"other settings \(max_rounds None, not 5\)"):
        store.open_for_runs({**first, "settings": other})


def test_a_line_that_is_not_a_row_is_named(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.results.write_text(json.dumps(_row("a", "b", 0)) + "\n[1, 2]\n")
    with pytest.raises(StoreError, match="line 2 is not a result row"):
        store.rows()


@pytest.mark.parametrize(
    "fields",
    [{"input_tokens": "x"}, {"success": "yes"}, {"repeat": "0"}, {"task": 1}, {"cost_usd": None}],
)
def test_a_row_with_a_field_of_the_wrong_type_is_named(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    store = ResultsStore(tmp_path)
    good = _row("a", "b", 0, success=True, input_tokens=5, cost_usd=0.5)
    store.results.write_text(json.dumps(good) + "\n" + json.dumps({**good, **fields}) + "\n")
    with pytest.raises(StoreError, match="line 2 is not a result row"):
        store.rows()


def test_trace_paths_are_safe_for_any_arm_name(tmp_path: Path) -> None:
    path = ResultsStore(tmp_path).trace_path(("t", "lenient+reminder=3", 2))
    assert path == tmp_path / "traces" / "t" / "lenient_reminder_3" / "2.jsonl"


def test_arms_in_puts_the_preferred_order_first() -> None:
    rows = [_row("t", "x", 0), _row("t", "no-board", 0), _row("t", "board", 0)]
    assert arms_in(rows, ["board", "no-board", "absent"]) == ["board", "no-board", "x"]


def test_a_folder_that_is_not_a_results_folder_is_not_written_into(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("my project\n")
    with pytest.raises(StoreError, match=r"is not empty and holds no eval\.json"):
        ResultsStore(tmp_path).open_for_runs({"model": "m", "suite_digest": "d"})
    assert [path.name for path in tmp_path.iterdir()] == ["README.md"]


def test_a_results_file_with_a_bad_line_is_refused_before_any_run(tmp_path: Path) -> None:
    store = ResultsStore(tmp_path)
    store.open_for_runs({"model": "m", "suite_digest": "d"})
    store.append(_row("a", "board", 0))
    with store.results.open("a", encoding="utf-8") as stream:
        stream.write("garbage\n")
    with pytest.raises(StoreError, match="line 2 is not a result row"):
        store.open_for_runs({"model": "m", "suite_digest": "d"})


def test_one_eval_at_a_time_writes_a_results_folder(tmp_path: Path) -> None:
    manifest = {"model": "m", "suite_digest": "d"}
    first = ResultsStore(tmp_path)
    first.open_for_runs(manifest)
    first.open_for_runs(manifest)  # the same eval may check again
    with pytest.raises(StoreError, match="another orchestrator eval is writing to it"):
        ResultsStore(tmp_path).open_for_runs(manifest)
    first.close()
    ResultsStore(tmp_path).open_for_runs(manifest)


@pytest.mark.parametrize("manifest", ["[1]", '{"arms": 5}', '{"arms": [1]}', '{"tasks": []}'])
def test_a_manifest_of_the_wrong_shape_is_named(tmp_path: Path, manifest: str) -> None:
    store = ResultsStore(tmp_path)
    store.manifest_path.write_text(manifest)
    with pytest.raises(StoreError, match=r"eval\.json: not an eval manifest"):
        store.manifest()
