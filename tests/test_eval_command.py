"""``orchestrator eval`` and ``orchestrator eval report`` as a person calls them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.script import parse_script
from orchestrator.testing import MessagesServer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _orchestrator(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "ORCHESTRATOR_"))}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        cwd=cwd,
        check=False,
    )


def test_a_scripted_eval_of_the_bundled_suite_then_its_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    run = _orchestrator(
        ["eval", "--arms", "board,no-board", "--repeat", "1", "--jobs", "2", "--out", str(out),
         "--scripted"],
        tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "SCRIPTED MODELS" in run.stdout and "prove" in run.stdout
    assert "board − no-board" in run.stdout
    assert "12/12" in run.stderr  # the progress bar's last state
    plot = out / "report.png"
    assert plot.read_bytes().startswith(PNG_MAGIC) and plot.stat().st_size > 10_000
    plot.unlink()
    report = _orchestrator(["eval", "report", str(out), "--json"], tmp_path)
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)
    assert summary["scripted"] is True and "prove nothing" in summary["warning"]
    assert list(summary["arms"]) == ["board", "no-board"]
    for arm in summary["arms"].values():
        assert arm["runs"] == 6
        assert 0 <= arm["ci_low"] <= arm["success_rate"] <= arm["ci_high"] <= 1
        assert set(arm["tokens"]) == {
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
        }
    assert summary["arms"]["no-board"]["reminders"] == 0
    assert summary["arms"]["board"]["reminders"] > 0
    (difference,) = summary["differences"]
    assert (difference["arm"], difference["baseline"]) == ("board", "no-board")
    assert len(summary["tasks"]) == 6
    assert plot.read_bytes().startswith(PNG_MAGIC)  # report writes the plot again


def _exit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(args)
    captured = capsys.readouterr()
    return int(exited.value.code or 0), captured.out, captured.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "--out", "o", "--scripted", "--arms", "board,nope"], "unknown arm 'nope'"),
        (["eval", "missing.toml", "--out", "o", "--scripted"], "no such suite file"),
        (["eval", "--scripted"], "Missing option '--out'"),
        (["eval", "--out", "o", "--scripted", "--task", "nope"], "no task named 'nope'"),
        (["eval", "--out", "o", "--scripted", "--prices", "1,2"], "--prices must be four"),
        (["eval", "report", "nowhere"], "no results.jsonl"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _out, err = _exit(args, capsys)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_without_a_key_and_without_scripted_it_says_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    code, _out, err = _exit(["eval", "--out", "o"], capsys)
    assert code == 2
    assert "ANTHROPIC_API_KEY is not set" in err and "--scripted" in err
    assert not (tmp_path / "o").exists()


def test_a_suite_file_without_steps_cannot_run_scripted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text('[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "true"\n')
    code, _out, err = _exit(["eval", "mine.toml", "--out", "o", "--scripted"], capsys)
    assert code == 2
    assert "task 't' has no [[tasks.steps]]" in err


def test_a_results_directory_refuses_another_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "eval.json").write_text(
        json.dumps({"model": "claude-x", "suite_digest": "d"})
    )
    code, _out, err = _exit(["eval", "--out", "o", "--scripted"], capsys)
    assert code == 2
    assert "holds results for another model" in err


def test_eval_help_names_both_forms(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _exit(["eval", "--help"], capsys)
    assert code == 0
    assert "eval report DIR" in out and "run" in out and "report" in out


SUITE = """
[[tasks]]
name = "notes"
prompt = "Write notes.txt."
check = "test -f notes.txt"
"""


def _api_eval(
    tmp_path: Path, turns: list[dict[str, object]], *args: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, object]]]:
    (tmp_path / "suite.toml").write_text(SUITE, encoding="utf-8")
    script = parse_script({"name": "eval-cli", "turns": turns}, source="test")
    with MessagesServer(script) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "ORCH"))}
        env |= {
            "ANTHROPIC_API_KEY": "test-key",
            "ANTHROPIC_BASE_URL": server.base_url,
            "ORCHESTRATOR_MAX_RETRIES": "0",
            "NO_COLOR": "1",
        }
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "eval", "suite.toml", "--out", "out", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            check=False,
        )
        return done, server.requests


def test_with_a_key_the_runs_go_through_the_sdk_to_the_endpoint(tmp_path: Path) -> None:
    write = {"name": "write_file", "input": {"path": "notes.txt", "content": "n"}}
    turns: list[dict[str, object]] = [
        {"tool_calls": [write]},
        {"text": "Done."},
        {"text": "Nothing to do."},
    ]
    done, requests = _api_eval(
        tmp_path, turns, "--arms", "no-board", "--repeat", "2", "--model", "claude-eval-test"
    )
    assert done.returncode == 0, done.stderr
    assert "SCRIPTED" not in done.stdout + done.stderr
    assert {body["model"] for body in requests} == {"claude-eval-test"}
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    assert [(row["repeat"], row["success"]) for row in rows] == [(0, True), (1, False)]
    assert rows[1]["check_exit"] != 0  # the second run wrote nothing
    assert all(row["model"] == "claude-eval-test" for row in rows)


def test_an_endpoint_that_keeps_failing_stops_the_eval_and_records_nothing(tmp_path: Path) -> None:
    turns: list[dict[str, object]] = [{"fault": "status", "status": 401} for _ in range(5)]
    done, requests = _api_eval(tmp_path, turns, "--arms", "board", "--repeat", "5")
    assert done.returncode == 1
    assert "eval stopped: 3 runs in a row could not be judged" in done.stderr
    assert "API error 401" in done.stderr
    assert len(requests) == 3
    assert (tmp_path / "out" / "results.jsonl").exists() is False
