"""Tests for the terminal views and the offline demo as a person (or a program) sees it."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator import console as console_module
from orchestrator.console import (
    Activity,
    JsonView,
    LiveView,
    PlainView,
    choose_view,
    plan_panel,
    print_timeline,
)
from orchestrator.plan import PlanItem, Priority, Status
from orchestrator.replay import RoundSummary

ESCAPE = re.compile(r"\x1b\[")
ANY_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")


class TerminalStringIO(io.StringIO):
    """A stream that says it is a terminal, as a person's stdout does."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _no_forced_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    # rich colours even a pipe when FORCE_COLOR is set; these tests decide colour themselves.
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def _item(id_: str, text: str, status: Status, active_form: str = "") -> dict[str, Any]:
    data: dict[str, Any] = {"id": id_, "text": text, "status": str(status)}
    if active_form:
        data["active_form"] = active_form
    return data


PLAN_ITEMS = [
    _item("1", "Read hello.py", Status.COMPLETED),
    _item("2", "Add type hints", Status.IN_PROGRESS, "Adding type hints"),
    _item("3", "Run the tests", Status.PENDING),
]

# Shaped like the loop's own events (see loop.py and plan.py); seq/ts/run_id as the trace adds.
EVENTS: list[dict[str, Any]] = [
    {"event": "run.started", "task": "Refactor hello.py", "model": "m", "settings": {}},
    {"event": "loop.transition", "src": "idle", "dst": "call_model", "trigger": "start"},
    {"event": "model.request", "round": 1, "messages": 1, "cache_breakpoints": 2, "bytes": 900},
    {
        "event": "model.response",
        "round": 1,
        "stop_reason": "tool_use",
        "content": [],
        "usage": {
            "input_tokens": 1234,
            "output_tokens": 56,
            "cache_read_input_tokens": 789,
            "cache_creation_input_tokens": 321,
        },
        "model": "m",
    },
    {
        "event": "plan.updated",
        "revision": 1,
        "merge": False,
        "items": PLAN_ITEMS,
        "completed": 1,
        "total": 3,
        "transitions": 2,
    },
    {
        "event": "tool.call",
        "round": 1,
        "id": "t1",
        "name": "bash",
        "input": {"command": "pytest -q"},
    },
    {
        "event": "tool.call",
        "round": 1,
        "id": "t2",
        "name": "read_file",
        "input": {"path": "gone.py"},
    },
    {
        "event": "tool.result",
        "round": 1,
        "id": "t1",
        "name": "bash",
        "is_error": False,
        "output": "3 passed\nin 0.1s",
        "duration_ms": 41.6,
    },
    {
        "event": "tool.result",
        "round": 1,
        "id": "t2",
        "name": "read_file",
        "is_error": True,
        "output": "Error: gone.py does not exist; check the path\nsecond line",
        "duration_ms": 2.2,
    },
    {"event": "audit.reminder", "round": 4, "rounds_since_update": 3, "threshold": 3, "plan": ""},
    {"event": "tool.call", "round": 5, "id": "t3", "name": "bash", "input": {"command": "ls"}},
    {"event": "guard.blocked", "round": 5, "id": "t3", "name": "bash", "rule": "repeat"},
    {
        "event": "tool.result",
        "round": 5,
        "id": "t3",
        "name": "bash",
        "is_error": True,
        "output": "Error: blocked: this bash call is identical to the previous one",
        "duration_ms": 0.1,
    },
    {"event": "run.finished", "status": "done", "rounds": 5, "reason": None},
]


def _play(view: Any, events: list[dict[str, Any]] = EVENTS) -> None:
    with view:
        view.on_text("Let me look ")
        view.on_text("at the code.")
        for event in events:
            view(event)
        view.on_text("All done.")


# --- plain ---------------------------------------------------------------------------------


def test_plain_view_shows_each_event_kind_as_a_person_reads_it() -> None:
    stream = io.StringIO()
    _play(PlainView(stream))
    lines = stream.getvalue().splitlines()

    # Streamed text pieces join on one line, and the next event starts a fresh line.
    assert lines[0] == "Let me look at the code."
    assert lines[1] == "· round 1: 1234 in · 56 out · 789 cache read · 321 cache write"
    # The plan, in the board's own format, indented under the round.
    assert lines[2:10] == [
        "    [x] #1: Read hello.py",
        "    [>] #2: Add type hints (Adding type hints)",
        "    [ ] #3: Run the tests",
        "",
        "    (1/3 completed)",
        "✓ bash pytest -q  42 ms  ok",
        # The tool's output, previewed under its line (short outputs whole).
        "    │ 3 passed",
        "    │ in 0.1s",
    ]
    # A call and its result are one line: name, key argument, duration, ok or error.
    assert lines[10] == "✗ read_file gone.py  2 ms  error"
    assert lines[11] == "    │ Error: gone.py does not exist; check the path"
    assert lines[12] == "    │ second line"
    assert lines[13] == "⚑ reminder: the plan has not changed for 3 rounds"
    assert lines[14] == "⊘ blocked bash: repeat call"
    assert lines[15] == "✗ bash ls  0 ms  error"
    assert lines[17] == "run done after 5 rounds"
    assert lines[18:] == ["All done."]
    assert stream.getvalue().endswith("All done.\n")
    # Requests and transitions are trace detail, not screen lines.
    assert not any("call_model" in line or "900" in line for line in lines)


def test_plain_view_call_line_appears_only_when_the_result_arrives() -> None:
    stream = io.StringIO()
    view = PlainView(stream)
    view(EVENTS[5])
    assert stream.getvalue() == ""
    view(EVENTS[7])
    assert stream.getvalue() == "✓ bash pytest -q  42 ms  ok\n    │ 3 passed\n    │ in 0.1s\n"


def test_a_call_a_hook_rewrote_shows_what_ran_and_what_the_model_asked() -> None:
    """A PreToolUse hook's ``updatedInput`` is what ran: the call line once showed the model's
    command beside the output of another one."""
    stream = io.StringIO()
    view = PlainView(stream)
    view(
        {
            "event": "tool.call",
            "round": 1,
            "id": "t1",
            "name": "bash",
            "input": {"command": "rm -r build"},
        }
    )
    view(
        {
            "event": "hook.updated_input",
            "round": 1,
            "id": "t1",
            "name": "bash",
            "input": {"command": "rm -r build --dry-run"},
            "hook": "python3 safe.py",
        }
    )
    view(
        {
            "event": "tool.result",
            "round": 1,
            "id": "t1",
            "name": "bash",
            "is_error": False,
            "output": "would remove build",
            "duration_ms": 5.0,
        }
    )
    assert stream.getvalue().splitlines() == [
        "✓ bash rm -r build --dry-run  5 ms  ok",
        "    ↻ input from the PreToolUse hook `python3 safe.py`; the model asked: rm -r build",
        "    │ would remove build",
    ]


def test_a_long_tool_output_shows_its_first_and_last_lines_and_more_with_verbose() -> None:
    output = "\n".join(f"line {n}" for n in range(1, 101))
    result = {**EVENTS[7], "output": output}
    short, long = io.StringIO(), io.StringIO()
    for stream, verbose in ((short, False), (long, True)):
        view = PlainView(stream, verbose=verbose)
        view(EVENTS[5])
        view(result)
    assert short.getvalue().splitlines()[1:] == [
        "    │ line 1",
        "    │ line 2",
        "    │ line 3",
        "    │ … 95 more lines (--verbose shows more, `show` all)",
        "    │ line 99",
        "    │ line 100",
    ]
    shown = long.getvalue().splitlines()[1:]
    assert shown[39] == "    │ line 40"
    assert shown[40] == "    │ … 40 more lines (--verbose shows more, `show` all)"
    assert shown[-1] == "    │ line 100"


def test_one_very_long_line_is_cut_to_the_preview_s_width() -> None:
    result = {**EVENTS[7], "output": "x" * 200_000 + "\nshort"}
    stream = io.StringIO()
    view = PlainView(stream)
    view(EVENTS[5])
    view(result)
    shown = stream.getvalue().splitlines()[1:]
    assert shown == [f"    │ {'x' * 240} … 199760 more characters", "    │ short"]


def test_the_live_activity_line_names_what_is_awaited_and_for_how_long() -> None:
    now = [100.0]
    activity = Activity(clock=lambda: now[0])
    assert activity.describe() == ""
    activity.follow({"event": "model.request", "round": 1})
    now[0] = 112.2
    assert activity.describe() == "waiting for the model… 12 s"
    activity.follow({"event": "model.response", "round": 1})
    assert activity.describe() == ""
    activity.follow({"event": "tool.call", "name": "bash", "input": {"command": "pytest -q"}})
    now[0] = 245.0
    assert activity.describe() == "running bash pytest -q … 133 s"
    activity.follow({"event": "tool.result", "name": "bash"})
    assert activity.describe() == ""


def test_plain_view_names_a_failed_run_and_its_reason() -> None:
    stream = io.StringIO()
    PlainView(stream)(
        {"event": "run.finished", "status": "failed", "rounds": 50, "reason": "max rounds (50)"}
    )
    assert stream.getvalue() == "run failed after 50 rounds: max rounds (50)\n"


def test_plain_view_survives_an_error_result_with_no_text() -> None:
    stream = io.StringIO()
    view = PlainView(stream)
    view(EVENTS[6])
    view({**EVENTS[8], "output": ""})
    assert stream.getvalue() == "✗ read_file gone.py  2 ms  error\n"


def test_plain_view_shows_escape_codes_the_model_or_a_tool_sends_and_obeys_none() -> None:
    stream = io.StringIO()
    view = PlainView(stream)
    with view:
        view.on_text("\x1b[1mbold\x1b[0m claim\n")
        view(EVENTS[6])
        view({**EVENTS[8], "output": "\x1b[31mFAILED\x1b[0m test_hello.py"})
    text = stream.getvalue()
    assert not ANY_ESCAPE.search(text)
    assert "\x1b" not in text
    # Shown, not silently dropped (issue 25): the user sees that something was there.
    assert "␛[1mbold␛[0m claim" in text
    assert "    │ ␛[31mFAILED␛[0m test_hello.py" in text


def test_plain_and_json_output_has_no_escape_codes() -> None:
    plain, as_json = io.StringIO(), io.StringIO()
    _play(PlainView(plain))
    _play(JsonView(as_json))
    assert plain.getvalue() and as_json.getvalue()
    assert not ESCAPE.search(plain.getvalue())
    assert not ESCAPE.search(as_json.getvalue())


def test_quiet_shows_nothing_per_event_or_text() -> None:
    stream = io.StringIO()
    _play(PlainView(stream, quiet=True))
    assert stream.getvalue() == ""


# --- json ----------------------------------------------------------------------------------


def test_json_view_writes_one_parseable_object_per_event() -> None:
    stream = io.StringIO()
    events = [*EVENTS, {"event": "run.finished", "path": Path("/w/t.jsonl"), "note": "é\nx"}]
    _play(JsonView(stream), events)
    lines = stream.getvalue().splitlines()
    assert len(lines) == len(events)
    parsed = [json.loads(line) for line in lines]
    assert [p["event"] for p in parsed] == [e["event"] for e in events]
    assert parsed[3]["usage"]["cache_read_input_tokens"] == 789
    assert parsed[-1] == {"event": "run.finished", "path": "/w/t.jsonl", "note": "é\nx"}
    # Streamed text is left out: it arrives whole in model.response.
    assert "Let me look" not in stream.getvalue()


# --- choosing a view -----------------------------------------------------------------------


@pytest.fixture
def colour_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@pytest.mark.usefixtures("colour_terminal")
def test_choose_view_picks_by_flags_terminal_and_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tty = TerminalStringIO()
    assert isinstance(choose_view(quiet=False, as_json=False, stream=tty), LiveView)
    assert isinstance(choose_view(quiet=False, as_json=False, stream=io.StringIO()), PlainView)
    assert isinstance(choose_view(quiet=False, as_json=True, stream=tty), JsonView)
    assert isinstance(choose_view(quiet=True, as_json=True, stream=tty), JsonView)
    quiet = choose_view(quiet=True, as_json=False, stream=tty)
    assert isinstance(quiet, PlainView)
    _play(quiet)
    assert tty.getvalue() == ""
    monkeypatch.setenv("NO_COLOR", "1")
    assert isinstance(choose_view(quiet=False, as_json=False, stream=tty), PlainView)
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(choose_view(quiet=False, as_json=False, stream=tty), PlainView)


@pytest.mark.usefixtures("colour_terminal")
def test_no_color_on_a_terminal_writes_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    tty = TerminalStringIO()
    _play(choose_view(quiet=False, as_json=False, stream=tty))
    assert "✓ bash pytest -q  42 ms  ok" in tty.getvalue().splitlines()
    assert not ESCAPE.search(tty.getvalue())


# --- live ----------------------------------------------------------------------------------


def _panel_text(items: list[PlanItem]) -> str:
    out = io.StringIO()
    Console(file=out, width=80).print(plan_panel(items))
    return out.getvalue()


def test_plan_panel_shows_markers_active_form_and_progress() -> None:
    text = _panel_text(
        [
            PlanItem("1", "Read hello.py", Status.COMPLETED),
            PlanItem("2", "Add type hints", Status.IN_PROGRESS, "Adding type hints"),
            PlanItem("3", "Run the tests", Status.PENDING),
            PlanItem("4", "Write a changelog", Status.CANCELLED),
        ]
    )
    assert "plan" in text.splitlines()[0]
    assert re.search(r"\[x\]\s+#1: Read hello\.py", text)
    assert re.search(r"\[>\]\s+#2: Add type hints", text)
    assert "Adding type hints" in text
    assert re.search(r"\[ \]\s+#3: Run the tests", text)
    assert re.search(r"\[-\]\s+#4: Write a changelog", text)
    # Cancelled items count toward n but not k.
    assert "1/4" in text
    assert not ESCAPE.search(text)


def test_plan_panel_progress_counts_completed_items() -> None:
    done = [PlanItem(str(i), f"step {i}", Status.COMPLETED) for i in range(1, 4)]
    assert "3/3" in _panel_text(done)
    started = [PlanItem("1", "a", Status.PENDING), PlanItem("2", "b", Status.IN_PROGRESS)]
    assert "0/2" in _panel_text(started)


def test_plan_panel_shows_priority_and_unfinished_blockers() -> None:
    text = _panel_text(
        [
            PlanItem("1", "Read", Status.IN_PROGRESS, "Reading", Priority.HIGH),
            PlanItem("2", "Write", Status.PENDING, blocked_by=("1",)),
        ]
    )
    assert re.search(r"#1: Read \(high priority\)", text)
    assert re.search(r"#2: Write \(blocked by #1\)", text)


def test_plain_view_shows_the_explanation_of_a_plan_update() -> None:
    out = io.StringIO()
    view = PlainView(out)
    view(
        {
            "event": "plan.updated",
            "revision": 1,
            "merge": False,
            "items": [{"id": "1", "text": "Read", "status": "pending"}],
            "explanation": "Reading comes\nfirst",
        }
    )
    assert out.getvalue() == "    [ ] #1: Read\n\n    (0/1 completed)\n✎ Reading comes first\n"


def test_plan_panel_for_an_empty_board() -> None:
    text = _panel_text([])
    assert "No todos." in text
    assert "0/0" not in text


@pytest.mark.usefixtures("colour_terminal")
def test_live_view_streams_text_and_event_lines_to_the_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    view = LiveView(console)
    with view:
        view.on_text("Let me look ")
        view.on_text("at the code.\nSecond line, still")
        view.on_text(" streaming")
        for event in EVENTS:
            view(event)
        view.on_text("All done.")
    raw = out.getvalue()
    assert ESCAPE.search(raw), "a terminal gets colour"
    text = ANY_ESCAPE.sub("", raw)
    for line in (
        "Let me look at the code.",
        "Second line, still streaming",
        "· round 1: 1234 in · 56 out · 789 cache read · 321 cache write",
        "✓ bash pytest -q  42 ms  ok",
        "✗ read_file gone.py  2 ms  error",
        "Error: gone.py does not exist; check the path",
        "⚑ reminder: the plan has not changed for 3 rounds",
        "⊘ blocked bash: repeat call",
        "run done after 5 rounds",
        "All done.",
    ):
        assert line in text, line
    # The half line in flight was flushed before the first event line, not after it.
    assert text.index("Second line, still streaming") < text.index("· round 1")
    # The panel is redrawn under the lines as they scroll: it shows the plan.updated board.
    assert text.index("No todos.") < text.index("#2: Add type hints")
    assert re.search(r"\[>\]\s+#2: Add type hints", text)
    assert "Adding type hints" in text
    assert "1/3" in text


@pytest.mark.usefixtures("colour_terminal")
def test_the_live_panel_is_not_rendered_again_for_every_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fifty event lines in a row, no plan change: the panel is drawn from lines rendered once
    (again only when its spinner is due), and every line still reaches the terminal in order."""
    rendered: list[int] = []
    real_panel = console_module.plan_panel

    def counting_panel(*args: Any, **kwargs: Any) -> Any:
        rendered.append(1)
        return real_panel(*args, **kwargs)

    monkeypatch.setattr(console_module, "plan_panel", counting_panel)
    out = io.StringIO()
    view = LiveView(Console(file=out, force_terminal=True, width=100))
    with view:
        view(EVENTS[4])  # plan.updated
        for number in range(50):
            view({"event": "audit.reminder", "rounds_since_update": number})
    text = ANY_ESCAPE.sub("", out.getvalue())
    positions = [text.index(f"for {number} rounds") for number in range(50)]
    assert positions == sorted(positions)
    assert len(rendered) < 25, len(rendered)


# --- the replay timeline -------------------------------------------------------------------

TIMELINE = [
    RoundSummary(1, tool_calls=1, completed=0, total=5, input_tokens=900, output_tokens=40),
    RoundSummary(
        2,
        tool_calls=2,
        completed=3,
        total=5,
        reminders=1,
        blocks=1,
        input_tokens=120,
        output_tokens=44,
        cache_read_tokens=800,
    ),
]


def test_timeline_table_has_a_row_per_round() -> None:
    stream = io.StringIO()
    print_timeline(TIMELINE, stream)
    text = stream.getvalue()
    assert not ESCAPE.search(text)
    rows = [line.split() for line in text.splitlines() if re.match(r"\s+\d+\s", line)]
    assert rows == [["1", "1", "0/5", "900/40/0"], ["2", "2", "3/5", "1", "1", "120/44/800"]]


@pytest.mark.usefixtures("colour_terminal")
def test_timeline_on_a_terminal_is_coloured_unless_no_color(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    coloured = TerminalStringIO()
    print_timeline(TIMELINE, coloured)
    assert ESCAPE.search(coloured.getvalue())
    monkeypatch.setenv("NO_COLOR", "1")
    plain = TerminalStringIO()
    print_timeline(TIMELINE, plain)
    assert not ESCAPE.search(plain.getvalue())
    assert "120/44/800" in plain.getvalue()


# --- the demo, as a subprocess -------------------------------------------------------------


def _demo(workdir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = _plain_env()
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "demo", "--workdir", str(workdir), *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def _plain_env() -> dict[str, str]:
    # The demo needs no key: take every setting out so the run cannot depend on them.
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("ANTHROPIC_", "ORCHESTRATOR_", "NO_COLOR"))
    }


def test_demo_in_a_pipe_is_labelled_plain_and_says_where_things_are(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    done = _demo(workdir)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not ESCAPE.search(out)
    assert out.splitlines()[0].startswith("[SCRIPTED scenario")
    assert "not a recording of a real model" in out.splitlines()[0]
    assert "⚑ reminder: the plan has not changed for 3 rounds" in out
    assert "⊘ blocked bash: repeat call" in out
    assert re.search(r"^✓ bash python3 test_hello\.py  \d+ ms  ok$", out, re.M)
    assert "run done after" in out
    assert "(5/5 completed)" in out

    tail = out.rstrip("\n").splitlines()[-5:]
    assert tail[0] == f"work directory: {workdir}"
    assert tail[1].startswith("trace: ")
    trace = Path(tail[1].removeprefix("trace: "))
    assert trace.is_file()
    # The trace lives in the per-user state directory, not in the work directory.
    assert not trace.is_relative_to(workdir)
    names = sorted(path.name for path in workdir.iterdir() if path.name != "__pycache__")
    assert names == ["hello.py", "test_hello.py"]
    # Run as `python -m orchestrator`, the demo says so, so the commands paste as they are.
    me = f"{shlex.quote(sys.executable)} -P -m orchestrator"
    assert tail[2] == f"replay it:  {me} replay {shlex.quote(str(trace))}"
    assert tail[3] == f"diagram it: {me} diagram --trace {shlex.quote(str(trace))}"
    assert tail[4] == f"picture it: {me} show {shlex.quote(str(trace))} --html"
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    assert events[-1]["event"] == "run.finished"
    assert events[-1]["status"] == "done"

    # The printed commands work as printed.
    outputs = []
    for line in tail[2:]:
        ran = subprocess.run(
            shlex.split(line.split(":", 1)[1]),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        outputs.append(ran.stdout)
    assert "stateDiagram-v2" in outputs[1]
    page = Path(outputs[2].strip())
    assert page.suffix == ".html" and page.read_text(encoding="utf-8").startswith("<!DOCTYPE")


def test_demo_quiet_prints_only_the_answer_and_the_final_plan(tmp_path: Path) -> None:
    done = _demo(tmp_path / "demo", "--quiet")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not ESCAPE.search(out)
    assert "SCRIPTED" in out
    assert "Done: hello.py has type hints, a docstring and a main guard" in out
    assert "[x] #5: Run the tests\n\n(5/5 completed)" in out
    # Nothing per event: no rounds, calls, reminders, blocks or intermediate model text.
    for noise in ("· round", "✓ ", "✗ ", "reminder:", "blocked", "Adding type hints to greet."):
        assert noise not in out, noise
    assert out.count("(5/5 completed)") == 1


def test_demo_json_streams_only_json_on_stdout(tmp_path: Path) -> None:
    done = _demo(tmp_path / "demo", "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    events: list[Mapping[str, Any]] = [json.loads(line) for line in lines]
    assert all(isinstance(event, dict) for event in events)
    names = [event["event"] for event in events]
    assert names[0] == "run.started"
    assert names[-2:] == ["run.finished", "result"]
    assert {"audit.reminder", "guard.blocked", "plan.updated", "tool.result"} <= set(names)
    # Every trace event, numbered; then the result object (no seq: it is not a trace line).
    assert [event["seq"] for event in events[:-1]] == list(range(1, len(events)))
    assert events[-1]["status"] == "done" and "seq" not in events[-1]
    # The label, the final plan and the paths go to stderr, out of the programs' way.
    assert "SCRIPTED" in done.stderr
    assert "(5/5 completed)" in done.stderr
    assert "orchestrator replay" in done.stderr
    assert not ESCAPE.search(done.stdout + done.stderr)


@pytest.mark.usefixtures("colour_terminal")
def test_the_live_region_shows_what_is_awaited_under_the_plan() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    view = LiveView(console)
    view({"event": "tool.call", "id": "t1", "name": "bash", "input": {"command": "make test"}})
    with console.capture() as capture:
        console.print(view._renderable())
    assert "running bash make test … 0 s" in ANY_ESCAPE.sub("", capture.get())
    view(
        {
            "event": "tool.result",
            "id": "t1",
            "name": "bash",
            "is_error": False,
            "output": "",
            "duration_ms": 5,
        }
    )
    view({"event": "model.request", "round": 2})
    with console.capture() as capture:
        console.print(view._renderable())
    assert "waiting for the model… 0 s" in ANY_ESCAPE.sub("", capture.get())


def _call_and_result(name: str, arguments: dict[str, Any], **result: Any) -> list[dict[str, Any]]:
    call = {"event": "tool.call", "round": 1, "id": "t9", "name": name, "input": arguments}
    done = {"event": "tool.result", "round": 1, "id": "t9", "name": name, "is_error": False}
    return [call, {**done, "output": "", "duration_ms": 46.0, **result}]


def test_a_command_that_exits_non_zero_is_a_cross_with_its_exit_code() -> None:
    stream = io.StringIO()
    view = PlainView(stream)
    for event in _call_and_result("bash", {"command": "echo oops; exit 3"}, exit_code=3):
        view(event)
    assert stream.getvalue().splitlines()[0] == "✗ bash echo oops; exit 3  46 ms  exit 3"
    stream = io.StringIO()
    view = PlainView(stream)
    for event in _call_and_result("bash", {"command": "true"}, exit_code=0):
        view(event)
    assert stream.getvalue().splitlines()[0] == "✓ bash true  46 ms  ok"


def test_a_duration_past_a_second_is_in_seconds() -> None:
    stream = io.StringIO()
    view = PlainView(stream)
    for event in _call_and_result("bash", {"command": "make"}, duration_ms=20111.4, exit_code=0):
        view(event)
    assert stream.getvalue().splitlines()[0] == "✓ bash make  20.1 s  ok"


def test_a_file_change_shows_its_diff_under_the_tool_line() -> None:
    diff = "--- a/greet.py\n+++ b/greet.py\n@@ -1 +1 @@\n-print('hi')\n+print('hey')"
    stream = io.StringIO()
    view = PlainView(stream)
    arguments = {"path": "greet.py", "old_text": "hi", "new_text": "hey"}
    for event in _call_and_result("edit_file", arguments, output="Edited greet.py", diff=diff):
        view(event)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "✓ edit_file greet.py  46 ms  ok"
    assert "    -print('hi')" in lines
    assert "    +print('hey')" in lines


def test_a_diff_with_escape_codes_reaches_the_terminal_inert() -> None:
    diff = "--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+\x1b]0;pwned\x07\x1b[2J"
    stream = io.StringIO()
    view = PlainView(stream)
    for event in _call_and_result("write_file", {"path": "x", "content": "..."}, diff=diff):
        view(event)
    assert "\x1b" not in stream.getvalue()
    assert "\x07" not in stream.getvalue()


def _board_event(count: int, current: int) -> dict[str, Any]:
    def status(number: int) -> Status:
        if number < current:
            return Status.COMPLETED
        return Status.IN_PROGRESS if number == current else Status.PENDING

    items = [
        _item(str(n), f"Step number {n}", status(n), "Working on it") for n in range(1, count + 1)
    ]
    return {"event": "plan.updated", "revision": 1, "items": items}


@pytest.mark.parametrize("rows", [15, 10, 24])
def test_the_live_region_fits_a_small_terminal_and_keeps_the_status_line(rows: int) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, height=rows)
    view = LiveView(console)
    view(_board_event(20, 12))
    view({"event": "model.request", "round": 7})
    lines = console.render_lines(view._renderable(), console.options, pad=False)
    text = ["".join(segment.text for segment in line) for line in lines]
    assert len(text) < rows, text  # one line left for the cursor: nothing scrolls off
    assert text[-1].startswith("waiting for the model…")
    shown = "\n".join(text)
    assert "#12: Step number 12" in shown  # what the agent is on stays in sight
    assert "more above" in shown
    assert ("more below" in shown) == (rows < 24)  # at 24 rows the rest below fits


def test_a_terminal_too_small_for_the_panel_gets_one_summary_line() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=80, height=5)
    view = LiveView(console)
    view(_board_event(20, 12))
    lines = console.render_lines(view._renderable(), console.options, pad=False)
    text = ["".join(segment.text for segment in line) for line in lines]
    assert text == ["plan 11/20 · #12: Step number 12"]


def test_a_board_that_fits_is_shown_whole() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, width=80, height=40)
    view = LiveView(console)
    view(_board_event(5, 2))
    lines = console.render_lines(view._renderable(), console.options, pad=False)
    shown = "\n".join("".join(segment.text for segment in line) for line in lines)
    assert all(f"#{n}: Step number {n}" in shown for n in range(1, 6))
    assert "more" not in shown
