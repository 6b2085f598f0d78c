"""Tests for replay: checking traces by re-driving machines, the timeline, resume, replay models."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar
from unittest import mock

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator import replay as replay_module
from orchestrator.cli import main
from orchestrator.conversation import Conversation
from orchestrator.loop import Loop, LoopMachine, LoopSettings, RunState
from orchestrator.plan import EdgePolicy, PlanBoard, TodoTool
from orchestrator.protocols import ModelError
from orchestrator.replay import Replay, rebuild
from orchestrator.script import ScriptedModel, parse_script
from orchestrator.testing import MessagesServer
from orchestrator.tools import BashTool, ReadFileTool, ToolRegistry, Workdir, WriteFileTool
from orchestrator.trace import open_trace
from orchestrator.trace_file import TRACE_FORMAT, read_trace

TASK = "Summarise notes.txt"
MODEL = "claude-test"
NOTES = "alpha beta gamma\n"

Event = dict[str, Any]


def _todo(*items: tuple[str, str], merge: bool = True) -> dict[str, Any]:
    return {
        "name": "todo",
        "input": {"merge": merge, "items": [{"id": i, "status": s} for i, s in items]},
    }


#: Eight rounds through the real SDK: a plan, a blocked repeat, a rejected batch, a reminder.
RECORDED_TURNS: list[dict[str, Any]] = [
    {
        "text": "I'll plan first, then read the notes.",
        "tool_calls": [
            {
                "name": "todo",
                "input": {
                    "items": [
                        {"id": "1", "text": "Read the notes", "status": "in_progress"},
                        {"id": "2", "text": "Count the words", "status": "pending"},
                        {"id": "3", "text": "Write the summary", "status": "pending"},
                    ]
                },
            },
            {"name": "read_file", "input": {"path": "notes.txt"}},
        ],
        "usage": {
            "input_tokens": 120,
            "output_tokens": 30,
            "cache_read_input_tokens": 7,
            "cache_creation_input_tokens": 50,
        },
    },
    {
        "tool_calls": [{"name": "bash", "input": {"command": "wc -w notes.txt"}}],
        "expect": [{"is_error": False}, {"is_error": False, "contains": "alpha beta gamma"}],
    },
    {
        "tool_calls": [
            {"name": "bash", "input": {"command": "wc -w notes.txt"}},
            _todo(("1", "in_progress"), ("2", "in_progress")),
        ],
        "expect": [{"is_error": False, "contains": "3 notes.txt"}],
    },
    {
        "tool_calls": [{"name": "bash", "input": {"command": "echo counted >> log.txt"}}],
        "expect": [
            {"is_error": True, "contains": "identical to the previous one"},
            {"is_error": True, "contains": "Only one task can be in_progress"},
        ],
        "expect_reminder": False,
    },
    {"tool_calls": [_todo(("1", "completed"), ("2", "in_progress"))], "expect_reminder": True},
    {
        "tool_calls": [
            _todo(("2", "completed"), ("3", "in_progress")),
            {"name": "bash", "input": {"command": "echo summary > summary.txt"}},
        ],
        "expect_reminder": False,
    },
    {"tool_calls": [_todo(("3", "completed"))]},
    {"text": "All done: the notes have three words."},
]

#: (round, tool calls, completed, total, reminders, blocks) of each timeline row.
EXPECTED_ROWS = [
    (1, 2, 0, 3, 0, 0),
    (2, 1, 0, 3, 0, 0),
    (3, 2, 0, 3, 0, 1),
    (4, 1, 0, 3, 1, 0),
    (5, 1, 1, 3, 0, 0),
    (6, 2, 2, 3, 0, 0),
    (7, 1, 3, 3, 0, 0),
    (8, 0, 3, 3, 0, 0),
]


def _script(name: str, turns: list[dict[str, Any]]) -> Any:
    return parse_script({"name": name, "turns": turns}, source=f"{name}.json")


def _orchestrator(*args: str | Path) -> int:
    """Run the CLI in this process, as the console script does; return its exit code."""
    with pytest.raises(SystemExit) as exit_info:
        main([str(arg) for arg in args])
    code = exit_info.value.code
    assert isinstance(code, int)
    return code


def _checked(done: tuple[int, str, str]) -> bool:
    """``replay --check`` passed: exit 0, its one line saying what it checked, nothing on stderr."""
    code, out, err = done
    return code == 0 and err == "" and out.startswith("replay --check: ") and out.count("\n") == 1


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in this process; return the exit code, stdout and stderr."""

    def run(*args: str | Path) -> tuple[int, str, str]:
        capsys.readouterr()
        code = _orchestrator(*args)
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def sdk_environment(monkeypatch: pytest.MonkeyPatch) -> Callable[[MessagesServer], None]:
    def point_at(server: MessagesServer) -> None:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)

    return point_at


@attrs.frozen
class Recording:
    trace: Path
    workdir: Path


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Recording:
    """One run of ``orchestrator run`` through the loopback server with the real SDK."""
    root = tmp_path_factory.mktemp("recorded")
    work = root / "work"
    work.mkdir()
    (work / "notes.txt").write_text(NOTES, encoding="utf-8")
    trace = root / "trace.jsonl"
    with pytest.MonkeyPatch.context() as patch, MessagesServer(_script("rec", RECORDED_TURNS)) as s:
        patch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-000000")
        patch.setenv("ANTHROPIC_BASE_URL", s.base_url)
        code = _orchestrator(
            "run",
            TASK,
            "--workdir",
            work,
            "--trace",
            trace,
            "--yes",
            "--max-retries",
            "0",
            "--model",
            MODEL,
        )
        assert code == 0
        assert s.violations == []
        assert s.served == len(RECORDED_TURNS)
    return Recording(trace, work)


def _events(path: Path) -> list[Event]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _write(path: Path, events: list[Event], *, renumber: bool = False) -> Path:
    if renumber:
        events = [{**event, "seq": number} for number, event in enumerate(events, start=1)]
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _index(events: list[Event], event: str, **fields: Any) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e["event"] == event and all(e.get(k) == v for k, v in fields.items())
    )


# --- a recorded run checks out -----------------------------------------------------------------


def test_the_recorded_trace_has_the_events_the_checks_rely_on(recording: Recording) -> None:
    names = [e["event"] for e in _events(recording.trace)]
    for name in ("plan.transition", "plan.updated", "plan.rejected", "guard.blocked"):
        assert name in names
    assert names.count("audit.reminder") == 1
    assert names[0] == "run.started"
    assert names[-1] == "run.finished"
    assert (recording.workdir / "summary.txt").read_text() == "summary\n"


def test_replay_check_passes_on_a_run_through_the_sdk(recording: Recording) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "replay", "--check", str(recording.trace)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    # One line saying what was checked, with the counts of the trace itself.
    events = _events(recording.trace)
    names = [event["event"] for event in events]
    assert done.stdout == (
        f"replay --check: {len(events)} events of 1 run re-driven through fresh machines: "
        f"{names.count('loop.transition')} loop transitions, "
        f"{names.count('plan.transition')} plan transitions, 1 reminder and "
        f"{sum(names.count(n) for n in ('plan.updated', 'plan.rejected', 'guard.blocked'))} "
        "other recorded outcomes came out the same\n"
    )


def test_the_timeline_table_is_printed_without_check(
    recording: Recording, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli("replay", recording.trace)
    assert (code, err) == (0, "")
    assert "timeline" in out
    for header in ("round", "tool calls", "plan", "reminders", "blocks", "tokens"):
        assert header in out
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == [str(r[0]) for r in EXPECTED_ROWS]
    assert rows[0][1:3] == ["2", "0/3"]
    assert rows[0][-1].startswith("120/30/7")
    assert rows[6][1:3] == ["1", "3/3"]
    assert "every transition and reminder came out the same" in out


def test_json_output_has_the_timeline_rows(
    recording: Recording, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli("replay", "--json", recording.trace)
    assert (code, err) == (0, "")
    document = json.loads(out)
    assert document["ok"] is True
    assert document["divergence"] is None
    assert document["unknown_events"] == 0
    assert document["truncated_tail"] is False
    rows = document["timeline"]
    assert [
        (r["round"], r["tool_calls"], r["completed"], r["total"], r["reminders"], r["blocks"])
        for r in rows
    ] == EXPECTED_ROWS
    assert (rows[0]["input_tokens"], rows[0]["output_tokens"], rows[0]["cache_read_tokens"]) == (
        120,
        30,
        7,
    )
    responses = [e for e in _events(recording.trace) if e["event"] == "model.response"]
    assert [r["input_tokens"] for r in rows] == [e["usage"]["input_tokens"] for e in responses]
    assert responses[0]["usage"]["cache_creation_input_tokens"] == 50


# --- hand-edited traces are caught and named ---------------------------------------------------


def _illegal_edge(events: list[Event]) -> tuple[list[Event], int]:
    at = _index(events, "plan.transition", item="1", trigger="start")
    events[at]["dst"] = "completed"
    return events, at + 1


def _legal_edge_that_did_not_happen(events: list[Event]) -> tuple[list[Event], int]:
    at = _index(events, "plan.transition", item="2", trigger="start")
    events[at] |= {"trigger": "cancel", "dst": "cancelled"}
    return events, at + 1


def _missing_reminder(events: list[Event]) -> tuple[list[Event], int]:
    at = _index(events, "audit.reminder")
    del events[at]
    # Renumbered, so the sequence numbers cannot give it away: only the machine can.
    events = [{**event, "seq": number} for number, event in enumerate(events, start=1)]
    return events, at + 1  # the advance that should have reminded now sits on that line


def _swapped_lines(events: list[Event]) -> tuple[list[Event], int]:
    at = _index(events, "tool.call", name="read_file")
    events[at], events[at + 1] = events[at + 1], events[at]
    return events, at + 1


def _swapped_and_renumbered(events: list[Event]) -> tuple[list[Event], int]:
    at = _index(events, "audit.reminder")
    events[at], events[at + 1] = events[at + 1], events[at]
    events = [{**event, "seq": number} for number, event in enumerate(events, start=1)]
    return events, at + 1


@pytest.mark.parametrize(
    ("edit", "phrase"),
    [
        pytest.param(_illegal_edge, "illegal edge pending -start-> completed", id="illegal-edge"),
        pytest.param(
            _legal_edge_that_did_not_happen,
            "plan.transition: recorded trigger='cancel', replay gives 'start'",
            id="legal-edge-that-did-not-happen",
        ),
        pytest.param(
            _missing_reminder,
            "replay expected audit.reminder (round=4, rounds_since_update=3) here, "
            "the trace has loop.transition",
            id="missing-reminder",
        ),
        pytest.param(_swapped_lines, "lines are missing or out of order", id="reordered-line"),
        pytest.param(
            _swapped_and_renumbered,
            "replay expected audit.reminder",
            id="reordered-and-renumbered",
        ),
    ],
)
def test_a_hand_edited_trace_is_caught_and_named(
    recording: Recording,
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    edit: Callable[[list[Event]], tuple[list[Event], int]],
    phrase: str,
) -> None:
    events, line = edit(_events(recording.trace))
    edited = _write(tmp_path / "edited.jsonl", events)
    code, out, err = cli("replay", "--check", edited)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert f"line {line}: " in err
    assert phrase in err


def test_replay_check_verifies_the_dependencies_guard(
    recording: Recording, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    # The first plan, edited so the item it starts waits for an unfinished one: the recorded
    # result says accepted, the re-driven board's dependencies_completed guard refuses it.
    events = _events(recording.trace)
    call = _index(events, "tool.call", name="todo")
    events[call]["input"]["items"][0]["blocked_by"] = ["2"]
    result = _index(events, "tool.result", id=events[call]["id"])
    code, out, err = cli("replay", "--check", _write(tmp_path / "edited.jsonl", events))
    assert (code, out) == (1, "")
    assert f"line {result + 1}: replay rejected the todo call" in err


# --- tolerated damage --------------------------------------------------------------------------


def test_a_trace_cut_at_every_byte_of_its_last_line_is_tolerated(
    recording: Recording, tmp_path: Path
) -> None:
    data = recording.trace.read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    last_line = data[start:].rstrip(b"\n")
    lines_before = data[:start].count(b"\n")
    cut = tmp_path / "cut.jsonl"
    for length in range(len(last_line) + 2):
        cut.write_bytes(data[: start + length])
        parsed = read_trace(cut)
        partial = 0 < length < len(last_line)
        assert parsed.truncated_tail is partial, length
        assert len(parsed.lines) == lines_before + (not partial and length > 0), length
        assert any("cut off" in w for w in parsed.warnings) is partial, length
        assert Replay(parsed).check() is None, length


def test_a_trace_cut_in_the_middle_of_a_call_is_tolerated(
    recording: Recording, tmp_path: Path
) -> None:
    events = _events(recording.trace)
    after_update = _index(events, "plan.updated") + 1  # the todo result was never written
    cut = _write(tmp_path / "cut.jsonl", events[:after_update])
    assert Replay(read_trace(cut)).check() is None


def test_the_cut_tail_is_a_warning_on_stderr(
    recording: Recording, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(recording.trace.read_bytes()[:-20])
    code, out, err = cli("replay", cut)
    assert code == 0
    assert "warning" in err
    assert "cut off" in err
    assert "timeline" in out
    assert _checked(cli("replay", "--check", cut))


def test_unknown_event_types_are_skipped_and_counted(
    recording: Recording, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    events = _events(recording.trace)
    run_id = events[0]["run_id"]
    novel = {"event": "cost.estimate", "run_id": run_id, "ts": events[0]["ts"], "usd": 0.01}
    events.insert(3, dict(novel))
    events.insert(_index(events, "audit.reminder"), {**novel, "event": "model.thinking"})
    trace = _write(tmp_path / "newer.jsonl", events, renumber=True)
    parsed = read_trace(trace)
    assert parsed.unknown_events == 2
    assert Replay(parsed).check() is None
    assert _checked(cli("replay", "--check", trace))
    code, out, err = cli("replay", "--json", trace)
    assert code == 0
    assert "skipped 2 events of unknown types" in err
    assert json.loads(out)["unknown_events"] == 2


# --- bad input ---------------------------------------------------------------------------------


def _not_json_in_the_middle(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join([*lines[:4], "this is not json", *lines[4:]]) + "\n")
    return f"{path}:5: not a JSON line"


def _newer_format(path: Path, lines: list[str]) -> str:
    newer = json.loads(lines[2]) | {"trace_format": TRACE_FORMAT + 1}
    path.write_text("\n".join([*lines[:2], json.dumps(newer), *lines[3:]]) + "\n")
    return f"{path}:3: trace_format {TRACE_FORMAT + 1} is newer than this orchestrator reads"


def _empty(path: Path, lines: list[str]) -> str:
    path.write_text("")
    return f"{path}: the trace is empty"


def _missing(path: Path, lines: list[str]) -> str:
    return f"{path}: no such trace file"


@pytest.mark.parametrize("flags", [[], ["--check"], ["--json"]], ids=["plain", "check", "json"])
@pytest.mark.parametrize(
    "damage",
    [_missing, _empty, _not_json_in_the_middle, _newer_format],
    ids=["missing", "empty", "not-json", "newer-format"],
)
def test_bad_input_is_one_line_on_stderr_and_exit_code_2(
    recording: Recording,
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    damage: Callable[[Path, list[str]], str],
    flags: list[str],
) -> None:
    path = tmp_path / "bad.jsonl"
    expected = damage(path, recording.trace.read_text(encoding="utf-8").splitlines())
    code, out, err = cli("replay", *flags, path)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert expected in err
    assert "Traceback" not in err


def test_bad_input_exits_2_without_a_traceback_in_a_real_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "replay", str(tmp_path / "nowhere.jsonl")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "no such trace file" in done.stderr


# --- run --replay-model ------------------------------------------------------------------------


def test_replay_model_reruns_offline_and_reports_a_differing_result(
    recording: Recording,
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "notes.txt").write_text("delta epsilon\n", encoding="utf-8")
    trace = tmp_path / "rerun.jsonl"
    code, _out, err = cli(
        "run",
        TASK,
        "--replay-model",
        recording.trace,
        "--workdir",
        fresh,
        "--trace",
        trace,
        "--yes",
    )
    # The rerun finished, but it did not reproduce the recording: not a success.
    assert code == 1
    assert "2 tool result(s) differ from the recording" in err
    assert "tool result differs for toolu_01_1 (read_file)" in err
    assert "alpha beta gamma" in err  # the recorded value
    assert "delta epsilon" in err  # the value now
    assert "tool result differs for toolu_02_0 (bash)" in err  # wc -w counts 2 words now
    assert "differs for toolu_01_0" not in err  # the plan came out the same
    # The tools really ran in the fresh work directory.
    assert (fresh / "summary.txt").read_text() == "summary\n"
    assert (fresh / "log.txt").read_text() == "counted\n"
    rerun = _events(trace)
    assert rerun[-1]["status"] == "done"
    assert [e["content"] for e in rerun if e["event"] == "model.response"] == [
        e["content"] for e in _events(recording.trace) if e["event"] == "model.response"
    ]
    assert _checked(cli("replay", "--check", trace))


def test_replay_model_says_nothing_when_every_result_matches(
    recording: Recording, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]
) -> None:
    same = tmp_path / "same"
    same.mkdir()
    (same / "notes.txt").write_text(NOTES, encoding="utf-8")
    code, _out, err = cli(
        "run",
        TASK,
        "--replay-model",
        recording.trace,
        "--workdir",
        same,
        "--yes",
        "--trace",
        tmp_path / "t.jsonl",
    )
    assert code == 0
    assert "differs" not in err


# --- resume ------------------------------------------------------------------------------------

FIRST_PART: list[dict[str, Any]] = [
    {
        "tool_calls": [
            {
                "name": "todo",
                "input": {
                    "items": [
                        {"id": "1", "text": "Count", "status": "in_progress"},
                        {"id": "2", "text": "Report", "status": "pending"},
                    ]
                },
            },
            {"name": "bash", "input": {"command": "echo first >> count.txt"}},
        ]
    },
    {"tool_calls": [{"name": "read_file", "input": {"path": "count.txt"}}]},
    {"tool_calls": [{"name": "bash", "input": {"command": "ls"}}]},
    {"tool_calls": [{"name": "bash", "input": {"command": "cat count.txt"}}]},
    {"fault": "status", "status": 529},
    {"fault": "status", "status": 529},
    {"fault": "status", "status": 529},
]

SECOND_PART: list[dict[str, Any]] = [
    {
        "tool_calls": [
            _todo(("1", "completed"), ("2", "in_progress")),
            {"name": "bash", "input": {"command": "echo second >> count.txt"}},
        ],
        "expect_reminder": True,
    },
    {"tool_calls": [_todo(("2", "completed"))]},
    {"text": "Counted and reported."},
]


def test_resume_continues_a_failed_run_in_the_same_trace(
    tmp_path: Path,
    cli: Callable[..., tuple[int, str, str]],
    sdk_environment: Callable[[MessagesServer], None],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    trace = tmp_path / "trace.jsonl"
    with MessagesServer(_script("first", FIRST_PART)) as first:
        sdk_environment(first)
        code, _out, err = cli(
            "run",
            "Count things",
            "--workdir",
            work,
            "--trace",
            trace,
            "--yes",
            "--max-retries",
            "0",
            "--model",
            MODEL,
        )
        assert code == 1
        assert "529" in err
        assert first.violations == []
        failed_request = first.requests[-1]
    first_part = _events(trace)
    assert first_part[-1]["status"] == "failed"
    assert (work / "count.txt").read_text() == "first\n"

    with MessagesServer(_script("second", SECOND_PART)) as second:
        sdk_environment(second)
        code, _out, err = cli("resume", trace, "--yes", "--max-retries", "0")
        assert code == 0, err
        assert second.violations == []
        # The rebuilt conversation is the one the failed request carried, reminder and all.
        assert second.requests[0] == failed_request

    events = _events(trace)
    assert events[: len(first_part)] == first_part
    assert {e["run_id"] for e in events} == {first_part[0]["run_id"]}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["status"] for e in events if e["event"] == "run.finished"] == ["failed", "done"]
    resumed = events[len(first_part)]
    assert resumed["event"] == "run.started"
    assert resumed["task"] is None
    assert resumed["first_round"] == 4
    assert (work / "count.txt").read_text() == "first\nsecond\n"  # nothing of part one ran again
    assert _checked(cli("replay", "--check", trace))
    assert [(item.id, item.status) for item in rebuild(read_trace(trace)).board.items] == [
        ("1", "completed"),
        ("2", "completed"),
    ]


def test_resume_refuses_a_run_that_is_done(
    recording: Recording, cli: Callable[..., tuple[int, str, str]]
) -> None:
    code, out, err = cli("resume", recording.trace)
    assert (code, out) == (2, "")
    assert "that run finished (done); give the next instruction" in err


def test_replay_of_a_resumed_run_knows_its_guard_starts_fresh(tmp_path: Path) -> None:
    """The resumed run's first call repeats the last one, which a fresh guard lets through."""
    same_call = {"name": "bash", "input": {"command": "echo again >> count.txt"}}
    trace_path = tmp_path / "trace.jsonl"
    board = PlanBoard()
    with open_trace(trace_path) as trace:
        first = _loop(tmp_path, board, trace.log, [{"tool_calls": [same_call]}])
        assert first.run("repeat it").status == "failed"  # the script runs out
    rebuilt = rebuild(read_trace(trace_path))
    assert isinstance(rebuilt.board, PlanBoard)
    with open_trace(
        trace_path, run_id=rebuilt.run_id, append=True, first_seq=rebuilt.last_seq
    ) as trace:
        second = _loop(
            tmp_path,
            rebuilt.board,
            trace.log,
            [{"tool_calls": [{**same_call, "id": "again"}]}, {"text": "done"}],
            run_settings=rebuilt.settings,
            conversation=rebuilt.conversation,
        )
        assert second.run(None, first_round=rebuilt.last_round).status == "done"
    assert (tmp_path / "count.txt").read_text() == "again\nagain\n"
    assert Replay(read_trace(trace_path)).check() is None


# --- property: replay reproduces the plan and the machine states -------------------------------


def _loop(
    root: Path,
    board: PlanBoard,
    log: Any,
    turns: list[dict[str, Any]],
    *,
    run_settings: LoopSettings | None = None,
    conversation: Conversation | None = None,
) -> Loop:
    """An in-process loop as the CLI wires it, playing ``turns`` and no approval needed."""
    workdir = Workdir(root)
    tools = ToolRegistry(
        [BashTool(workdir), ReadFileTool(workdir), WriteFileTool(workdir), TodoTool(board)]
    )
    return Loop(
        model=ScriptedModel(_script("session", turns)),
        tools=tools,
        plan=board,
        log=log,
        settings=run_settings or LoopSettings(model="scripted", system="s"),
        conversation=conversation,
    )


class _RecordingLoopMachine(LoopMachine):
    """A loop machine that remembers every state it put its runs in."""

    made: ClassVar[list[_RecordingLoopMachine]] = []

    def __init__(self) -> None:
        super().__init__()
        self.visited: list[str] = []
        _RecordingLoopMachine.made.append(self)

    def fire(self, run: RunState, trigger: str) -> bool:
        fired = super().fire(run, trigger)
        if fired:
            self.visited.append(run.state)
        return fired


_IDS = st.sampled_from(["1", "2", "3", "4"])
_STATUSES = st.sampled_from(["pending", "in_progress", "completed", "cancelled"])


def _one_in_progress(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = False
    for item in items:
        if item["status"] == "in_progress":
            item["status"] = "pending" if seen else "in_progress"
            seen = True
    return items


# A whole new list, usually valid: unique ids with texts, at most one item in progress.
def _full_list(ids: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    statuses = st.tuples(*[st.sampled_from(["pending", "pending", "in_progress"]) for _ in ids])
    return statuses.map(
        lambda chosen: {
            "items": _one_in_progress(
                [
                    {"id": i, "text": f"Step {i}", "status": status}
                    for i, status in zip(ids, chosen, strict=True)
                ]
            )
        }
    )


_FULL_LIST = st.lists(_IDS, min_size=1, max_size=4, unique=True).flatmap(_full_list)
# Status changes to items that may or may not exist: some edges are legal, some are not.
_MERGE = st.lists(
    st.fixed_dictionaries({"id": _IDS, "status": _STATUSES}), min_size=1, max_size=2
).map(lambda items: {"merge": True, "items": items})
# Refused by the board (or by the registry before it) whatever the board holds.
_INVALID = st.one_of(
    st.just({"items": [{"id": "1", "text": "", "status": "pending"}]}),
    st.just({"items": [{"id": "1", "text": "a", "status": "done"}]}),
    st.just({"items": [{"id": "1", "text": "a", "status": "pending"}] * 2}),
    st.just({"items": "not a list"}),
    st.just({"merge": True}),
)
_CALL = st.one_of(
    st.builds(lambda i: {"name": "todo", "input": i}, st.one_of(_FULL_LIST, _MERGE, _INVALID)),
    st.builds(
        lambda p: {"name": "read_file", "input": {"path": p}},
        st.sampled_from(["a.txt", "missing.txt", "../outside.txt"]),
    ),
    st.builds(
        lambda c: {"name": "bash", "input": {"command": c}},
        st.sampled_from(["echo hi", "cat a.txt", "exit 3"]),
    ),
    st.builds(
        lambda c: {"name": "bash", "input": {"command": c}},
        st.sampled_from(["echo hi", "cat a.txt", "exit 3"]),
    ),
)
_TURN = st.lists(_CALL, min_size=1, max_size=3).map(lambda calls: {"tool_calls": calls})
# Most sessions open with a plan, as a model told to plan first does; the rest start anywhere.
_TURNS = st.one_of(
    st.tuples(_FULL_LIST, st.lists(_TURN, min_size=1, max_size=9)).map(
        lambda first: [{"tool_calls": [{"name": "todo", "input": first[0]}]}, *first[1]]
    ),
    st.lists(_TURN, min_size=1, max_size=10),
)


@settings(max_examples=25, deadline=None)
@given(
    turns=_TURNS,
    threshold=st.integers(min_value=1, max_value=3),
    max_rounds=st.sampled_from([1, 3, 6, 50, 50, 50]),
    policy=st.sampled_from(list(EdgePolicy)),
)
def test_replay_reproduces_the_plan_and_the_machine_states(
    turns: list[dict[str, Any]], threshold: int, max_rounds: int, policy: EdgePolicy
) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        mock.patch("orchestrator.loop.LoopMachine", _RecordingLoopMachine),
        mock.patch.object(replay_module, "LoopMachine", _RecordingLoopMachine),
    ):
        _RecordingLoopMachine.made = []
        root = Path(directory)
        (root / "a.txt").write_text("some text\n", encoding="utf-8")
        board = PlanBoard(policy=policy)
        trace_path = root / ".orchestrator" / "trace.jsonl"
        run_settings = LoopSettings(
            model="scripted", system="s", reminder_threshold=threshold, max_rounds=max_rounds
        )
        with open_trace(trace_path) as trace:
            loop = _loop(
                root, board, trace.log, [*turns, {"text": "done"}], run_settings=run_settings
            )
            outcome = loop.run("work through the turns")
        parsed = read_trace(trace_path)
        replayer = Replay(parsed)
        assert replayer.check() is None
        live_machine, replayed_machine = _RecordingLoopMachine.made
        assert replayed_machine.visited == live_machine.visited
        assert live_machine.visited[-1] == outcome.status
        recorded = [e.event["dst"] for e in parsed.lines if e.name == "loop.transition"]
        assert recorded == live_machine.visited
        assert rebuild(parsed).board.items == board.items
        assert len(replayer.timeline) == outcome.rounds


def test_a_chat_reset_between_runs_replays_and_rebuilds(tmp_path: Path) -> None:
    board = PlanBoard()
    first_item = {"id": "1", "text": "First", "status": "in_progress"}
    second_item = {"id": "9", "text": "Second", "status": "pending"}
    script = _script(
        "reset",
        [
            {"tool_calls": [{"name": "todo", "input": {"items": [first_item]}}]},
            {"text": "planned"},
            {"tool_calls": [{"name": "todo", "input": {"items": [second_item]}}]},
            {"text": "planned again"},
        ],
    )
    trace_path = tmp_path / "chat.jsonl"
    with open_trace(trace_path) as trace:
        loop = Loop(
            model=ScriptedModel(script),
            tools=ToolRegistry([TodoTool(board)]),
            plan=board,
            log=trace.log,
            settings=LoopSettings(model="m", system="s"),
        )
        assert loop.run("first").status == "done"
        board.reset()
        assert loop.run("second").status == "done"
    events = _events(trace_path)
    assert any(e["event"] == "plan.updated" and e.get("reset") for e in events)
    parsed = read_trace(trace_path)
    assert Replay(parsed).check() is None
    assert [item.id for item in rebuild(parsed).board.items] == ["9"]
    # Without the reset line, the second plan would cancel #1: replay must notice.
    kept = [e for e in events if not e.get("reset")]
    assert Replay(read_trace(_write(tmp_path / "edited.jsonl", kept, renumber=True))).check()


def test_a_resumed_run_keeps_counting_rounds_since_the_plan_changed(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("n\n", encoding="utf-8")
    plan = {"items": [{"id": "1", "text": "Read notes", "status": "in_progress"}]}
    read = {"tool_calls": [{"name": "read_file", "input": {"path": "notes.txt"}}]}
    first = _script(
        "before",
        [
            {"tool_calls": [{"name": "todo", "input": plan}]},
            read,
            read,
            {"fault": "status", "status": 529},
        ],
    )
    # Two rounds without a plan update before the failure, one after: the third gets the reminder.
    second = _script("after", [read, {"text": "done", "expect_reminder": True}])
    trace_path = tmp_path / "resumed.jsonl"

    def loop_for(model: ScriptedModel, board: PlanBoard, log: Any, **kw: Any) -> Loop:
        registry = ToolRegistry([ReadFileTool(Workdir(tmp_path)), TodoTool(board)])
        settings = LoopSettings(model="m", system="s")
        return Loop(model=model, tools=registry, plan=board, log=log, settings=settings, **kw)

    with open_trace(trace_path) as trace:
        outcome = loop_for(ScriptedModel(first), PlanBoard(), trace.log).run("read")
    assert outcome.status == "failed"
    rebuilt = rebuild(read_trace(trace_path))
    assert rebuilt.rounds_since_update == 2
    assert isinstance(rebuilt.board, PlanBoard)
    with open_trace(
        trace_path, run_id=rebuilt.run_id, append=True, first_seq=rebuilt.last_seq
    ) as trace:
        loop = loop_for(
            ScriptedModel(second), rebuilt.board, trace.log, conversation=rebuilt.conversation
        )
        outcome = loop.run(
            None,
            first_round=rebuilt.last_round,
            rounds_since_update=rebuilt.rounds_since_update,
        )
    assert outcome.status == "done", outcome.reason
    assert Replay(read_trace(trace_path)).check() is None


def test_an_unmanaged_trace_is_not_followed_yet_a_forged_clearing_in_it_diverges(
    tmp_path: Path,
) -> None:
    """A run without ``context.window`` never clears: replay stops following its conversation
    (so memory stays flat), and a ``context.cleared`` line in such a trace is still caught."""
    source = Path(__file__).parent / "data" / "replay_corpus" / "demo.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()
    assert not any('"context.window"' in line for line in lines)
    template = json.loads(lines[9])
    forged = {key: template[key] for key in ("ts", "run_id", "trace_format") if key in template}
    forged.update(event="context.cleared", blocks=2, tokens_freed=100)
    events = [json.loads(line) for line in lines[:10]] + [forged]
    events += [json.loads(line) for line in lines[10:]]
    for seq, event in enumerate(events, start=1):
        event["seq"] = seq
    path = tmp_path / "forged.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")

    assert Replay(read_trace(source)).check() is None
    divergence = Replay(read_trace(path)).check()
    assert divergence is not None and divergence.line == 11
    assert "context.cleared" in str(divergence)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("oops", "the recorded content is not a list of blocks"),
        ([{}], "a recorded content block has no type"),
        ([{"type": "tool_use", "name": "bash", "input": {}}], "tool_use block has no string 'id'"),
        ([{"type": "tool_use", "id": "t", "name": "bash", "input": "ls"}], "not an object"),
        ([{"type": "text", "text": None}], "text block has no string 'text'"),
    ],
)
def test_the_replay_model_refuses_a_recorded_response_the_api_could_not_have_sent(
    tmp_path: Path, content: object, problem: str
) -> None:
    """``run --replay-model`` reads a file a person may have edited: a clear ModelError."""
    response = {"event": "model.response", "seq": 1, "content": content, "usage": {}}
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps(response) + "\n", encoding="utf-8")
    model = replay_module.ReplayModel(read_trace(trace))
    with pytest.raises(ModelError, match=problem):
        model.respond({}, lambda _text: None)
