"""Tests for orchestrator.diagram: checked-in statecharts, tables vs. drawings, per-run traces."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from orchestrator.diagram import (
    DOT_PROGRAM_MISSING,
    DiagramError,
    EdgeCounts,
    diagram_output,
    render_diagram,
    write_statecharts,
)
from orchestrator.loop import LOOP_STATES, LOOP_TRANSITIONS
from orchestrator.plan import ITEM_TRANSITIONS, Status
from tests.in_process import run_cli

STATECHARTS = Path(__file__).resolve().parents[1] / "statecharts"
GENERATED = ["item.mmd", "loop.mmd", "item.dot", "loop.dot", "README.md"]
ITEM_STATES = tuple(str(s) for s in Status)
MACHINES: dict[str, tuple[tuple[str, ...], tuple[Mapping[str, Any], ...]]] = {
    "item": (ITEM_STATES, ITEM_TRANSITIONS),
    "loop": (LOOP_STATES, LOOP_TRANSITIONS),
}
MERMAID_EDGE = re.compile(r"^\s*(\w+) --> (\w+): (.+)$")
DOT_EDGE = re.compile(r'^\s*(\w+) -> (\w+) \[label=("[^"]*"|\S+)(.*)\]$')


def table_edges(table: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    edges: set[tuple[str, str, str]] = set()
    for t in table:
        sources = t["source"] if isinstance(t["source"], list | tuple) else [t["source"]]
        edges.update((src, t["trigger"], t["dest"]) for src in sources)
    return edges


def mermaid_edges(text: str) -> dict[tuple[str, str], str]:
    """(src, dst) -> the edge's label, for every ``src --> dst: label`` line."""
    return {(m[1], m[2]): m[3] for line in text.splitlines() if (m := MERMAID_EDGE.match(line))}


def dot_edges(text: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(src, dst) -> (label, the other attributes), for every edge line of dot source."""
    return {
        (m[1], m[2]): (m[3].strip('"'), m[4])
        for line in text.splitlines()
        if (m := DOT_EDGE.match(line))
    }


def triggers_of(label: str) -> list[str]:
    return [part.split()[0] for part in label.split(" | ")]


def need_dot() -> None:
    if shutil.which("dot") is None:
        if os.environ.get("CI"):
            pytest.fail("Graphviz's dot program is missing; CI must install graphviz")
        pytest.skip("Graphviz's dot program is not installed")


def write_trace(path: Path, events: Iterable[Mapping[str, Any]], tail: str = "") -> Path:
    lines = [
        json.dumps({"ts": "2025-01-01T00:00:00Z", "run_id": "r1", "seq": n, **event})
        for n, event in enumerate(events, start=1)
    ]
    path.write_text("\n".join(lines) + "\n" + tail, encoding="utf-8")
    return path


def loop_edge(src: str, trigger: str, dst: str) -> dict[str, Any]:
    return {"event": "loop.transition", "src": src, "dst": dst, "trigger": trigger, "round": 1}


def item_edge(item: str, src: str, trigger: str, dst: str) -> dict[str, Any]:
    return {"event": "plan.transition", "item": item, "src": src, "dst": dst, "trigger": trigger}


@pytest.fixture
def run_trace(tmp_path: Path) -> Path:
    """Two rounds (the second after a reminder), two items each started and paused, a
    killed writer's half line at the end, and events the diagram ignores."""
    events = [
        {"event": "run.started", "task": "t", "model": "m"},
        loop_edge("idle", "start", "call_model"),
        {"event": "model.request", "round": 1},
        loop_edge("call_model", "use_tools", "dispatch"),
        item_edge("1", "pending", "start", "in_progress"),
        item_edge("1", "in_progress", "pause", "pending"),
        item_edge("2", "pending", "start", "in_progress"),
        item_edge("2", "in_progress", "pause", "pending"),
        {"event": "plan.updated", "revision": 1},
        loop_edge("dispatch", "dispatched", "audit"),
        {"event": "audit.reminder", "round": 1, "rounds_since_update": 3},
        loop_edge("audit", "advance", "call_model"),
        loop_edge("call_model", "use_tools", "dispatch"),
        loop_edge("dispatch", "dispatched", "audit"),
        loop_edge("audit", "advance", "call_model"),
        loop_edge("call_model", "finish", "done"),
    ]
    return write_trace(tmp_path / "trace.jsonl", events, tail='{"event": "run.fini')


# --- (1) the checked-in files are what the code generates ----------------------------------


def test_checked_in_statecharts_match_the_generator(tmp_path: Path) -> None:
    written = write_statecharts(tmp_path / "out")
    assert [p.name for p in written] == GENERATED
    for path in written:
        checked_in = STATECHARTS / path.name
        assert checked_in.is_file(), f"statecharts/{path.name} is missing; run make statecharts"
        assert checked_in.read_bytes() == path.read_bytes(), (
            f"statecharts/{path.name} is stale; run make statecharts"
        )
    assert sorted(p.name for p in STATECHARTS.iterdir()) == sorted(GENERATED)


def test_generation_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; "
        "from orchestrator.diagram import write_statecharts; "
        "write_statecharts(Path(sys.argv[1]))"
    )
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = tmp_path / seed
        subprocess.run([sys.executable, "-c", script, str(out)], env=env, check=True)
        for name in GENERATED:
            assert (out / name).read_bytes() == (STATECHARTS / name).read_bytes()


# --- (2) the drawings show exactly the tables ----------------------------------------------


@pytest.mark.parametrize("name", ["item", "loop"])
def test_mermaid_draws_every_state_and_edge_of_the_table(name: str) -> None:
    states, table = MACHINES[name]
    text = (STATECHARTS / f"{name}.mmd").read_text(encoding="utf-8")
    assert text.startswith("stateDiagram-v2\n")
    declared = re.findall(r'^\s*state "(\w+)" as (\w+)$', text, flags=re.MULTILINE)
    assert [alias for _label, alias in declared] == list(states)
    drawn = {
        (src, trigger, dst)
        for (src, dst), label in mermaid_edges(text).items()
        for trigger in triggers_of(label)
    }
    assert drawn == table_edges(table)
    assert f"[*] --> {states[0]}" in text


@pytest.mark.parametrize("name", ["item", "loop"])
def test_dot_source_draws_every_edge_of_the_table(name: str) -> None:
    states, table = MACHINES[name]
    text = (STATECHARTS / f"{name}.dot").read_text(encoding="utf-8")
    assert text.startswith(f'digraph "{name} machine" {{')
    for state in states:
        assert re.search(rf"^\s*{state} \[label=", text, flags=re.MULTILINE), state
    drawn = {
        (src, trigger, dst)
        for (src, dst), (label, _attrs) in dot_edges(text).items()
        for trigger in triggers_of(label)
    }
    assert drawn == table_edges(table)


def test_start_edge_shows_both_of_its_guards() -> None:
    for suffix in ("mmd", "dot"):
        text = (STATECHARTS / f"item.{suffix}").read_text(encoding="utf-8")
        edges = mermaid_edges(text) if suffix == "mmd" else dot_edges(text)
        label = edges[("pending", "in_progress")]
        label = label if isinstance(label, str) else label[0]
        assert label == "start [no_other_item_in_progress & dependencies_completed]"


def test_loop_diagram_shows_the_stale_edge_and_its_remind_action() -> None:
    mermaid = mermaid_edges((STATECHARTS / "loop.mmd").read_text(encoding="utf-8"))
    assert mermaid[("audit", "call_model")].split(" | ") == [
        "advance [plan_is_stale] / remind",
        "advance",
    ]
    assert mermaid[("audit", "failed")].split(" | ") == ["advance [round_limit_reached]", "fail"]
    assert mermaid[("call_model", "dispatch")] == "use_tools [has_tool_calls]"
    dot = dot_edges((STATECHARTS / "loop.dot").read_text(encoding="utf-8"))
    assert dot[("audit", "call_model")][0] == "advance [plan_is_stale] / remind | advance"


def test_readme_embeds_both_diagrams_and_explains_every_name() -> None:
    readme = (STATECHARTS / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```mermaid\n(.*?)\n```", readme, flags=re.DOTALL)
    assert [block + "\n" for block in blocks] == [
        (STATECHARTS / "item.mmd").read_text(encoding="utf-8"),
        (STATECHARTS / "loop.mmd").read_text(encoding="utf-8"),
    ]
    item_section, loop_section = readme.split("## Loop machine")
    for section, (states, table) in zip(
        (item_section.split("## Item machine")[1], loop_section), MACHINES.values(), strict=True
    ):
        prose = re.sub(r"```mermaid.*?```", "", section, flags=re.DOTALL)
        names = set(states) | {t["trigger"] for t in table}
        for t in table:
            guards = t.get("conditions", [])
            names.update([guards] if isinstance(guards, str) else guards)
            names.update([t["before"]] if "before" in t else [])
        for name in sorted(names):
            assert f"`{name}`" in prose, f"the README paragraph does not explain {name}"


def test_render_all_gives_both_mermaid_documents() -> None:
    text = render_diagram("all", "mermaid")
    item, loop = text.split("\n\n%% loop machine\n")
    assert item + "\n" == (STATECHARTS / "item.mmd").read_text(encoding="utf-8")
    assert loop + "\n" == (STATECHARTS / "loop.mmd").read_text(encoding="utf-8")
    assert render_diagram("loop", "mermaid") == loop


# --- (3) the dot files are valid Graphviz ---------------------------------------------------


def test_dot_files_parse_with_graphviz(tmp_path: Path) -> None:
    need_dot()
    for name in ("item.dot", "loop.dot"):
        done = subprocess.run(
            ["dot", "-Tsvg", str(STATECHARTS / name)], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert "<svg" in done.stdout
        assert "Warning" not in done.stderr and "Error" not in done.stderr, done.stderr
    both = tmp_path / "all.dot"
    both.write_text(render_diagram("all", "dot"), encoding="utf-8")
    done = subprocess.run(["dot", "-Tsvg", str(both)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("<svg") == 2


# --- (4) one run, from its trace ------------------------------------------------------------


def test_mermaid_run_highlights_visited_states_and_counts_edges(run_trace: Path) -> None:
    item = render_diagram("item", "mermaid", trace=run_trace)
    assert "classDef s_visited " in item
    assert "class pending s_visited" in item
    assert "class in_progress s_visited" in item
    assert "class completed s_default" in item
    assert "class cancelled s_default" in item
    edges = mermaid_edges(item)
    assert edges[("in_progress", "pending")] == "pause [held_by_actor] ×2 | expire [lease_expired]"
    assert (
        edges[("pending", "in_progress")]
        == "start [no_other_item_in_progress & dependencies_completed] ×2"
    )
    assert edges[("in_progress", "completed")] == "complete [held_by_actor & check_passes]"

    loop = render_diagram("loop", "mermaid", trace=run_trace)
    for state in ("idle", "call_model", "dispatch", "audit", "done"):
        assert f"class {state} s_visited" in loop
    for state in ("failed", "interrupted"):
        assert f"class {state} s_default" in loop
    edges = mermaid_edges(loop)
    assert edges[("call_model", "dispatch")] == "use_tools [has_tool_calls] ×2"
    # the reminder event tells the stale advance from the plain one
    assert edges[("audit", "call_model")] == "advance [plan_is_stale] / remind ×1 | advance ×1"
    assert edges[("audit", "failed")] == "advance [round_limit_reached] | fail"
    # No unfinished reminder in this run: only plan_settled can have let it finish
    assert (
        edges[("call_model", "done")] == "finish [plan_settled] ×1 | finish [unfinished_reminded]"
    )


def test_dot_run_colours_visited_edges_and_counts_them(run_trace: Path, tmp_path: Path) -> None:
    need_dot()
    text = render_diagram("all", "dot", trace=run_trace)
    item, loop = text.split("\n\n")
    edges = dot_edges(item)
    label, attrs = edges[("in_progress", "pending")]
    assert label == "pause [held_by_actor] ×2 | expire [lease_expired]"
    assert "color=blue" in attrs and "penwidth=3" in attrs
    label, attrs = edges[("in_progress", "completed")]
    assert label == "complete [held_by_actor & check_passes]" and "penwidth" not in attrs
    assert re.search(r"^\s*in_progress \[label=.*penwidth=3", item, flags=re.MULTILINE)
    assert not re.search(r"^\s*completed \[label=.*penwidth", item, flags=re.MULTILINE)
    assert dot_edges(loop)[("audit", "call_model")][0] == (
        "advance [plan_is_stale] / remind ×1 | advance ×1"
    )
    rendered = tmp_path / "run.dot"
    rendered.write_text(text, encoding="utf-8")
    done = subprocess.run(["dot", "-Tsvg", str(rendered)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr


def _finish_run(
    *, shared: bool = False, settled_at_end: bool, check_failed: bool = False
) -> list[dict[str, Any]]:
    """A run told of its unfinished plan once, that then ends (its plan settled or not)."""
    plan: dict[str, Any] = {"limit": 20, **({"shared": "board.db", "agent": "a"} if shared else {})}
    open_items = [{"id": "1", "status": "in_progress"}, {"id": "2", "status": "pending"}]
    done_items = [{"id": "1", "status": "completed"}, {"id": "2", "status": "cancelled"}]
    events: list[dict[str, Any]] = [
        {"event": "run.started", "settings": {"settle_plan": True}, "plan": plan},
        loop_edge("idle", "start", "call_model"),
        {"event": "plan.updated", "items": open_items},
        {"event": "audit.reminder", "round": 1, "reason": "unfinished", "unfinished": ["1", "2"]},
        loop_edge("call_model", "finish", "call_model"),
    ]
    if settled_at_end:
        events.append({"event": "plan.updated", "items": done_items})
    if check_failed:
        failed = {"event": "loop.done_check", "round": 2, "exit_code": 1, "passed": False}
        events += [failed, loop_edge("call_model", "finish", "call_model")] * 2
        events.append({"event": "loop.done_check", "round": 3, "exit_code": 0, "passed": True})
    events.append(loop_edge("call_model", "finish", "done"))
    return events


@pytest.mark.parametrize(
    ("settled", "done_label"),
    [
        (False, "finish [plan_settled] | finish [unfinished_reminded] ×1"),
        (True, "finish [plan_settled] ×1 | finish [unfinished_reminded]"),
    ],
)
def test_each_finish_is_counted_on_the_edge_it_took(
    tmp_path: Path, settled: bool, done_label: str
) -> None:
    """The unfinished reminder's edge, and which guard let the run end: never both."""
    trace = write_trace(tmp_path / "t.jsonl", _finish_run(settled_at_end=settled))
    edges = mermaid_edges(render_diagram("loop", "mermaid", trace=trace))
    assert edges[("call_model", "done")] == done_label
    loops = edges[("call_model", "call_model")].split(" | ")
    assert loops[1].endswith("/ remind_unfinished ×1")
    assert not loops[2].endswith("×1")  # the done-check's report did not fire


def test_a_failed_done_check_is_counted_on_its_report(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", _finish_run(settled_at_end=True, check_failed=True))
    loops = mermaid_edges(render_diagram("loop", "mermaid", trace=trace))[
        ("call_model", "call_model")
    ].split(" | ")
    assert [part.rsplit(" ", 1)[-1] for part in loops] == ["resend", "×1", "×2"]


def test_what_the_trace_cannot_tell_is_counted_once_on_the_arrow(tmp_path: Path) -> None:
    """On a shared board others change the plan unseen: which guard held is not in the trace."""
    events = _finish_run(shared=True, settled_at_end=True)
    trace = write_trace(tmp_path / "t.jsonl", events)
    edges = mermaid_edges(render_diagram("loop", "mermaid", trace=trace))
    assert edges[("call_model", "done")] == (
        "finish [plan_settled] | finish [unfinished_reminded] (either ×1)"
    )
    counts = EdgeCounts()
    for event in events:
        counts.feed(event)
    fired = {
        (src, trigger, dst): (which, times)
        for src, trigger, dst, which, times in counts.fired()["loop"]
    }
    assert fired[("call_model", "finish", "done")] == ("?", 1)
    assert fired[("idle", "start", "call_model")] == ("", 1)


def test_trace_without_transitions_highlights_nothing(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [{"event": "run.started"}])
    text = render_diagram("item", "mermaid", trace=trace)
    assert "s_visited" not in text.replace("classDef s_visited", "")
    assert "×" not in text


# --- (5) errors are one line ----------------------------------------------------------------


def assert_one_line(error: pytest.ExceptionInfo[DiagramError], *fragments: str) -> None:
    message = str(error.value)
    assert message and "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_missing_trace_file(tmp_path: Path) -> None:
    with pytest.raises(DiagramError) as error:
        render_diagram("all", "mermaid", trace=tmp_path / "nope.jsonl")
    assert_one_line(error, "nope.jsonl", "no such file")


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_trace_file(tmp_path: Path, content: str) -> None:
    trace = tmp_path / "empty.jsonl"
    trace.write_text(content, encoding="utf-8")
    with pytest.raises(DiagramError) as error:
        render_diagram("loop", "mermaid", trace=trace)
    assert_one_line(error, "empty")


def test_non_json_line_names_its_number(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text(
        json.dumps(loop_edge("idle", "start", "call_model")) + "\nnot json at all\n{}\n",
        encoding="utf-8",
    )
    with pytest.raises(DiagramError) as error:
        render_diagram("loop", "mermaid", trace=trace)
    assert_one_line(error, "line 2", "not JSON")


def test_complete_last_line_that_is_not_json_is_an_error(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [loop_edge("idle", "start", "call_model")])
    trace.write_text(trace.read_text(encoding="utf-8") + '{"event": \n', encoding="utf-8")
    with pytest.raises(DiagramError) as error:
        render_diagram("loop", "mermaid", trace=trace)
    assert_one_line(error, "line 2")


def test_file_of_one_cut_line_and_non_object_lines(tmp_path: Path) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"event": "loop.tra', encoding="utf-8")
    with pytest.raises(DiagramError) as error:
        render_diagram("loop", "mermaid", trace=cut)
    assert_one_line(error, "no complete line")
    listing = tmp_path / "list.jsonl"
    listing.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(DiagramError) as error:
        render_diagram("loop", "mermaid", trace=listing)
    assert_one_line(error, "line 1", "not a JSON object")


def test_transition_event_without_its_fields(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.jsonl", [{"event": "plan.transition", "item": "1"}])
    with pytest.raises(DiagramError) as error:
        render_diagram("item", "mermaid", trace=trace)
    assert_one_line(error, "line 1", "plan.transition")


def test_dot_text_needs_no_dot_program_but_an_image_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    # dot source is text: printing it needs no Graphviz program
    assert render_diagram("item", "dot") == (STATECHARTS / "item.dot").read_text().rstrip("\n")
    assert render_diagram("item", "mermaid").startswith("stateDiagram-v2")
    written = write_statecharts(tmp_path / "out")
    assert (tmp_path / "out" / "item.dot").read_bytes() == (STATECHARTS / "item.dot").read_bytes()
    assert len(written) == len(GENERATED)
    # an image is rendered by dot, and says so when dot is missing
    with pytest.raises(DiagramError) as error:
        diagram_output("loop", "mermaid", trace=None, output=tmp_path / "loop.svg")
    assert str(error.value) == f"{tmp_path / 'loop.svg'}: {DOT_PROGRAM_MISSING}"
    assert not (tmp_path / "loop.svg").exists()


def test_two_machines_are_two_documents(tmp_path: Path) -> None:
    text, written = diagram_output("all", "mermaid", trace=None, output=None)
    assert written == []
    blocks = re.findall(r"```mermaid\n(.*?)\n```", text, re.S)
    assert [block + "\n" for block in blocks] == [
        (STATECHARTS / "item.mmd").read_text(encoding="utf-8"),
        (STATECHARTS / "loop.mmd").read_text(encoding="utf-8"),
    ]
    text, written = diagram_output("all", "dot", trace=None, output=tmp_path / "charts")
    assert text == ""
    assert written == [tmp_path / "charts" / "item.dot", tmp_path / "charts" / "loop.dot"]
    for path in written:
        assert path.read_bytes() == (STATECHARTS / path.name).read_bytes()
    with pytest.raises(DiagramError, match="one file holds one machine"):
        diagram_output("all", "mermaid", trace=None, output=tmp_path / "both.mmd")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_an_image_output_is_rendered_by_graphviz(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"item{suffix}"
    assert diagram_output("item", "mermaid", trace=None, output=target) == ("", [target])
    head = target.read_bytes()[:400]
    assert (b"<svg" in head) if suffix == ".svg" else head.startswith(b"\x89PNG")


def test_the_diagram_command_prints_dot_and_writes_a_folder(tmp_path: Path) -> None:
    done = run_cli(
        ["diagram", "--machine", "loop", "--format", "dot"],
        env={**os.environ, "PATH": str(tmp_path)},  # no dot program on the PATH
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (STATECHARTS / "loop.dot").read_text(encoding="utf-8")
    done = run_cli(["diagram", "--output", str(tmp_path / "out")])
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["item.mmd", "loop.mmd"]


def test_dot_format_without_the_graphviz_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dot = tmp_path / "dot"
    fake_dot.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    fake_dot.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "graphviz", None)  # makes `import graphviz` fail
    for call in (lambda: render_diagram("loop", "dot"), lambda: write_statecharts(tmp_path)):
        with pytest.raises(DiagramError) as error:
            call()
        assert_one_line(error, "pip install 'orchestrator[graphviz]'")


def test_unknown_machine_or_format() -> None:
    with pytest.raises(DiagramError) as error:
        render_diagram("board", "mermaid")  # type: ignore[arg-type]
    assert_one_line(error, "'board'", "item, loop or all")
    with pytest.raises(DiagramError) as error:
        render_diagram("item", "svg")  # type: ignore[arg-type]
    assert_one_line(error, "'svg'", "mermaid or dot")


# --- (5) the trace is read line by line --------------------------------------------------------


def _visits_read_whole(path: Path) -> tuple[dict[Any, int], dict[Any, int]]:
    """The reader as it was before it streamed (the whole file as text, then every line), kept
    as the oracle the streaming reader must agree with."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DiagramError(
            f"trace {path}: no such file; pass a trace written by orchestrator run --trace"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise DiagramError(f"trace {path}: cannot read it: {error}") from None
    if not text.strip():
        raise DiagramError(f"trace {path} is empty; a run writes one JSON event per line")
    lines = text.split("\n")
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines):
                break
            raise DiagramError(
                f"trace {path} line {number} is not JSON ({error.msg}); "
                "pass a trace written by orchestrator run --trace"
            ) from None
        if not isinstance(record, dict):
            raise DiagramError(f"trace {path} line {number} is not a JSON object")
        records.append((number, record))
    if not records:
        raise DiagramError(f"trace {path} has no complete line; its only line is cut short")
    # The counting is EdgeCounts' own (what this oracle checks is the reading around it).
    counts = EdgeCounts()
    for number, record in records:
        try:
            counts.feed(record)
        except ValueError as error:
            raise DiagramError(f"trace {path} line {number}: {error}") from None
    return dict(counts.items), dict(counts.loop)


def _visits_or_error(read: Any, path: Path) -> Any:
    try:
        return read(path)
    except DiagramError as error:
        return f"DiagramError: {error}"


def _streamed(path: Path) -> Any:
    from orchestrator.diagram import _read_trace

    item_visits, loop_visits = _read_trace(path)
    return dict(item_visits.edges), dict(loop_visits.edges)


GOLDEN_TRACE = Path(__file__).resolve().parent / "data" / "demo_trace_golden.jsonl"

#: Files the corpus does not make: bad bytes after a bad line (the bytes are named first, as
#: when the whole file was decoded before any line was read), a bad edge before a bad line (the
#: line is named first), Windows and old-Mac line ends, and a half line after a lone CR.
_ODD_TRACES: dict[str, bytes] = {
    "bad-bytes-after-bad-line": b'{"event":"run.started"}\nnot json\n\xff\xfe\n',
    "bad-edge-before-bad-line": (
        b'{"event":"loop.transition","src":1}\n{"event":"run.started"}\nnot json\n'
    ),
    "crlf": b'{"event":"loop.transition","src":"idle","trigger":"start","dst":"call_model"}\r\n'
    b'{"event":"audit.reminder"}\r\n'
    b'{"event":"loop.transition","src":"audit","trigger":"advance","dst":"call_model"}\r\n',
    "lone-cr": b'{"event":"loop.transition","src":"idle","trigger":"start","dst":"call_model"}\r'
    b'{"event": "cut',
    "bad-last-line-with-cr": b'{"event":"run.started"}\r{"event": \r',
    "whitespace-only": b" \n\t\r\n",
    "bad-edge-only": b'{"event":"plan.transition","src":"pending"}\n',
}


def test_the_streamed_trace_gives_what_the_whole_file_gave(tmp_path: Path) -> None:
    """The golden demo trace, every trace of the replay corpus, and odd files: the same counts,
    or the same error word for word."""
    from tests.replay_corpus import apply, mutations

    traces = {"golden": GOLDEN_TRACE.read_bytes(), **_ODD_TRACES}
    traces.update({f"corpus-{n}": apply(m) for n, m in enumerate(mutations())})
    differences = []
    for name, content in traces.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(content)
        before, after = (
            _visits_or_error(_visits_read_whole, path),
            _visits_or_error(_streamed, path),
        )
        if before != after:
            differences.append((name, before, after))
    assert not differences
    assert not isinstance(_streamed(tmp_path / "golden.jsonl"), str)
    assert "cannot read it" in _visits_or_error(
        _streamed, tmp_path / "bad-bytes-after-bad-line.jsonl"
    )


def test_the_golden_trace_draws_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from orchestrator import diagram
    from orchestrator.diagram import _Visits

    streamed = {fmt: render_diagram("all", fmt, trace=GOLDEN_TRACE) for fmt in ("mermaid", "dot")}

    def read_whole(path: Path) -> tuple[_Visits, _Visits]:
        items, loop = _visits_read_whole(path)
        return _Visits(items), _Visits(loop)

    monkeypatch.setattr(diagram, "_read_trace", read_whole)
    whole = {fmt: render_diagram("all", fmt, trace=GOLDEN_TRACE) for fmt in ("mermaid", "dot")}
    assert streamed == whole
    assert "×" in streamed["mermaid"]  # the run's counts are drawn


def test_reading_a_trace_keeps_memory_flat_in_its_length(tmp_path: Path) -> None:
    """Peak Python allocations while counting a 1 MB and a 4 MB trace: the same, and a small
    part of either (the whole-file reader held the text and every parsed line)."""
    import tracemalloc

    line = json.dumps(
        {"event": "tool.result", "output": "x" * 900, "round": 1}, separators=(",", ":")
    )
    edge = json.dumps(loop_edge("audit", "advance", "call_model"))
    peaks = {}
    for megabytes in (1, 4):
        path = tmp_path / f"{megabytes}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for _ in range(megabytes * 1000):
                out.write(line + "\n" + edge + "\n")
        tracemalloc.start()
        try:
            _item_visits, loop_visits = _streamed(path)
            peaks[megabytes] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert sum(loop_visits.values()) == megabytes * 1000
    assert peaks[4] < 200_000, peaks
    assert peaks[4] < 2 * peaks[1] + 50_000, peaks
