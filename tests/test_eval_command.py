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
        (["eval", "--out", "o", "--scripted", "--max-cost", "nan"], "nan is not a finite number"),
        (["eval", "--out", "o", "--scripted", "--run-timeout", "inf"], "inf is not a finite"),
        (["eval", "--out", "o", "--scripted", "--prices", "nan,1,1,1"], "--prices must be four"),
        (
            ["eval", "--out", "o", "--scripted", "--repeat", "0"],
            "'--repeat': 0 is not in the range",
        ),
        (["eval", "--out", "o", "--scripted", "--repeat", "100000000"], "1<=x<=10000"),
        (["eval", "--out", "o", "--scripted", "--jobs", "0"], "'--jobs': 0 is not in the range"),
        (["eval", "--out", "o", "--scripted", "--jobs", "100000"], "1<=x<=256"),
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


def test_an_out_that_cannot_be_a_folder_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("")
    code, _out, err = _exit(["eval", "--scripted", "--out", "a-file/out"], capsys)
    assert code == 2
    assert err == "orchestrator: error: a-file/out: cannot use it for results: Not a directory\n"


def test_a_rerun_into_the_same_folder_says_what_it_resumes_and_adds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = ["eval", "--scripted", "--out", "o", "--task", "refactor-hello", "--repeat", "1"]
    code, _out, err = _exit([*first, "--arms", "board"], capsys)
    assert code == 0 and "resuming" not in err
    code, _out, err = _exit([*first[:-1], "2", "--arms", "board,no-board"], capsys)
    assert code == 0
    resumed = "orchestrator: resuming o: 1 of 4 runs are recorded and skipped; adding arms no-board"
    assert f"{resumed}\n" in err
    assert len((tmp_path / "o" / "results.jsonl").read_text().splitlines()) == 4


def test_a_suite_and_an_out_with_brackets_are_shown_as_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.toml").write_text(
        'name = "[/oops]"\n[[tasks]]\nname = "t"\nprompt = "p"\ncheck = "cat seed.txt"\n'
        '[tasks.files]\n"seed.txt" = "s"\n'
        '[[tasks.steps]]\ntitle = "Read"\ntool = "read_file"\ninput = { path = "seed.txt" }\n'
    )
    args = ["eval", "mine.toml", "--scripted", "--out", "o[/x]", "--repeat", "1"]
    code, out, err = _exit([*args, "--scripted-model", "diligent"], capsys)
    assert code == 0, err
    assert "suite: [/oops] · model: scripted:diligent" in out and "plot: o[/x]/report.png" in out


def test_without_a_key_and_without_scripted_it_says_what_to_do(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    code, _out, err = _exit(["eval", "--out", "o"], capsys)
    assert code == 2
    assert "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) is not set" in err and "--scripted" in err
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


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["eval"], "Usage: orchestrator eval [OPTIONS] COMMAND"),
        (["eval", "report"], "Usage: orchestrator eval report [OPTIONS] OUT"),
        (["eval", "mine.toml"], "Usage: orchestrator eval run [OPTIONS] [SUITE]"),
    ],
)
def test_both_help_flags_work_on_each_form(
    flag: str, args: list[str], usage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _err = _exit([*args, flag], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith(usage)


SUITE = """
[[tasks]]
name = "notes"
prompt = "Write notes.txt."
check = "test -f notes.txt"
"""


def _api_eval(
    tmp_path: Path,
    turns: list[dict[str, object]],
    *args: str,
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


def test_a_bearer_token_serves_as_it_does_for_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "suite.toml").write_text(SUITE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "ORCHESTRATOR_")) and name != "ORCHESTRATOR_TEST_HOME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "test-token-eval")
    monkeypatch.setenv("ORCHESTRATOR_MAX_RETRIES", "0")
    script = parse_script({"name": "bearer", "turns": [{"text": "Nothing to do."}]}, source="t")
    with MessagesServer(script) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        code, _out, err = _exit(
            ["eval", "suite.toml", "--out", "out", "--arms", "no-board", "--repeat", "1"], capsys
        )
        headers = server.request_headers
    assert code == 0, err
    assert [h["authorization"] for h in headers] == ["Bearer test-token-eval"]
    assert "x-api-key" not in headers[0]


def test_an_endpoint_that_keeps_failing_stops_the_eval_and_records_nothing(tmp_path: Path) -> None:
    turns: list[dict[str, object]] = [{"fault": "status", "status": 401} for _ in range(5)]
    done, requests = _api_eval(tmp_path, turns, "--arms", "board", "--repeat", "5")
    assert done.returncode == 1
    assert "eval stopped: 3 runs in a row could not be judged" in done.stderr
    assert "API error 401" in done.stderr
    assert len(requests) == 3
    assert (tmp_path / "out" / "results.jsonl").exists() is False
