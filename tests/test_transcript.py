"""``orchestrator show``: a trace read back as a transcript, a round at a time."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.trace_file import read_trace
from orchestrator.transcript import TranscriptError, transcript_lines
from tests.in_process import run_cli


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("show")
    trace = root / "trace.jsonl"
    done = run_cli(["demo", "--quiet", "--workdir", str(root / "work"), "--trace", str(trace)])
    assert done.returncode == 0, done.stderr
    return trace


def test_a_round_shows_text_calls_results_plan_changes_and_reminders(demo_trace: Path) -> None:
    lines = list(transcript_lines(read_trace(demo_trace), round_number=5))
    assert lines[0] == "── round 5 (9 messages sent)"
    assert lines[1].startswith("assistant: The harness reminds me that my plan is stale.")
    assert "→ todo [toolu_05_0]" in lines
    assert any(line.startswith("plan rejected: Only one task can be in_progress") for line in lines)
    # However long it took on this machine: a duration is never part of what is checked.
    assert any(re.fullmatch(r"← todo error \(\d+ ms\)", line) for line in lines)
    assert lines[-1].startswith("⚑ reminder: the plan had not changed for 4 rounds")
    assert not any("round 6" in line for line in lines)


def test_the_whole_trace_shows_every_round_and_the_run_ends(demo_trace: Path) -> None:
    lines = list(transcript_lines(read_trace(demo_trace), full=True))
    assert lines[0].startswith("══ run ")
    # The demo's settings ask for a model by name; the client that answered is scripted.
    settings_model = read_trace(demo_trace).lines[0].event["settings"]["model"]
    assert lines[0].endswith(f"· model {settings_model} (scripted:refactor-hello)"), lines[0]
    assert lines[1] == "task: Refactor hello.py: add type hints, docstrings, and a main guard"
    assert [line for line in lines if line.startswith("── round ")][-1].startswith("── round 14")
    assert "    │ def greet(name):" in lines  # read_file's output, whole
    assert any(line.startswith("plan updated (revision ") for line in lines)
    assert lines[-1] == "══ run done after 14 rounds"


def test_a_round_the_trace_lacks_is_one_line_exit_2(demo_trace: Path) -> None:
    with pytest.raises(TranscriptError, match="no round 99; its rounds are 1-14"):
        list(transcript_lines(read_trace(demo_trace), round_number=99))
    done = run_cli(["show", str(demo_trace), "--round", "99"])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
